"""The quality figures in the shipped eval.json belong to the shipped weights.

The fixture holds 100 pairs from the shipped model's own Tatoeba test split (written by
``python -m model.training.evaluate --write-fixture``); ``model.training.evaluate`` records their
greedy BLEU and chrF in ``eval.json``. Here they are recomputed from the weights, one sentence at a
time through the same ``generate`` the app uses, without the data folder.
"""

from pathlib import Path

import sacrebleu
import torch

from model.decoding import DecodingOptions, generate
from model.tokenizer import MAX_SOURCE_TOKENS, MAX_TARGET_TOKENS
from model.training.evaluate import file_sha256, read_fixture

FIXTURE = Path(__file__).resolve().parents[2] / "model" / "training" / "heldout_tatoeba_100.tsv"
TOLERANCE = 0.5  # BLEU / chrF points: float noise between machines, not a different model
# The least the shipped weights must reach on the fixture, measured here (greedy): the first
# shipped model scored 43.1. A broken or much worse checkpoint fails, whatever eval.json says.
BLEU_FLOOR = 35.0
RERUN = "rerun `python -m model.training.evaluate --data ../shared/data` on the shipped checkpoint"


def test_fixture_figures_match_the_shipped_weights(shipped_translator):
    recorded = shipped_translator.evaluation.get("fixture")
    assert recorded, f"model/checkpoints/eval.json has no 'fixture' figures: {RERUN}"
    assert recorded["sha256"] == file_sha256(FIXTURE), f"the fixture changed since eval.json: {RERUN}"
    assert recorded["in_tatoeba_test"], "the fixture is not from this checkpoint's Tatoeba test split"
    pairs = read_fixture(FIXTURE)
    assert len(pairs) == recorded["pairs"] == 100

    model, english, chinese = (
        shipped_translator.model, shipped_translator.english, shipped_translator.chinese
    )
    options = DecodingOptions(max_len=MAX_TARGET_TOKENS)
    outputs = []
    for pair in pairs:
        src = torch.tensor([english.encode(pair.english)[:MAX_SOURCE_TOKENS]])
        outputs.append(chinese.decode(generate(model, src, options).tokens))
    references = [[p.chinese for p in pairs]]
    bleu = sacrebleu.corpus_bleu(outputs, references, tokenize="zh").score
    chrf = sacrebleu.corpus_chrf(outputs, references).score

    assert bleu >= BLEU_FLOOR, f"greedy BLEU {bleu:.1f} on the held-out fixture"
    assert abs(bleu - recorded["greedy"]["bleu"]) <= TOLERANCE, (bleu, recorded)
    assert abs(chrf - recorded["greedy"]["chrf"]) <= TOLERANCE, (chrf, recorded)
