"""The measures: batched greedy and beam translations, BLEU and chrF (sacrebleu, ``tokenize="zh"``),
and the repetition rate. Training scores its dev set with them after every epoch; the evaluator
(``evaluate.py``) and the timeline packer (``snapshots.py``) score held-out splits with them.
"""

from __future__ import annotations

from model.decoding import beam_batch, greedy_batch, pad
from model.tokenizer import MAX_SOURCE_TOKENS, MAX_TARGET_TOKENS, ChineseTokenizer, EnglishTokenizer
from model.transformer import Transformer

MAX_UNIT = 4  # longest repeated span the repetition measure looks for, in characters
MIN_REPEATS = 3


# -- repetition --------------------------------------------------------------------------------


def repeated_runs(text: str) -> set[str]:
    """Every run in ``text`` of one span of 1–4 characters written 3 or more times in a row.

    A run is returned as its span written three times (``"偷偷偷"``, ``"华华华"``, ``"我的我的我的"``);
    longer runs contain these, so ``"偷偷偷偷"`` gives ``{"偷偷偷"}`` (and ``"偷偷偷偷偷偷"`` adds
    ``"偷偷偷偷偷偷"``: the span 偷偷 three times). Only spans with at least one letter or Chinese
    character count (``str.isalpha``): the 000 of 5000 or a row of dots is not a repetition.
    """
    runs = set()
    for size in range(1, MAX_UNIT + 1):
        for start in range(len(text) - MIN_REPEATS * size + 1):
            unit = text[start : start + size]
            has_letter = any(character.isalpha() for character in unit)
            if has_letter and text[start : start + MIN_REPEATS * size] == unit * MIN_REPEATS:
                runs.add(unit * MIN_REPEATS)
    return runs


def is_repetitive(output: str, reference: str) -> bool:
    """True when ``output`` has a run (see ``repeated_runs``) that ``reference`` does not contain.

    The reference decides what is legitimate: 哈哈哈 counts only when the reference lacks it.
    """
    return any(run not in reference for run in repeated_runs(output))


def repetition_rate(outputs: list[str], references: list[str]) -> float:
    """Percent of outputs that are repetitive (``is_repetitive``) against their own reference."""
    if not outputs:
        return 0.0
    flagged = sum(is_repetitive(o, r) for o, r in zip(outputs, references, strict=True))
    return round(100.0 * flagged / len(outputs), 2)


def translate_batch(
    model: Transformer, english: EnglishTokenizer, chinese: ChineseTokenizer, sentences: list[str],
    batch_size: int = 64,
) -> list[str]:
    outputs = []
    encoded = [english.encode(s)[:MAX_SOURCE_TOKENS] for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    results: dict[int, str] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        ids = greedy_batch(model, pad([encoded[i] for i in chunk]), max_len=MAX_TARGET_TOKENS)
        for index, tokens in zip(chunk, ids, strict=True):
            results[index] = chinese.decode(tokens)
    outputs = [results[i] for i in range(len(sentences))]
    return outputs


def bleu_chrf(hypotheses: list[str], references: list[str]) -> tuple[float, float]:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh").score
    chrf = sacrebleu.corpus_chrf(hypotheses, [references]).score
    return round(bleu, 2), round(chrf, 2)


def translate_beam(
    model: Transformer, english: EnglishTokenizer, chinese: ChineseTokenizer, sentences: list[str],
    beam_size: int = 4, batch_size: int = 32,
) -> list[str]:
    """Beam-search translations of ``sentences``, batched by source length."""
    encoded = [english.encode(s)[:MAX_SOURCE_TOKENS] for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    results: dict[int, str] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        ids = beam_batch(model, pad([encoded[i] for i in chunk]), beam_size)
        for index, tokens in zip(chunk, ids, strict=True):
            results[index] = chinese.decode(tokens)
    return [results[i] for i in range(len(sentences))]
