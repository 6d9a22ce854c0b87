"""Our traced translation against a real inference engine (CTranslate2) on the same weights.

    python -m bench.engine [--checkpoint DIR] [--sentences 20] [--repeats 3] [--greedy-only | --beam-only]
                           [--before TREE] [--ct2-gemm auto|mkl]

Converts the checkpoint to CTranslate2 float32 (``bench/ct2.py``), then times, interleaved in one
process and one thread each, for the same unseen ~10-word sentences:

- ``trace``     — Translator.trace(): the translation plus everything the pages show, as the app
                  runs it (every token decoded step by step by our model, then the recorded replay),
- ``translate`` — Translator.translate(): the translation and its per-step probabilities,
- ``decode``    — model.decoding.generate() alone: the tokens, nothing recorded,
- ``ct2``       — CTranslate2 float32 ``translate_batch`` with the same strategy,

for greedy and for beam 4, and prints p50/p90, the ratios to CTranslate2, whether every output is
identical token for token. What is
loaded is frozen out of Python's garbage collector first (``gc.freeze``), as the app's start-up does.

``--before TREE`` (a checkout of an earlier commit, e.g. ``git worktree add /tmp/before 4d45d7f``)
adds that tree's whole model package to the same interleaved loop: a second process imports
``TREE``'s ``model/`` (this file, run there as ``--worker``), loads the same checkpoint, and times
its own ``Translator.trace`` and ``generate`` when asked, one sentence at a time between ours, so
``trace-before`` and ``decode-before`` run on the same machine at the same moment (one waits while
the other runs). It also counts the decodes whose trees (every node's score as a float) are
identical before and after.

``--ct2-gemm mkl`` makes CTranslate2 (the yardstick) run its
products through MKL, as PyTorch's do, instead of its own choice (oneDNN on AMD CPUs, where MKL
takes a slower generic path; MKL on Intel ones), to see how much of a gap is the product library.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from bench import ct2
from bench.common import machine, percentiles, sentences
from model.decoding import DecodingOptions, generate
from model.transformer import BOS_ID, PAD_ID
from model.translator import DEFAULT_CHECKPOINT, Translator


def ct2_decode(engine, translator: Translator, text: str, options: DecodingOptions) -> list[int]:
    """CTranslate2's tokens for ``text`` under the same strategy (greedy or beam) and limits."""
    chinese = translator.chinese
    beam = options.beam_size if options.strategy == "beam" else 1
    result = engine.translate_batch(
        [translator.source_tokens(translator.source_ids(text))], beam_size=beam,
        max_decoding_length=options.max_len, length_penalty=options.length_penalty if beam > 1 else 0,
        suppress_sequences=[[chinese.id_to_token(PAD_ID)], [chinese.id_to_token(BOS_ID)]],
    )
    return [chinese.index[token] for token in result[0].hypotheses[0]]


