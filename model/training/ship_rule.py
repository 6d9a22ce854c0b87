"""When a new checkpoint may replace the shipped one: a rule that reads each split's own noise.

A result ships when (a) its dev BLEU is higher than the shipped checkpoint's on the same dev
sentences, (b) its mean BLEU over the held-out splits, greedy and beam 4, is higher, and (c) no
split is lower by more than that split's noise: sacrebleu's paired bootstrap (1,000 resamples of the
split's sentences, both systems scored on the same draws) does not call the drop significant at
95 %. A few hundred sentences move BLEU by a point or more between draws, so "every split at least as
good" refused results that were better nearly everywhere; the bootstrap tells a real drop from a
draw's luck. Both checkpoints must be scored on the very same sentences
(``eval_outputs.json.gz``, written by ``model.training.evaluate``).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

RULE_DECODINGS = ("greedy", "beam4")
PROBES = ("probe", "probe_unseen", "probe_learner")
SAMPLES = 1000
LEVEL = 0.05


@dataclass(frozen=True)
class Figure:
    """One split and decoding: both checkpoints' BLEU, each with the half-width of its 95 %
    bootstrap interval, and the paired test's p-value for the difference."""

    split: str
    decoding: str
    pairs: int
    shipped: float
    shipped_ci: float
    candidate: float
    candidate_ci: float
    p_value: float

    @property
    def significantly_lower(self) -> bool:
        return self.candidate < self.shipped and self.p_value < LEVEL

    def as_dict(self) -> dict:
        return {"split": self.split, "decoding": self.decoding, "pairs": self.pairs,
                "shipped": round(self.shipped, 2), "shipped_ci": round(self.shipped_ci, 2),
                "candidate": round(self.candidate, 2), "candidate_ci": round(self.candidate_ci, 2),
                "p_value": round(self.p_value, 4), "significantly_lower": self.significantly_lower}


def read_outputs(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def write_outputs(outputs: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same outputs give the same bytes (git keeps one copy)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write(json.dumps(outputs, ensure_ascii=False, sort_keys=True).encode())


def rule_splits(outputs: dict) -> list[str]:
    """The held-out splits the rule reads: every test split and the three probes (never the final
    split: that one is only reported, once, at the ship)."""
    return [name for name in outputs if name != "final_test" and (name.endswith("_test") or name in PROBES)]


def paired(shipped: list[str], candidate: list[str], references: list[str],
           samples: int = SAMPLES) -> tuple[float, float, float, float, float]:
    """(shipped BLEU, its ±, candidate BLEU, its ±, p-value) by sacrebleu's paired bootstrap."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    test = PairedTest([("shipped", shipped), ("candidate", candidate)],
                      {"BLEU": BLEU(tokenize="zh")}, [references], test_type="bs", n_samples=samples)
    _, scores = test()
    base, new = scores["BLEU"]
    return base.score, float(base.ci), new.score, float(new.ci), float(new.p_value)


def compare(shipped: dict, candidate: dict, samples: int = SAMPLES) -> list[Figure]:
    """Every rule split and decoding; both output sets must hold the same sentences."""
    figures = []
    for name in rule_splits(candidate):
        ours, theirs = candidate[name], shipped.get(name)
        if theirs is None or theirs["english"] != ours["english"] or theirs["reference"] != ours["reference"]:
            raise ValueError(f"the shipped checkpoint's outputs for {name} are of other sentences: "
                             "score both on the same splits")
        for decoding in RULE_DECODINGS:
            figures.append(Figure(name, decoding, len(ours["english"]),
                                  *paired(theirs[decoding], ours[decoding], ours["reference"], samples)))
    return figures


def verdict(figures: list[Figure], dev_shipped: float, dev_candidate: float) -> list[str]:
    """The reasons the result may not ship (none: it ships)."""
    reasons = []
    if not dev_candidate > dev_shipped:
        reasons.append(f"dev BLEU {dev_candidate:.2f} is not higher than the shipped checkpoint's "
                       f"{dev_shipped:.2f}")
    if not figures:  # refused on dev alone, before the held-out splits were scored
        return reasons
    old = sum(f.shipped for f in figures) / len(figures)
    new = sum(f.candidate for f in figures) / len(figures)
    if not new > old:
        reasons.append(f"the mean BLEU over {len(figures)} held-out figures is {new:.2f}, not higher "
                       f"than the shipped checkpoint's {old:.2f}")
    for f in figures:
        if f.significantly_lower:
            reasons.append(f"{f.split} {f.decoding}: {f.candidate:.2f} against {f.shipped:.2f}, lower "
                           f"beyond the split's noise (paired bootstrap p = {f.p_value:.3f})")
    return reasons


def report(figures: list[Figure], dev_shipped: float, dev_candidate: float) -> str:
    """The table ``model.training.ship`` prints: each figure with its interval, then the verdict."""
    lines = [f"{'split':<22} {'decoding':<8} {'pairs':>5}  {'shipped':>13}  {'candidate':>13}  {'p':>6}"]
    for f in figures:
        mark = "  lower (significant)" if f.significantly_lower else (
            "  lower (within noise)" if f.candidate < f.shipped else "")
        lines.append(f"{f.split:<22} {f.decoding:<8} {f.pairs:>5}  {f.shipped:6.2f} ± {f.shipped_ci:4.2f}"
                     f"  {f.candidate:6.2f} ± {f.candidate_ci:4.2f}  {f.p_value:6.3f}{mark}")
    mean_old = sum(f.shipped for f in figures) / len(figures)
    mean_new = sum(f.candidate for f in figures) / len(figures)
    lines.append(f"{'mean':<37} {mean_old:6.2f}         {mean_new:6.2f}")
    lines.append(f"{'dev (greedy)':<37} {dev_shipped:6.2f}         {dev_candidate:6.2f}")
    reasons = verdict(figures, dev_shipped, dev_candidate)
    lines.append("verdict: ships" if not reasons else "verdict: does not ship\n- " + "\n- ".join(reasons))
    return "\n".join(lines)
