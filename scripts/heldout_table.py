"""Print a checkpoint's held-out figures (its eval.json, written by ``model.training.evaluate``) as
the Markdown table the README shows; ``--before OLD/eval.json`` puts an earlier checkpoint's figures
beside them (old → new). A report written by ``model.training.ship`` carries its own "before" and
each figure's 95 % bootstrap interval (``ship``), and the final test split, reported at the ship.

    python scripts/heldout_table.py model/checkpoints/eval.json [--before runs/old-eval.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NAMES = {
    "tatoeba_test": "Tatoeba (everyday sentences)", "hsk_test": "HSK (learner sentences)",
    "captions_test": "3AM captions", "tico_test": "TICO-19 (health)", "ntrex_test": "NTREX-128 (news)",
    "tatoeba_extra_test": "Tatoeba, newer pairs", "un_test": "UN documents",
    "probe": "probe set", "probe_unseen": "unseen names and numbers", "probe_learner": "learner probe",
    "final": "final test split (drawn for this ship, looked at once)",
}


def rows(report: dict) -> dict[str, tuple[int, dict, dict]]:
    """Each split's (pairs, greedy figures, beam-4 figures)."""
    found = {name: report["sets"][name] for name in NAMES if name in report.get("sets", {})}
    found |= {name: report[name] for name in NAMES if isinstance(report.get(name), dict)
              and "greedy" in report[name]}
    return {name: (split["pairs"], split["greedy"], split.get("beam4", {})) for name, split in found.items()}


def cell(new: dict, old: dict | None, figure: dict | None = None) -> str:
    if not new:
        return "–"
    figures = f"{new['bleu']:.1f} / {new['chrf']:.1f}"
    if figure:  # the ship's paired bootstrap: the new BLEU's interval, and a drop marked
        figures += f" (±{figure['candidate_ci']:.1f})"
        if figure["candidate"] < figure["shipped"]:
            figures += " ▼" if figure["significantly_lower"] else " ▽"
    if old:
        return f"{old['bleu']:.1f} / {old['chrf']:.1f} → **{figures}**"
    return figures


def table(report: dict, before: dict | None = None) -> str:
    shipped = report.get("ship")
    if shipped and before is None:
        return ship_table(report)
    earlier = rows(before) if before else {}
    lines = ["| held-out split | pairs | greedy BLEU / chrF | beam 4 BLEU / chrF |", "|---|---|---|---|"]
    for name, (pairs, greedy, beam) in rows(report).items():
        old = earlier.get(name)
        lines.append(f"| {NAMES[name]} | {pairs:,} | {cell(greedy, old and old[1])} | "
                     f"{cell(beam, old and old[2])} |")
    return "\n".join(lines)


def ship_table(report: dict) -> str:
    """Before → after on every split, each new BLEU with its 95 % interval (▽: lower, within the
    split's noise; ▼: lower beyond it), and the final test split."""
    earlier = rows(report["previous"])
    figures = {(f["split"], f["decoding"]): f for f in report["ship"]["figures"]}
    lines = ["| held-out split | pairs | greedy BLEU / chrF | beam 4 BLEU / chrF |", "|---|---|---|---|"]
    for name, (pairs, greedy, beam) in rows(report).items():
        old = earlier.get(name)
        greedy_cell = cell(greedy, old and old[1], figures.get((name, "greedy")))
        beam_cell = cell(beam, old and old[2], figures.get((name, "beam4")))
        lines.append(f"| {NAMES[name]} | {pairs:,} | {greedy_cell} | {beam_cell} |")
    final, old_final = report.get("final"), (report["previous"].get("final") or {})
    if final:
        greedy_cell = cell(final["greedy"], old_final.get("greedy"))
        beam_cell = cell(final.get("beam4", {}), old_final.get("beam4"))
        lines.append(f"| {NAMES['final']} | {final['pairs']:,} | {greedy_cell} | {beam_cell} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eval", type=Path, help="the checkpoint's eval.json")
    parser.add_argument("--before", type=Path, help="an earlier checkpoint's eval.json")
    args = parser.parse_args(argv)
    report = json.loads(args.eval.read_text(encoding="utf-8"))
    before = json.loads(args.before.read_text(encoding="utf-8")) if args.before else None
    print(table(report, before))


if __name__ == "__main__":
    main()
