"""/coreference's threshold, calibrated on a labelled set (issue 75): its precision and how often
it says "no link".

    python -m bench.coreference_calibration [--checkpoint DIR] [--write]

model/explain/coreference_labelled.json holds English sentences written for this project, each
with its first third-person pronoun and the word it refers to, or null when it refers to nothing
in the sentence. For each, the page's own reading (app.pages.coreference.sentence_finding: the
pronoun, the nouns before it that agree with it, and the one the model's strongest encoder head
singles out most, as a multiple of the even spread) is taken from a real trace. A link is claimed
when that multiple reaches the threshold; it is right when it names the labelled antecedent. The
threshold chosen is the smallest that keeps the claimed links' precision at or above
TARGET_PRECISION. ``--write`` stores the result in model/explain/coreference_calibration.json,
which the page reads (only when the served weights are the ones measured here).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.pages.coreference import (
    CALIBRATION_FILE,
    LABELLED_FILE,
    TARGET_PRECISION,
    calibrate,
    sentence_finding,
    weights_fingerprint,
)
from model.decoding import DecodingOptions
from model.translator import DEFAULT_CHECKPOINT, Translator


def measure(checkpoint: Path = DEFAULT_CHECKPOINT) -> dict:
    """Every labelled sentence read by the page's rules on a real trace, and the calibration."""
    translator = Translator.load(checkpoint)
    labelled = json.loads(LABELLED_FILE.read_text(encoding="utf-8"))["sentences"]
    findings, labels, rows = [], [], []
    for item in labelled:
        # the encoder's attention is all the page reads: one decoding step is enough
        trace = translator.trace(item["text"], DecodingOptions(max_len=1))
        attention = [layer["self_attention"] for layer in trace.encoder]
        finding = sentence_finding(item["text"], trace.source_tokens, attention,
                                   translator.english.tokenize)
        assert finding["pronoun"] is not None and finding["pronoun"].lower() == item["pronoun"], item
        findings.append(finding)
        labels.append(item["antecedent"])
        pick = finding["pick"]
        rows.append({"text": item["text"], "antecedent": item["antecedent"],
                     "pick": pick and pick["word"], "ratio": pick and pick["ratio"]})
    result = calibrate(findings, labels)
    return {
        "weights_sha256": weights_fingerprint(checkpoint),
        "sentences": len(labelled),
        "with_antecedent": sum(1 for label in labels if label is not None),
        "without_antecedent": sum(1 for label in labels if label is None),
        "target_precision": TARGET_PRECISION,
        **result["chosen"],
        "tried": result["tried"],
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--write", action="store_true", help=f"store the result in {CALIBRATION_FILE}")
    args = parser.parse_args()
    result = measure(args.checkpoint)
    for row in result["rows"]:
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}×"
        print(f"{row['antecedent'] or '(none)':>12} | pick {row['pick'] or '(no candidate)':>14} "
              f"{ratio:>7} | {row['text']}")
    print("\nthreshold  links  right  precision  no-link (all / with antecedent / without)")
    for entry in result["tried"]:
        precision = "—" if entry["precision"] is None else f"{entry['precision']:.3f}"
        print(f"{entry['threshold']:>8.2f}× {entry['links']:>6} {entry['right']:>6} {precision:>10}  "
              f"{entry['no_link']:.3f} / {entry['no_link_with_antecedent']:.3f} / "
              f"{entry['no_link_without_antecedent']:.3f}")
    precision = "—" if result["precision"] is None else f"{result['precision']:.3f}"
    print(f"\n{result['sentences']} sentences ({result['with_antecedent']} with an antecedent, "
          f"{result['without_antecedent']} without); threshold {result['threshold']:.2f}× the even "
          f"spread: {result['links']} links claimed, {result['right']} right (precision {precision}); "
          f"says no link on {result['no_link']:.1%} of all sentences, "
          f"{result['no_link_with_antecedent']:.1%} of those with an antecedent and "
          f"{result['no_link_without_antecedent']:.1%} of those without")
    if args.write:
        stored = {key: value for key, value in result.items() if key != "rows"}
        CALIBRATION_FILE.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
        print(f"written: {CALIBRATION_FILE}")


if __name__ == "__main__":
    main()
