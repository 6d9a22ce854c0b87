"""Figures for the section pages (tokens, embeddings, coreference, training, KV cache, scale).

Plain data in, Plotly figure dicts out — no I/O, no model, no plotly import — in the same style as
``app/figures.py``. Labels arrive as arguments so the API can pass them in either language.
"""

from __future__ import annotations

from app.figures import (
    ATTENTION_SCALE,
    BLUE,
    GREY,
    ORANGE,
    base_layout,
    category_axis,
    unique_labels,
)

GREEN, VERMILION, PURPLE = "#009E73", "#D55E00", "#CC79A7"  # more Okabe–Ito colours
DIVERGING = "RdBu"
MASK_SCALE = [[0, "#3b3b3b"], [0.5, "#3b3b3b"], [0.5, "#56B4E9"], [1, "#56B4E9"]]
STAGE_COLOURS = [GREY, BLUE, ORANGE, GREEN, VERMILION, PURPLE]
TWO_AXES_MARGIN = {"l": 60, "r": 80, "t": 40, "b": 50}  # room for a right-hand axis and its title


# -- tokens -------------------------------------------------------------------------------------


def batch_heatmap(
    tokens: list[list[str]], ids: list[list[int]], padding: list[list[int]], row_names: list[str],
    title: str = "", pad_label: str = "padding",
) -> dict:
    """A padded mini-batch: one row per sentence, each cell a token and its id, padding greyed."""
    text = [[f"{tok}<br>{i}" for tok, i in zip(trow, irow, strict=True)]
            for trow, irow in zip(tokens, ids, strict=True)]
    heatmap = {
        "type": "heatmap",
        "z": padding,
        "x": list(range(len(tokens[0]))),
        "y": unique_labels(row_names),
        "text": text,
        "texttemplate": "%{text}",
        "textfont": {"size": 11},
        "colorscale": [[0, "#d9d9d9"], [1, "#cfe8f7"]],
        "zmin": 0, "zmax": 1,
        "showscale": False,
        "xgap": 2, "ygap": 2,
        "hovertemplate": "%{text}<extra></extra>",
    }
    width = len(tokens[0])
    layout = base_layout(
        title, 90 + 52 * len(tokens),
        xaxis={"title": {"text": "position"}, "dtick": 1, "range": [-0.5, width - 0.5],
               "showgrid": False, "zeroline": False},
        yaxis=category_axis(reverse=True),
        annotations=[{"text": f"■ {pad_label}", "showarrow": False, "x": 1, "y": 1.12,
                      "xref": "paper", "yref": "paper", "xanchor": "right",
                      "font": {"color": "#777"}}],
    )
    return {"data": [heatmap], "layout": layout}


def mask_heatmap(
    mask: list[list[int]], query_tokens: list[str], key_tokens: list[str], title: str,
    allowed: str = "may attend", blocked: str = "blocked", labels: tuple[str, str] = ("query", "key"),
) -> dict:
    """A 0/1 attention mask: rows are queries, columns keys; blue may attend, dark is blocked."""
    text = [[f"{q} → {k}: {allowed if m else blocked}" for k, m in zip(key_tokens, row, strict=True)]
            for q, row in zip(query_tokens, mask, strict=True)]
    heatmap = {
        "type": "heatmap",
        "z": mask,
        "x": unique_labels(key_tokens),
        "y": unique_labels(query_tokens),
        "text": text,
        "colorscale": MASK_SCALE,
        "zmin": 0, "zmax": 1,
        "showscale": False,
        "xgap": 1, "ygap": 1,
        "hovertemplate": "%{text}<extra></extra>",
    }
    height = max(260, min(520, 110 + 22 * len(query_tokens)))
    layout = base_layout(
        title, height,
        xaxis=category_axis(labels[1], tickangle=-60),
        yaxis=category_axis(labels[0], reverse=True),
    )
    return {"data": [heatmap], "layout": layout}


# -- embeddings ---------------------------------------------------------------------------------


