"""In-process cost of one full trace (every layer, head and step), and how it grows.

    python -m bench.trace_bench [--checkpoint DIR] [--repeats 30]

Prints, for distinct sentences (no cache anywhere): Translator.trace() alone, then trace → JSON
(what /api/trace does before gzip); by sentence length (5/10/20/40 words, greedy) and by beam size
(1/4/8, 10 words).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from bench.common import fmt, machine, percentiles, sentences
from model.decoding import DecodingOptions
from model.tokenizer import MAX_SOURCE_TOKENS
from model.translator import DEFAULT_CHECKPOINT, InputError, Translator


def time_traces(translator: Translator, texts: list[str], options: DecodingOptions) -> dict:
    trace_ms, json_ms, steps = [], [], []
    for text in texts:
        started = time.perf_counter()
        trace = translator.trace(text, options)
        middle = time.perf_counter()
        json.dumps(trace.to_dict(), ensure_ascii=False)
        done = time.perf_counter()
        trace_ms.append((middle - started) * 1000)
        json_ms.append((done - middle) * 1000)
        steps.append(len(trace.steps))
    return {"trace": percentiles(trace_ms), "json": percentiles(json_ms),
            "steps": sum(steps) / len(steps), "source_tokens": len(trace.source_tokens)}


def run(checkpoint, repeats: int = 30) -> dict:
    translator = Translator.load(checkpoint)
    for text in sentences(10, 5, offset=9000):  # warm-up: allocator, kernels, tokenizer
        translator.trace(text, DecodingOptions())
    results = {"machine": machine(), "length": {}, "beam": {}}
    greedy = DecodingOptions()
    for words in (5, 10, 20, 40):
        count = repeats if words <= 20 else max(5, repeats // 3)
        texts = sentences(words, count, offset=words)
        try:
            translator.source_ids(texts[0])
        except InputError as error:  # a small tokenizer splits long sentences past the cap
            print(f"{words} words: skipped ({error})")
            continue
        results["length"][words] = time_traces(translator, texts, greedy)
    for beam in (1, 4, 8):
        options = DecodingOptions(strategy="beam", beam_size=beam)
        results["beam"][beam] = time_traces(translator, sentences(10, max(5, repeats // 2),
                                                                  offset=500 + beam), options)
    results["worst_case"] = worst_case(translator)
    return results


def worst_case(translator: Translator) -> dict:
    """The most expensive request the API allows: 128 source tokens, beam 8, max_len 128."""
    words = sentences(40, 3, offset=7)
    text = " ".join(words)
    while len(translator.english.encode(text)) > MAX_SOURCE_TOKENS:
        text = text.rsplit(" ", 1)[0]
    started = time.perf_counter()
    trace = translator.trace(text, DecodingOptions(strategy="beam", beam_size=8, max_len=128))
    trace_ms = (time.perf_counter() - started) * 1000
    body = json.dumps(trace.to_dict(), ensure_ascii=False)
    return {"source_tokens": len(trace.source_tokens), "steps": len(trace.steps),
            "trace_ms": round(trace_ms, 1), "json_bytes": len(body.encode())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1, as the server runs; 0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = run(args.checkpoint, args.repeats)
    print("machine:", json.dumps(results["machine"]))
    for words, r in results["length"].items():
        print(f"trace, greedy, {words:2d} words ({r['source_tokens']} src tokens, {r['steps']:.1f} steps): "
              f"{fmt(r['trace'])}   + JSON {r['json']['p50']:.1f} ms")
    for beam, r in results["beam"].items():
        print(f"trace, beam {beam}, 10 words ({r['steps']:.1f} steps): {fmt(r['trace'])}"
              f"   + JSON {r['json']['p50']:.1f} ms")
    w = results["worst_case"]
    print(f"largest allowed request ({w['source_tokens']} source tokens, beam 8, max_len 128, "
          f"{w['steps']} steps): {w['trace_ms']:.0f} ms, {w['json_bytes'] / 1024:.0f} KB of JSON")
    print(json.dumps(results, default=str))


if __name__ == "__main__":
    main()
