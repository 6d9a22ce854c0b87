"""/decode — one time step at a time: what happens inside a decoder layer and the output layer
after the stack, the next-token distribution, the decoding strategy, forced tokens, and the
beam-search tree; and "why this token?": the logit lens per decoder layer and source attributions
beside the cross-attention. A token is a Chinese character for our model, a SentencePiece piece
for a Marian one."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from app.api import summary, timed
from app.deps import EngineDep, LanguageDep, page_text
from app.layout import activation_name, render_page
from app.pages.decode_beam import BEAM_WORDS, beam_lineage, beam_tree  # noqa: F401 (re-exported)
from app.palette import PLOT_FONT_PX
from app.plots import (
    ATTENTION_SCALE,
    BLUE,
    CHOSEN,
    FILTERED,
    GREY,
    LEGEND_TOP,
    MODEL,
    ORANGE,
    attention_heatmap,
    base_layout,
    category_axis,
    unique_labels,
)
from app.schemas import (
    MAX_FORCED,
    TOKENS_RULE,
    TRACE_ERRORS,
    NotFound,
    TraceRequest,
    errors,
    model_limit,
)
from model.api import ADD_NORM_NAMES, InputError, Trace, interpret, record

router = APIRouter()
PageText = page_text("decode")

# Words the figures need, with the English defaults a direct caller (a test, a notebook) gets.
WORDS = {"head": "head {n}", "before_norm": "x + sublayer(x)", "after_norm": "after LayerNorm",
         "dimension": "dimension", "step": "step", "sampled_from": "sampled from",
         "p_model": "model (temperature 1)", "unit": "hidden unit", "activation": "ReLU output",
         "ffn_input": "x (into the FFN)", "ffn_output": "FFN(x)"}
TOP_UNITS = 12  # the most active hidden units the FFN box names


class FigureRequest(TraceRequest):
    layer: int = Field(0, ge=0, le=63, json_schema_extra=model_limit("decoder_layer"),
                       description="decoder layer shown by the decode view")


class InterpretRequest(TraceRequest):
    """Which step of the translation to explain, and how finely to integrate the gradients."""

    step: int = Field(0, ge=0, le=MAX_FORCED - 1,  # a translation has at most max_len ≤ 128 steps
                      description="0-based decoding step whose token is explained: below "
                                  "the translation's number of steps (else 404)")
    ig_steps: int = Field(64, ge=2, le=256,
                          description="integrated-gradients steps along the path from the baseline "
                                      "(more: the attributions add up more exactly); 2–256")


@router.get("/decode", response_class=HTMLResponse, include_in_schema=False)
def page(request: Request, lang: LanguageDep) -> HTMLResponse:
    return render_page(request, "decode", lang)


@router.post("/api/figures/decode", responses=TRACE_ERRORS, tags=["figures"])
def decode_figures(request: FigureRequest, engine: EngineDep, t: PageText,
                   response: Response) -> dict:
    """Step-by-step decoding inside one decoder layer, plus the beam tree (Plotly JSON)."""
    trace, model_ms = engine.trace(request)
    if request.layer >= len(trace.decoder):
        raise InputError("layer", f"layer must be between 0 and {len(trace.decoder) - 1}")
    ffn, ffn_ms = engine.derived(request, trace, "ffn", record.ffn_units_of, trace, TOP_UNITS)
    gradients, gradient_ms = engine.derived(request, trace, "gradients", record.gradient_flow_of,
                                            engine.translator, trace)
    timed(response, model_ms + ffn_ms + gradient_ms)
    words = {
        "head": t("word.head", n="{n}"),  # "Head {n}" / "第 {n} 个头": the number's place
        "before_norm": t("legend.before_norm"),
        "after_norm": t("legend.after_norm"),
        "dimension": t("common.dimension"),
        "step": t("common.step"),
        "sampled_from": t("decode.sampled_from"),
        "p_model": t("decode.p_model"),
        **{name: t(f"ffn.{name}") for name in ("unit", "ffn_input", "ffn_output")},
        "activation": t("ffn.activation", act=activation_name(engine.translator.config)),
    }
    return {
        **summary(trace),
        "layer": request.layer,
        "layers": len(trace.decoder),
        "steps": decode_steps(trace, request.layer, words, ffn["decoder"][request.layer]),
        "residual": residual_rows(trace),
        "gradients": gradients,
        "figures": {
            "residual": residual_figure(trace, {name: t(f"res.{name}") for name in RES_WORDS}),
            "encoder_ffn": encoder_ffn_figure(trace, {name: t(f"res.{name}") for name in RES_WORDS}),
            "gradients": gradient_figure(gradients, {name: t(f"res.{name}") for name in RES_WORDS}),
        },
        "beam": beam_tree(trace, words["step"],
                          {name: t(f"beam.legend.{name}") for name in
                           ("winner", "finished", "pruned", "open", "log_p")}),
    }


@router.post("/api/figures/interpret",
             responses=errors(TOKENS_RULE, missing=("step must be below the number of "
                                                    "decoding steps of the translation",)),
             tags=["figures"])
def interpret_figures(request: InterpretRequest, engine: EngineDep, t: PageText,
                      response: Response) -> dict:
    """Why this token? What every decoder layer would predict (logit lens) at every step, and
    how much each English token contributed to one step's output token (gradient × input, integrated
    gradients) beside that step's cross-attention. One extra model pass per sentence for the lens
    and one per step for the attributions, both cached."""
    trace, model_ms = engine.trace(request)
    n = len(trace.steps)
    if request.step >= n:
        raise NotFound("step", f"step must be between 0 and {n - 1}: the translation has {n} steps")
    lens, lens_ms = engine.derived(request, trace, "lens", interpret.logit_lens,
                                   engine.translator, trace)
    attribution, attribution_ms = engine.derived(
        request, trace, ("attribution", request.step, request.ig_steps), interpret.attributions,
        engine.translator, trace, request.step, request.ig_steps,
    )
    timed(response, model_ms + lens_ms + attribution_ms)
    words = {name: t(f"why.word.{name}")
             for name in ("gradient_x_input", "integrated_gradients", "cross_attention", "share")}
    words.update(layer=t("word.layer", n="{n}"), step=t("common.step"))
    cross = cross_attention_means(trace, request.step)
    step_lens = lens[request.step]
    return {
        **summary(trace),
        "step": request.step,
        "layers": len(trace.decoder),
        "lens": asdict(step_lens),
        "first_top_layers": [s.first_top_layer for s in lens],
        "attribution": {**asdict(attribution),
                        "completeness_gap": round(attribution.completeness_gap, 6)},
        "cross_attention": cross,
        "strongest": strongest_sources(attribution, cross),
        "figures": {
            "lens": lens_figure(step_lens, words),
            "lens_steps": lens_steps_figure(lens, request.step, words),
            "attribution": attribution_figure(attribution, cross, words),
        },
    }


def gradient_figure(rows: list[dict], words: dict[str, str] | None = None) -> dict:
    """Per sublayer (bottom of the model on the left): the gradient reaching its input x, split
    into the part that came through the shortcut and the part through the sublayer."""
    words = {**RES_WORDS, **(words or {})}
    labels = [f"{words['enc' if r['side'] == 'encoder' else 'dec'].replace('{n}', str(r['layer'] + 1))}"
              f" · {words[r['sublayer']]}" for r in rows]
    data = [
        {"type": "bar", "name": words["grad_shortcut"], "x": labels, "y": [r["shortcut"] for r in rows],
         "marker": {"color": ORANGE}, "hovertemplate": "%{x}: %{y:.3f}<extra></extra>"},
        {"type": "bar", "name": words["grad_sublayer"], "x": labels,
         "y": [r["through_sublayer"] for r in rows], "marker": {"color": BLUE},
         "hovertemplate": "%{x}: %{y:.3f}<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "name": words["grad_input"], "x": labels,
         "y": [r["at_input"] for r in rows], "line": {"color": GREY},
         "hovertemplate": "%{x}: %{y:.3f}<extra></extra>"},
    ]
    layout = base_layout("", 360, barmode="group", xaxis=category_axis(tickangle=-45),
                         yaxis={"title": {"text": "‖∂L/∂·‖"}, "rangemode": "tozero"},
                         legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"},
                         margin={"l": 50, "r": 10, "t": 70, "b": 120})
    return {"data": data, "layout": layout}


# -- figures --------------------------------------------------------------------------------------


def attention_rows(weights: list[list[list[float]]], query: int, key_tokens: list[str],
                   head_label: str = "head {n}") -> dict:
    """The row of one query position in every head ([head][key]), as a heads × keys heatmap
    (``head_label``: a template with the number's place, ``{n}``)."""
    rows = [head[query][: len(key_tokens)] for head in weights]
    heads = [head_label.format(n=h + 1) for h in range(len(rows))]
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


def ffn_units_figure(units: list[int], values: list[float], d_ff: int,
                     words: dict[str, str] | None = None) -> dict:
    """The most active hidden units of one position, named by their index among all d_ff."""
    words = {**WORDS, **(words or {})}
    labels = [f"#{unit}" for unit in units]
    bar = {"type": "bar", "x": labels, "y": values, "marker": {"color": BLUE},
           "text": [f"{v:.2f}" for v in values], "textposition": "outside", "cliponaxis": False,
           "textfont": {"size": PLOT_FONT_PX},
           "hovertemplate": f"{words['unit']} %{{x}} / {d_ff}: %{{y:.3f}}<extra></extra>"}
    layout = base_layout("", 220, xaxis=category_axis(f"{words['unit']} (0–{d_ff - 1})"),
                         yaxis={"title": {"text": words["activation"]}, "rangemode": "tozero"})
    return {"data": [bar], "layout": layout}


def candidates_figure(step: dict, sampled: bool = False, sampled_from: str = "sampled from",
                      p_model: str = "model (temperature 1)") -> dict:
    """Linear + softmax: the most likely next tokens in the model's colour, the chosen one in
    orange; when sampling, a second bar per token (the filter's colour) shows the distribution
    actually drawn from (temperature, top-k, top-p)."""
    top = step["top"]
    tokens = [c["token"] for c in top]
    labels = unique_labels(tokens)
    text = {"textposition": "outside", "cliponaxis": False, "textfont": {"size": PLOT_FONT_PX}}
    bar = {
        "type": "bar",
        "orientation": "h",
        "y": labels,
        "x": [c["prob"] for c in top],
        "text": [f"{c['prob']:.3f}" for c in top],
        **text,
        # when sampling, the legend's swatch (the first bar's colour) must read "model = grey", so
        # the chosen token is outlined instead of filled
        "marker": {"color": [MODEL if sampled or token != step["token"] else CHOSEN for token in tokens],
                   "line": {"color": [CHOSEN if sampled and token == step["token"] else MODEL
                                      for token in tokens], "width": 2 if sampled else 0}},
        "customdata": tokens,
        "name": p_model,
        "hovertemplate": f"%{{customdata}}: %{{x:.4f}}<extra>{p_model}</extra>",
    }
    data = [bar]
    if sampled:
        data.append({
            "type": "bar", "orientation": "h", "y": labels,
            "x": [c["sample_prob"] for c in top],
            "marker": {"color": FILTERED, "line": {"color": [CHOSEN if t == step["token"] else FILTERED
                                                             for t in tokens], "width": 2}},
            "text": [f"{c['sample_prob']:.3f}" for c in top], **text,
            "name": sampled_from, "customdata": tokens,
            "hovertemplate": f"%{{customdata}}: %{{x:.4f}}<extra>{sampled_from}</extra>",
        })
    layout = base_layout(
        "", 60 + (40 if sampled else 26) * len(tokens), barmode="group",
        yaxis=category_axis(reverse=True),
        xaxis={"range": [0, 1.15], "tickvals": [0, 0.25, 0.5, 0.75, 1], "title": {"text": "p"}},
        showlegend=sampled, legend=LEGEND_TOP,
    )
    return {"data": data, "layout": layout}


def decode_steps(trace: Trace, layer: int, words: dict[str, str] | None = None,
                 ffn_layer: dict | None = None) -> list[dict]:
    """For every time step, the seven things inside decoder ``layer`` and the output head.
    ``ffn_layer`` is that layer's part of ``model.explain.record.ffn_units_of()``; without it the
    FFN box shows the five most active units the trace keeps and no output vector."""
    words = {**WORDS, **(words or {})}
    block = record.layer_lists(trace, "decoder")[layer]
    ffn = block.ffn
    sampled = trace.options.get("strategy") == "sample"
    steps = []
    for t, step in enumerate(trace.steps):
        prefix = trace.decoder_input[: t + 1]
        norms = {  # under the names the trace gives each Add & Norm (add_norm1…3)
            ADD_NORM_NAMES["decoder"][sublayer]: {
                name: stats[name][t] for name in ("residual_norm", "sublayer_norm", "sum_mean",
                                                  "sum_std", "normed_mean", "normed_std")}
            for sublayer, stats in block.add_norms
        }
        step_dict = {"token": step.token, "prob": step.prob, "top": [vars(c) for c in step.top]}
        if ffn_layer:
            units, values = ffn_layer["top_units"][t], ffn_layer["top_values"][t]
            output = vector_bars({words["ffn_input"]: ffn_layer["input_sample"][t],
                                  words["ffn_output"]: ffn_layer["output_sample"][t]},
                                 words["dimension"])
            input_norm = ffn_layer["input_norm"][t]
        else:
            units, values, output = ffn["top_units"][t], ffn["top_values"][t], None
            input_norm = None
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
                        "output_norm": ffn["output_norm"][t], "input_norm": input_norm,
                        "d_ff": ffn["d_ff"], "top_units": units, "top_values": values},
            },
            "figures": {
                "self_attention": attention_rows(block.self_attention, t, prefix, words["head"]),
                "add_norm1": _add_norm(block.after_self_attention, t, words),
                "cross_attention": attention_rows(block.cross_attention, t, trace.source_tokens,
                                                  words["head"]),
                "add_norm2": _add_norm(block.after_cross_attention, t, words),
                "ffn": ffn_units_figure(units, values, ffn["d_ff"], words),
                "ffn_output": output,
                "add_norm3": _add_norm(block.after_ffn, t, words),
                "softmax": candidates_figure(step_dict, sampled, words["sampled_from"],
                                             words["p_model"]),
            },
        })
    return steps


