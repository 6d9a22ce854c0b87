"""/tour — a guided walk through every page on the reader's sentence, one live figure per stop
(static/js/tour.js asks the stop's own JSON route, which reads the same cached trace)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.deps import LanguageDep
from app.layout import render_page
from app.pages.coreference import EXAMPLES as COREFERENCE_EXAMPLES

router = APIRouter(include_in_schema=False)

# The stops, in the documents' order: (path, pipeline stages highlighted, i18n key prefix).
TOUR = [
    ("/", "all", "tour.xray"),
    ("/pipeline", "all", "tour.pipeline"),
    ("/tokens", "tokens", "tour.tokens"),
    ("/embeddings", "embedding", "tour.embeddings"),
    ("/attention", "encoder", "tour.attention"),
    ("/coreference", "encoder", "tour.coreference"),
    ("/training", "loss", "tour.training"),
    ("/timeline", "loss", "tour.timeline"),
    ("/decode", "decoder output", "tour.decode"),
    ("/kv-cache", "decoder", "tour.kv"),
    ("/scale", "all", "tour.scale"),
]
PIPELINE_STAGES = ["tokens", "embedding", "encoder", "decoder", "output", "loss"]


@router.get("/tour", response_class=HTMLResponse)
def page(request: Request, lang: LanguageDep,
         step: Annotated[str, Query(max_length=4)] = "0") -> HTMLResponse:
    """One stop of the guided tour; an out-of-range ``step`` shows the nearest stop."""
    last = len(TOUR) - 1
    # "²" passes isdigit() but not int(); only ASCII digits are a step number
    step = min(last, max(0, int(step))) if step.isascii() and step.isdecimal() else 0
    path, stage, key = TOUR[step]
    return render_page(request, "tour", lang, step=step, steps=TOUR, tour_path=path,
                       tour_stage=stage, tour_key=key, stages=PIPELINE_STAGES,
                       coreference=COREFERENCE_EXAMPLES[0])
