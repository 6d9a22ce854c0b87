"""Section endpoints on the tiny random checkpoint: shapes, invariants, limits (422 naming the field)."""

from __future__ import annotations

import math

import pytest
import torch

from app.scale import ScaleInput, count, from_config

CAT = "The cat sits on the mat."
WOMAN = "The woman said that she was tired."


def field_of(response) -> str:
    assert response.status_code == 422, response.text
    return response.json()["errors"][0]["field"]


# -- /api/figures/tokens --------------------------------------------------------------------------


def test_tokens_batch_and_masks(app_client):
    body = app_client.post("/api/figures/tokens", json={"text": CAT}).json()
    batch = body["batch"]
    assert len(batch["sources"]) == 3 and batch["sources"][0] == CAT
    assert [e["token"] for e in body["english"]][-1] == "<eos>"
    assert "cat" in [e["token"] for e in body["english"]]
    width = len(batch["source_ids"][0])
    t_width = len(batch["decoder_ids"][0])
    for row in range(3):
        ids, length = batch["source_ids"][row], batch["source_lengths"][row]
        assert len(ids) == width
        assert ids[length:] == [0] * (width - length)  # <pad> = 0 after the sentence
        assert batch["source_padding"][row] == [1] * length + [0] * (width - length)
        assert batch["decoder_ids"][row][0] == 1  # <bos>
        # labels are the decoder input shifted left by one, ending in <eos> (2)
        target_length = batch["target_lengths"][row]
        assert batch["label_ids"][row][: target_length - 1] == batch["decoder_ids"][row][1:target_length]
        assert batch["label_ids"][row][target_length - 1] == 2
        encoder = batch["encoder_mask"][row]
        assert len(encoder) == width and all(r == batch["source_padding"][row] for r in encoder)
        decoder = batch["decoder_mask"][row]
        assert len(decoder) == t_width
        for q, mask_row in enumerate(decoder):
            assert all(v == 0 for v in mask_row[q + 1:])  # nothing from the future
            assert mask_row[: q + 1] == [int(k < target_length) for k in range(q + 1)]
        cross = batch["cross_mask"][row]
        assert len(cross) == t_width and all(r == batch["source_padding"][row] for r in cross)
    # the companions are shorter and longer, so someone in the batch is padded
    assert body["padding_share"]["pad"] > 0
    masks = body["figures"]["masks"]
    assert len(masks) == 3 and set(masks[0]) == {"padding", "causal", "cross"}
    assert masks[0]["padding"]["data"][0]["type"] == "heatmap"


def test_tokens_rejects_non_english(app_client):
    assert field_of(app_client.post("/api/figures/tokens", json={"text": "猫坐在垫子上"})) == "text"


# -- /api/figures/embeddings ----------------------------------------------------------------------


def test_embeddings_numbers(app_client, tiny_translator):
    body = app_client.post("/api/figures/embeddings", json={"text": CAT, "positions": 24}).json()
    d = tiny_translator.config.d_model
    assert body["d_model"] == d and body["sqrt_d"] == pytest.approx(math.sqrt(d), abs=1e-3)
    assert body["position_norm"] == pytest.approx(math.sqrt(d / 2), abs=1e-3)
    s = body["sample"]
    for token, position, total in zip(s["scaled"], s["position"], s["sum"], strict=True):
        assert token + position == pytest.approx(total, abs=2e-3)
    # the raw row is the table entry itself: × √d gives the scaled one
    row = tiny_translator.model.src_embedding.tokens.weight[
        tiny_translator.english.encode(CAT)[0]].tolist()
    assert s["raw"] == pytest.approx(row[:8], abs=1e-3)
    figures = body["figures"]
    token = figures["token"]["data"][0]
    assert len(token["z"]) == len(body["source_tokens"]) and len(token["z"][0]) == d
    cosine = figures["cosine"]["data"][0]["z"]
    assert len(cosine) == 24
    for p in range(24):
        assert cosine[p][p] == pytest.approx(1.0, abs=1e-3)
    for k in range(1, 8):  # similarity depends on the offset only
        assert cosine[5][5 + k] == pytest.approx(cosine[0][k], abs=2e-3)
    projection = figures["projection"]["data"]
    assert len(projection) == tiny_translator.config.n_encoder_layers + 1
    assert projection[0]["text"] == body["source_tokens"]


def test_embeddings_limits(app_client):
    assert field_of(app_client.post("/api/figures/embeddings",
                                    json={"text": CAT, "positions": 500})) == "positions"


# -- /api/coreference -------------------------------------------------------------------------------