def vectors_heatmap(
    matrix: list[list[float]], row_labels: list[str], title: str, dims_label: str = "dimension",
    zmax: float | None = None, height: int | None = None,
) -> dict:
    """Rows of vectors (tokens × dimensions or positions × dimensions) on a diverging scale."""
    peak = zmax or max((abs(v) for row in matrix for v in row), default=1.0) or 1.0
    heatmap = {
        "type": "heatmap",
        "z": matrix,
        "x": list(range(len(matrix[0]) if matrix else 0)),
        "y": list(range(len(matrix))) if len(row_labels) > 40 else unique_labels(row_labels),
        "customdata": [[label] * len(row) for label, row in zip(row_labels, matrix, strict=True)],
        "colorscale": DIVERGING,
        "reversescale": True,
        "zmid": 0, "zmin": -peak, "zmax": peak,
        "hovertemplate": "%{customdata} · dim %{x}: %{z:.3f}<extra></extra>",
    }
    many = len(row_labels) > 40
    yaxis = ({"title": {"text": ""}, "autorange": "reversed", "automargin": True}
             if many else category_axis(reverse=True))
    layout = base_layout(
        title, height or max(240, min(560, 110 + 20 * len(row_labels))),
        xaxis={"title": {"text": dims_label}, "showgrid": False, "zeroline": False},
        yaxis=yaxis,
    )
    return {"data": [heatmap], "layout": layout}


def similarity_heatmap(matrix: list[list[float]], title: str, axis_label: str = "position") -> dict:
    """Cosine similarity between every pair of positions (−1 … 1)."""
    heatmap = {
        "type": "heatmap",
        "z": matrix,
        "x": list(range(len(matrix))),
        "y": list(range(len(matrix))),
        "colorscale": ATTENTION_SCALE,
        "zmin": -1, "zmax": 1,
        "hovertemplate": f"{axis_label} %{{y}} · {axis_label} %{{x}}: %{{z:.3f}}<extra></extra>",
    }
    layout = base_layout(
        title, 420,
        xaxis={"title": {"text": axis_label}, "showgrid": False, "zeroline": False},
        yaxis={"title": {"text": axis_label}, "autorange": "reversed", "showgrid": False,
               "zeroline": False, "scaleanchor": "x"},
    )
    return {"data": [heatmap], "layout": layout}


def similarity_by_offset(matrix: list[list[float]], anchors: list[int], title: str,
                         offset_label: str = "offset k", name: str = "from position {p}") -> dict:
    """cos(PE[p], PE[p+k]) against k for a few starting positions p: the curves coincide."""
    data = []
    size = len(matrix)
    for colour, p in zip(STAGE_COLOURS[1:], anchors, strict=False):
        ks = list(range(0, size - p))
        data.append({
            "type": "scatter", "mode": "lines", "name": name.format(p=p),
            "x": ks, "y": [matrix[p][p + k] for k in ks],
            "line": {"color": colour, "width": 2},
            "hovertemplate": f"p={p}, k=%{{x}}: %{{y:.3f}}<extra></extra>",
        })
    layout = base_layout(title, 300, xaxis={"title": {"text": offset_label}},
                     yaxis={"title": {"text": "cos"}, "range": [-1.05, 1.05]},
                     legend={"orientation": "h", "y": 1.12, "x": 1, "xanchor": "right"})
    return {"data": data, "layout": layout}


def norm_bars(tokens: list[str], series: dict[str, list[float]], title: str) -> dict:
    """Vector lengths per token: raw embedding, after ×√d_model, the positional part, the sum."""
    data = [
        {"type": "bar", "name": name, "x": unique_labels(tokens), "y": values,
         "marker": {"color": colour}, "customdata": tokens,
         "hovertemplate": f"%{{customdata}} · {name}: %{{y:.3f}}<extra></extra>"}
        for (name, values), colour in zip(series.items(), STAGE_COLOURS, strict=False)
    ]
    layout = base_layout(title, 300, barmode="group", xaxis=category_axis(),
                     yaxis={"title": {"text": "‖v‖"}},
                     legend={"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"})
    return {"data": data, "layout": layout}


