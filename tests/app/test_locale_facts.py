"""What the pages state is right, in both languages: each claim that was wrong once is gone, and
the right idea is there instead (issue 32's nine points, and the wording fixes that go with them)."""

from __future__ import annotations

import re

import pytest

from app.i18n import page_strings

# (page, key, language) → (words of the wrong claim that must be gone, words of the right idea)
FACTS = {
    # 1. GPT vs BERT differ in training objective and stack too, not only in the mask
    ("tokens", "tokens.gpt_bert", "en"): (["are the whole difference"],
                                          ["not the whole difference", "next token", "masked",
                                           "encoder layers", "decoder layers"]),
    ("tokens", "tokens.gpt_bert", "zh"): (["正是两大著名模型家族的全部区别"],
                                          ["并不是全部区别", "训练目标", "掩码语言建模", "下一个词元",
                                           "编码器层", "解码器层"]),
    # 2. post-norm: the LayerNorm after each addition still scales the gradient
    ("decode", "res.gradient", "en"): (["no sublayer can shrink"],
                                       ["post-norm", "LayerNorm", "pre-norm", "scales the signal"]),
    ("decode", "res.gradient", "zh"): (["任何子层都缩不小"],
                                       ["后置归一化", "层归一化", "前置归一化", "放大或缩小"]),
    # 3. DeepNorm scales up the shortcut x·α and initialises the sublayers smaller
    # and (issue 58) only the FFN, W_V and W_O start smaller; queries and keys keep theirs
    ("scale", "scale.imp.deepnorm", "en"): (["residual branch up", "initialise the sub-layers' weights"],
                                            ["shortcut", "x·α", "α > 1", "smaller", "value and output",
                                             "queries and keys keep"]),
    ("scale", "scale.imp.deepnorm", "zh"): (["放大残差支路", "把子层的权重初始化得更小"],
                                            ["捷径", "x·α", "α > 1", "更小", "值和输出的投影",
                                             "查询和键的投影保持不变"]),
    # 4. Transformer-XL caches the previous segment; the Compressive Transformer compresses
    ("scale", "scale.imp.memory", "en"): (["Compressed memory (Transformer-XL"],
                                          ["previous segment", "cached", "Compressive Transformer"]),
    ("scale", "scale.imp.memory", "zh"): (["压缩记忆（Transformer-XL"],
                                          ["上一段", "缓存", "Compressive Transformer"]),
    # 5. RoPE: only the position-dependent part depends on relative distance
    ("scale", "scale.imp.rope", "en"): (["their dot product depends only on relative distance"],
                                        ["position-dependent part", "how far apart"]),
    ("scale", "scale.imp.rope", "zh"): (["点积自然只依赖相对距离"], ["与位置有关的部分", "相隔多远"]),
    # 6. MoE: more parameters at about the same compute per token
    ("scale", "scale.imp.moe", "en"): (["less work per token"], ["same compute per token"]),
    ("scale", "scale.imp.moe", "zh"): (["更少的每词计算"], ["计算量却基本不变"]),
    # 7. mixed precision does not halve weights + optimiser state; activations shrink
    ("scale", "scale.imp.mixed_precision", "en"): (["— about half the memory"],
                                                   ["does not halve", "master copy", "activations"]),
    ("scale", "scale.imp.mixed_precision", "zh"): (["显存大约减半"], ["并不减半", "主副本", "激活值"]),
    # 8. the learned relative-position bias is T5's; DeBERTa: disentangled attention
    ("scale", "scale.imp.relative", "en"): (["(T5, DeBERTa): learn a bias"],
                                            ["T5 learns a bias", "DeBERTa", "disentangled"]),
    ("scale", "scale.imp.relative", "zh"): (["（T5、DeBERTa）：直接学习"],
                                            ["T5 为", "偏置", "DeBERTa", "解耦注意力"]),
    # 9. it is the variance of the dot product that grows with d_k
    ("attention", "stage.scale_help", "en"): (["Dot products grow with the number of dimensions"],
                                              ["variance d_k", "variance back to 1"]),
    ("attention", "stage.scale_help", "zh"): (["维度越多，点积越大"], ["方差就是 d_k", "方差拉回 1"]),
    # issue 58. 1: under beam search a chosen token may be no layer's top candidate
    ("decode", "why.never_top", "en"): (["(it was sampled or forced)"], ["beam search", "whole path"]),
    ("decode", "why.never_top", "zh"): (["（它是采样或强制得到的）"], ["束搜索", "整条路径"]),
    # 2. box 7 (Linear + softmax) comes after the whole stack, not inside a decoder layer
    ("decode", "decode.intro", "en"): (["seven things"], ["six parts", "after the whole stack"]),
    ("decode", "decode.intro", "zh"): (["七件事"], ["六个部分", "整个解码器之后"]),
    ("decode", "decode.fold.boxes", "en"): ([], ["boxes 1–6", "box 7 comes after the last layer"]),
    ("decode", "decode.fold.boxes", "zh"): ([], ["第 1–6 格", "第 7 格在最后一层之后"]),
    # 3. the FFN holds half of a decoder layer's parameters, two-thirds of an encoder layer's
    ("scale", "scale.design.ffn.a", "en"): (["most of each layer's parameters"],
                                            ["two-thirds of an encoder layer", "half of a decoder layer"]),
    ("scale", "scale.design.ffn.a", "zh"): (["是每层参数最多的部分"],
                                            ["编码器层参数的三分之二", "解码器层的一半"]),
    # 4. GPT: decoder-only, pre-norm, learned positions, GELU; GPT-4 unpublished
    ("scale", "scale.intro", "en"): (["The architecture is nearly the same"],
                                     ["decoder-only", "pre-norm", "learned positions", "GELU"]),
    ("scale", "scale.intro", "zh"): (["架构几乎一样"], ["只有解码器", "前置归一化", "位置向量", "GELU"]),
    ("tour", "tour.scale.text", "en"): (["make GPT-3 and GPT-4"],
                                        ["decoder-only", "pre-norm", "never published"]),
    ("tour", "tour.scale.text", "zh"): (["就是 GPT-3、GPT-4"], ["只有解码器", "前置归一化", "从未公开"]),
    # 5. greedy_fast: a float32 copy re-drafts; after three checks, step by step
    ("decode", "decode.explain.greedy_fast", "en"): (["the guessing goes on from it"],
                                                     ["float32", "three", "step by step instead"]),
    ("decode", "decode.explain.greedy_fast", "zh"): (["再从那里接着猜"],
                                                     ["float32", "三次", "一步一步地解码"]),
    # 6. (DeepNet: the deepnorm entries above, issue 32's third point)
    # 7. the Chinese tokenizer is BLEU's; chrF works on characters
    ("training", "training.eval.intro", "en"): (["(sacrebleu, Chinese tokenization)"],
                                                ["BLEU counts matching words after",
                                                 "chrF counts matching character"]),
    ("training", "training.eval.intro", "zh"): (["（sacrebleu，中文分词）"],
                                                ["BLEU 先用", "chrF 数相同的字符片段"]),
    # the two languages said different things: a forced token can be at any step; learners
    # type English titles; the probe drops the full stop, not any final punctuation
    ("xray", "xray.result.forced", "zh"): (["开头是"], ["含有你强制的词元"]),
    ("training", "training.eval.learner_text", "zh"): (["帕特尔医生"], ["“Dr. Patel”", "“Mrs. Walsh”"]),
    ("training", "training.eval.no_stops", "zh"): (["句末标点"], ["句号"]),
    ("training", "training.eval.category.no_stop", "zh"): (["无标点"], ["句号"]),
}


