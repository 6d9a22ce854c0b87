"""Greedy traces start from a CTranslate2 int8 draft that our own model checks. Whatever the draft
proposes, the trace must be the one our model gives decoding step by step: the same tokens and
every number equal (model/translator.py: Translator._decode_and_replay)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from model.decoding import DecodingOptions
from model.transformer import BOS_ID, EOS_ID, PAD_ID
from model.translator import Translator

PROBE = Path(__file__).resolve().parents[2] / "model" / "training" / "probe.tsv"


def with_drafter(translator: Translator, drafter) -> Translator:
    """Another translator on the same weights (session fixtures stay as they are)."""
    other = Translator(translator.model, translator.english, translator.chinese)
    other.set_drafter(drafter)
    return other


def shown(trace) -> dict:
    data = trace.to_dict()
    data.pop("model_ms")  # a time, not a number from the model
    return data


class Scripted:
    """Proposes what ``script(source_ids, prefix, max_len)`` returns, and counts the calls."""

    def __init__(self, script):
        self.script = script
        self.calls = 0
        self.attempts: list[int] = []

    def propose(self, source_ids, prefix, max_len, attempt=0):
        self.calls += 1
        self.attempts.append(attempt)
        return self.script(list(source_ids), list(prefix), max_len)


def garbage(vocab_size: int, seed: int):
    rng = random.Random(seed)
    ids = [i for i in range(vocab_size) if i not in (PAD_ID, BOS_ID, EOS_ID)]
    return lambda source, prefix, max_len: (prefix + rng.choices(ids, k=rng.randint(0, 2 * max_len)))[
        :max_len]


def test_shipped_drafts_give_exactly_the_step_by_step_trace(shipped_translator):
    drafted = with_drafter(shipped_translator, shipped_translator.drafter())
    assert drafted.drafter() is not None, "CTranslate2 is in the lock: the shipped model drafts"
    stepwise = with_drafter(shipped_translator, None)
    lines = PROBE.read_text(encoding="utf-8").splitlines()[1:]
    texts = [line.split("\t")[1] for line in lines[::6]] + [
        "The cat sits on the mat.",
        "My brother bought three apples at the market on Monday, and he ate two of them before "
        "lunch because he was very hungry after the long walk.",
    ]
    for text in texts:
        assert shown(drafted.trace(text)) == shown(stepwise.trace(text)), text
        assert drafted.translate(text) == stepwise.translate(text), text
    options = DecodingOptions(max_len=5)  # the draft is cut by max_len
    assert shown(drafted.trace(texts[-1], options)) == shown(stepwise.trace(texts[-1], options))


@pytest.mark.parametrize("case", ["garbage", "nothing", "none", "too long", "wrong prefix"])
@pytest.mark.parametrize("options,forced", [
    (DecodingOptions(max_len=12), None),
    (DecodingOptions(max_len=3), None),
    (DecodingOptions(max_len=10), ["猫", "坐"]),
])
def test_any_draft_gives_our_models_greedy_trace(tiny_translator, case, options, forced):
    vocab = tiny_translator.chinese.vocab_size
    script = {
        "garbage": garbage(vocab, seed=len(case)),
        "nothing": lambda source, prefix, max_len: prefix,  # <eos> at once
        "none": lambda source, prefix, max_len: None,
        "too long": lambda source, prefix, max_len: (prefix + [5] * 3 * max_len)[:max_len],
        "wrong prefix": lambda source, prefix, max_len: [5, *prefix],
    }[case]
    drafter = Scripted(script)
    text = "The cat sits on the mat."
    expected = with_drafter(tiny_translator, None).trace(text, options, forced_prefix=forced)
    assert shown(with_drafter(tiny_translator, drafter).trace(text, options, forced)) == shown(expected)
    assert drafter.calls >= 1
    # the first guess is the fast one's; each later guess follows a correction by our model
    assert drafter.attempts[0] == 0 and drafter.attempts == sorted(set(drafter.attempts))


def test_a_draft_that_runs_past_the_end_is_cut_where_our_model_ends(shipped_translator):
    text = "The cat sits on the mat."
    expected = with_drafter(shipped_translator, None).trace(text)
    assert expected.finished
    overlong = Scripted(lambda source, prefix, max_len: expected.target_ids + [5, 6, 7])
    assert shown(with_drafter(shipped_translator, overlong).trace(text)) == shown(expected)
    assert overlong.calls == 1  # corrected to <eos> where it erred: no second proposal


def test_a_right_draft_is_checked_once(shipped_translator):
    text = "I like green tea."
    expected = with_drafter(shipped_translator, None).trace(text)
    right = Scripted(lambda source, prefix, max_len: expected.target_ids)
    assert shown(with_drafter(shipped_translator, right).trace(text)) == shown(expected)
    assert right.attempts == [0]


@pytest.mark.parametrize("options", [
    DecodingOptions(strategy="beam", beam_size=3, max_len=12),
    DecodingOptions(strategy="sample", seed=3, max_len=12),
    DecodingOptions(use_cache=False, max_len=12),  # the uncached decoder is what was asked for
])
def test_only_cached_greedy_decoding_is_drafted(tiny_translator, options):
    drafter = Scripted(lambda source, prefix, max_len: None)
    text = "The dog runs in the park."
    trace = with_drafter(tiny_translator, drafter).trace(text, options)
    assert drafter.calls == 0
    assert shown(trace) == shown(with_drafter(tiny_translator, None).trace(text, options))


class _Answer:
    def __init__(self, hypotheses):
        self.hypotheses = hypotheses


class _Engine:
    """Stands in for a CTranslate2 copy that fails, or answers a token we do not have."""

    def __init__(self, answer):
        self.answer = answer

    def translate_batch(self, *args, **kwargs):
        if isinstance(self.answer, Exception):
            raise self.answer
        return [_Answer([self.answer])]


@pytest.mark.parametrize("answer", [RuntimeError("engine failed"), ["猫", "not a character"]])
def test_a_failing_copy_proposes_nothing_and_decoding_proper_takes_over(tiny_translator, answer):
    from model.adapters.ct2 import Drafter

    drafter = Drafter(tiny_translator)
    drafter.engines = [_Engine(answer)]
    assert drafter.propose(tiny_translator.source_ids("We are students."), [], 12) is None
    text, options = "We are students.", DecodingOptions(max_len=12)
    expected = with_drafter(tiny_translator, None).trace(text, options)
    assert shown(with_drafter(tiny_translator, drafter).trace(text, options)) == shown(expected)
