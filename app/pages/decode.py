"""/decode — one time step at a time: the seven things inside a decoder layer, the next-character
distribution, the decoding strategy, forced characters, and the beam-search tree."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, page_text
from app.layout import render_page
from app.plots import (
    BLUE,
    GREY,
    LEGEND_TOP,
    ORANGE,
    attention_heatmap,
    base_layout,
    category_axis,
    unique_labels,
)
from app.schemas import ERRORS, TraceRequest
from model.trace import Trace
from model.translator import InputError

router = APIRouter()
PageText = page_text("decode")

# Words the figures need, with the English defaults a direct caller (a test, a notebook) gets.
WORDS = {"head": "head", "before_norm": "x + sublayer(x)", "after_norm": "after LayerNorm",
         "dimension": "dimension", "step": "step", "sampled_from": "sampled from"}


class FigureRequest(TraceRequest):
    layer: int = Field(0, ge=0, le=63, description="decoder layer shown by the decode view")


@router.get("/decode", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "decode", lang)


@router.post("/api/figures/decode", responses=ERRORS, tags=["figures"])
def decode_figures(request: FigureRequest, engine: EngineDep, t: PageText,
                   response: Response) -> dict:
    """Step-by-step decoding inside one decoder layer, plus the beam tree (Plotly JSON)."""
    trace, model_ms = engine.trace(request)
    if request.layer >= len(trace.decoder):
        raise InputError("layer", f"layer must be between 0 and {len(trace.decoder) - 1}")
    timed(response, model_ms)
    words = {
        "head": t("word.head", n="").strip(),
        "before_norm": t("legend.before_norm"),
        "after_norm": t("legend.after_norm"),
        "dimension": t("common.dimension"),
        "step": t("common.step"),
        "sampled_from": t("decode.sampled_from"),
    }
    return {
        **summary(trace),
        "layer": request.layer,
        "layers": len(trace.decoder),
        "steps": decode_steps(trace, request.layer, words),
        "beam": beam_tree(trace, words["step"]),
    }


# -- figures --------------------------------------------------------------------------------------


def attention_rows(weights: list[list[list[float]]], query: int, key_tokens: list[str],
                   head_label: str = "head") -> dict:
    """The row of one query position in every head ([head][key]), as a heads × keys heatmap."""
    rows = [head[query][: len(key_tokens)] for head in weights]
    heads = [f"{head_label} {h + 1}" for h in range(len(rows))]
    figure = attention_heatmap(rows, heads, key_tokens, labels=("", ""))
    figure["layout"]["height"] = 110 + 30 * len(rows)
    return figure


def vector_bars(series: dict[str, list[float]], dimension: str = "dimension",
                colors: tuple = (GREY, BLUE)) -> dict:
    """A few named vectors side by side, one bar per dimension (e.g. before / after LayerNorm)."""
    data = []
    for (name, values), color in zip(series.items(), colors, strict=False):
        data.append({
            "type": "bar", "name": name, "x": list(range(len(values))), "y": values,
            "marker": {"color": color},
            "hovertemplate": f"{name}<br>{dimension} %{{x}}: %{{y:.3f}}<extra></extra>",
        })
    layout = base_layout("", 220, barmode="group",
                         xaxis={"title": {"text": dimension},
                                "dtick": 1 if len(data[0]["x"]) <= 16 else 4},
                         legend=LEGEND_TOP)
    return {"data": data, "layout": layout}


def candidates_figure(step: dict, sampled: bool = False, sampled_from: str = "sampled from") -> dict:
    """Linear + softmax: the most likely next tokens, the chosen one in orange."""
    top = step["top"]
    tokens = [c["token"] for c in top]
    labels = unique_labels(tokens)
    bar = {
        "type": "bar",
        "orientation": "h",
        "y": labels,
        "x": [c["prob"] for c in top],
        "text": [f"{c['prob']:.3f}" for c in top],
        "textposition": "auto",
        "marker": {"color": [ORANGE if token == step["token"] else BLUE for token in tokens]},
        "customdata": tokens,
        "name": "p",
        "hovertemplate": "%{customdata}: %{x:.4f}<extra></extra>",
    }
    data = [bar]
    if sampled:
        data.append({
            "type": "bar", "orientation": "h", "y": labels,
            "x": [c["sample_prob"] for c in top], "marker": {"color": GREY},
            "name": sampled_from, "customdata": tokens,
            "hovertemplate": f"%{{customdata}}: %{{x:.4f}}<extra>{sampled_from}</extra>",
        })
    layout = base_layout(
        "", 60 + 26 * len(tokens), barmode="group",
        yaxis=category_axis(reverse=True),
        xaxis={"range": [0, 1], "title": {"text": "p"}},
        showlegend=sampled,
    )
    return {"data": data, "layout": layout}


def beam_tree(trace: Trace, step_label: str = "step") -> dict | None:
    """Beam search as a tree: x = step, one dot per hypothesis, the chosen path in orange."""
    nodes = trace.beam
    if not nodes:
        return None
    rows: dict[int, int] = {}
    y = []
    for node in nodes:
        y.append(rows.get(node.step, 0))
        rows[node.step] = rows.get(node.step, 0) + 1
    edges_x, edges_y, best_x, best_y = [], [], [], []
    for index, node in enumerate(nodes):
        if node.parent < 0:
            continue
        xs = [nodes[node.parent].step, node.step, None]
        ys = [y[node.parent], y[index], None]
        if node.selected and nodes[node.parent].selected:
            best_x += xs
            best_y += ys
        else:
            edges_x += xs
            edges_y += ys
    points = {
        "type": "scatter",
        "mode": "markers+text",
        "x": [n.step for n in nodes],
        "y": y,
        "text": [("<bos>" if n.parent < 0 else n.token) for n in nodes],
        "textposition": "top center",
        "marker": {
            "size": 12,
            "color": [ORANGE if n.selected else BLUE for n in nodes],
            "symbol": ["square" if n.finished else "circle" for n in nodes],
        },
        "customdata": [[n.score, "✓" if n.finished else ""] for n in nodes],
        "hovertemplate": "%{text}<br>log p = %{customdata[0]:.3f} %{customdata[1]}<extra></extra>",
    }
    data = [
        {"type": "scatter", "mode": "lines", "x": edges_x, "y": edges_y,
         "line": {"color": GREY, "width": 1}, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": best_x, "y": best_y,
         "line": {"color": ORANGE, "width": 3}, "hoverinfo": "skip"},
        points,
    ]
    layout = base_layout("", 120 + 40 * max(rows.values()), showlegend=False,
                         xaxis={"title": {"text": step_label}, "dtick": 1},
                         yaxis={"visible": False, "autorange": "reversed"})
    return {"data": data, "layout": layout}


def decode_steps(trace: Trace, layer: int, words: dict[str, str] | None = None) -> list[dict]:
    """For every time step, the seven things inside decoder ``layer`` and the output head."""
    words = {**WORDS, **(words or {})}
    block = trace.decoder[layer]
    ffn = block["ffn"]
    sampled = trace.options.get("strategy") == "sample"
    steps = []
    for t, step in enumerate(trace.steps):
        prefix = trace.decoder_input[: t + 1]
        norms = {
            key: {name: block[key][name][t]
                  for name in ("residual_norm", "sublayer_norm", "sum_mean", "sum_std",
                               "normed_mean", "normed_std")}
            for key in ("add_norm1", "add_norm2", "add_norm3")
        }
        step_dict = {"token": step.token, "prob": step.prob, "top": [vars(c) for c in step.top]}
        steps.append({
            "position": t,
            "token": step.token,
            "prob": step.prob,
            "entropy": step.entropy,
            "forced": step.forced,
            "prefix": prefix,
            "candidates": [c.token for c in step.top],
            "numbers": {
                **norms,
                "ffn": {"active_share": ffn["active_share"][t], "hidden_norm": ffn["hidden_norm"][t],
                        "output_norm": ffn["output_norm"][t], "d_ff": ffn["d_ff"]},
            },
            "figures": {
                "self_attention": attention_rows(block["self_attention"], t, prefix, words["head"]),
                "add_norm1": _add_norm(block["add_norm1"], t, words),
                "cross_attention": attention_rows(block["cross_attention"], t, trace.source_tokens,
                                                  words["head"]),
                "add_norm2": _add_norm(block["add_norm2"], t, words),
                "ffn": vector_bars({"ReLU(xW₁+b₁)": ffn["hidden_sample"][t]}, words["dimension"],
                                   colors=(BLUE,)),
                "add_norm3": _add_norm(block["add_norm3"], t, words),
                "softmax": candidates_figure(step_dict, sampled, words["sampled_from"]),
            },
        })
    return steps


def _add_norm(stats: dict, t: int, words: dict[str, str]) -> dict:
    series = {words["before_norm"]: stats["sum_sample"][t], words["after_norm"]: stats["normed_sample"][t]}
    return vector_bars(series, words["dimension"])
