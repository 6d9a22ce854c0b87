"""How many model passes the x-ray page costs for one new sentence, and how long its calls take.

    python -m bench.passes [--sentences 20]

For each sentence (an empty cache each time), the calls the x-ray page and the decode page make
in order — POST /api/trace, POST /api/xray/view, three opened blocks, POST /api/figures/decode — go
through the real app (in-process). Every call of the model's ``encode`` and ``decode`` is
counted (a recorded pass is one ``encode`` with a record plus one ``decode`` with a record; the
fast step decoder and the CTranslate2 draft do not call them), and each call is timed. Prints
the passes per call and the median milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

SENTENCES = [
    "The cat sits on the mat.", "Where is the train station?", "I love AI.",
    "The museum opens at nine o'clock on Sundays.", "Please close the window.",
    "If it rains tomorrow, we will stay at home and read.", "Why are you laughing?",
    "She has lived in Beijing for ten years.", "Can you help me carry this box?",
    "The children are playing in the garden.", "It costs 25 dollars.",
    "We need more time to finish the project.", "Good morning!",
    "The doctor told him to rest for a week.", "This book is very interesting.",
    "He speaks English and a little Chinese.", "Water boils at one hundred degrees.",
    "After the meeting, the students walked to the library.", "I don't know what to do.",
    "My neighbour repaired his old bicycle last weekend.",
]
CALLS = [
    ("trace", "/api/trace", {}),
    ("xray view", "/api/xray/view", {}),
    ("block enc attention", "/api/xray/block", {"side": "encoder", "block": "self_attention",
                                                "layer": 1, "position": 1}),
    ("block dec ffn", "/api/xray/block", {"side": "decoder", "block": "ffn", "layer": 2,
                                          "position": 1}),
    ("block dec output", "/api/xray/block", {"side": "decoder", "block": "output", "layer": 0,
                                             "position": 0}),
    ("decode figures", "/api/figures/decode", {}),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=len(SENTENCES))
    args = parser.parse_args(argv)

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    passes: Counter = Counter()
    ms: dict[str, list[float]] = {name: [] for name, _, _ in CALLS}
    counts: dict[str, Counter] = {name: Counter() for name, _, _ in CALLS}
    for text in SENTENCES[: args.sentences]:
        app = create_app(Settings(access_log=False, request_timeout_s=120))
        with TestClient(app) as client:
            model = app.state.translator.model
            encode, decode = model.encode, model.decode

            def counted_encode(*a, _encode=encode, **k):
                passes["encode" + (" recorded" if k.get("record") is not None else "")] += 1
                return _encode(*a, **k)

            def counted_decode(*a, _decode=decode, **k):
                passes["decode" + (" recorded" if k.get("record") is not None else "")] += 1
                return _decode(*a, **k)

            model.encode, model.decode = counted_encode, counted_decode
            for name, path, extra in CALLS:
                before = Counter(passes)
                started = time.perf_counter()
                answer = client.post(path, json={"text": text, **extra})
                ms[name].append((time.perf_counter() - started) * 1000)
                assert answer.status_code == 200, (path, answer.text[:200])
                counts[name] += Counter(passes) - before
    n = args.sentences
    print(f"{n} sentences, a new app (empty cache) for each; passes per sentence, median ms")
    print(f"{'call':22} {'encode':>7} {'rec.enc':>7} {'decode':>7} {'rec.dec':>7} {'ms':>8}")
    for name, _, _ in CALLS:
        c = counts[name]
        print(f"{name:22} {c['encode'] / n:7.2f} {c['encode recorded'] / n:7.2f} "
              f"{c['decode'] / n:7.2f} {c['decode recorded'] / n:7.2f} "
              f"{statistics.median(ms[name]):8.1f}")
    total = sum(counts.values(), Counter())
    print(f"{'all of the above':22} {total['encode'] / n:7.2f} {total['encode recorded'] / n:7.2f} "
          f"{total['decode'] / n:7.2f} {total['decode recorded'] / n:7.2f} "
          f"{sum(statistics.median(v) for v in ms.values()):8.1f}")


if __name__ == "__main__":
    main()
