"""/coreference: heads ranked by the weight the pronoun puts on its referent, measured."""

from __future__ import annotations

import pytest

from app.pages import coreference as figs
from app.pages.coreference import locate, rank_heads, words
from tests.app.checks import field_of

WOMAN = "The woman said that she was tired."


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


def test_coreference_with_distractor(app_client, tiny_translator):
    """Every head also says how much the pronoun attends to the distractor, read from the trace."""
    text = "The boy kicked the ball and he laughed."
    body = app_client.get("/api/coreference", params={
        "text": text, "pronoun": "he", "referent": "boy", "distractor": "ball"}).json()
    config = tiny_translator.config
    ranking = body["ranking"]
    assert len(ranking) == config.n_encoder_layers * config.n_heads
    assert "".join(body["tokens"][k].removeprefix("##") for k in body["distractor"]) == "ball"
    trace = app_client.post("/api/trace", json={"text": text}).json()
    for entry in ranking:
        row = trace["encoder"][entry["layer"]]["self_attention"][entry["head"]][body["pronoun"][0]]
        assert entry["distractor_weight"] == pytest.approx(sum(row[k] for k in body["distractor"]),
                                                           abs=1e-4)


@pytest.mark.parametrize(("params", "field"), [
    ({"text": WOMAN, "pronoun": "she!", "referent": "woman"}, "query.pronoun"),
    ({"text": "x" * 601, "pronoun": "she", "referent": "woman"}, "query.text"),
])
def test_coreference_limits(app_client, params, field):
    assert field_of(app_client.get("/api/coreference", params=params)) == field


@pytest.mark.parametrize(("params", "field"), [
    ({"text": WOMAN, "pronoun": "he", "referent": "woman"}, "pronoun"),
    ({"text": WOMAN, "pronoun": "she", "referent": "man"}, "referent"),
])
def test_a_word_not_in_the_text_is_not_found(app_client, params, field):
    response = app_client.get("/api/coreference", params=params)
    assert response.status_code == 404 and response.json()["errors"][0]["field"] == field


def test_words_and_locate():
    tokens = ["the", "wom", "##an", "said", "she", "was", "tired", ".", "<eos>"]
    assert words(tokens)[1] == ("woman", [1, 2])
    assert locate(["wom", "##an"], tokens, "referent") == [1, 2]
    assert locate(["she"], tokens, "pronoun", after=2) == [4]
    with pytest.raises(ValueError, match="referent"):
        locate(["man"], tokens, "referent")
    with pytest.raises(ValueError):
        locate(["wom"], tokens, "referent")  # only part of a word


def test_sentencepiece_pieces_are_grouped_into_words():
    """A Marian model's pieces: ▁ starts a word, a punctuation piece is a word of its own."""
    tokens = ["▁", "T", "he", "▁w", "o", "ma", "n", "▁s", "he", "▁was", "▁t", "i", "re", "d", ".",
              "<eos>"]
    grouped = words(tokens, "sentencepiece")
    assert [word for word, _ in grouped] == ["The", "woman", "she", "was", "tired", "."]
    assert grouped[1] == ("woman", [3, 4, 5, 6])
    assert locate(["▁s", "he"], tokens, "pronoun", kind="sentencepiece") == [7, 8]
    with pytest.raises(ValueError):
        locate(["▁t", "i"], tokens, "referent", kind="sentencepiece")  # only part of a word


def test_rank_heads_orders_by_weight():
    tokens = ["she", "and", "her"]
    # 1 layer, 2 heads; row 2 ("her") looks at "she" with 0.2 in head 0 and 0.9 in head 1
    attention = [[[[1, 0, 0], [0, 1, 0], [0.2, 0.3, 0.5]],
                  [[1, 0, 0], [0, 1, 0], [0.9, 0.05, 0.05]]]]
    result = rank_heads(attention, tokens, pronoun=[2], referent=[0])
    assert [(h["layer"], h["head"]) for h in result["ranking"]] == [(0, 1), (0, 0)]
    assert result["ranking"][0]["referent_rank"] == 1 and result["ranking"][1]["referent_rank"] == 3
    assert result["ranking"][0]["top_word"] == "she"
    assert result["uniform"] == pytest.approx(1 / 3, abs=1e-4)


