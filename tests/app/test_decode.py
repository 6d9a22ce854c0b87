"""/decode: the seven views inside a decoder layer at every step, candidates, the beam tree."""

from __future__ import annotations

import json

import pytest

from app.pages import decode
from app.plots import ORANGE
from model.decoding import DecodingOptions
from model.explain import record


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace("The cat sits on the mat.", DecodingOptions(max_len=6))


@pytest.fixture(scope="module")
def beam_trace(tiny_translator):
    return tiny_translator.trace("I like green tea.", DecodingOptions(strategy="beam", max_len=5))


def test_candidates_mark_the_chosen_token(trace):
    step = trace.steps[0]
    figure = decode.candidates_figure(
        {"token": step.token, "prob": step.prob, "top": [vars(c) for c in step.top]}
    )
    bar = figure["data"][0]
    assert bar["type"] == "bar" and bar["orientation"] == "h"
    assert bar["customdata"] == [c.token for c in step.top]
    chosen = bar["customdata"].index(step.token)
    assert bar["marker"]["color"][chosen] == ORANGE
    assert bar["marker"]["color"].count(ORANGE) == 1


def test_decode_steps_have_the_seven_views(trace):
    steps = decode.decode_steps(trace, layer=1)
    assert len(steps) == len(trace.steps)
    for t, step in enumerate(steps):
        assert step["prefix"] == trace.decoder_input[: t + 1]
        views = step["figures"]
        assert list(views) == ["self_attention", "add_norm1", "cross_attention", "add_norm2",
                               "ffn", "ffn_output", "add_norm3", "softmax"]
        # the masked self-attention row covers only the tokens so far, one row per head
        self_row = views["self_attention"]["data"][0]
        assert len(self_row["z"]) == 4 and all(len(r) == t + 1 for r in self_row["z"])
        cross_row = views["cross_attention"]["data"][0]
        assert [x.replace("\u200b", "") for x in cross_row["x"]] == trace.source_tokens
        assert views["add_norm1"]["data"][0]["type"] == "bar"
        # without ffn_details: the five most active units the trace keeps, named by index
        assert views["ffn"]["data"][0]["x"] == [f"#{u}" for u in trace.decoder[1]["ffn"]["top_units"][t]]
        assert views["ffn_output"] is None
    json.dumps(steps)


def test_beam_tree(beam_trace, trace):
    assert decode.beam_tree(trace) is None  # greedy has no tree
    figure = decode.beam_tree(beam_trace)
    points = [d for d in figure["data"] if "markers" in d["mode"]]
    assert sum(len(d["x"]) for d in points) == len(beam_trace.beam)
    assert points[0]["text"][0].startswith("<bos>")
    selected = [n for n in beam_trace.beam if n.selected]
    assert sum(d["marker"]["color"].count(ORANGE) for d in points) == len(selected)


# -- the beam tree as a lineage tree (issue 11, item 7) -------------------------------------------

def _beam(*rows):
    """(step, token, parent, score, finished, selected) per node → a trace-like object: a tree
    without its ranking, which beam_lineage ranks with model.decoding.rank_hypotheses."""
    from types import SimpleNamespace

    from model.decoding import LENGTH_PENALTY
    from model.explain.trace import BeamNodeInfo
    nodes = [BeamNodeInfo(i, *row) for i, row in enumerate(rows)]
    return SimpleNamespace(beam=nodes, options={"beam_size": 2, "length_penalty": LENGTH_PENALTY})


# beam 2: 猫 keeps going and ends at step 3; 狗 is dropped at step 2; a second hypothesis ends at
# step 4, which stops the search while 。 (node 8) is still open
SMALL_BEAM = _beam(
    (0, "<bos>", -1, 0.0, False, True),
    (1, "猫", 0, -0.1, False, True), (1, "狗", 0, -2.0, False, False),
    (2, "坐", 1, -0.5, False, True), (2, "在", 1, -1.0, False, False),
    (3, "<eos>", 3, -0.7, True, True), (3, "地", 4, -1.5, False, False),
    (4, "<eos>", 6, -1.9, True, False), (4, "。", 6, -2.5, False, False),
)


def test_beam_lineage_explains_every_node():
    lineage = decode.beam_lineage(SMALL_BEAM)
    assert lineage["status"] == ["kept", "kept", "pruned", "kept", "kept", "winner", "kept",
                                 "finished", "open"]
    # nothing at the last step goes unexplained: it ended, or it was open when the search stopped
    last = [s for n, s in zip(SMALL_BEAM.beam, lineage["status"], strict=True) if n.step == 4]
    assert set(last) <= {"finished", "winner", "open"}
    assert lineage["winner_step"] == 3 and lineage["last_step"] == 4


