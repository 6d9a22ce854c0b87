"""/embeddings — each id looks up a vector, scaled by √d_model and added to the sinusoidal
positional encoding; the position table, its cosine similarities, and how the token vectors move
through the encoder's layers (a 2-D projection)."""

from __future__ import annotations

import math

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.api import timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.palette import PLOT_FONT_PX, robust_scale
from app.plots import (
    ATTENTION_SCALE,
    DIVERGING,
    LEGEND_TOP,
    STAGE_COLOURS,
    base_layout,
    category_axis,
    plain_axis,
    unique_labels,
)
from app.schemas import TRACE_ERRORS, TraceRequest
from model.api import Translator

router = APIRouter()
PageText = page_text("embeddings")
MAX_POSITIONS_SHOWN = 128


class EmbeddingsRequest(TraceRequest):
    positions: int = Field(48, ge=8, le=128, description="rows of the positional table shown")


@router.get("/embeddings", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    d = translator.config.d_model
    return render_page(request, "embeddings", lang,
                       sqrt_d=f"{math.sqrt(d):.2f}", pe_norm=f"{math.sqrt(d / 2):.2f}")


@router.post("/api/figures/embeddings", responses=TRACE_ERRORS, tags=["figures"])
def embeddings_figures(request: EmbeddingsRequest, engine: EngineDep, translator: TranslatorDep,
                       t: PageText, response: Response) -> dict:
    """Token embeddings (×√d), positional encodings, their sum, the position table and its
    cosine similarities, and the 2-D projection of the token vectors after every layer."""
    trace, model_ms = engine.trace(TraceRequest.model_construct(**request.model_dump(exclude={"positions"})))
    table, _ = engine.run(positional_encoding, translator, request.positions)
    d = translator.config.d_model
    root = math.sqrt(d)
    encoder = trace.embeddings["encoder"]
    tokens = trace.source_tokens
    dims, position = t("common.dimension"), t("common.position")
    norms = {
        t("emb.norm.raw"): [round(_norm(v) / root, 4) for v in encoder["token"]],
        t("emb.norm.scaled"): [round(_norm(v), 4) for v in encoder["token"]],
        t("emb.norm.position"): [round(_norm(v), 4) for v in encoder["position"]],
        t("emb.norm.sum"): [round(_norm(v), 4) for v in encoder["sum"]],
    }
    stages = [t("emb.input")] + [t("emb.after_layer", n=i + 1)
                                 for i in range(len(trace.projection["points"]) - 1)]
    peak = robust_scale(encoder["sum"])  # the x-ray colours its embedding row on this scale too
    positions = [str(p) for p in range(len(table["table"]))]
    timed(response, model_ms)
    return {
        "text": trace.text,
        "translation": trace.translation,
        "source_tokens": tokens,
        "d_model": d,
        "sqrt_d": round(root, 4),
        "position_norm": table["norm"],
        "norms": norms,
        "sample": {
            "token": tokens[0],
            "raw": [round(v / root, 4) for v in encoder["token"][0][:8]],
            "scaled": encoder["token"][0][:8],
            "position": encoder["position"][0][:8],
            "sum": encoder["sum"][0][:8],
        },
        "projection": trace.projection,
        "figures": {
            "token": vectors_heatmap(encoder["token"], tokens, t("emb.tokens"), dims, peak),
            "position": vectors_heatmap(encoder["position"], tokens, t("emb.positions_sentence"),
                                        dims, peak),
            "sum": vectors_heatmap(encoder["sum"], tokens, t("emb.sum"), dims, peak),
            "norms": norm_bars(tokens, norms),
            "table": vectors_heatmap(table["table"], positions,
                                     t("emb.pe_heatmap", n=len(positions)), dims, 1.0, 420),
            "cosine": similarity_heatmap(table["cosine"], "", position),
            "offset": similarity_by_offset(table["cosine"], [0, 10, 20], t("emb.offset"),
                                           t("emb.offset_axis"), t("emb.offset_name")),
            "projection": projection_figure(trace.projection, stages, zoom_label=t("emb.zoomed")),
            # the same panels two to a row, for a phone
            "projection_narrow": projection_figure(trace.projection, stages, columns=2),
        },
    }


def positional_encoding(translator: Translator, positions: int) -> dict:
    """The model's own sinusoidal table for the first ``positions`` positions, and the cosine
    similarity between every pair of positions (run on the engine's model thread)."""
    positions = max(1, min(positions, MAX_POSITIONS_SHOWN, translator.config.max_positions))
    table = translator.position_table(positions)  # (P, D)
    unit = table / table.norm(dim=-1, keepdim=True)
    return {
        "d_model": translator.config.d_model,
        "table": _rounded(table.tolist(), 4),
        "cosine": _rounded((unit @ unit.T).tolist(), 4),
        "norm": round(float(table[0].norm()), 4),  # the same for every position: √(D/2)
    }


def _rounded(rows: list[list[float]], digits: int) -> list[list[float]]:
    return [[round(v, digits) for v in row] for row in rows]


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


# -- figures --------------------------------------------------------------------------------------


def vectors_heatmap(
    matrix: list[list[float]], row_labels: list[str], heading: str, dims_label: str = "dimension",
    zmax: float | None = None, height: int | None = None,
) -> dict:
    """Rows of vectors (tokens × dimensions or positions × dimensions) on a diverging scale."""
    peak = zmax or max((abs(v) for row in matrix for v in row), default=1.0) or 1.0
    many = len(row_labels) > 40
    heatmap = {
        "type": "heatmap",
        "z": matrix,
        "x": list(range(len(matrix[0]) if matrix else 0)),
        "y": list(range(len(matrix))) if many else unique_labels(row_labels),
        "customdata": [[label] * len(row) for label, row in zip(row_labels, matrix, strict=True)],
        "colorscale": DIVERGING,
        "zmid": 0, "zmin": -peak, "zmax": peak,
        "hovertemplate": f"%{{customdata}} · {dims_label} %{{x}}: %{{z:.3f}}<extra></extra>",
    }
    yaxis = ({"title": {"text": ""}, "autorange": "reversed", "automargin": True}
             if many else category_axis(reverse=True))
    layout = base_layout(heading, height or max(240, min(560, 110 + 20 * len(row_labels))),
                         xaxis=plain_axis(dims_label), yaxis=yaxis)
    return {"data": [heatmap], "layout": layout}


def similarity_heatmap(matrix: list[list[float]], heading: str, axis_label: str = "position") -> dict:
    """Cosine similarity between every pair of positions, the colour scale spanning the values
    actually present (between sinusoidal positions they stay well above −1, so a −1 … 1 scale
    would wash the picture out)."""
    low = min((v for row in matrix for v in row), default=-1.0)
    heatmap = {
        "type": "heatmap",
        "z": matrix,
        "x": list(range(len(matrix))),
        "y": list(range(len(matrix))),
        "colorscale": ATTENTION_SCALE,
        "zmin": math.floor(low * 20) / 20, "zmax": 1,
        "colorbar": {"title": {"text": "cos"}},
        "hovertemplate": f"{axis_label} %{{y}} · {axis_label} %{{x}}: %{{z:.3f}}<extra></extra>",
    }
    layout = base_layout(heading, 420, xaxis=plain_axis(axis_label, constrain="domain"),
                         yaxis=plain_axis(axis_label, autorange="reversed"))
    return {"data": [heatmap], "layout": layout}


def similarity_by_offset(matrix: list[list[float]], anchors: list[int], heading: str,
                         offset_label: str = "offset k", name: str = "from position {p}") -> dict:
    """cos(PE[p], PE[p+k]) against k for a few starting positions p: the curves coincide."""
    data = []
    for colour, p in zip(STAGE_COLOURS[1:], anchors, strict=False):
        ks = list(range(0, len(matrix) - p))
        data.append({
            "type": "scatter", "mode": "lines", "name": name.format(p=p),
            "x": ks, "y": [matrix[p][p + k] for k in ks],
            "line": {"color": colour, "width": 2},
            "hovertemplate": f"p={p}, k=%{{x}}: %{{y:.3f}}<extra></extra>",
        })
    layout = base_layout(heading, 300, xaxis={"title": {"text": offset_label}},
                         yaxis={"title": {"text": "cos"}, "range": [-1.05, 1.05]},
                         legend={**LEGEND_TOP, "y": 1.12})
    return {"data": data, "layout": layout}


def norm_bars(tokens: list[str], series: dict[str, list[float]], heading: str = "") -> dict:
    """Vector lengths per token: raw embedding, after ×√d_model, the positional part, the sum."""
    data = [
        {"type": "bar", "name": name, "x": unique_labels(tokens), "y": values,
         "marker": {"color": colour}, "customdata": tokens,
         "hovertemplate": f"%{{customdata}} · {name}: %{{y:.3f}}<extra></extra>"}
        for (name, values), colour in zip(series.items(), STAGE_COLOURS, strict=False)
    ]
    layout = base_layout(heading, 300, barmode="group", xaxis=category_axis(),
                         yaxis={"title": {"text": "‖v‖"}}, legend=LEGEND_TOP)
    return {"data": data, "layout": layout}


def projection_figure(projection: dict, stage_names: list[str], heading: str = "",
                      columns: int | None = None, zoom_label: str = "×{z}") -> dict:
    """Small multiples: the sentence's token vectors in 2-D at the input and after each layer,
    ``columns`` panels per row (all in one row by default); labels alternate above and below the
    points so neighbours overlap less.

    The plane is one for all panels, but each panel is zoomed to its own points: the deeper layers'
    vectors lie much closer together on it, and on the input's scale they would be one blot of
    overlapping labels. A zoomed panel says by how much in its title (``zoom_label``)."""
    tokens, points = projection["tokens"], projection["points"]
    panels = len(points)
    columns = max(1, min(columns or panels, panels))
    rows = math.ceil(panels / columns)

    def spread(stage):  # the larger side of the stage's bounding box
        xs, ys = [x for x, _ in stage], [y for _, y in stage]
        return max(max(xs) - min(xs), max(ys) - min(ys))

    first = spread(points[0]) or 1.0
    gap_x, gap_y = 0.06, 0.16 / rows
    width = (1 - gap_x * (columns - 1)) / columns
    height = (1 - gap_y * (rows - 1)) / rows
    positions = ["top center" if i % 2 == 0 else "bottom center" for i in range(len(tokens))]
    data, layout_axes, annotations = [], {}, []
    for index, (stage, name) in enumerate(zip(points, stage_names, strict=True)):
        suffix = "" if index == 0 else str(index + 1)
        row, column = divmod(index, columns)
        xs, ys = [x for x, _ in stage], [y for _, y in stage]
        side = spread(stage) or first
        # a square window around the points, so distances read alike across and up
        middle_x, middle_y = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
        half_x, half_y = side * 0.65, side * 0.6
        zoom = first / side
        # on a second line, so that two panels side by side on a phone keep their titles apart
        title = name if abs(zoom - 1) < 0.05 else f"{name}<br>{zoom_label.format(z=f'{zoom:.1f}')}"
        data.append({
            "type": "scatter", "mode": "markers+text", "name": name,
            "x": [p[0] for p in stage], "y": [p[1] for p in stage],
            "text": tokens, "textposition": positions, "textfont": {"size": PLOT_FONT_PX},
            "marker": {"size": 8, "color": STAGE_COLOURS[index % len(STAGE_COLOURS)]},
            "xaxis": f"x{suffix}", "yaxis": f"y{suffix}", "cliponaxis": False,
            "hovertemplate": f"{name} · %{{text}}<extra></extra>",
        })
        left = column * (width + gap_x)
        top = 1 - row * (height + gap_y)
        # rounded into [0, 1]: the sums above can land a hair outside it (-5.6e-17)
        x_domain = [round(max(0.0, left), 6), round(min(1.0, left + width), 6)]
        y_domain = [round(max(0.0, top - height), 6), round(min(1.0, top), 6)]
        layout_axes[f"xaxis{suffix}"] = {
            "domain": x_domain, "range": [middle_x - half_x, middle_x + half_x],
            "showticklabels": False, "zeroline": False, "showgrid": True, "anchor": f"y{suffix}",
        }
        layout_axes[f"yaxis{suffix}"] = {
            "domain": y_domain, "range": [middle_y - half_y, middle_y + half_y],
            "showticklabels": False, "zeroline": False, "showgrid": True, "anchor": f"x{suffix}",
        }
        annotations.append({"text": title, "x": left + width / 2, "y": top, "xref": "paper",
                            "yref": "paper", "xanchor": "center", "yanchor": "bottom",
                            "showarrow": False})
    layout = base_layout(heading, 60 + 300 * rows, showlegend=False, annotations=annotations,
                         **layout_axes)
    layout["margin"] = {"l": 10, "r": 10, "t": 46, "b": 10}
    return {"data": data, "layout": layout}