# -- residual connections, and the encoder's sublayers -----------------------------------------------

RES_WORDS = {"enc": "Enc {n}", "dec": "Dec {n}", "self_attention": "self-attention",
             "cross_attention": "cross-attention", "ffn": "FFN", "stream": "‖x‖: the stream coming in",
             "sublayer": "‖sublayer(x)‖: what it adds", "normed": "‖LayerNorm(x + sublayer(x))‖",
             "ratio": "ratio", "share": "units firing", "top_unit": "most active unit",
             "layer": "Layer {n}", "size": "size ‖·‖",
             "grad_shortcut": "through the shortcut: ‖∂L/∂(x + F(x))‖",
             "grad_sublayer": "back through the sublayer F", "grad_input": "total at x: ‖∂L/∂x‖"}

def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def residual_rows(trace: Trace) -> list[dict]:
    """Every sublayer in the order the data flows (encoder, then decoder): the mean size over
    the positions of the residual stream x coming in, of the sublayer's output F(x), and of
    LayerNorm(x + F(x)) going out; the ratio ‖F(x)‖ / ‖x‖ says how much one sublayer changes."""
    rows = []
    for side in ("encoder", "decoder"):
        for index, block in enumerate(record.layer_lists(trace, side)):
            for sublayer, stats in block.add_norms:
                stream, added = _mean(stats["residual_norm"]), _mean(stats["sublayer_norm"])
                rows.append({"side": side, "layer": index, "sublayer": sublayer,
                             "stream": round(stream, 3), "added": round(added, 3),
                             "normed": round(_mean(stats["normed_norm"]), 3),
                             "ratio": round(added / stream, 3) if stream else 0.0})
    return rows


