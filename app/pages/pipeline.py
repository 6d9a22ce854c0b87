"""/ — the whole encoder–decoder with this model's sizes, the translation and how sure the model
was of each character."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, TranslatorDep
from app.layout import render_page
from app.plots import BLUE, ORANGE, base_layout, category_axis, unique_labels
from app.schemas import ERRORS, TraceRequest
from model.trace import Trace

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    return render_page(request, "pipeline", lang, parameters=translator.parameter_counts())


@router.post("/api/figures/pipeline", responses=ERRORS, tags=["figures"])
def pipeline_figures(request: TraceRequest, engine: EngineDep, response: Response) -> dict:
    """The translation with its tokens and the probability of each chosen token (Plotly JSON)."""
    trace, model_ms = engine.trace(request)
    timed(response, model_ms)
    return {**summary(trace), "figures": {"probabilities": step_probabilities(trace)}}


def step_probabilities(trace: Trace) -> dict:
    """The probability of every chosen token, step by step (low bars = the model was unsure)."""
    steps = trace.steps
    tokens = [s.token for s in steps]
    bar = {
        "type": "bar",
        "x": unique_labels(tokens),
        "y": [s.prob for s in steps],
        "marker": {"color": [ORANGE if s.forced else BLUE for s in steps]},
        "hovertemplate": "%{x}: p = %{y:.4f}<extra></extra>",
    }
    return {"data": [bar], "layout": base_layout("", 200, xaxis=category_axis(),
                                                 yaxis={"range": [0, 1.05]})}
