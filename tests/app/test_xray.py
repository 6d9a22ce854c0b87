"""The x-ray's answers (POST /api/xray/view, /strips, /heads, /logits, /block) on the tiny
random checkpoint: what they send is the trace's own recorded pass, read without running the
model again."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest

from model.explain.record import stage_names

TEXT = "The cat sits on the mat."


def _counting(client):
    """Count every encode call of the app's model and every pass through its first decoder layer
    (each decoding step and each replay goes through it) from now on (returns the counter)."""
    model = client.app.state.translator.model
    calls = {"encode": 0, "decode": 0}
    encode = model.encode

    def counted_encode(*args, **kwargs):
        calls["encode"] += 1
        return encode(*args, **kwargs)

    def counted_decode(module, args):
        calls["decode"] += 1

    model.encode = counted_encode
    handle = model.decoder_layers[0].register_forward_pre_hook(counted_decode)
    return calls, lambda: (setattr(model, "encode", encode), handle.remove())


def test_the_xray_answers_are_the_traces_own_pass(fresh_client):
    from app import xray

    body = {"text": TEXT, "max_len": 6}
    calls, restore = _counting(fresh_client)
    try:
        trace = fresh_client.post("/api/trace", json=body).json()
        after_trace = dict(calls)
        answers = [fresh_client.post(f"/api/xray/{path}", json=body).content
                   for path in ("strips", "logits", "heads", "view")]
        for block in ("self_attention", "add_norm1", "ffn", "add_norm2"):
            answer = fresh_client.post("/api/xray/block", json={
                **body, "side": "encoder", "block": block, "layer": 1, "position": 1})
            assert answer.status_code == 200
    finally:
        restore()
    assert after_trace["encode"] >= 1 and after_trace["decode"] >= 1
    # the x-ray, its view included, and its blocks ran neither the encoder nor the decoder: the
    # view shows the one decoding asked for, no other unasked (issue 75)
    assert calls == after_trace

    header, arrays = xray.unpack_all(fresh_client.post("/api/xray/view", json=body).content, answers[0])
    for side in ("encoder", "decoder"):
        layers = len(trace[side])
        names = [s["name"] for s in header["stages"][side]]
        assert names == ["embedding"] + stage_names(side) * layers
        assert [s["layer"] for s in header["stages"][side]][1:] == [
            layer for layer in range(layers) for _ in stage_names(side)]
    # the strips hold the trace's vectors (int8 codes: within half a step of the largest value)
    codes = xray.strip_codes(header, arrays)["encoder"][0]
    scales = arrays["strips.encoder.scales"][0].astype(np.float64)
    embedding = codes.astype(np.float64) / 127 * scales[:, None]
    expected = np.array(trace["embeddings"]["encoder"]["sum"])
    assert np.abs(embedding - expected).max() <= header["stages"]["encoder"][0]["scale"] / 127
    # the logits give every probability the trace shows
    vocabulary, logits = xray.unpack(answers[1])
    logits = logits["logits"]
    assert logits.shape == (len(trace["steps"]), len(vocabulary["vocab"]))
    for row, step in zip(logits, trace["steps"], strict=True):
        finite = row[np.isfinite(row)]
        probs = np.exp(row - finite.max()) / np.exp(finite - finite.max()).sum()
        assert probs[step["id"]] == pytest.approx(step["prob"], abs=1e-5)


def test_the_json_xray_answer_is_gone(app_client):
    """No page read POST /api/xray (every number is in the packed answers): it went (issue 56)."""
    assert app_client.post("/api/xray", json={"text": TEXT}).status_code in (404, 405)
    assert "/api/xray" not in app_client.get("/openapi.json").json()["paths"]


def test_the_view_carries_the_models_own_stages(app_client):
    """The header's layout is record.py's list, stage for stage as the strips go, which the page's
    scripts draw their rows and frames from (tests/app/test_xray_layout.py holds them to it)."""
    from app import xray
    from model.explain.record import layout

    header, _ = xray.unpack(app_client.post("/api/xray/view", json={"text": TEXT, "max_len": 6}).content)
    for side in ("encoder", "decoder"):
        entries = header["layout"][side]
        assert entries == layout(side, 1 + max(e["layer"] for e in entries if e["layer"] is not None))
        strips = [e for e in entries if e["kind"] != "logits"]
        assert [(e["name"], e["layer"]) for e in strips] == [
            (s["name"], s["layer"]) for s in header["stages"][side]]
    assert header["layout"]["decoder"][-1]["kind"] == "logits"


@pytest.mark.parametrize("alpha", [None, 1.0])
def test_the_view_carries_the_length_penalty_the_search_ran_with(app_client, alpha):
    """The beam tree's ranking on the page divides by the α the header names: the one the trace's
    beam search ran with, the model's one default (model.decoding.LENGTH_PENALTY) unless another
    was asked for."""
    from app import xray
    from model.decoding import LENGTH_PENALTY, DecodingOptions

    translator = app_client.app.state.translator
    options = DecodingOptions(strategy="beam", beam_size=3, max_len=6,
                              **({} if alpha is None else {"length_penalty": alpha}))
    trace = translator.trace(TEXT, options)
    header, _ = xray.unpack(xray.view(trace, translator.chinese.vocabulary))
    assert header["length_penalty"] == (LENGTH_PENALTY if alpha is None else alpha)


def test_an_opened_attention_block_is_the_traced_head(app_client):
    body = {"text": TEXT, "max_len": 6}
    trace = app_client.post("/api/trace", json=body).json()
    for side, block, matrix in (("encoder", "self_attention", trace["encoder"][0]["self_attention"]),
                                ("decoder", "cross_attention", trace["decoder"][1]["cross_attention"])):
        layer = 0 if side == "encoder" else 1
        opened = app_client.post("/api/xray/block", json={
            **body, "side": side, "block": block, "layer": layer, "position": 1}).json()
        assert len(opened["heads"]) == len(matrix)
        for head, weights in zip(opened["heads"], matrix, strict=True):
            assert head["weights"] == pytest.approx(weights[1], abs=1e-5)
            assert sum(head["weights"]) == pytest.approx(1.0, abs=1e-4)
        assert opened["d_k"] == len(opened["heads"][0]["q"])


def test_an_opened_add_norm_block_adds_and_normalises(app_client):
    opened = app_client.post("/api/xray/block", json={
        "text": TEXT, "max_len": 6, "side": "decoder", "block": "add_norm3", "layer": 0,
        "position": 0}).json()
    summed = [a + b for a, b in zip(opened["residual"], opened["sublayer"], strict=True)]
    assert summed == pytest.approx(opened["sum"], abs=2e-4)
    mean = sum(opened["sum"]) / len(opened["sum"])
    assert opened["mean"] == pytest.approx(mean, abs=1e-4)
    normalized = [(x - opened["mean"]) / math.sqrt(opened["std"] ** 2 + opened["eps"])
                  for x in opened["sum"]]
    assert normalized == pytest.approx(opened["normalized"], abs=2e-3)


@pytest.mark.parametrize(("extra", "field", "status"), [
    ({"side": "encoder", "block": "cross_attention"}, "block", 422),
    ({"side": "encoder", "block": "output"}, "block", 422),
    ({"side": "decoder", "block": "ffn", "layer": 9}, "layer", 422),
    ({"side": "encoder", "block": "ffn", "position": 200}, "position", 422),  # past the schema's
    ({"side": "decoder", "block": "ffn", "position": 7}, "position", 404),  # past this sentence's
])
def test_a_block_that_does_not_exist_is_a_clear_error(app_client, extra, field, status):
    response = app_client.post("/api/xray/block", json={"text": TEXT, "max_len": 6, **extra})
    assert response.status_code == status
    assert field in response.text


# -- the one answer the page reads (POST /api/xray/view) and its lazy logits -----------------


@pytest.mark.parametrize("options", [
    {}, {"strategy": "beam", "beam_size": 3}, {"strategy": "sample", "top_k": 5, "seed": 3},
    {"forced_prefix": ["我"]},
])
def test_the_view_carries_every_number_the_page_read_before(app_client, options):
    """Decoded as static/js/xray/data.js decodes it, the view holds exactly (==, not close) the
    numbers the page read from /api/trace and /api/xray: every attention weight, Add & Norm size,
    FFN share, step, beam node, strip code and scale, the unforced translation, and the sampling
    table's rows at temperature 1 (the 15 likeliest of all logits and the page's own sums)."""
    from bench.xray_payload import differences

    assert differences(app_client, {"text": TEXT, "max_len": 6, **options}) == []


def test_the_views_rounding_error_is_half_a_unit_of_the_shown_decimal(app_client):
    """What the view rounds, it rounds to the trace's decimals: attention weights to 10⁻⁵ (within
    5·10⁻⁶ of the model's float32 weight), the strips to 1/127 of the stage's largest value."""
    from app import xray
    from app.pages.xray import XrayRequest
    from model.explain.record import ATTENTION_KINDS, SUBLAYERS

    body = {"text": TEXT, "max_len": 6}
    header, arrays = xray.unpack_all(app_client.post("/api/xray/view", json=body).content,
                                     app_client.post("/api/xray/strips", json=body).content)
    _, every = xray.unpack(app_client.post("/api/xray/heads", json=body).content)
    trace, _ = app_client.app.state.engine.trace(XrayRequest(**body))
    recorded = trace.recorded
    for kind, (side, sublayer) in ATTENTION_KINDS.items():
        assert sublayer in SUBLAYERS[side]
        planes = every[f"attention.{kind}"].astype(np.uint32)
        codes = planes[0] | (planes[1] << 8) | (planes[2] << 16)
        weights = np.stack([r["weights"][0].double().numpy()
                            for r in recorded.records(side, f"attention:{sublayer}")])
        assert np.abs(codes / 1e5 - weights).max() <= 0.5e-5 + 1e-12
    strips = xray.strip_codes(header, arrays)  # the Add & Norm stages come as corrections
    for side in ("encoder", "decoder"):
        for (_, _, vectors), stage, codes, scales in zip(
                recorded.stages(side), header["stages"][side], strips[side],
                arrays[f"strips.{side}.scales"], strict=True):
            values = vectors.double().numpy()
            error = np.abs(codes.astype(np.float64) * scales[:, None] / 127 - values)
            # each position to half a code step of its own largest value
            assert (error.max(axis=1) <= scales / 254 * (1 + 1e-5) + 1e-7).all()
            assert np.allclose(scales, np.abs(values).max(axis=1), rtol=1e-6)
            assert stage["scale"] == float(scales.max())


def test_head_averages_are_exact_where_shown_and_coarse_below_the_lines(app_client):
    """The view's head averages on a long sentence (many weights below the 0.03 a line needs):
    the page's own mean of every head (==) at every drawn line and each row's three largest,
    elsewhere at most 0.01 under it and still below 0.03 — and the exact ones are a minority."""
    from app import xray
    from bench.xray_payload import _mean, heads, page_mean, shown_mean

    body = {"text": "After the long meeting the students and their teacher walked slowly to the "
                    "old library near the river, where they read until the evening.", "max_len": 40}
    header, arrays = xray.unpack(app_client.post("/api/xray/view", json=body).content)
    every = heads(app_client.post("/api/xray/heads", json=body).content)
    exact = total = 0
    for kind in ("encoder", "decoder_self", "cross"):
        mean, where = _mean(arrays, f"attention.{kind}", header["attention_means"], kind)
        for layer, matrices in enumerate(every[kind]):
            assert shown_mean(mean[layer], where[layer], page_mean(matrices))
        exact += int(where.sum())
        total += where.size
    assert exact < 0.5 * total
    overall = _mean(arrays, "attention.cross.overall", header["attention_means"], "cross.overall")
    assert shown_mean(*overall, page_mean([m for layer in every["cross"] for m in layer]))
    # a weight just below a line's 0.03, or tied with a row's third largest, stays as it was
    codes = np.array([[[[2999, 3000, 0, 2000], [1000, 1000, 1000, 1000]]]] * 4, dtype=np.uint32)
    sent = xray.shown_means("m", codes.transpose(1, 0, 2, 3), axis=1)
    got, where = _mean(sent, "m", {"heads": 4, "shapes": {"k": [1, 2, 4]}}, "k")
    want = np.array(page_mean([c[0] / 1e5 for c in codes]))
    # row 1: 0.03 is drawn, 0.02999 and 0.02 are its largest after it; row 2: four equal weights,
    # the first three named (a stable sort), the last one coarse
    assert where.tolist() == [[[True, True, False, True], [True, True, True, False]]]
    assert got[0][where[0]].tolist() == want[where[0]].tolist()
    assert (got[0][~where[0]] <= want[~where[0]]).all()


def test_the_logits_come_apart_and_are_the_models(app_client):
    from app import xray
    from bench.xray_payload import old_answer

    body = {"text": TEXT, "max_len": 6}
    header, arrays = xray.unpack(app_client.post("/api/xray/logits", json=body).content)
    old = old_answer(app_client, body)
    assert header["vocab"] == old["vocab"]
    assert arrays["logits"].tobytes() == base64.b64decode(old["logits"]["float32"])
    view, _ = xray.unpack(app_client.post("/api/xray/view", json=body).content)
    assert "logits" not in view["arrays"] and "vocab" not in view  # the view leaves them out


def test_the_decoder_strips_come_apart_and_the_view_says_their_scales(app_client):
    """The landing frame draws no decoder strip, so the view leaves them out and carries each
    decoder row's ±m (the number beside its name) instead; /api/xray/strips brings them."""
    from app import xray

    body = {"text": TEXT, "max_len": 6}
    view_header, view = xray.unpack(app_client.post("/api/xray/view", json=body).content)
    strips_header, strips = xray.unpack(app_client.post("/api/xray/strips", json=body).content)
    assert not any(name.startswith("strips.decoder") for name in view)
    assert any(name.startswith("strips.encoder") for name in view)
    assert set(strips) and all(name.startswith("strips.decoder.") or name == "strips.decoder"
                               for name in strips)
    assert list(strips_header["norm_prediction"]) == ["decoder"]
    assert len(view_header["strip_ranges"]["decoder"]) == len(view_header["stages"]["decoder"])
    assert all(m > 0 for m in view_header["strip_ranges"]["decoder"])


