"""/scale: the parameter calculator (the documents' GPT-3 figures, this model's exact count), its
API and the page."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from app.pages import scale as figs
from app.pages.scale import GPT_MODELS, ScaleInput, count, from_config, preset
from model.transformer import Transformer, count_parameters
from tests.app.checks import field_of

torch.set_num_threads(1)


def rows(result: dict) -> dict[str, dict]:
    return {(row["group"], row["key"]): row for row in result["rows"]}


def test_gpt3_matrices_match_the_documents():
    result = rows(count(preset("GPT-3")))
    assert result[("embedding", "token_embedding")]["weights"] == 50257 * 12288  # ≈ 6.17亿
    assert round(50257 * 12288 / 1e6) == 618
    qkv = result[("decoder", "qkv")]
    assert qkv["weights"] == 3 * 12288**2 == 452_984_832  # ≈ 4.53亿 per layer
    assert qkv["times"] == 96
    assert result[("decoder", "ffn")]["weights"] == 2 * 12288 * 49152 == 1_207_959_552  # ≈ 12.08亿
    assert result[("decoder", "out")]["weights"] == 12288**2 == 150_994_944  # ≈ 1.51亿


def test_gpt_totals_land_on_the_published_sizes():
    assert count(preset("GPT-3"))["total"] == pytest.approx(175e9, rel=0.01)
    assert count(preset("GPT-2"))["total"] == pytest.approx(1.5e9, rel=0.05)
    assert count(preset("GPT-1"))["total"] == pytest.approx(117e6, rel=0.01)
    gpt2_small = ScaleInput(vocab=50257, d_model=768, layers=12, heads=12, d_ff=3072, context=1024)
    assert count(gpt2_small)["total"] == 124_439_808  # Hugging Face's count for "gpt2"
    assert [m["official"] for m in GPT_MODELS] == [True, True, True, False]


def test_weights_only_drops_biases_and_norms():
    spec = preset("GPT-3")
    with_bias = count(spec)
    without = count(dataclasses.replace(spec, biases=False))
    assert without["total"] == with_bias["total_weights_only"]
    d = 12288
    assert without["total"] == 50257 * d + 2048 * d + 96 * 12 * d * d


def test_mixture_of_experts_counts_total_and_active():
    dense = count(ScaleInput(d_model=64, heads=4, d_ff=256, layers=2, vocab=100, context=16))
    moe = count(ScaleInput(d_model=64, heads=4, d_ff=256, layers=2, vocab=100, context=16,
                           experts=8, active_experts=2))
    ffn = rows(dense)[("decoder", "ffn")]["count"]
    assert moe["total"] == dense["total"] + 7 * ffn
    assert moe["active_per_token"] == dense["total"] + ffn


def test_invalid_shapes_are_refused():
    with pytest.raises(ValueError, match="active_experts"):
        ScaleInput(experts=2, active_experts=3)


def check_against_tensors(model: Transformer) -> None:
    config = dataclasses.asdict(model.config)
    result = count(from_config(config))
    real = count_parameters(model)
    assert result["total"] == real["total"] == sum(p.numel() for p in model.parameters())
    by_row = rows(result)
    assert by_row[("embedding", "source_embedding")]["count"] == real["source_embedding"]
    assert by_row[("embedding", "target_embedding")]["count"] == real["target_embedding"]
    assert by_row[("embedding", "position_encoding")]["count"] == 0
    encoder = sum(r["count"] for r in result["rows"] if r["group"] == "encoder")
    decoder = sum(r["count"] for r in result["rows"] if r["group"] == "decoder")
    assert encoder == real["encoder"]
    assert decoder == real["decoder"]
    assert by_row[("output", "output_projection")]["count"] == real["output_projection"]
    # per-matrix: the first encoder layer's attention and FFN tensors
    layer = model.encoder_layers[0]
    attention = layer.self_attention
    qkv = sum(m.weight.numel() + m.bias.numel() for m in (attention.w_q, attention.w_k, attention.w_v))
    assert by_row[("encoder", "qkv")]["per_layer"] == qkv
    out = attention.w_o.weight.numel() + attention.w_o.bias.numel()
    assert by_row[("encoder", "out")]["per_layer"] == out
    ffn = sum(p.numel() for p in layer.ffn.parameters())
    assert by_row[("encoder", "ffn")]["per_layer"] == ffn
    norms = sum(p.numel() for p in model.decoder_layers[0].add_norm3.parameters()) * 3
    assert by_row[("decoder", "layer_norm")]["per_layer"] == norms


def test_exact_count_of_the_tiny_model(tiny_translator):
    check_against_tensors(tiny_translator.model)


def test_exact_count_with_an_untied_output():
    from model.transformer import TransformerConfig

    model = Transformer(TransformerConfig(50, 40, d_model=16, n_heads=2, n_encoder_layers=1,
                                          n_decoder_layers=1, d_ff=32, tie_output=False))
    check_against_tensors(model)


def test_exact_count_of_the_shipped_model(shipped_translator):
    check_against_tensors(shipped_translator.model)


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


def test_parameter_breakdown():
    result = count(ScaleInput(d_model=64, heads=4, d_ff=256, layers=2, vocab=100, context=16))
    figure = figs.parameter_breakdown(result, {"qkv": "Q, K, V"})
    bar = figure["data"][0]
    assert bar["orientation"] == "h" and "Q, K, V" in bar["y"]
    assert sum(bar["x"]) == result["total"]


def test_scale_page_tables(app_client, tiny_translator):
    html = app_client.get("/scale").text
    for anchor in ("gpt-table", "calculator", "chatgpt", "design", "improvements", "timeline",
                   "why-moe", "imp-efficiency-flash", "imp-positions-rope", "imp-positions-alibi",
                   "imp-architecture-prenorm", "imp-architecture-swiglu", "imp-efficiency-gqa",
                   "stage-sft", "stage-rm", "stage-ppo", "year-2017"):
        assert f'id="{anchor}"' in html, anchor
    assert "174,604,259,328" in html  # GPT-3 by the calculator
    total = sum(p.numel() for p in tiny_translator.model.parameters())
    assert f"{total:,}" in html
    assert html.count('class="badge"') == 1  # GPT-4 marked as an estimate
    assert 'id="scale-presets"' in html
