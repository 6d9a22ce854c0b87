"""Shared Plotly primitives: colours and colour scales (``app/palette.py``'s), axes, the layout
every figure starts from, the attention heatmap. Pure functions: plain data in, a Plotly figure
dict out (the JSON plotly.js draws); no I/O, no model, no plotly import. Each page's own figures
live in ``app/pages/<page>.py``."""

from __future__ import annotations

from app import palette

# the palette's colours, for the pages' figures (``from app.plots import BLUE``)
BLUE, ORANGE, GREY = palette.BLUE, palette.ORANGE, palette.GREY
GREEN, VERMILION, PURPLE, SKY = palette.GREEN, palette.VERMILION, palette.PURPLE, palette.SKY
MODEL, FILTERED, CHOSEN = palette.MODEL, palette.FILTERED, palette.CHOSEN

STAGE_COLOURS = [GREY, BLUE, ORANGE, GREEN, VERMILION, PURPLE, SKY]
# every colour scale is the palette's (app/palette.py): one for probabilities and attention, one
# for signed values, centred on 0 (a figure sets zmin = -m, zmax = m)
ATTENTION_SCALE = palette.colorscale(palette.SEQUENTIAL)
DIVERGING = palette.colorscale(palette.DIVERGING)
FONT = {"family": "system-ui, 'WenQuanYi Micro Hei', 'Noto Sans CJK SC', sans-serif",
        "size": palette.PLOT_FONT_PX}
TWO_AXES_MARGIN = {"l": 60, "r": 80, "t": 40, "b": 50}  # room for a right-hand axis and its title
LEGEND_TOP = {"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"}


def unique_labels(tokens: list[str]) -> list[str]:
    """Tokens made distinct with invisible zero-width spaces, so Plotly keeps one row per position
    even when a sentence repeats a token (``the … the``) and hover still shows the plain token."""
    seen: dict[str, int] = {}
    labels = []
    for token in tokens:
        count = seen.get(token, 0)
        seen[token] = count + 1
        labels.append(token + "\u200b" * count)
    return labels


def title(text: str) -> dict:
    return {"text": text}


def category_axis(label: str = "", reverse: bool = False, **extra) -> dict:
    axis = {"type": "category", "title": title(label), "automargin": True,
            "showgrid": False, "zeroline": False, **extra}
    if reverse:
        axis["autorange"] = "reversed"
    return axis


def plain_axis(label: str = "", **extra) -> dict:
    """A numeric axis without grid or zero line (heatmaps)."""
    return {"title": title(label), "showgrid": False, "zeroline": False, **extra}


def plotly_text(text: str) -> str:
    """Text for a Plotly title: Plotly reads titles as a little HTML, so a literal ``<bos>`` would
    vanish as an unknown tag; ``&lt;``/``&gt;`` show it as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def base_layout(heading: str = "", height: int = 320, **extra) -> dict:
    layout = {
        "title": {"text": plotly_text(heading), "font": {"size": palette.PLOT_TITLE_PX}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 40 if heading else 16, "b": 50},
        "font": FONT,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        # a bar's value that would have to shrink under 12 px to fit is hidden (its hover and the
        # page's tables still give it), never drawn at 6–9 px (issue 75: readable on a phone)
        "uniformtext": {"minsize": palette.PLOT_FONT_PX, "mode": "hide"},
    }
    layout.update(extra)
    return layout


def attention_heatmap(
    weights: list[list[float]],
    query_tokens: list[str],
    key_tokens: list[str],
    heading: str = "",
    labels: tuple[str, str] = ("query", "key"),
) -> dict:
    """One head's [query][key] matrix: rows are queries, columns keys, hover shows the weight."""
    heatmap = {
        "type": "heatmap",
        "z": weights,
        "x": unique_labels(key_tokens),
        "y": unique_labels(query_tokens),
        "colorscale": ATTENTION_SCALE,
        "zmin": 0,
        "zmax": 1,
        "hovertemplate": "%{y} → %{x}<br>%{z:.4f}<extra></extra>",
        "xgap": 1,
        "ygap": 1,
    }
    height = max(300, min(640, 120 + 28 * len(query_tokens)))
    layout = base_layout(
        heading,
        height,
        xaxis=category_axis(labels[1], tickangle=-45),
        yaxis=category_axis(labels[0], reverse=True),
    )
    return {"data": [heatmap], "layout": layout}
