"""What the translation above the x-ray's player costs a new sentence: the model time of the view
without it (the recorded greedy trace) and of the beam-4 translation it adds (the lean decoder,
nothing recorded), p50 over new sentences of 5/10/20/40 words and the longest sentence.

    python -m bench.xray_alternative [--checkpoint DIR] [--count 8] [--threads 2]

In-process, no HTTP: both are what ``POST /api/xray/view`` runs on the model thread for a new
greedy sentence (app/pages/xray.py, ``alternative``); the view's packing is the same either way.
"""

from __future__ import annotations

import argparse
import statistics
import time

from app.pages.xray import alternative_options
from app.schemas import TraceRequest
from bench.common import machine, sentences
from bench.xray_payload import longest_text
from model.decoding import DecodingOptions
from model.translator import DEFAULT_CHECKPOINT, Translator, set_threads


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT))
    parser.add_argument("--count", type=int, default=8, help="new sentences per length")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    translator = Translator.load(args.checkpoint)
    greedy = DecodingOptions(strategy="greedy", max_len=128)
    beam = alternative_options(TraceRequest(text="warm up"))
    translator.trace("A warm-up sentence.", greedy)
    translator.translate("A warm-up sentence.", beam)
    print(machine())
    print("| sentence | greedy trace (the view before) | + beam 4, lean (added) | added / before |")
    print("|---|---|---|---|")
    rows = [(f"{n} words", sentences(n, args.count, offset=101)) for n in (5, 10, 20, 40)]
    longest = longest_text(lambda text: translator.source_ids(text))
    rows.append(("longest (128 tokens)", [longest] * max(1, args.count // 4)))
    for name, texts in rows:
        traced, added = [], []
        for text in texts:
            started = time.perf_counter()
            translator.trace(text, greedy)
            traced.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            translator.translate(text, beam)
            added.append((time.perf_counter() - started) * 1000)
        before, extra = statistics.median(traced), statistics.median(added)
        print(f"| {name} | {before:.0f} ms | {extra:.0f} ms | {extra / before:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
