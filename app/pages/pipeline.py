"""/ — the whole encoder–decoder with this model's sizes, the translation and how sure the model
was of each character, and why attention replaced recurrence (RNN / LSTM), measured on the
sentence's own encoder attention."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, TranslatorDep, page_text
from app.layout import render_page
from app.plots import (
    ATTENTION_SCALE,
    BLUE,
    GREY,
    LEGEND_TOP,
    ORANGE,
    TWO_AXES_MARGIN,
    VERMILION,
    base_layout,
    category_axis,
    unique_labels,
)
from app.schemas import TRACE_ERRORS, TraceRequest
from model.api import Trace, record

router = APIRouter()
PageText = page_text("pipeline")


@router.get("/pipeline", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep, translator: TranslatorDep) -> HTMLResponse:
    return render_page(request, "pipeline", lang, parameters=translator.parameter_counts())


@router.post("/api/figures/pipeline", responses=TRACE_ERRORS, tags=["figures"])
def pipeline_figures(request: TraceRequest, engine: EngineDep, t: PageText,
                       response: Response) -> dict:
    """The translation with its tokens and the probability of each chosen token (Plotly JSON)."""
    trace, model_ms = engine.trace(request)
    timed(response, model_ms)
    names = (t("pipeline.p_model"), t("pipeline.p_sampled"))
    words = {"rnn": t("rnn.rnn"), "attention": t("rnn.attention_short"), "weight": t("rnn.weight"),
             "distance": t("rnn.distance_axis"), "steps": t("rnn.steps")}
    flow_words = {name: t(f"pipeline.flow.{name}") for name in (
        "embedding", "layer", "self_attention", "cross_attention", "ffn", "encoder", "decoder")}
    return {**summary(trace), "links": distance_links(trace),
            "figures": {"probabilities": step_probabilities(trace, names),
                        "recurrence": recurrence_figure(trace, words),
                        "flow": flow_figure(trace, flow_words)}}


def flow_figure(trace: Trace, words: dict[str, str]) -> dict:
    """The x-ray in numbers: how large each token's vector is (‖x‖) after every stage, encoder
    above and decoder below, stage by stage in the order the data flows (the embedding, then per
    layer each sublayer's Add & Norm). The same stages the x-ray draws as colour strips."""
    def rows(side: str, tokens: list[str], embedding: list[list[float]]) -> tuple[list, list]:
        names, z = [words["embedding"]], [[round(sum(v * v for v in vector) ** 0.5, 3)
                                           for vector in embedding]]
        for index, layer in enumerate(record.layer_lists(trace, side)):
            for sublayer, stats in layer.add_norms:
                names.append(f"{words['layer'].format(n=index + 1)} · {words[sublayer]}")
                z.append(stats["normed_norm"][: len(tokens)])
        return names, z

    data, panels = [], (("encoder", trace.source_tokens, "y"),
                        ("decoder", trace.decoder_rows, "y2"))
    top = 0.0
    for side, tokens, axis in panels:
        names, z = rows(side, tokens, trace.embeddings[side]["sum"])
        top = max([top] + [v for row in z for v in row])
        data.append({"type": "heatmap", "z": z, "x": unique_labels(tokens), "y": names,
                     "xaxis": "x" if axis == "y" else "x2", "yaxis": axis,
                     "colorscale": ATTENTION_SCALE, "coloraxis": "coloraxis",
                     "hovertemplate": f"{words[side]} · %{{y}} · %{{x}}<br>‖x‖ = %{{z:.2f}}"
                                      "<extra></extra>", "xgap": 1, "ygap": 1})
    layout = base_layout(
        "", 560,
        xaxis={**category_axis(tickangle=-45), "anchor": "y"},
        yaxis={**category_axis(words["encoder"], reverse=True), "domain": [0.58, 1]},
        xaxis2={**category_axis(tickangle=-45), "anchor": "y2"},
        yaxis2={**category_axis(words["decoder"], reverse=True), "domain": [0, 0.4]},
        coloraxis={"colorscale": ATTENTION_SCALE, "cmin": 0, "cmax": top,
                   "colorbar": {"title": {"text": "‖x‖"}, "thickness": 10}},
        margin={"l": 170, "r": 20, "t": 16, "b": 60},
    )
    return {"data": data, "layout": layout}


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


# -- why attention replaced recurrence ----------------------------------------------------------

RNN_WORDS = {"rnn": "RNN / LSTM: steps one after another", "attention": "self-attention: steps",
             "weight": "strongest direct attention weight", "distance": "tokens apart",
             "steps": "sequential steps"}


SPECIAL = {"<eos>", "<bos>", "<pad>"}


def distance_links(trace: Trace) -> list[dict]:
    """For every distance d between two English words: the strongest attention weight any
    encoder head in any layer puts directly on a word d positions away, and where it is.
    <eos> is left out on both sides: heads with nothing better to do park their weight on it,
    which says nothing about how words relate."""
    words = [i for i, token in enumerate(trace.source_tokens) if token not in SPECIAL]
    n = len(words)
    best: list[dict] = []
    for d in range(1, n):
        top = {"distance": d, "weight": 0.0, "layer": 0, "head": 0, "query": 0, "key": 0}
        for layer, block in enumerate(record.layer_lists(trace, "encoder")):
            for head, rows in enumerate(block.self_attention):
                for query in words[:n]:
                    for key in (query - d, query + d):
                        if key in words and rows[query][key] > top["weight"]:
                            top = {"distance": d, "weight": rows[query][key], "layer": layer,
                                   "head": head, "query": query, "key": key}
        top["from"], top["to"] = trace.source_tokens[top["query"]], trace.source_tokens[top["key"]]
        best.append(top)
    return best


def recurrence_figure(trace: Trace, words: dict[str, str] | None = None) -> dict:
    """Bars: how many steps, one after another, carry a word to another d tokens away — d in a
    recurrent network, 1 per layer with self-attention. Line: the strongest attention weight
    this model really puts across that distance."""
    words = {**RNN_WORDS, **(words or {})}
    links = distance_links(trace)
    x = [link["distance"] for link in links]
    hover = [f"{link['from']} → {link['to']}" for link in links]
    data = [
        {"type": "bar", "name": words["rnn"], "x": x, "y": x, "marker": {"color": GREY},
         "hovertemplate": f"%{{x}}: %{{y}}<extra>{words['rnn']}</extra>"},
        {"type": "bar", "name": words["attention"], "x": x, "y": [1] * len(x),
         "marker": {"color": BLUE},
         "hovertemplate": f"%{{x}}: %{{y}}<extra>{words['attention']}</extra>"},
        {"type": "scatter", "mode": "lines+markers", "name": words["weight"], "x": x,
         "y": [link["weight"] for link in links], "yaxis": "y2", "customdata": hover,
         "line": {"color": VERMILION}, "marker": {"color": ORANGE, "size": 7},
         "hovertemplate": f"%{{x}}: %{{y:.3f}} (%{{customdata}})<extra>{words['weight']}</extra>"},
    ]
    layout = base_layout("", 300, barmode="group",
                         xaxis={"title": {"text": words["distance"]}, "dtick": 1 if len(x) <= 20 else 5},
                         yaxis={"title": {"text": words["steps"]}, "rangemode": "tozero"},
                         yaxis2={"title": {"text": "p"}, "overlaying": "y", "side": "right",
                                 "range": [0, 1.05], "tickvals": [0, 0.25, 0.5, 0.75, 1],
                                 "showgrid": False},
                         legend={**LEGEND_TOP, "y": 1.25}, margin=TWO_AXES_MARGIN)
    return {"data": data, "layout": layout}
