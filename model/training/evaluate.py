"""Score a checkpoint on every held-out test split and the probe set: ``python -m model.training.evaluate``.

Rebuilds the splits from ``--data`` with the checkpoint's own recipe (``history.json``'s
``recipe``; for a checkpoint from before recipes, its settings), so no test sentence entered its
training, and counts any test sentence its training pairs had after all. Every split in
``Splits.test_sets()`` (Tatoeba, HSK, captions, TICO-19 health, NTREX news) and the hand-written
probe set (``model/training/probe.tsv``, overall and per category) is translated greedily and with beam
search, and the everyday splits once more without their final full stops (``no_stops``); BLEU
(sacrebleu, ``tokenize="zh"``), chrF and the repetition rate (``scoring.py``) go to ``eval.json``
beside the weights (or ``--out``), with a few example outputs per split and every probe output.
The committed test fixture (100 Tatoeba test pairs) is scored too, so a test can tie the
recorded figures to the shipped weights without the data folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import time
from pathlib import Path

import torch

from model.tokenizer import MAX_SOURCE_TOKENS, MAX_TARGET_TOKENS
from model.training.data import Pair, Splits, _english_key, file_sha256, split_seed
from model.training.recipe import (
    evaluation_sources,
    held_out_splits,
    parse_recipe,
    recipe_from_settings,
    stage_pairs,
)
from model.training.scoring import bleu_chrf, repetition_rate, translate_batch, translate_beam
from model.training.ship_rule import write_outputs
from model.training.transforms import STOPS_ZH, drop_final_stops
from model.translator import DEFAULT_CHECKPOINT, Translator

log = logging.getLogger("model.training.evaluate")

PROBE_FILE = Path(__file__).parent / "probe.tsv"
# names and numbers no training sentence has, and the seed documents' own examples
UNSEEN_FILE = Path(__file__).parent / "probe_unseen.tsv"
# names with a title before them (Dr. Patel) and sentences typed without a final stop
LEARNER_FILE = Path(__file__).parent / "probe_learner.tsv"
# everyday splits also scored without their final marks (how learners often type)
NO_STOPS_SETS = ("tatoeba_test", "hsk_test", "tatoeba_extra_test")
FIXTURE_FILE = Path(__file__).parent / "heldout_tatoeba_100.tsv"
FIXTURE_SIZE = 100
OUTPUTS_FILE = "eval_outputs.json.gz"  # every output as scored, beside eval.json (the ship rule's)
LENGTH_PENALTY = 0.6  # as DecodingOptions' default, so the figures match what the app shows


# -- data --------------------------------------------------------------------------------------


def read_table(path: Path) -> list[dict[str, str]]:
    """Rows of a tab-separated file with a header line (the probe set, the test fixture)."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def read_fixture(path: Path = FIXTURE_FILE) -> list[Pair]:
    return [Pair(row["english"], row["chinese"], "tatoeba") for row in read_table(path)]


