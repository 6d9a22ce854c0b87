"""KV-cached vs uncached greedy generation of 128 tokens: same tokens, how much faster.

    python -m bench.kv_cache_bench [--checkpoint DIR] [--steps 128] [--rounds 5]

Uses Translator.kv_cache_race (the numbers the /kv-cache page shows): <eos> is suppressed so both
runs produce exactly ``--steps`` tokens. Also checks model.decoding.generate with use_cache on/off
gives the same translation for a few sentences.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from bench.common import machine, sentences
from model.decoding import DecodingOptions, generate
from model.translator import DEFAULT_CHECKPOINT, Translator


def run(checkpoint, steps: int, rounds: int) -> dict:
    translator = Translator.load(checkpoint)
    text = sentences(10, 1, offset=77)[0]
    translator.kv_cache_race(text, 8)  # warm-up
    races = [translator.kv_cache_race(text, steps) for _ in range(rounds)]
    cached = statistics.median(r["cached_ms"] for r in races)
    uncached = statistics.median(r["uncached_ms"] for r in races)
    same_generate, timings = True, {True: [], False: []}
    with torch.inference_mode():
        for sentence in sentences(10, 5, offset=300):
            src = torch.tensor([translator.source_ids(sentence)])
            outputs = {}
            for use_cache in (True, False):
                started = time.perf_counter()
                outputs[use_cache] = generate(translator.model, src,
                                              DecodingOptions(max_len=steps, use_cache=use_cache)).tokens
                timings[use_cache].append((time.perf_counter() - started) * 1000)
            same_generate &= outputs[True] == outputs[False]
    return {
        "machine": machine(), "steps": steps, "rounds": rounds,
        "cached_ms": round(cached, 1), "uncached_ms": round(uncached, 1),
        "speedup": round(uncached / cached, 2),
        "identical_tokens": all(r["identical"] for r in races),
        "generate_identical": same_generate,
        "generate_cached_ms": round(statistics.median(timings[True]), 1),
        "generate_uncached_ms": round(statistics.median(timings[False]), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1, as the server runs; 0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    r = run(args.checkpoint, args.steps, args.rounds)
    print(f"{r['steps']} greedy tokens: cached {r['cached_ms']:.1f} ms, uncached {r['uncached_ms']:.1f} ms "
          f"→ {r['speedup']:.1f}× faster; same tokens: {r['identical_tokens']}")
    print(f"generate() on 5 sentences (stops at <eos>): cached {r['generate_cached_ms']} ms, "
          f"uncached {r['generate_uncached_ms']} ms, same translations: {r['generate_identical']}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
