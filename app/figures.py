"""Trace → Plotly figures, as plain dicts (the JSON plotly.js draws). Pure functions: no I/O,
no model, no plotly import."""

from __future__ import annotations

from model.trace import Trace

ATTENTION_SCALE = "Cividis"  # perceptually uniform and readable with colour-vision deficiency
THUMBNAIL_HEIGHT = 90  # px; static/css/app.css reserves the same for .thumb
BLUE, ORANGE, GREY = "#0072B2", "#E69F00", "#999999"  # Okabe–Ito colours
FONT = {"family": "system-ui, 'WenQuanYi Micro Hei', 'Noto Sans CJK SC', sans-serif", "size": 12}
KIND_TOKENS = {
    "encoder": ("source_tokens", "source_tokens"),
    "decoder_self": ("decoder_input", "decoder_input"),
    "cross": ("decoder_input", "source_tokens"),
}
KIND_LAYERS = {"encoder": ("encoder", "self_attention"),
               "decoder_self": ("decoder", "self_attention"),
               "cross": ("decoder", "cross_attention")}


def unique_labels(tokens: list[str]) -> list[str]:
    """Tokens made distinct with invisible zero-width spaces, so Plotly keeps one row per position
    even when a sentence repeats a token (``the … the``) and hover still shows the plain token."""
    seen: dict[str, int] = {}
    labels = []
    for token in tokens:
        count = seen.get(token, 0)
        seen[token] = count + 1
        labels.append(token + "\u200b" * count)
    return labels


def category_axis(title: str = "", reverse: bool = False, **extra) -> dict:
    axis = {"type": "category", "title": {"text": title}, "automargin": True,
            "showgrid": False, "zeroline": False, **extra}
    if reverse:
        axis["autorange"] = "reversed"
    return axis


def base_layout(title: str = "", height: int = 320, **extra) -> dict:
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 40 if title else 16, "b": 50},
        "font": FONT,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    layout.update(extra)
    return layout


def attention_weights(trace: Trace, kind: str, layer: int) -> list:
    """[head][query][key] weights of one layer of one kind of attention."""
    stack, name = KIND_LAYERS[kind]
    return getattr(trace, stack)[layer][name]


def attention_tokens(trace: Trace, kind: str) -> tuple[list[str], list[str]]:
    query, key = KIND_TOKENS[kind]
    return getattr(trace, query), getattr(trace, key)


def attention_heatmap(
    weights: list[list[float]],
    query_tokens: list[str],
    key_tokens: list[str],
    title: str = "",
    labels: tuple[str, str] = ("query", "key"),
) -> dict:
    """One head's [query][key] matrix: rows are queries, columns keys, hover shows the weight."""
    heatmap = {
        "type": "heatmap",
        "z": weights,
        "x": unique_labels(key_tokens),
        "y": unique_labels(query_tokens),
        "colorscale": ATTENTION_SCALE,
        "zmin": 0,
        "zmax": 1,
        "hovertemplate": "%{y} → %{x}<br>%{z:.4f}<extra></extra>",
        "xgap": 1,
        "ygap": 1,
    }
    height = max(300, min(640, 120 + 28 * len(query_tokens)))
    layout = base_layout(
        title,
        height,
        xaxis=category_axis(labels[1], tickangle=-45),
        yaxis=category_axis(labels[0], reverse=True),
    )
    return {"data": [heatmap], "layout": layout}


def thumbnail(figure: dict) -> dict:
    """How to redraw a heatmap small: trace overrides and a bare layout (the data is shared)."""
    hidden = {"visible": False, "fixedrange": True}
    return {
        "trace": {"showscale": False, "xgap": 0, "ygap": 0, "hoverinfo": "skip"},
        "layout": base_layout(height=THUMBNAIL_HEIGHT,
                          margin={"l": 2, "r": 2, "t": 2, "b": 2},
                          xaxis={**hidden, "type": "category"},
                          yaxis={**hidden, "type": "category", "autorange": "reversed"}),
    }


def attention_overview(trace: Trace, kind: str, labels: tuple[str, str] = ("query", "key")) -> list:
    """Every layer and head of one kind: a full-size figure and how to draw it as a thumbnail."""
    query_tokens, key_tokens = attention_tokens(trace, kind)
    stack = getattr(trace, KIND_LAYERS[kind][0])
    cells = []
    for layer in range(len(stack)):
        for head, weights in enumerate(attention_weights(trace, kind, layer)):
            figure = attention_heatmap(weights, query_tokens, key_tokens, labels=labels)
            cells.append({"layer": layer, "head": head, "figure": figure,
                          "thumbnail": thumbnail(figure)})
    return cells


def score_bars(
    values: list[float | None], key_tokens: list[str], title: str, color: str = BLUE,
    fmt: str = ".3f",
) -> dict:
    """One query row at one stage (q·k, ÷√d_k, masked, softmax) as bars over the key tokens.

    Masked-out keys (None, i.e. −∞ before softmax) are drawn as grey stubs labelled "−∞".
    """
    shown = [0 if v is None else v for v in values]
    colors = [GREY if v is None else color for v in values]
    text = ["−∞" if v is None else format(v, fmt) for v in values]
    bar = {
        "type": "bar",
        "x": unique_labels(key_tokens),
        "y": shown,
        "text": text,
        "textposition": "auto",
        "marker": {"color": colors},
        "hovertemplate": "%{x}: %{text}<extra></extra>",
    }
    return {"data": [bar], "layout": base_layout(title, 240, xaxis=category_axis(tickangle=-45),
                                             yaxis={"zeroline": True})}


