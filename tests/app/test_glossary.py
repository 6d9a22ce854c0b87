"""app/locales/glossary.json: one Chinese form per term, and no stray English in the Chinese pages."""

from __future__ import annotations

import json
import re

import pytest

from app import i18n
from app.i18n import COMMON, page_strings

GLOSSARY = json.loads((i18n.LOCALES / "glossary.json").read_text(encoding="utf-8"))
TERMS: dict[str, dict] = GLOSSARY["terms"]
ALLOWED = GLOSSARY["allowed_english"]
EXEMPT = {key for key in GLOSSARY["exempt_keys"] if key != "about"}
PAGES = [COMMON, *i18n.pages()]
ZH = {(page, key): text for page in PAGES for key, text in page_strings("zh", page).items()}

# Latin-letter "words": letters, digits, hyphens, underscores, with at least one letter
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]*")
PHRASES = sorted((p for group, words in ALLOWED.items() if group != "about" for p in words),
                 key=len, reverse=True)


def glosses() -> dict[str, set[str]]:
    """Chinese form → the English accepted right after it in （…）, spelled as listed (one casing:
    后置归一化（post-norm）, never （Post-Norm））."""
    accepted: dict[str, set[str]] = {}
    for term in TERMS.values():
        for zh in filter(None, (term["zh"], term.get("full"))):
            accepted.setdefault(zh, set()).update([term["en"], *term.get("gloss", [])])
    for zh, extra in GLOSSARY["gloss"].items():
        if zh != "about":
            accepted.setdefault(zh, set()).update(extra)
    return accepted


GLOSSES = glosses()


def without_glosses(text: str) -> str:
    """``层归一化（LayerNorm）`` → ``层归一化``: an English gloss after the Chinese term is allowed."""
    for form in sorted(GLOSSES, key=len, reverse=True):
        for gloss in GLOSSES[form]:
            text = text.replace(f"{form}（{gloss}）", form)
    return text


def prose(text: str) -> str:
    """What a Chinese reader reads as Chinese prose: placeholders, <tokens>, quoted English, titles
    in 《》, command-line flags, file names and module paths (eval.json, model.training.evaluate,
    /api/scale) removed."""
    text = re.sub(r"\{\w*\}", " ", text)
    text = re.sub(r"<[a-z]+>|--[\w\-]+", " ", text)
    text = re.sub(r"“[\x00-\x7f]*”|《[^》]*》", " ", text)
    text = re.sub(r"[\w\-]*[/.][\w\-/.]*\w", " ", text)
    return without_glosses(text)


def english_outside_the_list(text: str) -> list[str]:
    text = prose(text)
    for phrase in PHRASES:
        text = re.sub(r"(?<![A-Za-z0-9_\-])" + re.escape(phrase) + r"(?![A-Za-z0-9_\-])", " ", text)
    words = [w for w in WORD.findall(text) if re.search(r"[A-Za-z]", w)]
    # symbols: one letter (x, Q, T, O), an identifier with an underscore (d_model, W_Q), or a
    # number times a letter (8d² is 8·d²)
    return [w for w in words if not (len(w) == 1 or "_" in w or re.fullmatch(r"\d+[A-Za-z]", w))]


def variants_used(text: str) -> list[str]:
    text = without_glosses(re.sub(r"\{\w*\}", "{}", text))  # {warmup} is a name, not a word
    found = []
    for name, term in TERMS.items():
        found += [f"{variant!r} (say {term['zh']!r}: {name})" for variant in term["variants_to_avoid"]
                  if variant in text]
        found += [f"{m.group(0)!r} (say {term['zh']!r}: {name})"
                  for pattern in term.get("avoid_patterns", []) for m in re.finditer(pattern, text)]
    return found


def test_the_glossary_is_well_formed_and_every_chinese_term_is_used():
    everything = " ".join(ZH.values())
    for name, term in TERMS.items():
        assert {"en", "zh", "variants_to_avoid"} <= set(term), name
        assert term["zh"] not in term["variants_to_avoid"], name
        for pattern in term.get("avoid_patterns", []):
            assert not re.search(pattern, term["zh"]), (name, pattern)
        if name not in ("stack",):  # "编码器 / 解码器" names a choice of words, not one string
            assert term["zh"] in everything, f"{name}: {term['zh']!r} is in no Chinese string"
    # no Chinese form is another term's variant
    forms = {term["zh"] for term in TERMS.values()}
    for name, term in TERMS.items():
        assert not forms & set(term["variants_to_avoid"]), name


@pytest.mark.parametrize("page", PAGES)
def test_chinese_strings_use_the_glossary_form_of_every_term(page):
    wrong = {key: found for (p, key), text in ZH.items() if p == page
             if (found := variants_used(text))}
    assert wrong == {}


@pytest.mark.parametrize("page", PAGES)
def test_chinese_strings_leave_no_english_outside_the_allowed_list(page):
    stray = {key: words for (p, key), text in ZH.items() if p == page and key not in EXEMPT
             if (words := english_outside_the_list(text))}
    assert stray == {}


