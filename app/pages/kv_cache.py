"""/kv-cache — the same generation with and without cached keys and values, timed on this
machine, and which K/V rows each step computes or reads from the cache."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.plots import BLUE, LEGEND_TOP, ORANGE, TWO_AXES_MARGIN, VERMILION, base_layout, plain_axis
from app.schemas import ERRORS, TextQuery

router = APIRouter()
PageText = page_text("kv_cache")
MAX_KV_STEPS = 128


class KVCacheQuery(TextQuery):
    steps: int = Field(32, ge=1, le=MAX_KV_STEPS,
                       description=f"tokens to generate in each run, 1–{MAX_KV_STEPS}")


@router.get("/kv-cache", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    steps = request.query_params.get("steps", "32")
    return render_page(request, "kv_cache", lang, steps=steps if steps.isdigit() else "32")


@router.get("/api/kv-cache", responses=ERRORS, tags=["model"])
def kv_cache(query: Annotated[KVCacheQuery, Query()], engine: EngineDep, translator: TranslatorDep,
             t: PageText, response: Response) -> dict:
    """Generate ``steps`` tokens with and without the KV cache on the live model, timing each."""
    race, _ = engine.run(translator.kv_cache_race, query.text, query.steps)
    names = (t("kv.cached"), t("kv.uncached"))
    step, position = t("common.step"), t("common.position")
    legend = (t("kv.fresh"), t("kv.reused"), "")
    timed(response, race["cached_ms"] + race["uncached_ms"])
    return {
        "text": query.text,
        **race,
        "d_model": translator.config.d_model,
        "layers": translator.config.n_decoder_layers,
        "figures": {
            "timing": kv_timing_figure(race, names, t("kv.ms"), step),
            "work": kv_work_figure(race, names, t("kv.positions"), step),
            "cached_grid": kv_grid(race, True, t("kv.grid_cached"), legend, step, position),
            "uncached_grid": kv_grid(race, False, t("kv.grid_uncached"), legend, step, position),
        },
    }


# -- figures --------------------------------------------------------------------------------------


def kv_timing_figure(race: dict, names: tuple[str, str], ms_label: str = "ms",
                     step_label: str = "step") -> dict:
    """Milliseconds per generated token, with and without the cache, as the output grows."""
    x = list(range(1, race["steps"] + 1))
    data = [
        {"type": "scatter", "mode": "lines+markers", "name": name, "x": x, "y": race[key],
         "line": {"color": colour}, "marker": {"size": 4},
         "hovertemplate": f"{step_label} %{{x}}: %{{y:.2f}} ms<extra>{name}</extra>"}
        for key, name, colour in (("cached_step_ms", names[0], BLUE),
                                  ("uncached_step_ms", names[1], VERMILION))
    ]
    layout = base_layout("", 320, xaxis={"title": {"text": step_label}},
                         yaxis={"title": {"text": ms_label}, "rangemode": "tozero"},
                         legend=LEGEND_TOP)
    return {"data": data, "layout": layout}


def kv_work_figure(race: dict, names: tuple[str, str], ylabel: str = "positions",
                   step_label: str = "step") -> dict:
    """Positions pushed through the decoder at each step, and the running total (dotted)."""
    x = list(range(1, race["steps"] + 1))
    data = []
    for key, name, colour in (("cached_positions", names[0], BLUE),
                              ("uncached_positions", names[1], VERMILION)):
        values = race[key]
        running = [sum(values[: i + 1]) for i in range(len(values))]
        data.append({"type": "bar", "name": name, "x": x, "y": values,
                     "marker": {"color": colour},
                     "hovertemplate": f"{step_label} %{{x}}: %{{y}}<extra>{name}</extra>"})
        data.append({"type": "scatter", "mode": "lines", "name": f"Σ {name}", "x": x,
                     "y": running, "yaxis": "y2", "line": {"color": colour, "dash": "dot"},
                     "hovertemplate": f"{step_label} %{{x}}: Σ %{{y}}<extra>{name}</extra>"})
    layout = base_layout("", 320, barmode="group", xaxis={"title": {"text": step_label}},
                         yaxis={"title": {"text": ylabel}, "rangemode": "tozero"},
                         yaxis2={"title": {"text": "Σ"}, "overlaying": "y", "side": "right",
                                 "showgrid": False, "rangemode": "tozero"},
                         legend={**LEGEND_TOP, "y": 1.2},
                         margin=TWO_AXES_MARGIN)
    return {"data": data, "layout": layout}


def kv_grid(race: dict, cached: bool, heading: str, legend: tuple[str, str, str],
            step_label: str = "step", position_label: str = "position") -> dict:
    """Which K/V rows exist at each step: computed this step (orange), read from the cache
    (blue), not yet generated (blank). Without a cache every row is recomputed every step."""
    steps = race["steps"]
    positions = race["cached_positions"] if cached else race["uncached_positions"]
    z, text = [], []
    for step in range(steps):
        rows = step + 1  # K/V rows this step's attention reads: <bos> + tokens so far
        fresh = positions[step]
        row, labels = [], []
        for position in range(steps):
            if position >= rows:
                row.append(None)
                labels.append("")
            elif position >= rows - fresh:
                row.append(1)
                labels.append(legend[0])
            else:
                row.append(0.5)
                labels.append(legend[1])
        z.append(row)
        text.append(labels)
    heatmap = {
        "type": "heatmap", "z": z, "text": text,
        "x": list(range(steps)), "y": list(range(1, steps + 1)),
        "colorscale": [[0, BLUE], [0.5, BLUE], [0.51, ORANGE], [1, ORANGE]],
        "zmin": 0, "zmax": 1, "showscale": False, "xgap": 1 if steps <= 40 else 0,
        "ygap": 1 if steps <= 40 else 0,
        "hovertemplate": f"{step_label} %{{y}} · {position_label} %{{x}}: %{{text}}<extra></extra>",
    }
    layout = base_layout(heading, 320, xaxis=plain_axis(position_label),
                         yaxis=plain_axis(step_label, autorange="reversed"))
    return {"data": [heatmap], "layout": layout}
