"""The JSON endpoints no single page owns (health, model info, translate, the whole trace) and
the two helpers every page's JSON route uses: ``timed`` and ``summary``. Documented at /docs.

Endpoints are plain ``def`` functions, so FastAPI runs them in its threadpool; the model itself
runs on the engine's one thread.
"""

from __future__ import annotations

from dataclasses import asdict

import orjson
from fastapi import APIRouter, Response

from app.deps import EngineDep, TranslatorDep
from app.schemas import (
    ERRORS,
    TRACE_ERRORS,
    Health,
    ModelInfo,
    TraceRequest,
    TranslateRequest,
    TranslateResponse,
)
from model.api import Trace

router = APIRouter()


def timed(response: Response, model_ms: float) -> None:
    """Server-Timing shows the model's compute time for the request (0 when the trace was cached);
    app/middleware.py adds the time it waited for the model thread as ``queue;dur``."""
    response.headers["Server-Timing"] = f"model;dur={model_ms:.1f}"


def summary(trace: Trace) -> dict:
    """The sentence, its translation and its tokens: the head of every figure answer."""
    return {
        "text": trace.text,
        "translation": trace.translation,
        "finished": trace.finished,
        "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens,
        "decoder_input": trace.decoder_input,
        # decoder rows by what each position reads and what it produces ("<bos> → 猫")
        "decoder_rows": trace.decoder_rows,
        "options": trace.options,
        "model_ms": trace.model_ms,
    }


@router.get("/healthz", response_model=Health, tags=["service"])
async def healthz() -> Health:
    """Answered on the event loop, never behind the threadpool or the model thread."""
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
def translate(request: TranslateRequest, engine: EngineDep, response: Response) -> dict:
    """Translate one English sentence; each step lists the most likely candidates."""
    trace, model_ms = engine.trace(request)
    timed(response, model_ms)
    return {
        "text": trace.text,
        "translation": trace.translation,
        "source_tokens": trace.source_tokens,
        "target_tokens": trace.target_tokens,
        "finished": trace.finished,
        "steps": [asdict(step) for step in trace.steps],
        "model_ms": trace.model_ms,
    }


@router.post("/api/trace", responses=TRACE_ERRORS, tags=["model"])
def trace(request: TraceRequest, engine: EngineDep) -> Response:
    """Everything recorded inside one translation: embeddings, every attention matrix
    (``encoder[layer].self_attention[head][query][key]``, ``decoder[layer].self_attention`` T×T,
    ``decoder[layer].cross_attention`` T×S), Add & Norm and FFN statistics, steps, beam tree."""
    result, model_ms = engine.trace(request)
    # The trace is plain data already: serialise it directly, with orjson (the stdlib encoder
    # holds the GIL ~5× longer, and the model thread waits for it). FastAPI's generic encoder
    # would walk every float of every attention matrix once more, slower than the model.
    response = Response(orjson.dumps(result.to_dict()), media_type="application/json")
    timed(response, model_ms)
    return response
