"""app/plots.py, and every figure of every page: valid Plotly, labelled in the reader's language."""

from __future__ import annotations

import json
import re

import pytest

from app import plots
from model.decoding import DecodingOptions
from tests.app.checks import assert_valid_figures
from tests.app.test_glossary import GLOSSARY, without_glosses

CAT = "The cat sits on the mat."


@pytest.fixture(scope="module")
def trace(tiny_translator):
    return tiny_translator.trace("The cat sits on the mat.", DecodingOptions(max_len=6))


def test_unique_labels_keep_repeated_tokens_apart():
    labels = plots.unique_labels(["the", "cat", "the", "the"])
    assert len(set(labels)) == 4
    assert [label.replace("\u200b", "") for label in labels] == ["the", "cat", "the", "the"]


def test_attention_heatmap_has_tokens_on_both_axes(trace):
    figure = plots.attention_heatmap(
        trace.decoder[0]["cross_attention"][1], trace.decoder_input, trace.source_tokens
    )
    heatmap = figure["data"][0]
    assert heatmap["type"] == "heatmap"
    assert heatmap["colorscale"] == plots.ATTENTION_SCALE  # the palette's sequential scale
    assert (heatmap["zmin"], heatmap["zmax"]) == (0, 1)
    assert [x.replace("\u200b", "") for x in heatmap["x"]] == trace.source_tokens
    assert [y.replace("\u200b", "") for y in heatmap["y"]] == trace.decoder_input
    assert len(heatmap["z"]) == len(trace.decoder_input)
    assert "%{z:.4f}" in heatmap["hovertemplate"]
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"  # first query on top
    json.dumps(figure)  # plain JSON data


# Every JSON route that answers with figures, asked for the same sentence.
FIGURE_ROUTES = [
    ("post", "/api/figures/pipeline", {"text": CAT}),
    ("post", "/api/figures/tokens", {"text": CAT}),
    ("post", "/api/figures/embeddings", {"text": CAT}),
    ("post", "/api/figures/attention", {"text": CAT}),
    ("post", "/api/figures/attention-detail",
     {"text": CAT, "kind": "decoder_self", "layer": 0, "head": 0, "query": 1}),
    # max_len: the random tiny model never ends a sentence; 8 steps draw every figure 128 would
    ("post", "/api/figures/decode", {"text": CAT, "layer": 1, "max_len": 8}),
    ("post", "/api/figures/decode",  # draws the "sampled from" bars
     {"text": CAT, "strategy": "sample", "seed": 1, "top_k": 5, "max_len": 8}),
    ("post", "/api/figures/decode", {"text": CAT, "strategy": "beam", "beam_size": 3, "max_len": 8}),
    ("get", "/api/coreference",
     {"text": "The boy kicked the ball and he laughed.", "pronoun": "he", "referent": "boy",
      "distractor": "ball"}),
    ("post", "/api/score", {"text": CAT, "reference": "猫坐在垫子上。"}),
    ("get", "/api/training", {}),
    ("get", "/api/kv-cache", {"text": CAT, "steps": 6}),
    ("get", "/api/scale", {}),
]
# What may stay in Latin letters in Chinese: the glossary's list (symbols, names of methods and
# models), plus what only figures show: hover units (ms) and the x·W of a projection's axis.
LATIN_ALLOWED = {word for group, words in GLOSSARY["allowed_english"].items() if group != "about"
                 for phrase in words for word in phrase.split()} | {"ms", "xW"}


def labels(figure: dict) -> list[str]:
    """What a reader reads around the plot: title, axis titles, legend entries, annotations."""
    layout = figure["layout"]
    texts = [layout.get("title", {}).get("text", "")]
    texts += [value.get("title", {}).get("text", "") for key, value in layout.items()
              if key.startswith(("xaxis", "yaxis")) and isinstance(value, dict)]
    texts += [a.get("text", "") for a in layout.get("annotations", [])]
    if layout.get("showlegend", True):
        texts += [trace.get("name", "") for trace in figure["data"]]
    texts += [trace.get("hovertemplate", "").split("<extra>")[0] for trace in figure["data"]]
    return [text for text in texts if text]


def english_words(text: str) -> list[str]:
    # plotly placeholders, tokens like <bos>, symbols like d_model
    text = re.sub(r"%\{[^}]*\}|<[^>]*>|&lt;\w+&gt;|\w+_\w+", " ",
                  without_glosses(text))  # 键（Key）: a gloss; &lt;bos&gt;: <bos> in a title
    return [word for word in re.findall(r"[A-Za-z]{2,}", text) if word not in LATIN_ALLOWED]


@pytest.mark.parametrize(("method", "path", "body"), FIGURE_ROUTES,
                         ids=[f"{path}-{i}" for i, (_, path, _) in enumerate(FIGURE_ROUTES)])
def test_every_figure_is_valid_plotly_and_reads_in_chinese(fresh_client, method, path, body):
    fresh_client.cookies.set("lang", "zh")
    arguments = {"json": body} if method == "post" else {"params": body}
    response = fresh_client.request(method.upper(), path, **arguments)
    assert response.status_code == 200, response.text
    figures = assert_valid_figures(response.json())
    sentence = set(re.findall(r"[A-Za-z]+", CAT + body.get("text", "") + "ball boy he"))
    for where, figure in figures:
        for text in labels(figure):
            english = [w for w in english_words(text) if w not in sentence]
            assert english == [], f"{path} {where}: {text!r} is not in Chinese"


def test_a_title_keeps_special_tokens_plotly_would_drop_as_tags(app_client):
    """Issue 25 item 7: "Decoder input (<bos> + Chinese)" showed as "Decoder input ( + Chinese)"."""
    from app.plots import base_layout

    assert base_layout("Decoder input (<bos> + Chinese)")["title"]["text"] == \
        "Decoder input (&lt;bos&gt; + Chinese)"
    figures = app_client.post("/api/figures/tokens", json={"text": "The cat sits on the mat."}).json()
    titles = [f["layout"]["title"]["text"] for f in figures["figures"].values() if isinstance(f, dict)
              and "layout" in f]
    assert any("&lt;bos&gt;" in title for title in titles)
    assert not any("<bos>" in title for title in titles)


def test_colour_scales_are_the_palettes():
    """Issue 24 item 5: every figure colours signed values and probabilities with the palette."""
    from app import palette
    from app.pages import embeddings, kv_cache

    assert palette.colorscale(palette.DIVERGING) == plots.DIVERGING
    assert palette.colorscale(palette.SEQUENTIAL) == plots.ATTENTION_SCALE
    assert plots.FONT["size"] == palette.PLOT_FONT_PX
    heat = plots.attention_heatmap([[0.2, 0.8]], ["a"], ["b", "c"])["data"][0]
    assert heat["colorscale"] == plots.ATTENTION_SCALE and (heat["zmin"], heat["zmax"]) == (0, 1)
    signed = [embeddings.vectors_heatmap([[0.5, -2.0]], ["a"], "x")["data"][0],
              kv_cache.kv_rows_figure([[0.5, -2.0]], ["a"])["data"][0]]
    for trace in signed:  # negative blue, positive red, centred on 0, never reversed
        assert trace["colorscale"] == plots.DIVERGING and not trace.get("reversescale")
        assert trace["zmin"] == -trace["zmax"]