def test_the_view_is_gzipped_once_and_sent_plain_when_asked(app_client):
    body = {"text": TEXT, "max_len": 6}
    zipped = app_client.post("/api/xray/view", json=body, headers={"Accept-Encoding": "gzip"})
    plain = app_client.post("/api/xray/view", json=body, headers={"Accept-Encoding": "identity"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert "content-encoding" not in plain.headers
    assert zipped.content == plain.content  # the client unzips it to the same bytes
    assert zipped.headers["content-type"] == "application/octet-stream"
    assert app_client.post("/api/xray/view", json={"text": "猫"}).status_code == 422


@pytest.mark.parametrize(("options", "other"), [
    ({}, {"strategy": "beam", "beam_size": 4}),
    ({"strategy": "sample", "seed": 5}, {"strategy": "beam", "beam_size": 4}),
    ({"strategy": "beam", "beam_size": 2}, {"strategy": "beam", "beam_size": 4}),
    ({"forced_prefix": ["我"]}, {"strategy": "beam", "beam_size": 4}),
    ({"strategy": "beam", "beam_size": 4}, {"strategy": "greedy"}),
    ({"strategy": "beam", "forced_prefix": ["我"]}, {"strategy": "beam", "beam_size": 4}),
])
def test_the_comparison_is_the_sentence_by_the_other_decoding(app_client, options, other):
    """What the x-ray shows when a learner asks to compare (issue 75): beam search with 4 beams,
    or greedy decoding when the view is beam 4's own; never forced; the same text /api/translate
    gives for that decoding, cut by the same max_len. The view itself carries no other decoding."""
    from app import xray

    for max_len in (6, 2):
        body = {"text": TEXT, "max_len": max_len, **options}
        header, _ = xray.unpack(app_client.post("/api/xray/view", json=body).content)
        assert "alternative" not in header
        compared = app_client.post("/api/xray/compare", json=body)
        assert compared.status_code == 200
        expected = app_client.post("/api/translate", json={"text": TEXT, "max_len": max_len,
                                                           **other}).json()
        assert compared.json() == {
            "strategy": other["strategy"], "beam_size": other.get("beam_size"),
            "translation": expected["translation"], "finished": expected["finished"],
            # each step's token and the model's probability for it: what the page marks
            "tokens": [step["token"] for step in expected["steps"]],
            "probs": [round(step["prob"], 4) for step in expected["steps"]]}
    assert compared.json()["finished"] is False  # two tokens: cut off before <eos>


def test_the_comparison_is_read_from_its_kept_trace_when_there_is_one(fresh_client):
    """Switching decodings, then comparing: beam 4's comparison after greedy's trace reads greedy's
    translation from the kept trace (no encoder pass more than the beam trace's own); a sentence
    with nothing kept runs the lean decoder for it (one more); asking again costs nothing."""
    fresh_client.post("/api/trace", json={"text": TEXT, "max_len": 6})  # greedy, kept
    greedy = fresh_client.post("/api/translate", json={"text": TEXT, "max_len": 6}).json()
    calls, restore = _counting(fresh_client)
    try:
        beam = {"strategy": "beam", "beam_size": 4, "max_len": 6}
        fresh_client.post("/api/xray/view", json={"text": TEXT, **beam})
        compared = fresh_client.post("/api/xray/compare", json={"text": TEXT, **beam}).json()
        switched = dict(calls)
        fresh_client.post("/api/xray/view", json={"text": "A dog runs.", **beam})
        viewed = dict(calls)
        fresh_client.post("/api/xray/compare", json={"text": "A dog runs.", **beam})
        compared_new = dict(calls)
        fresh_client.post("/api/xray/compare", json={"text": "A dog runs.", **beam})
    finally:
        restore()
    assert compared["translation"] == greedy["translation"]
    assert switched["encode"] == 1
    assert viewed["encode"] == 2  # the view of a new sentence: its own trace only
    assert compared_new["encode"] == 3
    assert calls == compared_new  # kept with the trace


def test_the_comparison_takes_the_views_limits(app_client):
    assert app_client.post("/api/xray/compare", json={"text": ""}).status_code == 422
    assert app_client.post("/api/xray/compare", json={"text": TEXT, "max_len": 0}).status_code == 422
