"""JSON endpoints (documented at /docs). Thin: validate, fetch the cached trace, shape the answer.

Endpoints are plain ``def`` functions, so FastAPI runs them (and the model) in its threadpool.
"""

from __future__ import annotations

from dataclasses import asdict

import orjson
from fastapi import APIRouter, Response

from app import figures
from app.dependencies import TracesDep, TranslateDep, TranslatorDep
from app.schemas import (
    AttentionDetailRequest,
    AttentionStagesRequest,
    ErrorResponse,
    FigureRequest,
    Health,
    ModelInfo,
    TraceRequest,
    TranslateRequest,
    TranslateResponse,
)
from model.translator import InputError

router = APIRouter()
ERRORS = {422: {"model": ErrorResponse, "description": "a field is out of its limits"}}


def _timed(response: Response, model_ms: float) -> None:
    """Server-Timing shows the model's share of the request (0 when the trace was cached)."""
    response.headers["Server-Timing"] = f"model;dur={model_ms:.1f}"


@router.get("/healthz", response_model=Health, tags=["service"])
def healthz() -> Health:
    return Health()


@router.get("/api/model", response_model=ModelInfo, tags=["model"])
def model_info(translator: TranslatorDep) -> ModelInfo:
    """Architecture sizes, parameter counts per component, and how training and evaluation went."""
    config = asdict(translator.config)
    config["d_head"] = translator.config.d_head
    history = translator.history
    epochs = history.get("epochs", [])
    last = epochs[-1] if epochs else {}
    final = history.get("final", {})
    training = {
        "epochs": len(epochs),
        "steps": last.get("step"),
        "final_train_loss": last.get("train_loss"),
        "final_dev_bleu": final.get("dev_bleu", last.get("dev_bleu")),
        "final_dev_chrf": final.get("dev_chrf", last.get("dev_chrf")),
        "minutes": last.get("minutes"),
        "weights": final.get("weights"),
    }
    return ModelInfo(
        config=config,
        parameters=translator.parameter_counts(),
        training=training,
        evaluation=translator.evaluation,
        checkpoint=str(translator.path.name if translator.path else ""),
    )


@router.post("/api/translate", response_model=TranslateResponse, responses=ERRORS,
             tags=["model"])
def translate(request: TranslateRequest, traces: TracesDep, response: Response) -> dict:
    """Translate one English sentence; each step lists the most likely candidates."""
    trace, model_ms = traces.get(request)
    _timed(response, model_ms)
    return {
        "text": trace.text,
        "translation": trace.translation,
        "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens,
        "finished": trace.finished,
        "steps": [asdict(step) for step in trace.steps],
        "model_ms": trace.model_ms,
    }


@router.post("/api/trace", responses=ERRORS, tags=["model"])
def trace(request: TraceRequest, traces: TracesDep) -> Response:
    """Everything recorded inside one translation: embeddings, every attention matrix
    (``encoder[layer].self_attention[head][query][key]``, ``decoder[layer].self_attention`` T×T,
    ``decoder[layer].cross_attention`` T×S), Add & Norm and FFN statistics, steps, beam tree."""
    result, model_ms = traces.get(request)
    # The trace is plain data already: serialise it directly, with orjson (the stdlib encoder
    # holds the GIL ~5× longer, and the model thread waits for it). FastAPI's generic encoder
    # would walk every float of every attention matrix once more, slower than the model.
    response = Response(orjson.dumps(result.to_dict()), media_type="application/json")
    _timed(response, model_ms)
    return response


@router.post("/api/attention-detail", responses=ERRORS, tags=["model"])
def attention_detail(request: AttentionDetailRequest, traces: TracesDep, response: Response) -> dict:
    """One head of one layer, stage by stage: Q, K, V, q·k, ÷√d_k, mask, softmax, weighted sum."""
    result, model_ms = traces.get(request)
    layers = len(result.encoder if request.kind == "encoder" else result.decoder)
    if request.layer >= layers:
        raise InputError("layer", f"layer must be between 0 and {layers - 1}")
    n_heads = len(figures.attention_weights(result, request.kind, request.layer))
    if request.head >= n_heads:
        raise InputError("head", f"head must be between 0 and {n_heads - 1}")
    _timed(response, model_ms)
    return result.attention_detail(request.kind, request.layer, request.head)


@router.post("/api/figures/attention-detail", responses=ERRORS, tags=["figures"])
def attention_stage_figures(
    request: AttentionStagesRequest, traces: TracesDep, response: Response
) -> dict:
    """One query row of one head through q·k, ÷√d_k, mask, softmax and the weighted sum of V."""
    detail = attention_detail(request, traces, response)
    rows = len(detail["query_tokens"])
    if request.query >= rows:
        raise InputError("query", f"query must be between 0 and {rows - 1}")
    return {
        "detail": detail,
        "query": request.query,
        "figures": figures.attention_stages(detail, request.query),
    }


@router.post("/api/figures/pipeline", responses=ERRORS, tags=["figures"])
def pipeline_figures(request: TraceRequest, traces: TracesDep, response: Response) -> dict:
    """The translation with its tokens and the probability of each chosen token (Plotly JSON)."""
    result, model_ms = traces.get(request)
    _timed(response, model_ms)
    return {
        **_summary(result),
        "figures": {"probabilities": figures.step_probabilities(result)},
    }


@router.post("/api/figures/attention", responses=ERRORS, tags=["figures"])
def attention_figures(
    request: TraceRequest, traces: TracesDep, t: TranslateDep, response: Response
) -> dict:
    """Every head of every layer for the three kinds of attention (Plotly JSON)."""
    result, model_ms = traces.get(request)
    _timed(response, model_ms)
    labels = (t("word.query"), t("word.key"))
    return {
        **_summary(result),
        "kinds": {kind: figures.attention_overview(result, kind, labels)
                  for kind in figures.KIND_TOKENS},
    }


@router.post("/api/figures/decode", responses=ERRORS, tags=["figures"])
def decode_figures(
    request: FigureRequest, traces: TracesDep, t: TranslateDep, response: Response
) -> dict:
    """Step-by-step decoding inside one decoder layer, plus the beam tree (Plotly JSON)."""
    result, model_ms = traces.get(request)
    if request.layer >= len(result.decoder):
        raise InputError("layer", f"layer must be between 0 and {len(result.decoder) - 1}")
    _timed(response, model_ms)
    return {
        **_summary(result),
        "layer": request.layer,
        "layers": len(result.decoder),
        "steps": figures.decode_steps(result, request.layer, {
            "head": t("word.head", n="").strip(),
            "before_norm": t("legend.before_norm"),
            "after_norm": t("legend.after_norm"),
        }),
        "beam": figures.beam_tree(result),
    }


def _summary(trace) -> dict:
    return {
        "text": trace.text,
        "translation": trace.translation,
        "finished": trace.finished,
        "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens,
        "decoder_input": trace.decoder_input,
        "options": trace.options,
        "model_ms": trace.model_ms,
    }