def test_coreference_ranking_is_measured(app_client, tiny_translator):
    body = app_client.get("/api/coreference", params={
        "text": WOMAN, "pronoun": "she", "referent": "woman"}).json()
    layers, heads = tiny_translator.config.n_encoder_layers, tiny_translator.config.n_heads
    ranking = body["ranking"]
    assert len(ranking) == layers * heads
    weights = [entry["weight"] for entry in ranking]
    assert weights == sorted(weights, reverse=True)
    assert all(0 <= w <= 1 for w in weights)
    tokens = body["tokens"]
    assert tokens[body["pronoun"][0]] == "she"
    # the same number, read straight from the encoder attention of the trace
    trace = app_client.post("/api/trace", json={"text": WOMAN}).json()
    top = ranking[0]
    row = trace["encoder"][top["layer"]]["self_attention"][top["head"]][body["pronoun"][0]]
    assert sum(row[k] for k in body["referent"]) == pytest.approx(top["weight"], abs=1e-4)
    assert body["grid"][top["layer"]][top["head"]] == top["weight"]
    assert body["uniform"] == pytest.approx(len(body["referent"]) / len(tokens), abs=1e-4)
    assert body["figures"]["grid"]["data"][0]["type"] == "heatmap"


def test_coreference_with_distractor(app_client):
    body = app_client.get("/api/coreference", params={
        "text": "The boy kicked the ball and he laughed.", "pronoun": "he", "referent": "boy",
        "distractor": "ball"}).json()
    assert all(entry["distractor_weight"] is not None for entry in body["ranking"])


@pytest.mark.parametrize(("params", "field"), [
    ({"text": WOMAN, "pronoun": "he", "referent": "woman"}, "pronoun"),
    ({"text": WOMAN, "pronoun": "she", "referent": "man"}, "referent"),
    ({"text": WOMAN, "pronoun": "she!", "referent": "woman"}, "query.pronoun"),
    ({"text": "x" * 201, "pronoun": "she", "referent": "woman"}, "query.text"),
])
def test_coreference_limits(app_client, params, field):
    assert field_of(app_client.get("/api/coreference", params=params)) == field


# -- /api/score and /api/training ---------------------------------------------------------------


def test_score_shapes_and_no_update(app_client, tiny_translator):
    before = [p.detach().clone() for p in tiny_translator.model.parameters()]
    body = app_client.post("/api/score", json={"text": CAT, "reference": "猫坐在垫子上。"}).json()
    n = len("猫坐在垫子上。") + 1
    assert body["decoder_input"][0] == "<bos>" and body["labels"][-1] == "<eos>"
    assert body["decoder_input"][1:] == body["labels"][:-1]
    assert len(body["label_prob"]) == len(body["cross_entropy"]) == len(body["predicted"]) == n
    for p, ce in zip(body["label_prob"], body["cross_entropy"], strict=True):
        assert ce == pytest.approx(-math.log(p), rel=1e-3, abs=1e-3)
    assert body["loss"] == pytest.approx(sum(body["cross_entropy"]) / n, abs=1e-3)
    assert body["clipped_grad_norm"] == pytest.approx(min(body["grad_norm"], body["clip"]), abs=1e-4)
    assert isinstance(body["greedy"], list)
    assert body["figures"]["positions"]["data"][0]["type"] == "bar"
    after = list(tiny_translator.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(p.grad is None for p in after)


@pytest.mark.parametrize(("body", "field"), [
    ({"text": CAT, "reference": "the cat"}, "reference"),
    ({"text": CAT, "reference": "猫" * 201}, "reference"),
    ({"text": CAT, "reference": ""}, "reference"),
    ({"text": "", "reference": "猫"}, "text"),
    ({"text": CAT}, "reference"),
])
def test_score_limits(app_client, body, field):
    assert field_of(app_client.post("/api/score", json=body)) == field


def test_training_history_and_schedule(app_client, tiny_translator):
    body = app_client.get("/api/training").json()
    assert body["d_model"] == tiny_translator.config.d_model
    assert body["has_history"] is True
    schedule = body["figures"]["schedule"]["data"][0]
    lr = schedule["y"]
    peak = lr.index(max(lr))
    warmup = body["warmup"]
    assert abs(schedule["x"][peak] - warmup) <= schedule["x"][1] - schedule["x"][0]
    assert body["peak_lr"] == pytest.approx(tiny_translator.config.d_model ** -0.5 * warmup ** -0.5)
    curves = body["figures"]["curves"]["data"]
    assert [len(c["x"]) for c in curves] == [10, 10]
    assert body["figures"]["epochs"]["data"][0]["y"] == [1.0]


# -- /api/kv-cache ------------------------------------------------------------------------------


def test_kv_cache_race(app_client):
    body = app_client.get("/api/kv-cache", params={"text": CAT, "steps": 12}).json()
    assert body["identical"] is True
    assert body["cached_ms"] > 0 and body["uncached_ms"] > 0
    assert len(body["cached_step_ms"]) == len(body["uncached_step_ms"]) == 12
    assert body["cached_positions"] == [1] * 12
    assert body["uncached_positions"] == list(range(1, 13))
    assert len(body["tokens"]) == 12
    grid = body["figures"]["cached_grid"]["data"][0]["z"]
    assert len(grid) == 12 and grid[11][11] == 1 and grid[11][0] == 0.5 and grid[0][1] is None
    uncached = body["figures"]["uncached_grid"]["data"][0]["z"]
    assert uncached[11][:12] == [1] * 12


@pytest.mark.parametrize("params", [{"text": CAT, "steps": 0}, {"text": CAT, "steps": 129}])
def test_kv_cache_step_limits(app_client, params):
    assert field_of(app_client.get("/api/kv-cache", params=params)) == "query.steps"


def test_kv_cache_text_limits(app_client):
    assert field_of(app_client.get("/api/kv-cache", params={"text": "a" * 201})) == "query.text"
    assert field_of(app_client.get("/api/kv-cache", params={"text": "12345"})) == "query.text"


# -- /api/scale ---------------------------------------------------------------------------------


def test_scale_api_is_the_calculator(app_client):
    body = app_client.get("/api/scale").json()  # defaults: GPT-3
    assert body["total"] == count(ScaleInput())["total"]
    by_key = {row["key"]: row for row in body["rows"]}
    assert by_key["qkv"]["weights"] == 3 * 12288**2
    assert by_key["ffn"]["weights"] == 2 * 12288 * 49152
    assert by_key["token_embedding"]["count"] == 50257 * 12288
    assert all(row["label"] for row in body["rows"])
    assert body["figure"]["data"][0]["type"] == "bar"


def test_scale_api_counts_this_model_exactly(app_client, tiny_translator):
    from dataclasses import asdict

    spec = from_config(asdict(tiny_translator.config))
    params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in asdict(spec).items()}
    body = app_client.get("/api/scale", params=params).json()
    assert body["total"] == sum(p.numel() for p in tiny_translator.model.parameters())


