"""Both languages say the same thing: for every key, the facts a sentence carries — its numbers,
{placeholders}, named tokens such as <bos>, code (file names, commands, flags, API paths) and
symbols (γ, β, √) — are the same in English and in Chinese, so a dropped sentence or a changed
claim shows up as a difference."""

from __future__ import annotations

import re

import pytest

from app import i18n
from app.i18n import COMMON, page_strings

PAGES = [COMMON, *i18n.pages()]

PLACEHOLDER = re.compile(r"\{(\w*)\}")
TOKEN = re.compile(r"<(?:bos|eos|pad|unk)>")
CODE = re.compile(r"(?:python -m |--)[\w.\-]*[\w\-]|[\w\-/]+\.(?:json|tsv|py|md|safetensors|txt)\b"
                  r"|/api/[\w/\-{}]*")
SYMBOL = re.compile(r"[αβγδεθλμσ√∞∑]")
# a number written with digits (25, 0.1, 1,057), with its magnitude: 618M and 6.18 亿 are one
# number, 175B and 1750 亿 another; not a digit inside a name (GPT-3, T5, FP16, W_Q) or 2-D
NUMBER = re.compile(r"(?<![\w.\-])(\d+(?:[.,]\d+)*)\s*(M|B|K|million|billion|亿|万)?(?![A-Za-z0-9])")
MAGNITUDE = {"K": 1e3, "万": 1e4, "M": 1e6, "million": 1e6, "亿": 1e8, "B": 1e9, "billion": 1e9}


def numbers(text: str) -> set[str]:
    text = PLACEHOLDER.sub(" ", text)
    text = re.sub(r"[A-Za-z]+[\-_]?\d+(?:\.\d+)?[A-Za-z]*|\d-D\b", " ", text)
    found = set()
    for digits, unit in NUMBER.findall(text):
        digits = digits.replace(",", "")
        found.add(f"{float(digits) * MAGNITUDE[unit]:.3g}" if unit else digits)
    return found


def facts(text: str) -> dict[str, object]:
    """What a sentence commits to, beyond its wording."""
    return {
        "placeholders": sorted(set(PLACEHOLDER.findall(text))),
        "tokens": sorted(set(TOKEN.findall(text))),
        "code": sorted(set(CODE.findall(text))),
        "symbols": sorted(set(SYMBOL.findall(text))),
        "numbers": sorted(numbers(text)),
    }


def pairs():
    for page in PAGES:
        en, zh = page_strings("en", page), page_strings("zh", page)
        for key in sorted(en.keys() & zh.keys()):
            yield page, key, en[key], zh[key]


def differences(en: str, zh: str) -> dict[str, tuple]:
    a, b = facts(en), facts(zh)
    return {kind: (a[kind], b[kind]) for kind in a if a[kind] != b[kind]}


@pytest.mark.parametrize("page", PAGES)
def test_both_languages_carry_the_same_facts(page):
    found = {key: diff for p, key, en, zh in pairs() if p == page if (diff := differences(en, zh))}
    assert found == {}


def test_both_languages_have_the_same_keys():
    for page in PAGES:
        assert page_strings("en", page).keys() == page_strings("zh", page).keys(), page


def test_the_check_catches_what_it_is_for():
    """The four divergences issue 58 found, in their old wording, each fail."""
    # a dropped sentence: the row label "<bos> → 猫"
    assert differences("Row 1 is <bos> → 猫: what the model read before writing 猫.", "第一行。")
    assert differences("{a} and {b}", "{a}")  # a dropped placeholder
    assert differences("BLEU 0–100 after 25 steps", "BLEU 0–100，25 步之后")  == {}
    assert differences("eval.json from python -m model.training.evaluate", "eval.json") != {}
    assert differences("γ and β", "γ") != {}
    assert numbers("GPT-3 has 96 layers and d_model 12,288") == {"96", "12288"}
    assert numbers("about 175B in all; 2-D") == numbers("约 1750 亿；二维") == {"1.75e+11"}
    assert differences("618M", "6.18 亿") == {} and differences("1.21B", "12.08 亿") == {}
    assert differences("stage 1", "第 2 阶段")