def attention_stages(detail: dict, query: int) -> dict:
    """Bars for one query row at each stage of ``Trace.attention_detail``."""
    keys = detail["key_tokens"]
    return {
        "raw": score_bars(detail["raw"][query], keys, ""),
        "scaled": score_bars(detail["scaled"][query], keys, ""),
        "masked": score_bars(detail["masked"][query], keys, ""),
        "weights": score_bars(detail["weights"][query], keys, "", color=ORANGE),
    }


def attention_rows(
    weights: list[list[list[float]]], query: int, key_tokens: list[str], title: str,
    head_label: str = "head",
) -> dict:
    """The row of one query position in every head ([head][key]), as a heads × keys heatmap."""
    rows = [head[query][: len(key_tokens)] for head in weights]
    heads = [f"{head_label} {h + 1}" for h in range(len(rows))]
    figure = attention_heatmap(rows, heads, key_tokens, title=title, labels=("", ""))
    figure["layout"]["height"] = 110 + 30 * len(rows)
    return figure


def vector_bars(series: dict[str, list[float]], title: str, colors: tuple = (GREY, BLUE)) -> dict:
    """A few named vectors side by side, one bar per dimension (e.g. before / after LayerNorm)."""
    data = []
    for (name, values), color in zip(series.items(), colors, strict=False):
        data.append({
            "type": "bar", "name": name, "x": list(range(len(values))), "y": values,
            "marker": {"color": color},
            "hovertemplate": f"{name}<br>dim %{{x}}: %{{y:.3f}}<extra></extra>",
        })
    layout = base_layout(title, 220, barmode="group",
                     xaxis={"title": {"text": "dimension"}, "dtick": 1 if len(data[0]["x"]) <= 16
                            else 4},
                     legend={"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"})
    return {"data": data, "layout": layout}


def candidates_figure(step: dict, title: str = "", sampled: bool = False) -> dict:
    """Linear + softmax: the most likely next tokens, the chosen one in orange."""
    top = step["top"]
    tokens = [c["token"] for c in top]
    chosen = step["token"]
    colors = [ORANGE if t == chosen else BLUE for t in tokens]
    labels = unique_labels(tokens)
    bar = {
        "type": "bar",
        "orientation": "h",
        "y": labels,
        "x": [c["prob"] for c in top],
        "text": [f"{c['prob']:.3f}" for c in top],
        "textposition": "auto",
        "marker": {"color": colors},
        "customdata": tokens,
        "name": "p",
        "hovertemplate": "%{customdata}: %{x:.4f}<extra></extra>",
    }
    data = [bar]
    if sampled:
        data.append({
            "type": "bar", "orientation": "h", "y": labels,
            "x": [c["sample_prob"] for c in top], "marker": {"color": GREY},
            "name": "sampled from", "customdata": tokens,
            "hovertemplate": "%{customdata}: %{x:.4f}<extra>sampled from</extra>",
        })
    layout = base_layout(
        title, 60 + 26 * len(tokens), barmode="group",
        yaxis=category_axis(reverse=True),
        xaxis={"range": [0, 1], "title": {"text": "p"}},
        showlegend=sampled,
    )
    return {"data": data, "layout": layout}


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


def beam_tree(trace: Trace) -> dict | None:
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
    labels = [("<bos>" if n.parent < 0 else n.token) for n in nodes]
    points = {
        "type": "scatter",
        "mode": "markers+text",
        "x": [n.step for n in nodes],
        "y": y,
        "text": labels,
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
    height = 120 + 40 * max(rows.values())
    layout = base_layout("", height, showlegend=False,
                     xaxis={"title": {"text": "step"}, "dtick": 1},
                     yaxis={"visible": False, "autorange": "reversed"})
    return {"data": data, "layout": layout}


def decode_steps(trace: Trace, layer: int, names: dict[str, str] | None = None) -> list[dict]:
    """For every time step, the seven things inside decoder ``layer`` and the output head."""
    names = names or {}
    label = names.get
    block = trace.decoder[layer]
    sampled = trace.options.get("strategy") == "sample"
    steps = []
    for t, step in enumerate(trace.steps):
        prefix = trace.decoder_input[: t + 1]
        norms = {}
        for key in ("add_norm1", "add_norm2", "add_norm3"):
            stats = block[key]
            norms[key] = {
                name: stats[name][t]
                for name in ("residual_norm", "sublayer_norm", "sum_mean", "sum_std",
                             "normed_mean", "normed_std")
            }
        ffn = block["ffn"]
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
                "self_attention": attention_rows(
                    block["self_attention"], t, prefix, label("self_attention", ""),
                    label("head", "head")),
                "add_norm1": vector_bars(_norm_series(block["add_norm1"], t, names), ""),
                "cross_attention": attention_rows(
                    block["cross_attention"], t, trace.source_tokens,
                    label("cross_attention", ""), label("head", "head")),
                "add_norm2": vector_bars(_norm_series(block["add_norm2"], t, names), ""),
                "ffn": vector_bars({label("ffn_hidden", "ReLU(xW₁+b₁)"): ffn["hidden_sample"][t]},
                                   "", colors=(BLUE,)),
                "add_norm3": vector_bars(_norm_series(block["add_norm3"], t, names), ""),
                "softmax": candidates_figure(step_dict, "", sampled),
            },
        })
    return steps


def _norm_series(stats: dict, t: int, names: dict[str, str]) -> dict[str, list[float]]:
    return {
        names.get("before_norm", "x + sublayer(x)"): stats["sum_sample"][t],
        names.get("after_norm", "LayerNorm"): stats["normed_sample"][t],
    }