def projection_figure(projection: dict, stage_names: list[str], title: str = "") -> dict:
    """Small multiples: the sentence's token vectors in 2-D at the input and after each layer."""
    tokens, points = projection["tokens"], projection["points"]
    panels = len(points)
    xs = [x for stage in points for x, _ in stage]
    ys = [y for stage in points for _, y in stage]
    pad_x = (max(xs) - min(xs)) * 0.15 or 1.0
    pad_y = (max(ys) - min(ys)) * 0.15 or 1.0
    x_range = [min(xs) - pad_x, max(xs) + pad_x]
    y_range = [min(ys) - pad_y, max(ys) + pad_y]
    gap = 0.03
    width = (1 - gap * (panels - 1)) / panels
    data, layout_axes, annotations = [], {}, []
    for index, (stage, name) in enumerate(zip(points, stage_names, strict=True)):
        suffix = "" if index == 0 else str(index + 1)
        data.append({
            "type": "scatter", "mode": "markers+text", "name": name,
            "x": [p[0] for p in stage], "y": [p[1] for p in stage],
            "text": tokens, "textposition": "top center", "textfont": {"size": 10},
            "marker": {"size": 8, "color": STAGE_COLOURS[index % len(STAGE_COLOURS)]},
            "xaxis": f"x{suffix}", "yaxis": f"y{suffix}",
            "hovertemplate": f"{name} · %{{text}}<extra></extra>",
        })
        start = index * (width + gap)
        layout_axes[f"xaxis{suffix}"] = {
            "domain": [start, start + width], "range": x_range, "showticklabels": False,
            "zeroline": False, "showgrid": True, "anchor": f"y{suffix}",
        }
        layout_axes[f"yaxis{suffix}"] = {
            "range": y_range, "showticklabels": False, "zeroline": False, "showgrid": True,
            "anchor": f"x{suffix}",
        }
        annotations.append({"text": name, "x": start + width / 2, "y": 1.0, "xref": "paper",
                            "yref": "paper", "yanchor": "bottom", "showarrow": False})
    layout = base_layout(title, 340, showlegend=False, annotations=annotations, **layout_axes)
    layout["margin"] = {"l": 10, "r": 10, "t": 40, "b": 10}
    return {"data": data, "layout": layout}


# -- coreference --------------------------------------------------------------------------------


def head_grid(values: list[list[float]], title: str, layer_label: str = "layer",
              head_label: str = "head", zmax: float | None = None) -> dict:
    """A layers × heads grid of one number per head (e.g. the weight on the referent)."""
    layers, heads = len(values), len(values[0]) if values else 0
    heatmap = {
        "type": "heatmap",
        "z": values,
        "x": [f"{head_label} {h + 1}" for h in range(heads)],
        "y": [f"{layer_label} {n + 1}" for n in range(layers)],
        "text": [[f"{v:.3f}" for v in row] for row in values],
        "texttemplate": "%{text}",
        "colorscale": ATTENTION_SCALE,
        "zmin": 0, "zmax": zmax or max(max(row) for row in values) or 1,
        "hovertemplate": f"{layer_label} %{{customdata[0]}} · {head_label} %{{customdata[1]}}: "
                         "%{z:.4f}<extra></extra>",
        "customdata": [[[layer + 1, head + 1] for head in range(heads)] for layer in range(layers)],
        "xgap": 2, "ygap": 2,
    }
    layout = base_layout(
        title, 120 + 46 * layers,
        xaxis=category_axis(),
        yaxis=category_axis(reverse=True),
    )
    return {"data": [heatmap], "layout": layout}


def row_bars(weights: list[float], key_tokens: list[str], highlight: dict[int, str],
             title: str) -> dict:
    """One query row of attention over the keys; highlighted keys get their own colour."""
    colours = [highlight.get(i, BLUE) for i in range(len(key_tokens))]
    bar = {
        "type": "bar", "x": unique_labels(key_tokens), "y": weights,
        "marker": {"color": colours}, "customdata": key_tokens,
        "text": [f"{w:.2f}" for w in weights], "textposition": "auto",
        "hovertemplate": "%{customdata}: %{y:.4f}<extra></extra>",
    }
    layout = base_layout(title, 260, xaxis=category_axis(tickangle=-45),
                     yaxis={"range": [0, 1]})
    return {"data": [bar], "layout": layout}