def residual_figure(trace: Trace, words: dict[str, str] | None = None) -> dict:
    """Bars per sublayer: the stream coming in and what the sublayer adds; a line: the size
    after LayerNorm, which the next sublayer receives."""
    words = {**RES_WORDS, **(words or {})}
    rows = residual_rows(trace)
    labels = [f"{words['enc' if r['side'] == 'encoder' else 'dec'].replace('{n}', str(r['layer'] + 1))}"
              f" · {words[r['sublayer']]}" for r in rows]
    ratio = [r["ratio"] for r in rows]
    hover = f"%{{x}}<br>%{{y:.2f}} ({words['ratio']} ‖F(x)‖/‖x‖ = %{{customdata:.2f}})"
    data = [
        {"type": "bar", "name": words["stream"], "x": labels, "y": [r["stream"] for r in rows],
         "marker": {"color": GREY}, "customdata": ratio, "hovertemplate": hover + "<extra></extra>"},
        {"type": "bar", "name": words["sublayer"], "x": labels, "y": [r["added"] for r in rows],
         "marker": {"color": BLUE}, "customdata": ratio, "hovertemplate": hover + "<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "name": words["normed"], "x": labels,
         "y": [r["normed"] for r in rows], "line": {"color": ORANGE},
         "hovertemplate": "%{x}<br>%{y:.2f}<extra></extra>"},
    ]
    layout = base_layout("", 360, barmode="group", xaxis=category_axis(tickangle=-45),
                         yaxis={"title": {"text": words["size"]}, "rangemode": "tozero"},
                         legend={"orientation": "h", "y": 1.02, "x": 0, "yanchor": "bottom"},
                         margin={"l": 50, "r": 10, "t": 70, "b": 120})
    return {"data": data, "layout": layout}


