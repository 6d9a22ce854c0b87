"""/attention — every head of every layer for the three kinds of attention, and one head opened
stage by stage: q·k, ÷√d_k, mask, softmax, the weighted sum of V."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, page_text
from app.layout import render_page
from app.palette import PLOT_FONT_PX
from app.plots import BLUE, GREY, ORANGE, attention_heatmap, base_layout, category_axis, unique_labels
from app.schemas import TOKENS_RULE, TRACE_ERRORS, NotFound, TraceRequest, errors, model_limit
from model.api import MAX_SOURCE_TOKENS, InputError, Trace

router = APIRouter()
PageText = page_text("attention")

KIND_TOKENS = {
    "encoder": ("source_tokens", "source_tokens"),
    "decoder_self": ("decoder_rows", "decoder_input"),  # rows: reads → produces; keys: inputs
    "cross": ("decoder_rows", "source_tokens"),
}
KIND_LAYERS = {"encoder": ("encoder", "self_attention"),
               "decoder_self": ("decoder", "self_attention"),
               "cross": ("decoder", "cross_attention")}
AttentionKind = Literal["encoder", "decoder_self", "cross"]


class AttentionDetailRequest(TraceRequest):
    kind: AttentionKind
    layer: int = Field(ge=0, le=63, json_schema_extra=model_limit("layer"),
                       description="0-based layer index (of the encoder for kind=encoder, else of "
                                   "the decoder)")
    head: int = Field(ge=0, le=63, json_schema_extra=model_limit("head"),
                      description="0-based head index")


class AttentionStagesRequest(AttentionDetailRequest):
    # the most rows an attention can have: 128 source tokens and <eos>, or <bos> and 128 steps
    query: int = Field(0, ge=0, le=MAX_SOURCE_TOKENS,
                       description="the query row to follow (0-based): below the number of source "
                                   "tokens for kind=encoder, of decoder input tokens otherwise "
                                   "(else 404)")


LAYER_RULE = "layer must be below the number of layers of the stack kind reads (GET /api/model)"
DETAIL_ERRORS = errors(TOKENS_RULE, missing=(LAYER_RULE,))
STAGES_ERRORS = errors(TOKENS_RULE, missing=(
    LAYER_RULE, "query must be below the number of rows of that attention: the source tokens "
                "(with <eos>) for kind=encoder, the decoder input tokens otherwise"))


# -- routes ---------------------------------------------------------------------------------------


@router.get("/attention", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "attention", lang)


@router.post("/api/figures/attention", responses=TRACE_ERRORS, tags=["figures"])
def attention_figures(request: TraceRequest, engine: EngineDep, t: PageText,
                      response: Response) -> dict:
    """Every head of every layer for the three kinds of attention (Plotly JSON)."""
    trace, model_ms = engine.trace(request)
    timed(response, model_ms)
    labels = (t("word.query"), t("word.key"))
    return {
        **summary(trace),
        "kinds": {kind: attention_overview(trace, kind, labels) for kind in KIND_TOKENS},
    }


@router.post("/api/attention-detail", responses=DETAIL_ERRORS, tags=["model"])
def attention_detail(request: AttentionDetailRequest, engine: EngineDep, response: Response) -> dict:
    """One head of one layer, stage by stage: Q, K, V, q·k, ÷√d_k, mask, softmax, weighted sum."""
    trace, model_ms = engine.trace(request)
    layers = len(trace.encoder if request.kind == "encoder" else trace.decoder)
    if request.layer >= layers:  # past both stacks: out of the schema's limit (422)
        error = NotFound if request.layer < max(len(trace.encoder), len(trace.decoder)) else InputError
        raise error("layer", f"layer must be between 0 and {layers - 1}")
    n_heads = len(attention_weights(trace, request.kind, request.layer))
    if request.head >= n_heads:
        raise InputError("head", f"head must be between 0 and {n_heads - 1}")
    timed(response, model_ms)
    return trace.attention_detail(request.kind, request.layer, request.head)


@router.post("/api/figures/attention-detail", responses=STAGES_ERRORS, tags=["figures"])
def attention_stage_figures(request: AttentionStagesRequest, engine: EngineDep,
                            response: Response) -> dict:
    """One query row of one head through q·k, ÷√d_k, mask, softmax and the weighted sum of V."""
    detail = attention_detail(request, engine, response)
    rows = len(detail["query_tokens"])
    if request.query >= rows:
        raise NotFound("query", f"query must be between 0 and {rows - 1}")
    return {"detail": detail, "query": request.query,
            "figures": attention_stages(detail, request.query)}


# -- figures --------------------------------------------------------------------------------------


def attention_weights(trace: Trace, kind: str, layer: int) -> list:
    """[head][query][key] weights of one layer of one kind of attention."""
    stack, name = KIND_LAYERS[kind]
    return getattr(trace, stack)[layer][name]


def attention_tokens(trace: Trace, kind: str) -> tuple[list[str], list[str]]:
    query, key = KIND_TOKENS[kind]
    return getattr(trace, query), getattr(trace, key)


def attention_overview(trace: Trace, kind: str, labels: tuple[str, str] = ("query", "key")) -> list:
    """Every layer and head of one kind, a heatmap figure each (static/js/attention.js also draws
    its thumbnail from it)."""
    query_tokens, key_tokens = attention_tokens(trace, kind)
    stack = getattr(trace, KIND_LAYERS[kind][0])
    cells = []
    for layer in range(len(stack)):
        for head, weights in enumerate(attention_weights(trace, kind, layer)):
            figure = attention_heatmap(weights, query_tokens, key_tokens, labels=labels)
            cells.append({"layer": layer, "head": head, "figure": figure})
    return cells


def score_bars(values: list[float | None], key_tokens: list[str], color: str = BLUE,
               fmt: str = ".3f") -> dict:
    """One query row at one stage (q·k, ÷√d_k, masked, softmax) as bars over the key tokens.

    Masked-out keys (None, i.e. −∞ before softmax) get a grey column across the whole plot with
    "−∞" written in it, since a bar cannot be drawn to minus infinity.
    """
    labels = unique_labels(key_tokens)
    bar = {
        "type": "bar",
        "x": labels,
        "y": [0 if v is None else v for v in values],
        "text": ["" if v is None else format(v, fmt) for v in values],  # −∞ is written below
        "customdata": ["−∞" if v is None else format(v, fmt) for v in values],
        "textposition": "outside",
        "cliponaxis": False,
        "textfont": {"size": PLOT_FONT_PX},
        "marker": {"color": [GREY if v is None else color for v in values]},
        "hovertemplate": "%{x}: %{customdata}<extra></extra>",
    }
    masked = [i for i, v in enumerate(values) if v is None]
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": i - 0.5, "x1": i + 0.5,
               "y0": 0, "y1": 1, "fillcolor": "rgba(120,120,120,0.25)", "line": {"width": 0},
               "layer": "below"} for i in masked]
    annotations = [{"x": labels[i], "xref": "x", "y": 0.5, "yref": "paper", "text": "−∞",
                    "showarrow": False, "font": {"size": 13, "color": "#333"}} for i in masked]
    layout = base_layout("", 240, xaxis=category_axis(tickangle=-45),
                         yaxis={"zeroline": True}, shapes=shapes, annotations=annotations)
    layout["margin"] = {**layout["margin"], "t": 28}  # room for the labels above the tallest bar
    return {"data": [bar], "layout": layout}


def attention_stages(detail: dict, query: int) -> dict:
    """Bars for one query row at each stage of ``Trace.attention_detail``."""
    keys = detail["key_tokens"]
    return {
        "raw": score_bars(detail["raw"][query], keys),
        "scaled": score_bars(detail["scaled"][query], keys),
        "masked": score_bars(detail["masked"][query], keys),
        "weights": score_bars(detail["weights"][query], keys, color=ORANGE),
    }