# -- training -----------------------------------------------------------------------------------


def score_figure(score: dict, titles: tuple[str, str]) -> dict:
    """Per position: p(right label) on the left axis, its cross-entropy −log p on the right."""
    labels = [f"{i} → {lab}" for i, lab in zip(score["decoder_input"], score["labels"],
                                                 strict=True)]
    x = unique_labels(labels)
    data = [
        {"type": "bar", "name": titles[0], "x": x, "y": score["label_prob"],
         "marker": {"color": BLUE}, "customdata": labels, "offsetgroup": "p",
         "hovertemplate": "%{customdata}<br>p = %{y:.4f}<extra></extra>"},
        {"type": "bar", "name": titles[1], "x": x, "y": score["cross_entropy"], "yaxis": "y2",
         "marker": {"color": ORANGE}, "customdata": labels, "offsetgroup": "ce",
         "hovertemplate": "%{customdata}<br>−log p = %{y:.3f}<extra></extra>"},
    ]
    layout = base_layout(
        "", 320, barmode="group",
        xaxis=category_axis(tickangle=-45),
        yaxis={"title": {"text": titles[0]}, "range": [0, 1]},
        yaxis2={"title": {"text": titles[1]}, "overlaying": "y", "side": "right",
                "rangemode": "tozero", "showgrid": False},
        legend={"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"},
        margin=TWO_AXES_MARGIN,
    )
    return {"data": data, "layout": layout}


def lr_schedule_figure(
    curve_steps: list[int], curve_lr: list[float], logged_steps: list[int], logged_lr: list[float],
    warmup: int, names: tuple[str, str, str] = ("schedule", "logged", "warmup"),
) -> dict:
    """The warmup schedule as a line, the learning rates logged during training as dots."""
    data = [
        {"type": "scatter", "mode": "lines", "name": names[0], "x": curve_steps, "y": curve_lr,
         "line": {"color": BLUE, "width": 2},
         "hovertemplate": "step %{x}: %{y:.2e}<extra></extra>"},
    ]
    if logged_steps:
        data.append({"type": "scatter", "mode": "markers", "name": names[1], "x": logged_steps,
                     "y": logged_lr, "marker": {"color": ORANGE, "size": 5},
                     "hovertemplate": "step %{x}: %{y:.2e}<extra></extra>"})
    peak = max(curve_lr) if curve_lr else 0
    layout = base_layout(
        "", 300, xaxis={"title": {"text": "step"}}, yaxis={"title": {"text": "lr"},
                                                           "exponentformat": "e"},
        shapes=[{"type": "line", "x0": warmup, "x1": warmup, "y0": 0, "y1": peak,
                 "line": {"color": GREY, "dash": "dot"}}],
        annotations=[{"text": f"{names[2]} = {warmup}", "x": warmup, "y": peak, "showarrow": False,
                      "yanchor": "bottom", "font": {"color": "#555"}}],
        legend={"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"},
    )
    return {"data": data, "layout": layout}


