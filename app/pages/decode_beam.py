"""/decode's beam search: the lineage of every hypothesis (read from the trace's own ranking)
and the tree figure drawn from it."""

from __future__ import annotations

from app.palette import PLOT_FONT_PX
from app.plots import BLUE, GREY, ORANGE, base_layout
from model.api import Trace, rank_hypotheses, shown_hypotheses

BEAM_WORDS = {"step": "step", "winner": "chosen translation", "finished": "ended (<eos>)",
              "pruned": "dropped: no continuation stayed in the beam",
              "open": "still open when the search stopped", "log_p": "log p"}


def beam_lineage(trace: Trace) -> dict | None:
    """Beam search as a lineage tree: every node's status, its row in a drawing where no edges
    cross, and the hypotheses beam search ranked with their length-penalised scores (the winner
    first; read from the trace, never re-ranked here)."""
    nodes = trace.beam
    if not nodes:
        return None
    children: dict[int, list[int]] = {}
    for node in nodes:
        if node.parent >= 0:
            children.setdefault(node.parent, []).append(node.id)
    last_step = max(n.step for n in nodes)
    status = []
    for node in nodes:
        if node.selected and (node.finished or not children.get(node.id)):
            status.append("winner")
        elif node.finished:
            status.append("finished")
        elif children.get(node.id) or node.parent < 0:
            status.append("kept")
        elif node.step == last_step:
            status.append("open")  # alive when the search stopped: never extended
        else:
            status.append("pruned")  # extended, but none of its continuations ranked in the beam
    # rows: depth first, the chosen child first and then by score, so the chosen path is the top
    # row and every subtree owns a band of rows of its own (edges never cross)
    row = [0.0] * len(nodes)
    next_leaf = 0
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        index, done = stack.pop()
        kids = sorted(children.get(index, []), key=lambda i: (not nodes[i].selected, -nodes[i].score))
        if done:
            row[index] = row[kids[0]]
        elif not kids:
            row[index] = next_leaf
            next_leaf += 1
        else:
            stack.append((index, True))
            stack.extend((kid, False) for kid in reversed(kids))
    alpha = trace.options["length_penalty"]
    # as beam search ranked them, the winner first (a tree recorded without its ranking, such as
    # a test's simulated one, is ranked by the same function)
    ranked = getattr(trace, "hypotheses", None) or shown_hypotheses(rank_hypotheses(nodes, alpha), nodes)
    hypotheses = []
    for hypothesis in ranked:
        path, cursor = [], hypothesis.node
        while cursor > 0:
            path.append(nodes[cursor].token)
            cursor = nodes[cursor].parent
        hypotheses.append({"node": hypothesis.node,
                           "tokens": [token for token in reversed(path) if token != "<eos>"],
                           "length": hypothesis.length, "log_prob": hypothesis.log_prob,
                           "penalty": hypothesis.penalty, "score": hypothesis.score,
                           "winner": nodes[hypothesis.node].selected})
    return {"status": status, "row": row, "alpha": alpha, "last_step": last_step,
            "winner_step": max((n.step for n in nodes if n.selected), default=0),
            "beam_size": int(trace.options.get("beam_size", 4)),
            "rows": next_leaf, "hypotheses": hypotheses}


def beam_tree(trace: Trace, step_label: str = "step", words: dict[str, str] | None = None) -> dict | None:
    """Beam search as a lineage tree: x = step, each hypothesis on its own row under its parent,
    the cumulative log-probability on every node, one legend entry per kind of node."""
    words = {**BEAM_WORDS, "step": step_label, **(words or {})}
    lineage = beam_lineage(trace)
    if lineage is None:
        return None
    nodes, row, status = trace.beam, lineage["row"], lineage["status"]
    edges_x, edges_y, best_x, best_y = [], [], [], []
    for node in nodes:
        if node.parent < 0:
            continue
        parent = nodes[node.parent]
        # an elbow: out of the parent along its row, then down to the child's row
        xs = [parent.step, parent.step + 0.5, parent.step + 0.5, node.step, None]
        ys = [row[parent.id], row[parent.id], row[node.id], row[node.id], None]
        if node.selected and parent.selected:
            best_x += xs
            best_y += ys
        else:
            edges_x += xs
            edges_y += ys
    data = [
        {"type": "scatter", "mode": "lines", "x": edges_x, "y": edges_y, "showlegend": False,
         "line": {"color": GREY, "width": 1}, "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": best_x, "y": best_y, "showlegend": False,
         "line": {"color": ORANGE, "width": 3}, "hoverinfo": "skip"},
    ]
    styles = {"kept": (BLUE, "circle", 10), "winner": (ORANGE, "star", 16),
              "finished": (BLUE, "square", 11), "pruned": (GREY, "x", 9),
              "open": (GREY, "circle-open", 10)}
    for kind, (colour, symbol, size) in styles.items():
        members = [n for n in nodes if status[n.id] == kind]
        if not members:
            continue
        name = {"kept": words["log_p"]}.get(kind, words.get(kind, kind))
        data.append({
            "type": "scatter", "mode": "markers+text", "name": name, "showlegend": kind != "kept",
            "x": [n.step for n in members], "y": [row[n.id] for n in members],
            "text": [f"{'<bos>' if n.parent < 0 else n.token} {n.score:.2f}" for n in members],
            "textposition": "top center", "textfont": {"size": PLOT_FONT_PX},
            "marker": {"size": size, "symbol": symbol,
                       "color": [ORANGE if n.selected else colour for n in members]},
            "customdata": [[n.id, n.score] for n in members],
            "hovertemplate": f"%{{text}}<br>{words['log_p']} = %{{customdata[1]:.4f}}<extra>{name}</extra>",
        })
    layout = base_layout("", 110 + 34 * max(lineage["rows"], 1), showlegend=True,
                         legend={"orientation": "h", "y": -0.12, "x": 0, "yanchor": "top"},
                         xaxis={"title": {"text": words["step"]}, "dtick": 1,
                                "range": [-0.5, lineage["last_step"] + 0.7]},
                         yaxis={"visible": False, "autorange": "reversed"},
                         margin={"l": 20, "r": 20, "t": 20, "b": 90})
    return {"data": data, "layout": layout, "lineage": lineage}