def test_coreference_page_defaults_to_an_example(app_client):
    html = app_client.get("/coreference").text
    assert 'value="The woman said that she was tired."' in html
    # a carried sentence without a pronoun stays, and the page says why nothing is measured
    html = app_client.get("/coreference", params={"text": "I like green tea."}).text
    assert 'value="I like green tea."' in html and 'id="coref-missing"' in html
    html = app_client.get("/coreference", params={
        "text": "The boy kicked the ball and he laughed.", "pronoun": "he", "referent": "boy"}).text
    assert 'value="The boy kicked the ball and he laughed."' in html and 'value="boy"' in html


def test_head_grid():
    grid = figs.head_grid([[0.1, 0.4], [0.3, 0.2]], "", "layer {n}", "head {n}")
    trace = grid["data"][0]
    assert trace["x"] == ["head 1", "head 2"] and trace["y"] == ["layer 1", "layer 2"]
    # a language that puts the number inside the words keeps it there (not "第  层 1")
    trace = figs.head_grid([[0.1, 0.4], [0.3, 0.2]], "", "第 {n} 层", "第 {n} 个头")["data"][0]
    assert trace["x"] == ["第 1 个头", "第 2 个头"] and trace["y"] == ["第 1 层", "第 2 层"]
    assert trace["hovertemplate"].startswith("第 %{customdata[0]} 层 · 第 %{customdata[1]} 个头: ")


def test_the_grid_names_layers_and_heads_in_the_readers_language(app_client):
    app_client.cookies.set("lang", "zh")
    body = app_client.get("/api/coreference", params={
        "text": WOMAN, "pronoun": "she", "referent": "woman"}).json()
    trace = body["figures"]["grid"]["data"][0]
    assert trace["x"][:2] == ["第 1 个头", "第 2 个头"] and trace["y"][0] == "第 1 层"


@pytest.mark.parametrize(("text", "expected"), [
    ("Liv wrote code until late at night; she really loves programming.",
     {"pronoun": "she", "referent": "Liv", "distractor": ""}),
    ("The teacher praised the student because he worked hard.",
     {"pronoun": "he", "referent": "teacher", "distractor": "student"}),
    ("My sister bought a new car and she loves it.",
     {"pronoun": "she", "referent": "sister", "distractor": "car"}),
    ("The cat sits on the mat.", None),
])
def test_the_question_is_guessed_from_the_learners_own_sentence(text, expected):
    from app.pages.coreference import guess_words

    assert guess_words(text) == expected


def test_a_carried_sentence_is_kept(app_client):
    """Issue 25 item 5: a sentence from another page was silently replaced by the first example."""
    mine = "My sister bought a new car and she loves it."
    html = app_client.get("/coreference", params={"text": mine}).text
    assert f'value="{mine}"' in html and 'id="coref-guessed"' in html
    assert ('id="coref-pronoun" name="pronoun" type="text" maxlength="20" required size="8" '
            'value="she"') in html
    none = app_client.get("/coreference", params={"text": "The cat sits on the mat."}).text
    assert 'value="The cat sits on the mat."' in none and 'id="coref-missing"' in none


# -- issue 75 item 5: no false lesson --------------------------------------------------------------


def test_a_sentence_without_a_pronoun_or_an_antecedent_gets_no_link():
    from app.pages.coreference import guess_words, read_sentence, verdict

    assert read_sentence("The bakery opens at seven on weekdays.")["pronoun"] is None
    assert verdict({"pronoun": None}, "bakery", [1], [0], None) == {"kind": "not_pronoun"}
    read = read_sentence("The driver passed the receipt to her.")
    assert read["pronoun"] == "her"
    assert [(c.word, c.agrees) for c in read["candidates"]] == [("driver", True), ("receipt", False)]
    read = read_sentence("The uncle waved before she drove away.")
    assert [(c.word, c.agrees) for c in read["candidates"]] == [("uncle", False)]
    assert guess_words("Nobody answered when she knocked.") == {
        "pronoun": "she", "referent": "", "distractor": ""}


def test_the_calibration_is_reproduced_by_the_script():
    """The figures the page quotes (model/explain/coreference_calibration.json) are what
    bench/coreference_calibration.py measures on the shipped checkpoint now."""
    import json

    from app.pages.coreference import CALIBRATION_FILE
    from bench.coreference_calibration import measure

    stored = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    fresh = measure()
    assert fresh["with_antecedent"] >= 30 and fresh["without_antecedent"] >= 10
    for key in ("weights_sha256", "threshold", "links", "right", "precision", "no_link",
                "no_link_with_antecedent", "no_link_without_antecedent"):
        assert fresh[key] == stored[key], key
    assert stored["precision"] >= stored["target_precision"]