def training_curves(steps: list[dict], names: dict[str, str]) -> dict:
    """Loss and gradient norm (before clipping) over training steps, two stacked panels."""
    x = [s["step"] for s in steps]
    data = [
        {"type": "scatter", "mode": "lines", "name": names["loss"], "x": x,
         "y": [s["loss"] for s in steps], "line": {"color": BLUE}, "xaxis": "x", "yaxis": "y",
         "hovertemplate": "step %{x}: %{y:.3f}<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": names["grad_norm"], "x": x,
         "y": [s["grad_norm"] for s in steps], "line": {"color": VERMILION}, "xaxis": "x2",
         "yaxis": "y2", "hovertemplate": "step %{x}: %{y:.3f}<extra></extra>"},
    ]
    layout = base_layout(
        "", 420,
        xaxis={"domain": [0, 1], "anchor": "y", "showticklabels": False},
        yaxis={"domain": [0.55, 1], "title": {"text": names["loss"]}},
        xaxis2={"domain": [0, 1], "anchor": "y2", "title": {"text": "step"}, "matches": "x"},
        yaxis2={"domain": [0, 0.45], "title": {"text": names["grad_norm"]}},
        legend={"orientation": "h", "y": 1.1, "x": 1, "xanchor": "right"},
    )
    if "clip" in names:
        layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y2",
                             "y0": float(names["clip"]), "y1": float(names["clip"]),
                             "line": {"color": GREY, "dash": "dot"}}]
    return {"data": data, "layout": layout}


def epoch_curves(epochs: list[dict], names: dict[str, str]) -> dict:
    """Dev BLEU and chrF after every epoch (greedy decoding of the dev set)."""
    x = [e["epoch"] for e in epochs]
    data = [
        {"type": "scatter", "mode": "lines+markers", "name": "BLEU", "x": x,
         "y": [e.get("dev_bleu") for e in epochs], "line": {"color": BLUE}},
        {"type": "scatter", "mode": "lines+markers", "name": "chrF", "x": x,
         "y": [e.get("dev_chrf") for e in epochs], "line": {"color": GREEN}},
        {"type": "scatter", "mode": "lines+markers", "name": names["train_loss"], "x": x,
         "y": [e.get("train_loss") for e in epochs], "line": {"color": ORANGE, "dash": "dot"},
         "yaxis": "y2"},
    ]
    layout = base_layout(
        "", 300, xaxis={"title": {"text": names["epoch"]}, "dtick": 1 if len(x) <= 30 else None},
        yaxis={"title": {"text": "BLEU / chrF"}, "rangemode": "tozero"},
        yaxis2={"title": {"text": names["train_loss"]}, "overlaying": "y", "side": "right",
                "showgrid": False, "rangemode": "tozero"},
        legend={"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"},
        margin=TWO_AXES_MARGIN,
    )
    return {"data": data, "layout": layout}


# -- KV cache -----------------------------------------------------------------------------------


def kv_timing_figure(race: dict, names: tuple[str, str], ms_label: str = "ms",
                     step_label: str = "step") -> dict:
    """Milliseconds per generated token, with and without the cache, as the output grows."""
    x = list(range(1, race["steps"] + 1))
    data = [
        {"type": "scatter", "mode": "lines+markers", "name": names[0], "x": x,
         "y": race["cached_step_ms"], "line": {"color": BLUE}, "marker": {"size": 4},
         "hovertemplate": f"{step_label} %{{x}}: %{{y:.2f}} ms<extra>{names[0]}</extra>"},
        {"type": "scatter", "mode": "lines+markers", "name": names[1], "x": x,
         "y": race["uncached_step_ms"], "line": {"color": VERMILION}, "marker": {"size": 4},
         "hovertemplate": f"{step_label} %{{x}}: %{{y:.2f}} ms<extra>{names[1]}</extra>"},
    ]
    layout = base_layout("", 320, xaxis={"title": {"text": step_label}},
                     yaxis={"title": {"text": ms_label}, "rangemode": "tozero"},
                     legend={"orientation": "h", "y": 1.15, "x": 1, "xanchor": "right"})
    return {"data": data, "layout": layout}


