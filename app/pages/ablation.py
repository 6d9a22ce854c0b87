"""/ablation — switch a part of the model off and watch the translation change.

Heads, whole sublayers or the positional encoding are switched off (``model/explain/ablation.py``:
what "off" means, zero or mean); the sentence is translated again without them, and the original
translation is scored with and without them. Each head's importance for this translation is
measured by removing it alone; the word-order test shuffles the sentence with positional encoding
off. Everything runs on the engine's model thread and is kept with the trace (``Engine.derived``).

The page's state is its URL, so other pages can link to it: ``/ablation?text=…&off=cross.1.2,enc.3
&mode=mean&step=2&shuffle=1`` (parts as ``model/explain/ablation.py`` names them, comma-separated).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field, field_validator

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.plots import BLUE, ORANGE, base_layout, category_axis, unique_labels
from app.schemas import (
    TOKENS_RULE,
    TraceRequest,
    TranslateRequest,
    errors,
    model_limit,
)
from model.api import ablation as ablate

router = APIRouter()
PageText = page_text("ablation")

Mode = Literal["zero", "mean"]
# the schema's pattern: PART_PATTERN, or once the model is loaded its own layers and heads
PartName = Annotated[str, Field(min_length=1, max_length=16,
                                json_schema_extra={"pattern": ablate.PART_PATTERN,
                                                   **model_limit("ablation_part")},
                                examples=["cross.1.2"])]
PARTS_RULE = (f"off names at most {ablate.MAX_PARTS} parts, each a layer and head this model has: "
              "enc.L.H, dec.L.H, cross.L.H (a head: encoder self-attention, decoder masked "
              "self-attention, cross-attention; layers and heads counted from 1), enc.L, dec.L, "
              "cross.L, encffn.L, decffn.L (a whole sublayer), pos.enc, pos.dec (positional encoding)")
MODE_HELP = ("zero: a part that is off writes 0; mean: it writes the average of what it wrote over "
             "this sentence with nothing off")


class AblationRequest(TraceRequest):
    off: list[PartName] = Field(
        default_factory=list, max_length=ablate.MAX_PARTS,
        description=f"the parts to switch off (at most {ablate.MAX_PARTS}), e.g. cross.1.2, enc.3, pos.enc",
    )
    mode: Mode = Field("zero", description=MODE_HELP)

    @field_validator("off", mode="before")
    @classmethod
    def few_parts(cls, off):
        if isinstance(off, list) and len(off) > ablate.MAX_PARTS:
            raise ValueError(f"at most {ablate.MAX_PARTS} parts can be off at once ({len(off)} "
                             "given): switch a whole sublayer off instead of its heads one by one")
        return off


class ImportanceRequest(TraceRequest):
    mode: Mode = Field("zero", description=MODE_HELP)


class WordOrderRequest(TranslateRequest):
    shuffle: int = Field(1, ge=0, le=9999, description="which shuffle of the words (a seed); 0–9999"
                                                      " (a text of one word has only its own order)")


ABLATION_ERRORS = errors(TOKENS_RULE, PARTS_RULE)


# -- routes ---------------------------------------------------------------------------------------


@router.get("/ablation", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "ablation", lang, kinds=ablate.HEAD_KINDS)


@router.post("/api/ablation", responses=ABLATION_ERRORS, tags=["model"])
def ablation(request: AblationRequest, engine: EngineDep, translator: TranslatorDep, t: PageText,
             response: Response) -> dict:
    """Translate again with parts switched off; the original translation's probability at every
    step with and without them (teacher-forced), and where the two translations part."""
    parts = ablate.parse_parts(request.off, translator.config)
    trace, trace_ms = engine.trace(request)
    name = ("ablation", tuple(part.name for part in parts), request.mode)
    result, model_ms = engine.derived(request, trace, name, ablate.retranslate, translator, trace,
                                      parts, request.mode)
    timed(response, trace_ms + model_ms)
    return {**summary(trace), **result, "figure": step_figure(result, t)}


@router.post("/api/ablation/importance", responses=errors(TOKENS_RULE), tags=["model"])
def importance(request: ImportanceRequest, engine: EngineDep, translator: TranslatorDep,
               response: Response) -> dict:
    """Every head's importance for this translation: the change of its log-probability
    (teacher-forced) when that head alone is switched off, and per step the change of that
    step's character's probability. All heads are scored as rows of batched passes."""
    trace, trace_ms = engine.trace(request)
    result, model_ms = engine.derived(request, trace, ("importance", request.mode),
                                      ablate.head_importance, translator, trace, request.mode)
    timed(response, trace_ms + model_ms)
    return {**summary(trace), **result}


@router.post("/api/ablation/word-order", responses=errors(TOKENS_RULE), tags=["model"])
def word_order(request: WordOrderRequest, engine: EngineDep, translator: TranslatorDep,
               response: Response) -> dict:
    """The sentence and its words shuffled, through the encoder with and without positional
    encoding: how far apart the same token's vectors are in the two, and the translations. A
    sentence of fewer than two words has one order: ``shuffled`` is false and the sentence is
    compared with itself (the page says the test needs two words)."""
    trace, trace_ms = engine.trace(request)
    words = len(ablate.word_spans(trace.source_tokens, trace.source_ids))
    result, model_ms = engine.derived(request, trace, ("word-order", request.shuffle),
                                      ablate.word_order, translator, trace, request.shuffle)
    timed(response, trace_ms + model_ms)
    return {**summary(trace), **result, "shuffled": words > 1}


# -- figures --------------------------------------------------------------------------------------


def step_figure(result: dict, t) -> dict:
    """The original translation's characters: the probability the model gave each one with every
    part on, and with the parts off (bars side by side); where the new translation parts, marked."""
    original = result["original"]
    labels = unique_labels(original["tokens"])
    bars = [
        {"type": "bar", "name": t("ablation.with_all"), "x": labels, "y": original["prob_with"],
         "marker": {"color": BLUE}, "hovertemplate": "%{x}: %{y:.4f}<extra></extra>"},
        {"type": "bar", "name": t("ablation.with_off"), "x": labels, "y": original["prob_without"],
         "marker": {"color": ORANGE}, "hovertemplate": "%{x}: %{y:.4f}<extra></extra>"},
    ]
    shapes, annotations = [], []
    parted = result["parted_at"]
    if parted is not None and parted < len(labels):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": parted - 0.5,
                       "x1": parted - 0.5, "y0": 0, "y1": 1, "line": {"color": "#333", "dash": "dot"}})
        annotations.append({"x": parted - 0.5, "xref": "x", "y": 1, "yref": "paper",
                            "text": t("ablation.parts_here"), "showarrow": False, "xanchor": "left",
                            "yanchor": "top", "bgcolor": "rgba(255,255,255,0.85)",
                            "font": {"size": 11}})
    layout = base_layout(
        t("ablation.figure_title"), 300, barmode="group",
        xaxis=category_axis(t("ablation.figure_x")),
        yaxis={"title": {"text": t("word.probability")}, "range": [0, 1.05]},
        legend={"orientation": "h"}, shapes=shapes, annotations=annotations,
    )
    return {"data": bars, "layout": layout}
