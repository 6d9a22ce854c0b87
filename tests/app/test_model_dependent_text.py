"""What the pages say about the model follows the model that is loaded: this project's checkpoint
(BPE with ## for English, one id per Chinese character, sin/cos interleaved) or a Marian model
(SentencePiece with ▁ on both sides, the table as [sin…, cos…] halves, SiLU)."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

# (what must be there, what must not), per model and language
EMBEDDINGS = {
    ("ours", "en"): (["PE(pos, 2i) = sin", "Even dimensions use sine, odd ones cosine"], ["half"]),
    ("ours", "zh"): (["PE(pos, 2i) = sin", "偶数维用正弦、奇数维用余弦"], ["一半"]),
    ("marian", "en"): (["PE(pos, i) = sin", "PE(pos, d/2 + i) = cos", "first half of the dimensions"],
                       ["Even dimensions", "2i+1"]),
    ("marian", "zh"): (["PE(pos, i) = sin", "PE(pos, d/2 + i) = cos", "前一半维度"], ["偶数维", "2i+1"]),
}
TOKENS = {
    ("ours", "en"): (["start with ##", "one id per character"], ["▁", "SentencePiece"]),
    ("ours", "zh"): (["以 ## 开头", "一个字一个编号"], ["▁", "SentencePiece"]),
    ("marian", "en"): (["SentencePiece", "▁"], ["##", "one id per character"]),
    ("marian", "zh"): (["SentencePiece", "▁"], ["##", "一个字一个编号"]),
}


@pytest.fixture(scope="module")
def clients(app_client, tiny_marian):
    app = create_app(Settings(model=str(tiny_marian), cache_size=8, access_log=False))
    with TestClient(app) as marian:
        yield {"ours": app_client, "marian": marian}
    app_client.cookies.clear()


def visible(client, path: str, lang: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities and <sup> read inline."""
    client.cookies.set("lang", lang)
    html = client.get(path).text
    main = re.search(r"<main.*?</main>", html, re.S).group(0)
    main = re.sub(r"<script.*?</script>", " ", main, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", main)))


@pytest.mark.parametrize("model", ["ours", "marian"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_position_table_is_explained_as_the_model_lays_it_out(clients, model, lang):
    text = visible(clients[model], "/embeddings", lang)
    present, absent = EMBEDDINGS[model, lang]
    assert [p for p in present if p not in text] == []
    assert [a for a in absent if a in text] == []


@pytest.mark.parametrize("model", ["ours", "marian"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tokenizer_is_explained_as_the_model_cuts_text(clients, model, lang):
    for path in ("/tokens", "/tour?step=2"):
        text = visible(clients[model], path, lang)
        present, absent = TOKENS[model, lang]
        assert [p for p in present if p not in text] == [], path
        assert [a for a in absent if a in text] == [], path


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_output_layer_scores_what_the_model_writes(clients, lang):
    """One score per character for our model; per piece for Marian (a piece may be a whole word)."""
    unit = {"en": ("one score per character", "one score per piece"),
            "zh": ("每个字一个分数", "每个片段一个分数")}[lang]
    for model, (say, not_say) in (("ours", unit), ("marian", unit[::-1])):
        text = visible(clients[model], "/decode", lang)
        assert say in text and not_say not in text, model


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decoder_writes_what_the_model_writes(clients, lang):
    """One character per step for our model; one piece (of one or more characters) for Marian."""
    says = {"en": {"ours": ["writes one character per step", "the Chinese one character at a time",
                            "writes a character,"],
                   "marian": ["writes one piece (one or more characters) per step",
                              "the Chinese one piece (one or more characters) at a time",
                              "writes a piece (one or more characters),"]},
            "zh": {"ours": ["每一步只写一个字。", "一次写出一个字", "每写一个字，"],
                   "marian": ["每一步只写一个片段（一个或几个字）", "一次写出一个片段（一个或几个字）",
                              "每写一个片段（一个或几个字）"]}}[lang]
    for model, phrases in says.items():
        text = " ".join(visible(clients[model], path, lang) for path in ("/decode", "/pipeline", "/kv-cache"))
        assert [p for p in phrases if p not in text] == [], model


def test_the_facts_come_from_the_config_and_the_tokenizers(clients):
    from app.model_facts import model_facts

    ours = model_facts(clients["ours"].app.state.translator)
    marian = model_facts(clients["marian"].app.state.translator)
    assert ours == {"position_layout": "interleaved", "source_pieces": "bpe", "target_pieces": "characters",
                    "layers": ours["layers"], "activation": "ReLU", "norm": "post"}
    assert marian["position_layout"] == "halves" and marian["activation"] == "SiLU"
    assert marian["source_pieces"] == marian["target_pieces"] == "sentencepiece"
    assert marian["layers"] == "2+2" and marian["norm"] == "post"


# What may still say "character" (字) with a Marian model: the English input box's limits, what a
# SentencePiece piece is made of, the reference typed in Chinese characters, and words that merely
# contain 字 (数字 digit, 文字 text, 字母 letter, 字符 character of the input, 汉字 the script).
INPUT_SIDE = {
    "en": [r"\b\d+ characters\b", r"\{chars\} characters", r"\{n\} characters long", "one or more characters",
           "in Chinese characters"],
    "zh": ["一个或几个字", "数字", "文字", "字母", "字符", "汉字"],
}
OUTPUT_AS_CHARACTERS = {"en": r"(?i)\bcharacters?\b", "zh": "字"}
OURS_WRITES_CHARACTERS = {("/", "en"): "writes one Chinese character per time step",
                          ("/", "zh"): "每个时间步写一个字",
                          ("/decode", "en"): "writes one character per step",
                          ("/decode", "zh"): "每一步只写一个字。"}


def page_strings(client, path: str, lang: str) -> str:
    """What a reader can see on the page: the visible text of <main> and every string the page hands
    its JavaScript, except the keys kept for our model alone (``*.characters``)."""
    client.cookies.set("lang", lang)
    html = client.get(path).text
    strings = json.loads(unescape(re.search(r'<script type="application/json" id="i18n">(.*?)</script>',
                                            html, re.S).group(1)))
    shown = [value for key, value in strings.items() if not key.endswith(".characters")]
    return " ".join([visible(client, path, lang), *shown])


@pytest.mark.parametrize("path", ["/", "/decode", "/scale", "/coreference"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_marian_model_s_output_is_not_called_characters(clients, path, lang):
    """A Marian model writes SentencePiece pieces: the x-ray, /decode (with its why-this-token
    part), /scale and /coreference call its output tokens (or pieces), never characters; our
    model's x-ray and /decode still say one character per step."""
    text = page_strings(clients["marian"], path, lang)
    for allowed in INPUT_SIDE[lang]:
        text = re.sub(allowed, " ", text)
    claims = [text[max(0, m.start() - 60):m.end() + 20]
              for m in re.finditer(OUTPUT_AS_CHARACTERS[lang], text)]
    assert claims == []
    if (path, lang) in OURS_WRITES_CHARACTERS:
        assert OURS_WRITES_CHARACTERS[path, lang] in visible(clients["ours"], path, lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tour_says_what_the_decoder_writes(clients, lang):
    """The tour's x-ray and pipeline stops: one character at a time for our model, one piece for Marian."""
    says = {"en": {"ours": "the decoder writes one character at a time",
                   "marian": "the decoder writes one piece (one or more characters) at a time"},
            "zh": {"ours": ["一次写出一个字", "一次写一个字"],
                   "marian": ["一次写出一个片段（一个或几个字）", "一次写一个片段（一个或几个字）"]}}[lang]
    for model, phrases in says.items():
        phrases = [phrases, phrases] if isinstance(phrases, str) else phrases
        for step, phrase in zip(("0", "1"), phrases, strict=True):
            assert phrase in visible(clients[model], f"/tour?step={step}", lang), (model, step)


def test_coreference_ranks_whole_words_of_the_sentence(clients):
    """/coreference's verdict counts words ("word number 3", the most-watched word): with a Marian
    model too they are the sentence's words, not SentencePiece pieces."""
    body = clients["marian"].get("/api/coreference", params={
        "text": "The woman said that she was tired.", "pronoun": "she", "referent": "woman"}).json()
    sentence_words = {"the", "woman", "said", "that", "she", "was", "tired", "."}
    assert body["words"] == len(sentence_words)
    assert {head["top_word"].lower() for head in body["ranking"]} <= sentence_words


@pytest.mark.parametrize("model", ["ours", "marian"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_scale_s_own_count_is_checked_as_the_model_counts(clients, model, lang):
    """/scale: the calculator's count for this model equals its real tensors for our checkpoint; a
    Marian model shares one embedding matrix (and keeps its output bias fixed), so the page gives
    both figures and never says they agree. The layer sentence names both stacks from the config."""
    client = clients[model]
    client.cookies.set("lang", lang)
    html = client.get("/scale").text
    check = re.search(r'id="gpt-check".*?</details>', html, re.S).group(0)
    check = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", check)))
    translator = client.app.state.translator
    real = f"{translator.parameter_counts()['total']:,}"
    agrees = {"en": "the same as adding up its real parameter tensors",
              "zh": "与真实参数张量逐个相加的结果一致"}[lang]
    assert real in check
    assert (agrees in check) == (model == "ours")
    enc, dec = translator.config.n_encoder_layers, translator.config.n_decoder_layers
    layers = {"en": f"This model has {enc} encoder and {dec} decoder layers",
              "zh": f"本模型只有编码器 {enc} 层、解码器 {dec} 层"}[lang]
    assert layers in visible(client, "/scale", lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_sentence_hint_says_how_the_model_cuts_english(clients, lang):
    """Our BPE makes every digit a piece of its own; a Marian model's SentencePiece keeps a number
    such as 2024 in one piece, so the hint under the sentence box says so only for ours."""
    def hint(model: str) -> str:
        clients[model].cookies.set("lang", lang)
        html = clients[model].get("/decode").text
        return unescape(re.search(r'<p class="hint">(.*?)</p>', html, re.S).group(1))

    digits = {"en": "every digit and punctuation mark is one too", "zh": "每个数字和标点也各算一个"}[lang]
    assert digits in hint("ours") and "SentencePiece" not in hint("ours")
    assert digits not in hint("marian") and "SentencePiece" in hint("marian")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_optimizer_settings_are_claimed_only_for_our_model(clients, lang):
    """/training's Adam settings are this project's: our model was trained with them; a Marian
    model was trained by its authors, and the page says so instead."""
    ours = {"en": "This model was trained with exactly these settings",
            "zh": "本模型正是用这组设置训练的"}[lang]
    assert ours in visible(clients["ours"], "/training", lang)
    assert ours not in visible(clients["marian"], "/training", lang)


def test_chinese_sentences_are_joined_without_a_space(clients):
    """Two Chinese sentences of one paragraph follow each other directly (。点…, not 。 点…);
    the English ones keep their space."""
    client = clients["ours"]
    client.cookies.set("lang", "zh")
    html = client.get("/decode").text
    assert re.search(r"。\s+<span class=\"keys-hint\">", html) is None
    assert re.search(r"[。）]\s+点任意候选词元", html) is None
    client.cookies.set("lang", "en")
    assert re.search(r"\. <span class=\"keys-hint\">", client.get("/decode").text)


@pytest.fixture(scope="module")
def untied(tmp_path_factory):
    """A tiny Marian model whose output layer has its own matrix (tie_word_embeddings false)."""
    from tests.marian_folder import make_tiny_marian

    folder = make_tiny_marian(tmp_path_factory.mktemp("untied") / "opus-mt-en-zh-untied",
                              tie_word_embeddings=False)
    app = create_app(Settings(model=str(folder), cache_size=8, access_log=False))
    with TestClient(app) as client:
        yield client


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_untied_output_layer_is_not_called_shared(clients, untied, lang):
    """/pipeline's parameter table and the x-ray's output block say the output layer shares the
    Chinese embedding only when it does; the x-ray's script learns it from the page's config."""
    shared = {"en": "shares the Chinese embedding", "zh": "与中文嵌入共享权重"}[lang]
    assert shared in visible(clients["ours"], "/pipeline", lang)
    assert shared not in visible(untied, "/pipeline", lang)
    assert untied.app.state.translator.config.tie_output is False
    for client, tied in ((clients["ours"], True), (untied, False)):
        page_data = re.search(r'id="page-data">(.*?)</script>', client.get("/").text).group(1)
        data = json.loads(unescape(page_data))
        assert data["config"]["tie_output"] is tied