@pytest.mark.parametrize(("page", "key", "lang"), list(FACTS), ids=[f"{k}-{lang}" for _, k, lang in FACTS])
def test_the_wrong_claim_is_gone_and_the_right_idea_is_there(page, key, lang):
    text = page_strings(lang, page)[key]
    gone, present = FACTS[(page, key, lang)]
    assert [words for words in gone if words in text] == []
    assert [words for words in present if words not in text] == []


def all_zh() -> dict[str, str]:
    from app import i18n

    return {key: text for page in ["common", *i18n.pages()]
            for key, text in page_strings("zh", page).items()}


def test_the_chinese_wording_a_learner_stumbled_on_is_gone():
    zh = all_zh()
    assert zh["site.title"] == "透视 Transformer"
    assert "只懂英文" not in zh["form.hint"] and "译成中文" in zh["form.hint"]  # it writes Chinese
    assert "延伸出来的那个" not in zh["decode.beam_help"]
    stumbles = ["加和归一", "离散度", "图样", "家谱树", "堆栈", "Transformer 内部", " vs "]
    assert {key: s for key, text in zh.items() for s in stumbles if s in text} == {}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_dense_explanations_lead_with_the_idea(lang):
    decode = page_strings(lang, "decode")
    # greedy first says what it is; how this server speeds it up is a separate, later note
    greedy, fast = decode["decode.explain.greedy"], decode["decode.explain.greedy_fast"]
    assert "int8" not in greedy and "int8" in fast
    assert len(greedy) < (200 if lang == "en" else 80)
    # attribution: the question it answers comes before the two methods
    attribution = decode["why.attr_help"]
    idea = "pushed this output token's probability up" if lang == "en" else "把这个输出词元的概率推高了"
    method = "Gradient × input" if lang == "en" else "梯度 × 输入"
    assert attribution.index(idea) < attribution.index(method)
    # the tour's training stop explains each word it uses
    tour = page_strings(lang, "tour")["tour.training.text"]
    for word in (["teacher forcing", "gradient clipping", "warmup"] if lang == "en"
                 else ["教师强制", "梯度裁剪", "预热"]):
        assert word in tour
    assert (re.search(r"\(teacher forcing\)", tour) if lang == "en" else "（这叫教师强制）" in tour)


def test_the_decode_page_shows_the_greedy_note(app_client):
    app_client.cookies.clear()  # a cookie another test left must not decide the language
    app_client.cookies.set("lang", "zh")
    try:
        html = app_client.get("/decode").text
    finally:
        app_client.cookies.clear()  # nor may this one decide another test's
    assert page_strings("zh", "decode")["decode.explain.greedy_fast"] in html


def test_the_scale_table_reads_in_chinese(app_client):
    """The calculator's shapes carry no English; experts are named in the reader's language."""
    app_client.cookies.clear()  # a cookie another test left must not decide the language
    app_client.cookies.set("lang", "zh")
    try:
        rows = app_client.get("/api/scale", params={"experts": 8, "active_experts": 2}).json()["rows"]
        encoder_decoder = app_client.get("/api/scale",
                                         params={"architecture": "encoder_decoder"}).json()["rows"]
        untied = app_client.get("/api/scale", params={"tied_output": False}).json()["rows"][-1]
    finally:
        app_client.cookies.clear()  # nor may this one decide another test's
    shapes = " ".join(row["shape"] for row in rows)
    assert not re.search(r"[A-Za-z]", shapes), shapes
    ffn = next(row for row in rows if row["key"] == "ffn")
    assert ffn["shape"].startswith("8 × (") and ffn["label"].endswith("8 个专家")
    assert not re.search(r"[A-Za-z]", " ".join(row["shape"] for row in encoder_decoder))
    assert untied["label"] == page_strings("zh", "scale")["scale.row.output_untied"]