STIFF = {phrase: better for phrase, better in GLOSSARY["stiff_phrases"].items() if phrase != "about"}
# a Chinese term followed by an English gloss: 后置归一化（post-norm）
GLOSSED = re.compile(r"([\u4e00-\u9fff][\u4e00-\u9fff +&]*)（([A-Za-z][A-Za-z &\-]*)）")


def renderings(texts) -> dict[str, set[str]]:
    """Each English gloss (lower-cased) → the ways the Chinese strings write it: the Chinese term
    before it (its last four characters or more, as far as the glossary knows the term) and the
    English's own spelling."""
    found: dict[str, set[str]] = {}
    known = sorted(GLOSSES, key=len, reverse=True)
    for text in texts:
        for chinese, english in GLOSSED.findall(text):
            term = next((form for form in known if chinese.endswith(form)), chinese[-4:])
            found.setdefault(english.lower(), set()).add(f"{term}（{english}）")
    return found


def test_each_glossed_term_has_one_chinese_rendering_and_one_english_spelling():
    """The same English term in （…） after two different Chinese words, or spelled two ways
    (Pre-Norm / pre-norm), is one idea with two names."""
    assert {gloss: forms for gloss, forms in renderings(ZH.values()).items() if len(forms) > 1} == {}


@pytest.mark.parametrize("page", PAGES)
def test_chinese_strings_avoid_the_stiff_phrases(page):
    stiff = {key: [f"{p!r} (say {STIFF[p]!r})" for p in STIFF if p in text]
             for (p_, key), text in ZH.items() if p_ == page}
    assert {key: found for key, found in stiff.items() if found} == {}


def test_one_line_does_not_mix_a_terms_short_and_full_forms():
    """残差 + 归一化 → … → 残差连接 + 层归一化 in one line reads as two things; the full form may
    only follow the short one as its gloss: 残差 + 归一化（残差连接 + 层归一化）."""
    mixed = {}
    for (page, key), text in ZH.items():
        for name, term in TERMS.items():
            if "full" in term:
                rest = text.replace(f"{term['zh']}（{term['full']}）", "")
                if term["full"] in rest and term["zh"] in rest.replace(term["full"], ""):
                    mixed[page, key] = name
    assert mixed == {}


def test_a_page_that_uses_a_short_form_spells_out_the_full_form():
    """残差 + 归一化 is short for 残差连接 + 层归一化: each page that uses it says the long form too."""
    for name, term in TERMS.items():
        if "full" not in term:
            continue
        for page in PAGES:
            texts = " ".join(page_strings("zh", page).values())
            if term["zh"] in texts.replace(term["full"], ""):
                assert term["full"] in texts, (name, page)


def test_the_checks_catch_what_they_are_for():
    """The checks themselves: each of these old strings fails, each rewritten one passes."""
    assert variants_used("2 加和归一")
    assert variants_used("屏蔽：<pad> 列，挡住不看")
    assert variants_used("打开第 {layer} 层，头 {head}") and variants_used("第 {layer} 层第 {head} 头")
    assert not variants_used("{h} 个头，每头 {k} 个数") and not variants_used("第 {n} 个头")
    assert variants_used("行是提问的词（查询）") and not variants_used("行是提问的词元（查询）")
    assert variants_used("④ Softmax → 权重") and not variants_used("④ softmax → 权重")
    assert not variants_used("再做层归一化（LayerNorm）") and variants_used("LayerNorm 之后")
    assert english_outside_the_list("熵 {h} nats") == ["nats"]
    assert english_outside_the_list("本轮训练：{epochs} 个 epoch") == ["epoch"]
    assert english_outside_the_list("‖sublayer(x)‖：子层加上的量") == ["sublayer"]
    assert english_outside_the_list("d_model 加上本项目的 warmup") == ["warmup"]
    assert english_outside_the_list("强制之后 vs 原来") == ["vs"]
    assert english_outside_the_list("推测解码（speculative decoding）；读到“she”时；W_Q、x、T") == []
    assert english_outside_the_list("由 python -m model.training.evaluate 写出 eval.json") == []
    assert variants_used("本轮训练：{epochs} 轮") and variants_used("训练周期") and variants_used("轮次")
    assert not variants_used("本次训练：{epochs} 轮") and not variants_used("每轮之后")
    assert variants_used("英语子词") and variants_used("加上偏移 β") and variants_used("每个快照 3 兆字节")
    assert variants_used("前置归一化（Pre-Norm）") and not variants_used("前置归一化（pre-norm）")
    assert english_outside_the_list("BLEU（sacrebleu）") == ["sacrebleu"]
    assert len(renderings(["A 是后置归一化（post-norm）", "B 是后归一（post-norm）"])["post-norm"]) == 2
    assert len(renderings(["前置归一化（Pre-Norm）", "前置归一化（pre-norm）"])["pre-norm"]) == 2
    assert len(renderings(["前置归一化（pre-norm）", "即前置归一化（pre-norm）"])["pre-norm"]) == 1
