"""/ — the whole encoder–decoder with this model's sizes, the translation and how sure the model
was of each character."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.plots import BLUE, GREY, LEGEND_TOP, ORANGE, base_layout, category_axis, unique_labels
from app.schemas import ERRORS, TraceRequest
from model.trace import Trace

router = APIRouter()
PageText = page_text("pipeline")


@router.get("/pipeline", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    return render_page(request, "pipeline", lang, parameters=translator.parameter_counts())


@router.post("/api/figures/pipeline", responses=ERRORS, tags=["figures"])
def pipeline_figures(request: TraceRequest, engine: EngineDep, t: PageText,
                       response: Response) -> dict:
    """The translation with its tokens and the probability of each chosen token (Plotly JSON)."""
    trace, model_ms = engine.trace(request)
    timed(response, model_ms)
    names = (t("pipeline.p_model"), t("pipeline.p_sampled"))
    return {**summary(trace), "figures": {"probabilities": step_probabilities(trace, names)}}


def sampled_probability(step) -> float | None:
    """The chosen token's probability in the distribution it was drawn from (after temperature,
    top-k, top-p); None when the token is not among the recorded candidates."""
    for candidate in step.top:
        if candidate.token == step.token:
            return candidate.sample_prob
    return None


def step_probabilities(trace: Trace, names: tuple[str, str] = ("model, temperature 1",
                                                              "distribution sampled from")) -> dict:
    """The probability of every chosen token, step by step (low bars = the model was unsure).

    When the translation was sampled, a second bar per step shows the chosen token's probability
    in the distribution it was actually drawn from (temperature, top-k, top-p applied)."""
    steps = trace.steps
    labels = unique_labels([s.token for s in steps])
    sampled = trace.options.get("strategy") == "sample"
    bar = {
        "type": "bar", "name": names[0],
        "x": labels,
        "y": [s.prob for s in steps],
        "marker": {"color": [ORANGE if s.forced else (GREY if sampled else BLUE) for s in steps]},
        "hovertemplate": f"%{{x}}: p = %{{y:.4f}}<extra>{names[0]}</extra>",
    }
    data = [bar]
    if sampled:
        data.append({
            "type": "bar", "name": names[1], "x": labels,
            "y": [sampled_probability(s) for s in steps],
            "marker": {"color": [ORANGE if s.forced else BLUE for s in steps]},
            "hovertemplate": f"%{{x}}: p = %{{y:.4f}}<extra>{names[1]}</extra>",
        })
    return {"data": data, "layout": base_layout("", 220, barmode="group", xaxis=category_axis(),
                                                 yaxis={"range": [0, 1.05]},
                                                 showlegend=sampled, legend=LEGEND_TOP)}