def encoder_ffn_figure(trace: Trace, words: dict[str, str] | None = None) -> dict:
    """Encoder layers × English tokens: the share of the FFN's hidden units that fire, with the
    index of the most active unit written in each cell."""
    words = {**RES_WORDS, **(words or {})}
    layers = [words["layer"].replace("{n}", str(i + 1)) for i in range(len(trace.encoder))]
    z = [block["ffn"]["active_share"] for block in trace.encoder]
    units = [[f"#{u[0]}" for u in block["ffn"]["top_units"]] for block in trace.encoder]
    top = [[", ".join(f"#{u} {v:.2f}" for u, v in zip(us, vs, strict=True))
            for us, vs in zip(block["ffn"]["top_units"], block["ffn"]["top_values"], strict=True)]
           for block in trace.encoder]
    heatmap = {"type": "heatmap", "z": z, "x": unique_labels(trace.source_tokens), "y": layers,
               "zmin": 0, "zmax": max(max(row) for row in z) if z else 1,
               "colorscale": ATTENTION_SCALE, "xgap": 1, "ygap": 1,
               "text": units, "texttemplate": "%{text}", "customdata": top,
               "colorbar": {"title": {"text": words["share"]}, "thickness": 10, "tickformat": ".0%"},
               "hovertemplate": f"%{{y}} · %{{x}}: {words['share']} %{{z:.1%}}<br>"
                                f"{words['top_unit']}: %{{customdata}}<extra></extra>"}
    layout = base_layout("", 90 + 44 * len(layers), xaxis=category_axis(tickangle=-45),
                         yaxis=category_axis(reverse=True),
                         margin={"l": 70, "r": 10, "t": 10, "b": 70})
    return {"data": [heatmap], "layout": layout}


