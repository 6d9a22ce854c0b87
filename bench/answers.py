"""Every JSON answer the pages read, for many sentences and strategies: written out, or compared.

    python -m bench.answers --out runs/answers-before            # before a change
    python -m bench.answers --out runs/answers-after --compare runs/answers-before

A refactoring that must not change one number is checked this way: the same requests through
the real app (in-process, on the shipped checkpoint or ``--checkpoint``), every answer saved as
JSON with the timing fields dropped (they differ from run to run), then compared answer by
answer. Prints how many answers were written and, with ``--compare``, every one that differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SENTENCES = [
    "The cat sits on the mat.", "I love AI.", "Where is the train station?",
    "Liv wrote code until late at night; she really loves programming.",
    "The museum opens at nine o'clock on Sundays.", "Tom and Mary went to Paris in 2019.",
    "If it rains tomorrow, we will stay at home and read.", "Dr. Patel gave me 25 apples.",
    "My neighbour repaired his old bicycle last weekend.", "Please close the window.",
    "She has lived in Beijing for ten years.", "Why are you laughing?",
    "It costs 25 dollars.", "There are 365 days in a year.", "I don't know what to do.",
    "The children are playing in the garden.", "He speaks English and a little Chinese.",
    "We need more time to finish the project.", "Can you help me carry this box?",
    "The doctor told him to rest for a week.",
    "After the meeting, the students walked to the library and studied until the evening.",
    "Water boils at one hundred degrees.", "Good morning!", "This book is very interesting.",
    "The weather is nice today, so let's go for a walk in the park.",
]
OPTIONS = [
    {"strategy": "greedy"},
    {"strategy": "beam", "beam_size": 4},
    {"strategy": "beam", "beam_size": 2},
    {"strategy": "sample", "temperature": 0.8, "seed": 7},
    {"strategy": "sample", "top_k": 5, "seed": 3},
    {"strategy": "sample", "top_p": 0.9, "temperature": 1.2, "seed": 11},
    {"strategy": "greedy", "forced_prefix": ["我"]},
    {"strategy": "greedy", "max_len": 4},
]
# timings differ from run to run (the KV-cache race's figures are made of nothing else)
TIMING = ("_ms", "_min", "_max", "seconds", "speedup", "timing")


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not k.endswith(TIMING)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def differences(before, after, path: str = "") -> set[str]:
    """Where two answers differ, as key paths with list indices folded (``/steps/N/prob``)."""
    if type(before) is not type(after):
        return {f"{path} (type)"}
    if isinstance(before, dict):
        found = set()
        for key in before.keys() | after.keys():
            if key not in before or key not in after:
                found.add(f"{path}/{key} ({'added' if key not in before else 'removed'})")
            else:
                found |= differences(before[key], after[key], f"{path}/{key}")
        return found
    if isinstance(before, list):
        if len(before) != len(after):
            return {f"{path} (length)"}
        return set().union(*(differences(a, b, f"{path}/N") for a, b in zip(before, after,
                                                                             strict=True)))
    return set() if before == after else {path}


def _packed_json(body: bytes) -> dict:
    """A packed x-ray answer as JSON: its header, and its arrays as lists (the strips' Add & Norm
    corrections undone, so the codes compare whatever their coding)."""
    from app.xray import strip_codes, unpack

    header, arrays = unpack(body)
    codes = strip_codes(header, arrays)
    return {"header": {k: v for k, v in header.items() if k != "arrays"},
            "arrays": {k: v.tolist() for k, v in arrays.items() if not k.startswith("strips.")},
            "strips": {side: value.tolist() for side, value in codes.items()}}


def requests() -> list[tuple[str, str, dict]]:
    """(name, path, body) of every answer to compare."""
    calls = []
    for s, text in enumerate(SENTENCES):
        for o, options in enumerate(OPTIONS):
            body = {"text": text, **options}
            name = f"s{s:02d}-o{o}"
            calls.append((f"{name}-trace", "/api/trace", body))
            calls.append((f"{name}-xray", "/api/xray/view", body))
            if o in (0, 1, 3):
                for figure in ("decode", "attention", "embeddings", "pipeline", "tokens"):
                    calls.append((f"{name}-fig-{figure}", f"/api/figures/{figure}", body))
                for side, block, layer, position in (
                    ("encoder", "embedding", 0, 0), ("encoder", "self_attention", 1, 1),
                    ("encoder", "add_norm1", 2, 0), ("encoder", "ffn", 0, 2),
                    ("encoder", "add_norm2", 1, 1), ("decoder", "self_attention", 0, 1),
                    ("decoder", "cross_attention", 2, 0), ("decoder", "add_norm2", 1, 1),
                    ("decoder", "ffn", 2, 1), ("decoder", "add_norm3", 0, 0),
                    ("decoder", "output", 0, 1), ("decoder", "embedding", 0, 1),
                ):
                    calls.append((f"{name}-block-{side}-{block}-{layer}-{position}",
                                  "/api/xray/block", {**body, "side": side, "block": block,
                                                      "layer": layer, "position": position}))
            if o == 0 and s % 5 == 0:
                calls.append((f"{name}-score", "/api/score", {
                    "text": text, "reference": "猫坐在垫子上。"}))
                calls.append((f"{name}-kv", "GET /api/kv-cache", {"text": text, "steps": 12}))
                calls.append((f"{name}-fig-interpret", "/api/figures/interpret",
                              {**body, "step": 1, "ig_steps": 16}))
    return calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, default=None)
    parser.add_argument("--checkpoint", type=Path, default=None)
    args = parser.parse_args(argv)

    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings(request_timeout_s=120, cache_size=256, cache_mb=4096,
                        **({"checkpoint": args.checkpoint} if args.checkpoint else {}))
    args.out.mkdir(parents=True, exist_ok=True)
    written, differ, statuses, where = 0, [], {}, {}
    with TestClient(create_app(settings)) as client:
        for name, path, body in requests():
            if path.startswith("GET "):
                answer = client.get(path[4:], params=body)
            else:
                answer = client.post(path, json=body)
            statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
            packed = answer.headers.get("content-type", "").startswith("application/octet-stream")
            data = {"status": answer.status_code,
                    "body": _clean(_packed_json(answer.content) if packed else answer.json())}
            text = json.dumps(data, ensure_ascii=False, sort_keys=True)
            (args.out / f"{name}.json").write_text(text, encoding="utf-8")
            written += 1
            if args.compare is not None:
                before = args.compare / f"{name}.json"
                earlier = json.loads(before.read_text(encoding="utf-8")) if before.exists() else None
                if earlier is None or {**earlier, "body": _clean(earlier["body"])} != data:
                    differ.append(name)
                    kind = name.split("-", 2)[2]  # s00-o1-fig-decode → fig-decode
                    for place in differences(_clean(earlier["body"]) if earlier else None,
                                             data["body"]):
                        where[(kind.split("-block-")[0], place)] = where.get(
                            (kind.split("-block-")[0], place), 0) + 1
    print(f"{written} answers written to {args.out}; statuses {statuses}")
    if args.compare is not None:
        print(f"{len(differ)} differ from {args.compare}; where (answers, kind, key path):")
        for (kind, place), count in sorted(where.items()):
            print(f"  {count:5d}  {kind:16} {place}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
