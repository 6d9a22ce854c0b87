"""Sentences of a chosen length, percentiles, and a machine description for the benchmark tables."""

from __future__ import annotations

import itertools
import os
import platform
import statistics
from datetime import UTC, datetime
from pathlib import Path

SUBJECTS = ["The teacher", "My brother", "Her friend", "The doctor", "Our neighbor", "The student",
            "His mother", "The child"]
VERBS = ["reads", "buys", "likes", "finds", "sees", "wants"]
OBJECTS = ["a book", "the newspaper", "some tea", "a letter", "the map", "an apple"]
PLACES = ["in the kitchen", "at the station", "in the park", "at the school", "in the garden"]
TIMES = ["every morning", "every evening", "every day"]


def clauses(with_time: bool = True):
    """Distinct clauses of 10 words (subject verb object place time) or 9 (… place today)."""
    for subject, verb, obj, place, time in itertools.product(SUBJECTS, VERBS, OBJECTS, PLACES, TIMES):
        yield f"{subject} {verb} {obj} {place} {time if with_time else 'today'}"


def sentences(words: int, count: int, offset: int = 0) -> list[str]:
    """``count`` distinct, grammatical English sentences of exactly 5, 10, 20 or 40 words."""
    ten = list(clauses(True))
    nine = list(clauses(False))
    out = []
    for i in range(offset, offset + count):
        a, b, c, d = (ten[(i * 7919) % len(ten)], nine[(i * 104729 + 1) % len(nine)],
                      nine[(i * 1299709 + 2) % len(nine)], nine[(i * 15485863 + 3) % len(nine)])
        if words == 5:
            short = list(itertools.product(SUBJECTS, VERBS, OBJECTS))
            s = " ".join(short[(i * 7) % len(short)])
        elif words == 10:
            s = a
        elif words == 20:
            s = f"{a} and {b[0].lower()}{b[1:]}"
        elif words == 40:
            s = (f"{a} and {b[0].lower()}{b[1:]} because {c[0].lower()}{c[1:]} "
                 f"and {d[0].lower()}{d[1:]}")
        else:
            raise ValueError("words must be 5, 10, 20 or 40")
        assert len(s.split()) == words, (words, s)
        out.append(s + ".")
    assert len(set(out)) == len(out)
    return out


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"n": len(values), "p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99),
            "mean": statistics.fmean(values), "max": ordered[-1]}


def fmt(stats: dict[str, float], unit: str = "ms") -> str:
    return (f"p50 {stats['p50']:.1f} {unit} · p90 {stats['p90']:.1f} · p99 {stats['p99']:.1f} · "
            f"max {stats['max']:.1f} (n={stats['n']})")


def machine() -> dict[str, str]:
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    import torch

    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": str(torch.get_num_threads()),
    }