def _spread(count: int, size: int) -> list[int]:
    """``size`` indices (or all ``count``) spread evenly over ``range(count)``."""
    kept = min(size, count)
    return [i * count // kept for i in range(kept)]


def fixture_pairs(test: list[Pair], size: int = FIXTURE_SIZE) -> list[Pair]:
    """``size`` pairs spread evenly over the Tatoeba test split (which runs from short to long)."""
    return [test[i] for i in _spread(len(test), size)]


def write_fixture(pairs: list[Pair], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["english\tchinese"] + [f"{p.english}\t{p.chinese}" for p in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def split_settings(settings: dict) -> dict:
    """The training settings that decide the splits, with train.py's defaults where missing."""
    return {
        "seed": 13 if split_seed(settings) is None else split_seed(settings),
        "test_size": int(settings.get("test_size", 1000)),
        "dev_size": int(settings.get("dev_size", 500)),
        "dictionary": bool(settings.get("dictionary", False)),
        # checkpoints from before the wider domains have no "narrow": they saw Tatoeba and HSK only
        "narrow": bool(settings.get("narrow", True)),
    }


def rebuild_splits(data: Path, history: dict) -> tuple[Splits, set[str]]:
    """The test splits to report, and the English sentences (as keys) the checkpoint trained on.

    Every checkpoint is scored on the test splits of every domain (``evaluation_sources``), those
    it did not train on included. The training pairs are rebuilt as its recipe built them (every
    stage's sources, upsampling and transforms; for a checkpoint from before recipes, the recipe
    its flags stand for), to count any test sentence that training saw after all.
    """
    text = (history.get("recipe") or {}).get("text")
    recipe = parse_recipe(text) if text else recipe_from_settings(history.get("settings", {}))
    splits = held_out_splits(data, recipe, evaluation_sources(recipe))
    trained = (splits if set(recipe.sources) == set(evaluation_sources(recipe))
               else held_out_splits(data, recipe))
    seen: set[str] = set()
    for stage in recipe.stages:
        seen |= {_english_key(p.english) for p in stage_pairs(trained.train, stage, data)[0]}
    return splits, seen


# -- scoring -----------------------------------------------------------------------------------


def _figures(outputs: list[str], references: list[str], seconds: float | None = None) -> dict:
    bleu, chrf = bleu_chrf(outputs, references)
    figures = {"bleu": bleu, "chrf": chrf, "repetition_pct": repetition_rate(outputs, references)}
    if seconds is not None:
        figures["seconds"] = round(seconds, 1)
    return figures


def _keeps(output: str, must: str) -> bool:
    """Whether every comma-separated item of ``must`` (a name's characters, a number's digits)
    stands in ``output`` as it is."""
    return all(item in output for item in must.split(",") if item)


class Evaluator:
    """Translates lists of sentences with each decoding (greedy, beam N) and scores them."""

    def __init__(self, translator: Translator, beam_size: int = 4):
        self.translator = translator
        self.decodings = ["greedy"] + ([f"beam{beam_size}"] if beam_size > 1 else [])
        self.beam_size = beam_size
        # every output as scored, by split: what the ship rule's paired bootstrap resamples
        self.kept: dict[str, dict[str, list[str]]] = {}

    def keep(self, name: str | None, sources: list[str], references: list[str],
             scored: dict[str, list[str]]) -> None:
        if name is not None:
            self.kept[name] = {"english": sources, "reference": references, **scored}

    def translate(self, sources: list[str]) -> dict[str, tuple[list[str], float]]:
        """Outputs and seconds per decoding."""
        t = self.translator
        results = {}
        for decoding in self.decodings:
            started = time.perf_counter()
            if decoding == "greedy":
                outputs = translate_batch(t.model, t.english, t.chinese, sources)
            else:
                outputs = translate_beam(t.model, t.english, t.chinese, sources, self.beam_size)
            results[decoding] = (outputs, time.perf_counter() - started)
        return results

    def test_set(self, pairs: list[Pair], seen: set[str], examples: int,
                 strip_final: bool = False, name: str | None = None) -> dict:
        """``strip_final``: score the outputs without their final 。！？ (the examples keep them),
        for references that have none: whether a model ends a sentence typed without a full
        stop with one is a matter of style, not of translation."""
        sources = [p.english for p in pairs]
        references = [p.chinese for p in pairs]
        outputs = self.translate(sources)
        report: dict = {
            "pairs": len(pairs),
            "sentences": len({_english_key(s) for s in sources}),
            "seen_in_training": sum(_english_key(s) in seen for s in sources),
        }
        scored = {}
        for decoding, (hypotheses, seconds) in outputs.items():
            if strip_final:
                hypotheses = [h.rstrip(STOPS_ZH) for h in hypotheses]
            report[decoding] = _figures(hypotheses, references, seconds)
            scored[decoding] = hypotheses
        self.keep(name, sources, references, scored)
        report["examples"] = [
            {"english": sources[i], "reference": references[i]}
            | {decoding: outputs[decoding][0][i] for decoding in self.decodings}
            for i in _spread(len(pairs), examples)
        ]
        return report

    def probe(self, rows: list[dict[str, str]], strip_final: bool = False,
              name: str | None = None) -> dict:
        """``strip_final``: a row whose reference has no final 。！？ is scored on its output
        without one too (``outputs`` keeps the outputs as they were)."""
        sources = [r["english"] for r in rows]
        references = [r["chinese"] for r in rows]
        outputs = self.translate(sources)
        scored = {decoding: [h.rstrip(STOPS_ZH) if strip_final and not r.endswith(tuple(STOPS_ZH))
                             else h for h, r in zip(hypotheses, references, strict=True)]
                  for decoding, (hypotheses, _) in outputs.items()}
        self.keep(name, sources, references, scored)
        report: dict = {"pairs": len(rows)}
        for decoding, (_, seconds) in outputs.items():
            report[decoding] = _figures(scored[decoding], references, seconds)
        categories: dict[str, list[int]] = {}
        for index, row in enumerate(rows):
            categories.setdefault(row["category"], []).append(index)
        report["categories"] = {
            name: {"pairs": len(indices)}
            | {
                decoding: _figures([scored[decoding][i] for i in indices],
                                   [references[i] for i in indices])
                for decoding in self.decodings
            }
            for name, indices in categories.items()
        }
        if any(row.get("must") for row in rows):  # names and numbers that must come through as such
            report["kept"] = {decoding: {
                "share": round(sum(_keeps(outputs[decoding][0][i], row["must"])
                                   for i, row in enumerate(rows) if row.get("must"))
                               / sum(bool(row.get("must")) for row in rows), 4),
                "of": sum(bool(row.get("must")) for row in rows)} for decoding in self.decodings}
        report["outputs"] = [
            {"category": row["category"], "english": row["english"], "reference": row["chinese"]}
            | {decoding: outputs[decoding][0][i] for decoding in self.decodings}
            for i, row in enumerate(rows)
        ]
        return report


def fixture_report(translator: Translator, path: Path, tatoeba_test: list[Pair] | None) -> dict:
    """Greedy BLEU/chrF on the committed fixture, as ``tests/model/test_shipped_quality.py``
    recomputes them."""
    pairs = read_fixture(path)
    outputs = translate_batch(
        translator.model, translator.english, translator.chinese, [p.english for p in pairs]
    )
    bleu, chrf = bleu_chrf(outputs, [p.chinese for p in pairs])
    report = {"file": path.name, "sha256": file_sha256(path), "pairs": len(pairs),
              "greedy": {"bleu": bleu, "chrf": chrf}}
    if tatoeba_test is not None:
        held_out = {(p.english, p.chinese) for p in tatoeba_test}
        report["in_tatoeba_test"] = all((p.english, p.chinese) in held_out for p in pairs)
    return report


def evaluate(
    translator: Translator, splits: Splits, seen: set[str], probe: list[dict[str, str]],
    fixture: Path | None, beam_size: int = 4, examples: int = 10,
    unseen: list[dict[str, str]] | None = None, learner: list[dict[str, str]] | None = None,
    outputs: dict | None = None, final: bool = False,
) -> dict:
    """The whole report that ``eval.json`` keeps (``unseen``: the probe of names and numbers that
    no training sentence has, kept as ``probe_unseen`` with every output; ``learner``: titled
    names and sentences without a final stop, kept as ``probe_learner``). ``outputs`` (a dict)
    receives every split's outputs as scored; ``final`` scores the final test split too, which is
    looked at once, when a result ships (``model.training.ship``)."""
    evaluator = Evaluator(translator, beam_size)
    report: dict = {
        "tokenize": "zh",
        "decodings": {"greedy": {}} | (
            {f"beam{beam_size}": {"beam_size": beam_size, "length_penalty": LENGTH_PENALTY}}
            if beam_size > 1 else {}
        ),
        "max_src_tokens": MAX_SOURCE_TOKENS,
        "max_tgt_tokens": MAX_TARGET_TOKENS,
        "sets": {},
    }
    for name, pairs in splits.test_sets().items():
        report["sets"][name] = evaluator.test_set(pairs, seen, examples, name=name)
        log.info("%s %s", name, _summary(report["sets"][name]))
    if final and splits.final_test:
        report["final"] = evaluator.test_set(splits.final_test, seen, examples, name="final_test")
        log.info("final test split %s", _summary(report["final"]))
    # the everyday splits as a learner often types them: without the final . ! ? (and the
    # references without their 。！？), the pairs that end in such a mark on both sides; the
    # outputs are scored without a final mark too (adding one is no error)
    report["no_stops"] = {}
    for name in NO_STOPS_SETS:
        pairs = drop_final_stops(splits.test_sets().get(name, []), 1.0)
        if not pairs:
            continue
        report["no_stops"][name] = evaluator.test_set(pairs, seen, examples, strip_final=True)
        log.info("%s without final stops %s", name, _summary(report["no_stops"][name]))
    report["probe"] = evaluator.probe(probe, name="probe")
    log.info("probe %s", _summary(report["probe"]))
    if unseen:
        report["probe_unseen"] = evaluator.probe(unseen, name="probe_unseen")
        log.info("probe_unseen %s", _summary(report["probe_unseen"]))
    if learner:
        report["probe_learner"] = evaluator.probe(learner, strip_final=True, name="probe_learner")
        log.info("probe_learner %s", _summary(report["probe_learner"]))
    if fixture is not None:
        report["fixture"] = fixture_report(translator, fixture, splits.test)
        log.info("fixture %s", report["fixture"])
    main_set = report["sets"]["tatoeba_test"]
    best = evaluator.decodings[-1]
    report["test"] = {"bleu": main_set[best]["bleu"], "chrf": main_set[best]["chrf"],
                      "decoding": best.replace("beam", "beam ")}
    if outputs is not None:
        outputs.update(evaluator.kept)
    return report


def _summary(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in ("examples", "outputs", "categories")}


def previous_figures(earlier: dict, label: tuple[str, str] | None = None) -> dict:
    """The parts of an earlier report that a before/after comparison needs; ``label`` (English,
    Chinese) names the earlier checkpoint on the /training page."""
    english, chinese = label or ("previous checkpoint", "上一个检查点")
    return {
        "label": {"en": english, "zh": chinese},
        "sets": earlier.get("sets", {}),
        "probe": earlier.get("probe", {}),
        "probe_unseen": earlier.get("probe_unseen", {}),
        "no_stops": earlier.get("no_stops", {}),
        "probe_learner": earlier.get("probe_learner", {}),
        "fixture": earlier.get("fixture"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--out", type=Path, help="report file (default: eval.json in --checkpoint)")
    parser.add_argument("--beam", type=int, default=4, help="beam size (1 or less: greedy only)")
    parser.add_argument("--examples", type=int, default=10, help="example outputs kept per split")
    parser.add_argument("--probe", type=Path, default=PROBE_FILE)
    parser.add_argument("--unseen", type=Path, default=UNSEEN_FILE,
                        help="probe of unseen names and numbers (skipped if the file is absent)")
    parser.add_argument("--learner", type=Path, default=LEARNER_FILE,
                        help="probe of titled names and sentences without a final stop (skipped if "
                        "the file is absent)")
    parser.add_argument("--fixture", type=Path, default=FIXTURE_FILE)
    parser.add_argument("--write-fixture", action="store_true",
                        help="first (re)write --fixture from the rebuilt Tatoeba test split")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--final", action="store_true",
                        help="score the final test split too (looked at once: at the ship)")
    parser.add_argument("--previous", type=Path,
                        help="an earlier checkpoint's eval.json, kept under 'previous' for before/after")
    parser.add_argument("--previous-label", nargs=2, metavar=("EN", "ZH"),
                        help="what the earlier checkpoint was, in English and Chinese (/training)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)

    started = time.perf_counter()
    translator = Translator.load(args.checkpoint)
    settings = translator.history.get("settings", {})
    splits, seen = rebuild_splits(args.data, translator.history)
    if args.write_fixture:
        write_fixture(fixture_pairs(splits.test), args.fixture)
        log.info("wrote %s", args.fixture)
    fixture = args.fixture if args.fixture.is_file() else None
    if fixture is None:
        log.warning("no fixture at %s: eval.json gets no 'fixture' figures", args.fixture)
    report = {
        "checkpoint": args.checkpoint.name,
        "split": split_settings(settings),
    }
    unseen = read_table(args.unseen) if args.unseen.is_file() else None
    learner = read_table(args.learner) if args.learner.is_file() else None
    outputs: dict = {}
    report |= evaluate(translator, splits, seen, read_table(args.probe), fixture, args.beam,
                       args.examples, unseen, learner, outputs, args.final)
    report["minutes"] = round((time.perf_counter() - started) / 60, 2)
    if args.previous:
        report["previous"] = previous_figures(
            json.loads(args.previous.read_text(encoding="utf-8")), args.previous_label
        )
    out = args.out or args.checkpoint / "eval.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    write_outputs(outputs, out.with_name(OUTPUTS_FILE))
    log.info("wrote %s and %s (%.1f min)", out, OUTPUTS_FILE, report["minutes"])


if __name__ == "__main__":
    main()