def kv_work_figure(race: dict, names: tuple[str, str], ylabel: str = "positions",
                   step_label: str = "step") -> dict:
    """Positions pushed through the decoder at each step, and the running total (dotted)."""
    x = list(range(1, race["steps"] + 1))
    data = []
    for key, name, colour in (("cached_positions", names[0], BLUE),
                              ("uncached_positions", names[1], VERMILION)):
        values = race[key]
        running = [sum(values[: i + 1]) for i in range(len(values))]
        data.append({"type": "bar", "name": name, "x": x, "y": values,
                     "marker": {"color": colour},
                     "hovertemplate": f"{step_label} %{{x}}: %{{y}}<extra>{name}</extra>"})
        data.append({"type": "scatter", "mode": "lines", "name": f"Σ {name}", "x": x,
                     "y": running, "yaxis": "y2", "line": {"color": colour, "dash": "dot"},
                     "hovertemplate": f"{step_label} %{{x}}: Σ %{{y}}<extra>{name}</extra>"})
    layout = base_layout("", 320, barmode="group", xaxis={"title": {"text": step_label}},
                     yaxis={"title": {"text": ylabel}, "rangemode": "tozero"},
                     yaxis2={"title": {"text": "Σ"}, "overlaying": "y", "side": "right",
                             "showgrid": False, "rangemode": "tozero"},
                     legend={"orientation": "h", "y": 1.2, "x": 1, "xanchor": "right"},
                     margin=TWO_AXES_MARGIN)
    return {"data": data, "layout": layout}


def kv_grid(race: dict, cached: bool, title: str, legend: tuple[str, str, str],
            step_label: str = "step", position_label: str = "position") -> dict:
    """Which K/V rows exist at each step: computed this step (orange), read from the cache
    (blue), not yet generated (blank). Without a cache every row is recomputed every step."""
    steps = race["steps"]
    positions = race["cached_positions"] if cached else race["uncached_positions"]
    z, text = [], []
    for step in range(steps):
        rows = step + 1  # K/V rows this step's attention reads: <bos> + tokens so far
        fresh = positions[step]
        row, labels = [], []
        for position in range(steps):
            if position >= rows:
                row.append(None)
                labels.append("")
            elif position >= rows - fresh:
                row.append(1)
                labels.append(legend[0])
            else:
                row.append(0.5)
                labels.append(legend[1])
        z.append(row)
        text.append(labels)
    heatmap = {
        "type": "heatmap", "z": z, "text": text,
        "x": list(range(steps)), "y": list(range(1, steps + 1)),
        "colorscale": [[0, BLUE], [0.5, BLUE], [0.51, ORANGE], [1, ORANGE]],
        "zmin": 0, "zmax": 1, "showscale": False, "xgap": 1 if steps <= 40 else 0,
        "ygap": 1 if steps <= 40 else 0,
        "hovertemplate": f"{step_label} %{{y}} · {position_label} %{{x}}: %{{text}}<extra></extra>",
    }
    layout = base_layout(title, 320, xaxis={"title": {"text": position_label}, "showgrid": False,
                                        "zeroline": False},
                     yaxis={"title": {"text": step_label}, "autorange": "reversed",
                            "showgrid": False, "zeroline": False})
    return {"data": [heatmap], "layout": layout}


# -- scale --------------------------------------------------------------------------------------


def parameter_breakdown(result: dict, labels: dict[str, str], title: str = "") -> dict:
    """Where the parameters are: one horizontal bar per kind of weight (all layers together)."""
    rows = [row for row in result["rows"] if row["count"] > 0]
    names = [labels.get(f"{row['group']}.{row['key']}", labels.get(row["key"], row["key"]))
             for row in rows]
    total = result["total"] or 1
    bar = {
        "type": "bar", "orientation": "h",
        "y": unique_labels(names), "x": [row["count"] for row in rows],
        "text": [f"{100 * row['count'] / total:.1f}%" for row in rows], "textposition": "auto",
        "customdata": [[name, row["shape"], row["times"]] for name, row in zip(names, rows,
                                                                               strict=True)],
        "marker": {"color": [{"embedding": GREEN, "encoder": BLUE, "decoder": ORANGE}.get(
            row["group"], GREY) for row in rows]},
        "hovertemplate": "%{customdata[0]}<br>%{customdata[1]} × %{customdata[2]}<br>"
                         "%{x:,}<extra></extra>",
    }
    layout = base_layout(title, 80 + 30 * len(rows), yaxis=category_axis(reverse=True),
                     xaxis={"title": {"text": "parameters"}, "type": "log"})
    return {"data": [bar], "layout": layout}