def test_beam_lineage_rows_never_cross_and_the_chosen_path_is_one_row():
    lineage = decode.beam_lineage(SMALL_BEAM)
    row, nodes = lineage["row"], SMALL_BEAM.beam
    assert {row[n.id] for n in nodes if n.selected} == {0}
    edges = [(row[n.parent], row[n.id], n.step) for n in nodes if n.parent >= 0]
    for a in edges:
        for b in edges:
            if a[2] == b[2] and a[0] < b[0]:
                assert a[1] <= b[1], (a, b)  # a parent higher up never has a child lower down
    assert len(set(row[n.id] for n in nodes if n.step == 4)) == 2  # leaves get rows of their own


def test_beam_lineage_ranks_ended_hypotheses_by_length_penalised_score():
    from model.decoding import length_penalty as _length_penalty

    lineage = decode.beam_lineage(SMALL_BEAM)
    first, second = lineage["hypotheses"]
    assert first["tokens"] == ["猫", "坐"] and first["winner"] and first["length"] == 2
    assert second["tokens"] == ["猫", "在", "地"] and second["length"] == 3
    for h in lineage["hypotheses"]:
        assert h["score"] == pytest.approx(h["log_prob"] / _length_penalty(h["length"], 0.6), abs=1e-4)


def test_beam_tree_shows_the_score_on_every_node_and_a_legend_for_every_kind():
    figure = decode.beam_tree(SMALL_BEAM)
    points = [d for d in figure["data"] if "markers" in d["mode"]]
    texts = [t for d in points for t in d["text"]]
    assert len(texts) == len(SMALL_BEAM.beam)
    assert "坐 -0.50" in texts and "<eos> -1.90" in texts
    names = {d["name"] for d in points if d["showlegend"]}
    assert names == {decode.BEAM_WORDS[k] for k in ("winner", "finished", "pruned", "open")}


def test_beam_lineage_on_the_model(beam_trace):
    """The page reads beam search's own ranking: the winner first, every hypothesis an ended node
    (or one open when none ended), scores falling, each its shown log p over its penalty."""
    from model.decoding import length_penalty as _length_penalty

    lineage = decode.beam_lineage(beam_trace)
    assert len(lineage["status"]) == len(beam_trace.beam)
    best = lineage["hypotheses"][0]
    assert best["winner"] and "".join(best["tokens"]) == beam_trace.translation
    scores = [h["score"] for h in lineage["hypotheses"]]
    assert scores == sorted(scores, reverse=True)
    assert [h["node"] for h in lineage["hypotheses"]] == [h.node for h in beam_trace.hypotheses]
    for h in lineage["hypotheses"]:
        node = beam_trace.beam[h["node"]]
        assert h["log_prob"] == node.score and h["length"] == node.step - node.finished
        alpha = beam_trace.options["length_penalty"]
        assert h["score"] == round(node.score / _length_penalty(h["length"], alpha), 4)


# -- the FFN box (issue 11, item 8) ----------------------------------------------------------------

def test_ffn_details_are_the_traced_ffn(tiny_translator, trace):
    details = record.ffn_units_of(trace, decode.TOP_UNITS)
    assert len(details["decoder"]) == len(trace.decoder) and len(details["encoder"]) == len(trace.encoder)
    for side, after in (("decoder", "add_norm3"), ("encoder", "add_norm2")):
        for layer, recorded in zip(details[side], getattr(trace, side), strict=True):
            # the most active units agree with the trace's top five, and are sorted
            assert [u[:5] for u in layer["top_units"]] == recorded["ffn"]["top_units"]
            assert all(v == sorted(v, reverse=True) for v in layer["top_values"])
            assert layer["output_norm"] == pytest.approx(recorded["ffn"]["output_norm"], abs=1e-2)
            # x + FFN(x) is exactly what the next Add & Norm sums
            for x, fx, summed in zip(layer["input_sample"], layer["output_sample"],
                                     recorded[after]["sum_sample"], strict=True):
                assert [a + b for a, b in zip(x, fx, strict=True)] == pytest.approx(summed, abs=2e-3)