class Before:
    """An earlier tree's model package in a second process: ``run(path, text, options)`` has it
    time its own ``trace`` or ``generate`` once and returns (ms, what it decoded)."""

    def __init__(self, tree: Path, checkpoint: Path):
        env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--checkpoint", str(checkpoint)],
            cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def run(self, path: str, text: str, options: DecodingOptions) -> tuple[float, tuple]:
        self.process.stdin.write(json.dumps({"path": path, "text": text, "options": vars(options)}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["ms"], (answer["tokens"], [tuple(node) for node in answer["nodes"]])

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def worker(checkpoint: Path) -> None:
    """``--worker``: answer Before's requests with this process's ``model`` package."""
    torch.set_num_threads(1)
    translator = Translator.load(checkpoint)
    gc.collect()
    gc.freeze()  # as main() and the app's start-up do
    for line in sys.stdin:
        request = json.loads(line)
        options = DecodingOptions(**request["options"])
        src = torch.tensor([translator.source_ids(request["text"])])
        started = time.perf_counter()
        if request["path"] == "trace":
            translator.trace(request["text"], options)
            result = None
        else:
            result = generate(translator.model, src, options)
        ms = (time.perf_counter() - started) * 1000
        tokens, nodes = tree(result) if result is not None else ([], [])
        print(json.dumps({"ms": ms, "tokens": tokens, "nodes": nodes}), flush=True)


def tree(result) -> tuple:
    return (result.tokens, [(n.step, n.token_id, n.parent, n.score, n.finished, n.selected)
                            for n in result.beam_nodes])


def compare(translator: Translator, engine, texts: list[str], options: DecodingOptions,
            repeats: int, before: Before | None = None) -> dict:
    """Every path on every sentence, interleaved (trace, translate, decode, ct2, trace, …)."""
    paths = {
        "trace": lambda text, src: translator.trace(text, options),
        "translate": lambda text, src: translator.translate(text, options),
        "decode": lambda text, src: generate(translator.model, src, options),
        "ct2": lambda text, src: ct2_decode(engine, translator, text, options),
    }
    if before is not None:  # these time themselves in the earlier tree's process
        paths["trace-before"] = lambda text, src: before.run("trace", text, options)
        paths["decode-before"] = lambda text, src: before.run("decode", text, options)
    for text in texts[:3]:  # warm-up
        for path in paths.values():
            path(text, torch.tensor([translator.source_ids(text)]))
    times: dict[str, list[float]] = {name: [] for name in paths}
    identical = same_tree = 0
    for text in texts:
        src = torch.tensor([translator.source_ids(text)])
        if before is not None:
            same_tree += tree(paths["decode"](text, src)) == paths["decode-before"](text, src)[1]
        output = translator.trace(text, options).target_ids
        identical += output == ct2_decode(engine, translator, text, options)
        for _ in range(repeats):
            for name, path in paths.items():
                started = time.perf_counter()
                answer = path(text, src)
                ms = (time.perf_counter() - started) * 1000
                times[name].append(answer[0] if name.endswith("-before") else ms)
    return {"identical": identical, "sentences": len(texts),
            "same_tree": same_tree if before is not None else None,
            "stats": {name: percentiles(values) for name, values in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per sentence and path")
    parser.add_argument("--greedy-only", action="store_true", help="skip the two beam-4 comparisons")
    parser.add_argument("--beam-only", action="store_true", help="skip greedy and beam 4 without a penalty")
    parser.add_argument("--before", type=Path, default=None,
                        help="an earlier checkout whose model package to time beside ours")
    parser.add_argument("--ct2-gemm", choices=("auto", "mkl"), default="auto",
                        help="CTranslate2's products (the yardstick's): its own "
                        "choice (oneDNN on AMD CPUs, MKL on Intel ones), or MKL, the library "
                        "PyTorch's products use, on any CPU")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.checkpoint)
        return
    before = Before(args.before, args.checkpoint) if args.before else None

    torch.set_num_threads(1)
    translator = Translator.load(args.checkpoint)
    texts = sentences(10, args.sentences, offset=4242)
    if args.ct2_gemm == "mkl":
        os.environ["CT2_USE_MKL"] = "1"  # read when CTranslate2 makes its first model
    print("machine:", machine(), "CTranslate2 products:", args.ct2_gemm)
    engine = ct2.load(translator, "float32", threads=1)
    # as the app's start-up does: the garbage collector no longer walks what is loaded by now
    gc.collect()
    gc.freeze()
    for label, options in (
        ("greedy", DecodingOptions()),
        ("beam 4, length penalty 0.6 (the app's default)",
         DecodingOptions(strategy="beam", beam_size=4)),
        ("beam 4, no length penalty", DecodingOptions(strategy="beam", beam_size=4,
                                                      length_penalty=0.0)),
    ):
        if args.greedy_only and options.strategy != "greedy":
            continue
        if args.beam_only and (options.strategy != "beam" or options.length_penalty == 0.0):
            continue
        result = compare(translator, engine, texts, options, args.repeats, before)
        stats = result["stats"]
        base = stats["ct2"]
        print(f"\n{label}: {result['sentences']} sentences × {args.repeats} runs, one thread; "
              f"identical outputs (trace = CTranslate2) "
              f"{result['identical']}/{result['sentences']}"
              + (f"; decodes identical to --before, every node's score as a float, "
                 f"{result['same_tree']}/{result['sentences']}" if before is not None else ""))
        for name, s in stats.items():
            print(f"  {name:<10} p50 {s['p50']:7.2f} ms  p90 {s['p90']:7.2f} ms   "
                  f"p50 {s['p50'] / base['p50']:4.2f}×  p90 {s['p90'] / base['p90']:4.2f}× "
                  "CTranslate2")
    if before is not None:
        before.close()


if __name__ == "__main__":
    main()
