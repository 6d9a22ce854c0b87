"""The x-ray's "check this translation" warning, calibrated on held-out pairs (issue 75, item 6):
how well its signals separate poor translations from good ones, and the thresholds chosen.

    python -m bench.warning_calibration [--data ../shared/data] [--checkpoint DIR] [--write]
                                        [--rows FILE]

The pairs are the dev splits (Tatoeba's and every wider domain's: ``Splits.dev_mix``) of the
checkpoint's own splits, rebuilt from ``--data`` as ``model.training.evaluate`` rebuilds them, so
no pair entered its training; a pair whose English the training pairs had after all is left out.
Each English sentence is translated greedily (max_len 128, as the x-ray asks) by the shipped
checkpoint, one thread, and the warning's signals are computed from the translation's own steps
(app/translation_warning.py, as static/js/xray/result.js does). Each translation is scored with
sentence chrF (sacrebleu, its defaults) against its reference.

"Poor" is a sentence chrF below BAD_BELOW = 25, an absolute cut, so the page can say it in words
that do not move with the sample. Why 25: read by hand on the shipped checkpoint's dev outputs
(2026-12-08), of 14 drawn at random with chrF 18–25, 10 lost or changed the meaning; of 14 with
chrF 25–32, 5 did: 25 is about where "poor" stops being the rule. Sentence chrF is harsh on short
Chinese (a correct 汤姆是个好人。 against "Tom是一个好人。" scores 24), so some "poor" ones are
fine: the figures are a floor on what the warning gets right, not a verdict on each sentence. The
sample's lowest quartile is printed and stored beside it, with the chosen rule's figures against it.
Reported: the ROC AUC of each signal against "poor"; the pair of thresholds chosen from a grid
(``app.translation_warning.choose``: the one that best tells poor from good, the highest mean of
its two hit rates), its precision, recall and how often it warns, and the hand-set rule it replaced
(Σ ≥ 2 or mean < 0.6, from 26 sentences) measured the same way. ``--write`` stores the result in
model/explain/warning_calibration.json (with the weights' sha256), which the x-ray reads.
``--rows FILE`` keeps every translation with its figures (JSON lines) for a later look.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sacrebleu
import torch

from app.pages.coreference import weights_fingerprint
from app.translation_warning import (
    CALIBRATION_FILE,
    choose,
    level,
    lowest_share_cut,
    roc_auc,
    rule_figures,
    signals,
)
from model.decoding import DecodingOptions
from model.training.data import _english_key
from model.training.evaluate import rebuild_splits
from model.translator import DEFAULT_CHECKPOINT, InputError, Translator

BAD_BELOW = 25.0  # sentence chrF: below it a translation is "poor" (see the docstring)
EXPECTED_GRID = [round(0.5 + 0.25 * i, 2) for i in range(31)] + [None]  # 0.5 … 8.0, off
MEAN_GRID = [round(0.05 * i, 2) for i in range(17)]  # 0 (off) … 0.8
MAX_LEN = 128  # the x-ray's own max_len
ROW_FIELDS = ("source", "chrf", "expected", "mean", "steps", "unknown")


def compact(row: dict) -> list:
    return [row[name] for name in ROW_FIELDS]


def expand(values: list) -> dict:
    return dict(zip(ROW_FIELDS, values, strict=True))


def held_out_pairs(data: Path, checkpoint: Path) -> tuple[list, int]:
    """The dev pairs of the checkpoint's splits none of whose English it trained on, and how many
    were left out because training had them."""
    history = json.loads((checkpoint / "history.json").read_text(encoding="utf-8"))
    splits, seen = rebuild_splits(data, history)
    pairs = splits.dev_mix()
    kept = [pair for pair in pairs if _english_key(pair.english) not in seen]
    return kept, len(pairs) - len(kept)


def translate_rows(translator: Translator, pairs: list) -> tuple[list[dict], int]:
    """Every pair translated greedily, with its signals and sentence chrF; pairs too long for the
    model are counted, not translated."""
    options = DecodingOptions(max_len=MAX_LEN)
    rows, refused = [], 0
    for pair in pairs:
        try:
            translation = translator.translate(pair.english, options)
        except InputError:
            refused += 1
            continue
        steps = [{"prob": step.prob, "forced": step.forced} for step in translation.steps]
        signal = signals(steps, translation.source_tokens)
        chrf = sacrebleu.sentence_chrf(translation.translation, [pair.chinese]).score
        rows.append({"source": pair.source, "english": pair.english, "reference": pair.chinese,
                     "output": translation.translation, "finished": translation.finished,
                     "chrf": round(chrf, 2), **{k: (round(v, 5) if isinstance(v, float) else v)
                                                for k, v in signal.items()}})
    return rows, refused


def calibrate(rows: list[dict], bad_below: float = BAD_BELOW) -> dict:
    """The figures stored in warning_calibration.json, from translated ``rows``."""
    bad = [row["chrf"] < bad_below for row in rows]
    quartile = lowest_share_cut([row["chrf"] for row in rows], 0.25)
    bad_quartile = [row["chrf"] < quartile for row in rows]
    expected = [row["expected"] for row in rows]
    far = [1 - row["mean"] for row in rows]
    per_step = [row["expected"] / max(row["steps"], 1) for row in rows]
    unknown = [row["unknown"] for row in rows]
    auc = {
        "expected": roc_auc(expected, bad),
        "one_minus_mean": roc_auc(far, bad),
        "expected_per_token": roc_auc(per_step, bad),
        "unknown": roc_auc(unknown, bad),
    }
    chosen = choose(rows, bad, EXPECTED_GRID, MEAN_GRID)
    quartile_chosen = rule_figures(rows, bad_quartile, chosen["expected_at"], chosen["mean_below"])
    before = rule_figures(rows, bad, 2.0, 0.6)  # the hand-set rule (26 sentences) it replaces
    quiet = [b for row, b in zip(rows, bad, strict=True)
             if level(row, chosen["expected_at"], chosen["mean_below"]) == "sure"]
    by_source = {}
    for name in sorted({row["source"] for row in rows}):
        mine = [(row, b) for row, b in zip(rows, bad, strict=True) if row["source"] == name]
        figures = rule_figures([r for r, _ in mine], [b for _, b in mine],
                               chosen["expected_at"], chosen["mean_below"])
        by_source[name] = {"pairs": len(mine), "bad": sum(b for _, b in mine),
                           "warned": figures["warned"], "warned_bad": figures["warned_bad"]}
    return {
        "pairs": len(rows),
        "bad_below": bad_below,
        "bad": sum(bad),
        "bad_share": round(sum(bad) / len(rows), 4),
        "lowest_quartile_chrf": quartile,
        "chosen_by": "the highest mean of the two hit rates (poor warned, good left alone)",
        "auc": {name: None if value is None else round(value, 4) for name, value in auc.items()},
        "chosen": chosen,
        "quiet_bad_share": round(sum(quiet) / len(quiet), 4) if quiet else None,
        "chosen_against_lowest_quartile": quartile_chosen,
        "hand_set_rule": before,
        "by_source": by_source,
    }


def dumps(result: dict) -> str:
    """The stored JSON: indented, every row on one line."""
    text = json.dumps({**result, "rows": "__ROWS__"}, indent=1, ensure_ascii=False)
    rows = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in result["rows"])
    return text.replace('"__ROWS__"', "[\n" + rows + "\n ]") + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--write", action="store_true", help=f"store the result in {CALIBRATION_FILE}")
    parser.add_argument("--rows", type=Path, help="keep every translation here (JSON lines)")
    parser.add_argument("--from-rows", type=Path, help="calibrate rows kept before (no translating)")
    parser.add_argument("--limit", type=int, default=0, help="translate only this many pairs (a try)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared
    started = time.perf_counter()
    pairs, left_out = held_out_pairs(args.data, args.checkpoint)
    if args.limit:
        pairs = pairs[:: max(1, len(pairs) // args.limit)][: args.limit]
    if args.from_rows:  # the same pairs, translated before (by --rows)
        rows = [json.loads(line) for line in args.from_rows.read_text(encoding="utf-8").splitlines()]
        english = {pair.english for pair in pairs}
        assert all(row["english"] in english for row in rows), "rows of other pairs"
        refused = len(pairs) - len(rows)
    else:
        translator = Translator.load(args.checkpoint)
        rows, refused = translate_rows(translator, pairs)
        if args.rows:
            args.rows.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                                 encoding="utf-8")
    seconds = time.perf_counter() - started
    result = calibrate(rows)
    result = {"weights_sha256": weights_fingerprint(args.checkpoint), "pairs_from": "dev splits (dev_mix)",
              "decoding": "greedy", "max_len": MAX_LEN, "metric": "sentence chrF (sacrebleu defaults)",
              "left_out_trained": left_out, "refused_too_long": refused, **result,
              # every pair's figures, no text: a test recomputes the thresholds from them
              "row_fields": list(ROW_FIELDS), "rows": [compact(row) for row in rows]}
    done = "read from rows kept" if args.from_rows else "translated"
    print(f"{result['pairs']} held-out pairs {done} in {seconds:.0f} s "
          f"({left_out} left out as trained on, {refused} too long)")
    print(f"poor: sentence chrF < {result['bad_below']}: {result['bad']} ({result['bad_share']:.1%}); "
          f"the lowest quartile lies below chrF {result['lowest_quartile_chrf']}")
    for name, value in result["auc"].items():
        print(f"  AUC {name:>20}: {value}")
    chosen, before = result["chosen"], result["hand_set_rule"]
    for label, figures in (("chosen", chosen), ("hand-set (Σ ≥ 2, mean < 0.6)", before),
                           ("chosen vs lowest quartile", result["chosen_against_lowest_quartile"])):
        expected = "off" if figures["expected_at"] is None else figures["expected_at"]
        print(f"{label}: Σ(1−p) ≥ {expected} or mean < {figures['mean_below']} or <unk>: "
              f"warns on {figures['warned']} ({figures['warn_rate']:.1%}), {figures['warned_bad']} poor "
              f"(precision {figures['precision']}, recall {figures['recall']}, AUC {figures['auc']})")
    print(f"of the translations it does not warn on, {result['quiet_bad_share']:.1%} are poor")
    for name, figures in result["by_source"].items():
        print(f"  {name:>14}: {figures}")
    if args.write:
        CALIBRATION_FILE.write_text(dumps(result), encoding="utf-8")
        print(f"written: {CALIBRATION_FILE}")


if __name__ == "__main__":
    main()
