"""Checks shared by the web tests."""

from __future__ import annotations

import plotly.graph_objects as go

# the trace types of plotly.js's cartesian bundle, the one the app serves (static/vendor/README.md)
CARTESIAN_TRACES = {"bar", "box", "contour", "heatmap", "histogram", "histogram2d",
                    "histogram2dcontour", "image", "pie", "scatter", "scatterternary", "violin"}


def field_of(response) -> str:
    """The field a 422 names first."""
    assert response.status_code == 422, response.text
    return response.json()["errors"][0]["field"]


def figures_in(value, path: str = "") -> list[tuple[str, dict]]:
    """Every Plotly figure dict (``{"data": [...], "layout": {...}}``) inside a JSON answer."""
    found = []
    if isinstance(value, dict):
        if isinstance(value.get("data"), list) and isinstance(value.get("layout"), dict):
            found.append((path, value))
        for key, item in value.items():
            found += figures_in(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += figures_in(item, f"{path}[{index}]")
    return found


def assert_valid_figures(answer, at_least: int = 1) -> list[tuple[str, dict]]:
    """Every figure in ``answer`` is one Plotly accepts: go.Figure validates each trace type and
    each layout property, and raises on anything unknown or out of range; and each trace is of a
    type the served bundle draws."""
    figures = figures_in(answer)
    assert len(figures) >= at_least, "no figure in the answer"
    for path, figure in figures:
        types = {trace.get("type", "scatter") for trace in figure["data"]}
        assert types <= CARTESIAN_TRACES, f"{path}: {types - CARTESIAN_TRACES} not in the bundle"
        try:
            go.Figure(figure)
        except ValueError as error:  # plotly's validation error names the bad property
            raise AssertionError(f"{path} is not a valid Plotly figure: {error}") from error
    return figures