@pytest.mark.parametrize(("params", "field"), [
    ({"d_model": 100, "heads": 12}, "heads"),
    ({"experts": 2, "active_experts": 3}, "active_experts"),
    ({"layers": 0}, "query.layers"),
    ({"d_model": 10**6}, "query.d_model"),
    ({"architecture": "rnn"}, "query.architecture"),
])
def test_scale_limits(app_client, params, field):
    assert field_of(app_client.get("/api/scale", params=params)) == field


def test_query_strings_are_parsed_as_a_browser_sends_them(app_client):
    """Query parameters arrive as text: numbers and booleans must still be read."""
    assert app_client.get("/api/kv-cache?text=The+cat&steps=4").json()["steps"] == 4
    body = app_client.get("/api/scale?d_model=768&heads=12&layers=12&d_ff=3072&context=1024"
                          "&biases=true&architecture=decoder_only").json()
    assert body["total"] == 124_439_808
    assert field_of(app_client.get("/api/scale?d_model=768&unknown=1")) == "query.unknown"


def test_schedule_uses_the_checkpoints_own_settings(tiny_checkpoint, tiny_translator):
    """The curve comes from noam_lr with this model's d_model and history's warmup; a history
    logged by the training loop (lr of step s = noam_lr(s)) lies exactly on it."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from model.train import noam_lr
    from model.translator import Translator

    d = tiny_translator.config.d_model
    history = {"settings": {"warmup": 40, "lr_factor": 2.0, "clip": 0.5},
               "steps": [{"step": s, "loss": 1.0, "grad_norm": 1.0, "epoch": 1,
                          "lr": noam_lr(s, d, 40, 2.0)} for s in range(1, 200, 7)],
               "epochs": []}
    translator = Translator(tiny_translator.model, tiny_translator.english,
                            tiny_translator.chinese, history=history)
    with TestClient(create_app(Settings(checkpoint=tiny_checkpoint), translator)) as client:
        body = client.get("/api/training").json()
        assert (body["warmup"], body["lr_factor"]) == (40, 2.0)
        curve, logged = body["figures"]["schedule"]["data"]
        on_curve = dict(zip(curve["x"], curve["y"], strict=True))
        for step, lr in zip(logged["x"], logged["y"], strict=True):
            assert lr == pytest.approx(on_curve[step])
        assert body["figures"]["epochs"] is None
        score = client.post("/api/score", json={"text": CAT, "reference": "猫"}).json()
        assert score["clip"] == 0.5