def test_ffn_box_names_the_units_and_draws_the_output(tiny_translator, trace):
    details = record.ffn_units_of(trace, decode.TOP_UNITS)
    steps = decode.decode_steps(trace, 0, None, details["decoder"][0])
    for t, step in enumerate(steps):
        units = details["decoder"][0]["top_units"][t]
        assert len(units) == decode.TOP_UNITS
        assert step["figures"]["ffn"]["data"][0]["x"] == [f"#{u}" for u in units]
        assert "dimension" not in step["figures"]["ffn"]["layout"]["xaxis"]["title"]["text"]
        names = [d["name"] for d in step["figures"]["ffn_output"]["data"]]
        assert names == [decode.WORDS["ffn_input"], decode.WORDS["ffn_output"]]
        assert step["numbers"]["ffn"]["top_units"] == units


def test_decode_route_sends_twelve_units_and_the_ffn_output(app_client):
    body = app_client.post("/api/figures/decode", json={"text": "The cat sits on the mat.", "max_len": 4,
                                                      "layer": 0}).json()
    ffn = body["steps"][0]["numbers"]["ffn"]
    assert len(ffn["top_units"]) == decode.TOP_UNITS and ffn["input_norm"] > 0
    assert body["steps"][0]["figures"]["ffn_output"]["data"][1]["y"]


def test_the_attention_rows_name_heads_in_the_readers_language(app_client):
    request = {"text": "The cat sits on the mat.", "max_len": 4, "layer": 0}
    heads = app_client.post("/api/figures/decode", json=request).json()[
        "steps"][0]["figures"]["self_attention"]["data"][0]["y"]
    assert heads[:2] == ["Head 1", "Head 2"]
    app_client.cookies.set("lang", "zh")  # the number inside the words: not "第  个头 1"
    figures = app_client.post("/api/figures/decode", json=request).json()["steps"][0]["figures"]
    for name in ("self_attention", "cross_attention"):
        assert figures[name]["data"][0]["y"][:2] == ["第 1 个头", "第 2 个头"], name


# -- residual connections and the encoder's sublayers (issue 11, items 8 and 15) ------------------

def test_residual_rows_cover_every_sublayer_in_order(trace):
    rows = decode.residual_rows(trace)
    n_enc, n_dec = len(trace.encoder), len(trace.decoder)
    assert len(rows) == 2 * n_enc + 3 * n_dec
    assert [r["sublayer"] for r in rows[:2]] == ["self_attention", "ffn"]
    assert [r["sublayer"] for r in rows[2 * n_enc: 2 * n_enc + 3]] == [
        "self_attention", "cross_attention", "ffn"]
    first = trace.encoder[0]["add_norm1"]
    mean = sum(first["residual_norm"]) / len(first["residual_norm"])
    assert rows[0]["stream"] == pytest.approx(mean, abs=1e-3)
    for r in rows:
        assert r["ratio"] == pytest.approx(r["added"] / r["stream"], abs=1e-3)
    figure = decode.residual_figure(trace)
    assert [d["y"] for d in figure["data"]] == [[r["stream"] for r in rows], [r["added"] for r in rows],
                                                [r["normed"] for r in rows]]


def test_encoder_ffn_figure_is_the_traced_encoder(trace):
    heatmap = decode.encoder_ffn_figure(trace)["data"][0]
    assert heatmap["z"] == [block["ffn"]["active_share"] for block in trace.encoder]
    assert heatmap["text"][0] == [f"#{u[0]}" for u in trace.encoder[0]["ffn"]["top_units"]]
    assert len(heatmap["x"]) == len(trace.source_tokens)


def test_gradient_flow_splits_the_gradient_at_every_sublayer(tiny_translator, trace):
    rows = record.gradient_flow_of(tiny_translator, trace)
    assert len(rows) == len(decode.residual_rows(trace))
    assert [(r["side"], r["layer"], r["sublayer"]) for r in rows] == [
        (r["side"], r["layer"], r["sublayer"]) for r in decode.residual_rows(trace)]
    for r in rows:
        assert r["at_input"] > 0 and r["shortcut"] > 0
        # ‖a + b‖ ≤ ‖a‖ + ‖b‖: the two parts really add up to the gradient at x
        assert r["at_input"] <= r["shortcut"] + r["through_sublayer"] + 1e-4
    assert all(p.grad is None for p in tiny_translator.model.parameters())  # weights untouched
    figure = decode.gradient_figure(rows)
    assert [d["y"] for d in figure["data"]] == [[r["shortcut"] for r in rows],
                                                [r["through_sublayer"] for r in rows],
                                                [r["at_input"] for r in rows]]