def _add_norm(stats: dict, t: int, words: dict[str, str]) -> dict:
    series = {words["before_norm"]: stats["sum_sample"][t], words["after_norm"]: stats["normed_sample"][t]}
    return vector_bars(series, words["dimension"])


# -- why this token? ------------------------------------------------------------------------------

WHY_WORDS = {"layer": "Layer {n}", "gradient_x_input": "gradient × input",
             "integrated_gradients": "integrated gradients", "cross_attention": "cross-attention",
             "step": "step", "share": "share"}


def layer_label(words: dict[str, str], index: int) -> str:
    return words["layer"].replace("{n}", str(index + 1))


def cross_attention_means(trace: Trace, step: int) -> list[list[float]]:
    """[layer][source token]: the step's cross-attention row, averaged over the heads."""
    means = []
    for block in record.layer_lists(trace, "decoder"):
        rows = [head[step] for head in block.cross_attention]
        means.append([round(sum(column) / len(rows), 5) for column in zip(*rows, strict=True)])
    return means


def shares(values: list[float]) -> list[float]:
    """Signed attributions as shares of their total size: Σ|share| = 1, comparable to attention."""
    total = sum(abs(v) for v in values) or 1.0
    return [round(v / total, 4) for v in values]


def strongest_sources(attribution: interpret.Attribution, cross: list[list[float]]) -> dict:
    """The source token each view weighs most (attributions by size, whatever the sign)."""
    def top(values: list[float]) -> int:
        return max(range(len(values)), key=lambda i: abs(values[i]))

    return {
        "gradient_x_input": top(attribution.gradient_x_input),
        "integrated_gradients": top(attribution.integrated_gradients),
        "cross_attention": [top(row) for row in cross],
    }


