"""The greedy trace of long sentences, as the app runs it, against CTranslate2.

    python -m bench.long_trace [--checkpoint DIR] [--repeats 9]

Sentences: the longest the API takes (exactly 128 source tokens within 600 characters, as
``bench.xray_payload`` builds it) and four 40-word ones; greedy with the app's ``max_len`` (128).
Interleaved in one process and one thread, per sentence and run:

- ``trace``    — ``Translator.trace()`` as the app runs it (every token decoded step by step by our
                 model, then the recorded replay),
- ``ct2``      — CTranslate2 float32 ``translate_batch``, greedy, the same weights,

and prints p50/p90 per path and sentence, and whether the trace and CTranslate2 wrote the same
tokens. (Written to check issue 27's "128-token greedy trace p50 ≤ 60 ms", when a CTranslate2
drafter still proposed greedy traces; it has left the runtime since, issue 74.)
"""

from __future__ import annotations

import argparse
import time

import torch

from bench import ct2
from bench.common import machine, percentiles, sentences
from bench.engine import ct2_decode
from bench.xray_payload import longest_text
from model.decoding import DecodingOptions
from model.translator import DEFAULT_CHECKPOINT, Translator

OPTIONS = DecodingOptions(max_len=128)  # the app's limit (app/schemas.py)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    translator = Translator.load(args.checkpoint)
    engine = ct2.load(translator, "float32", threads=1)
    texts = {"128 tokens": longest_text(translator.english.encode)}
    texts.update({f"40 words #{i + 1}": text for i, text in enumerate(sentences(40, 4, offset=77))})
    print("machine:", machine())
    for label, text in texts.items():
        src = translator.source_ids(text)
        paths = {
            "trace": lambda text=text: translator.trace(text, OPTIONS),
            "ct2": lambda text=text: ct2_decode(engine, translator, text, OPTIONS),
        }
        for path in paths.values():  # warm-up
            path()
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.repeats):
            for name, path in paths.items():
                started = time.perf_counter()
                path()
                times[name].append((time.perf_counter() - started) * 1000)
        trace = translator.trace(text, OPTIONS)
        same = trace.target_ids == ct2_decode(engine, translator, text, OPTIONS)
        print(f"\n{label}: {len(src)} source tokens, {len(trace.steps)} steps, {args.repeats} runs; "
              f"trace = CTranslate2: {same}")
        for name, values in times.items():
            s = percentiles(values)
            print(f"  {name:<15} p50 {s['p50']:7.1f} ms  p90 {s['p90']:7.1f} ms")


if __name__ == "__main__":
    main()