def lens_figure(lens: interpret.StepLens, words: dict[str, str] | None = None) -> dict:
    """Logit lens for one step: layers (bottom to top) × candidates, the chosen token first."""
    words = {**WHY_WORDS, **(words or {})}
    layers = [layer_label(words, layer.layer) for layer in lens.layers]
    labels = unique_labels(lens.candidates)
    labels[0] = f"{labels[0]} ✓"  # the token finally chosen
    heatmap = {
        "type": "heatmap", "z": lens.grid, "x": labels, "y": layers,
        "zmin": 0, "zmax": 1, "colorscale": ATTENTION_SCALE, "xgap": 1, "ygap": 1,
        "texttemplate": "%{z:.2f}", "customdata": [lens.candidates] * len(layers),
        "hovertemplate": "%{y} · %{customdata}: p = %{z:.4f}<extra></extra>",
        "colorbar": {"title": {"text": "p"}, "thickness": 10},
    }
    layout = base_layout("", 90 + 44 * len(layers),
                         xaxis=category_axis(side="top"), yaxis=category_axis())
    return {"data": [heatmap], "layout": layout}


def lens_steps_figure(lens: list[interpret.StepLens], current: int,
                      words: dict[str, str] | None = None) -> dict:
    """Every step at once: the probability each layer gives the token finally chosen."""
    words = {**WHY_WORDS, **(words or {})}
    n_layers = len(lens[0].layers) if lens else 0
    layers = [layer_label(words, index) for index in range(n_layers)]
    z = [[step.layers[index].chosen_prob for step in lens] for index in range(n_layers)]
    ranks = [[step.layers[index].chosen_rank for step in lens] for index in range(n_layers)]
    heatmap = {
        "type": "heatmap", "z": z, "x": unique_labels([s.token for s in lens]), "y": layers,
        "zmin": 0, "zmax": 1, "colorscale": ATTENTION_SCALE, "xgap": 1, "ygap": 1,
        "texttemplate": "%{z:.2f}", "customdata": ranks,
        "hovertemplate": "%{x} · %{y}: p = %{z:.4f}, #%{customdata}<extra></extra>",
        "colorbar": {"title": {"text": "p"}, "thickness": 10},
    }
    shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": current - 0.5, "x1": current + 0.5,
               "y0": 0, "y1": 1, "line": {"color": ORANGE, "width": 3}}] if lens else []
    layout = base_layout("", 90 + 40 * n_layers, shapes=shapes,
                         xaxis=category_axis(words["step"]), yaxis=category_axis())
    return {"data": [heatmap], "layout": layout}


def attribution_figure(attribution: interpret.Attribution, cross: list[list[float]],
                       words: dict[str, str] | None = None) -> dict:
    """Rows of one step, one column per English token: the two attributions (as shares of their
    total size, signed in the cell) above the cross-attention of every layer (mean of heads)."""
    words = {**WHY_WORDS, **(words or {})}
    gxi, ig = attribution.gradient_x_input, attribution.integrated_gradients
    rows = [words["gradient_x_input"], words["integrated_gradients"]] + [
        f"{words['cross_attention']} · {layer_label(words, index)}" for index in range(len(cross))
    ]
    signed = [shares(gxi), shares(ig), *cross]
    raw = [gxi, ig, *cross]
    heatmap = {
        "type": "heatmap",
        "z": [[abs(v) for v in row] for row in signed],
        "x": unique_labels(attribution.source_tokens), "y": rows,
        "zmin": 0, "zmax": 1, "colorscale": ATTENTION_SCALE, "xgap": 1, "ygap": 1,
        "text": [[f"{v:+.2f}" if index < 2 else f"{v:.2f}" for v in row]
                 for index, row in enumerate(signed)],
        "texttemplate": "%{text}", "customdata": raw,
        "hovertemplate": "%{y} · %{x}: %{text} (%{customdata:.4f})<extra></extra>",
        "colorbar": {"title": {"text": words["share"]}, "thickness": 10},
    }
    layout = base_layout("", 110 + 36 * len(rows),
                         xaxis=category_axis(tickangle=-45), yaxis=category_axis(reverse=True),
                         margin={"l": 190, "r": 20, "t": 16, "b": 60})
    return {"data": [heatmap], "layout": layout}
