"""Our traced translation against a real inference engine (CTranslate2) on the same weights.

    python -m bench.engine [--checkpoint DIR] [--sentences 20] [--repeats 3] [--greedy-only]
                           [--before TREE]

Converts the checkpoint to CTranslate2 float32 (``model/adapters/ct2.py``), then times, interleaved in one
process and one thread each, for the same unseen ~10-word sentences:

- ``trace``     — Translator.trace(): the translation plus everything the pages show, as the app
                  runs it (greedy: a CTranslate2 int8 draft checked by the recorded replay),
- ``stepwise``  — the same trace with drafting off: every token decoded step by step by our model,
- ``translate`` — Translator.translate(): the translation and its per-step probabilities,
- ``decode``    — model.decoding.generate() alone: the tokens, nothing recorded,
- ``draft``     — the int8 draft alone (greedy only),
- ``floor``     — the least a drafted greedy trace can run and still show our model's numbers: the
                  int8 draft, our encoder and one teacher-forced replay of the draft, with nothing
                  recorded and no lists built (greedy only; a right draft assumed),
- ``ct2``       — CTranslate2 float32 ``translate_batch`` with the same strategy,

for greedy and for beam 4, and prints p50/p90, the ratios to CTranslate2, whether every output is
identical token for token, and (greedy) how many drafts our model accepted unchanged.

``--before TREE`` (a checkout of an earlier commit, e.g. ``git worktree add /tmp/before 4d45d7f``)
adds that tree's decode step (its ``model/decoding.py`` and ``model/lean.py``) to the same
interleaved loop: ``decode-before`` and ``trace-before`` (our trace with that step), and counts the
beam searches whose trees (every node's score as a float) are identical before and after.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import torch

import model.translator
from bench.common import machine, percentiles, sentences
from model.adapters import ct2
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


@torch.inference_mode()
def floor(translator: Translator, drafter: ct2.Drafter, src: torch.Tensor,
          options: DecodingOptions) -> torch.Tensor:
    """Draft, encode, replay once: the passes a drafted greedy trace cannot skip. Their logits
    are the ones the trace shows; recording them and turning them into lists come on top."""
    tokens = drafter.propose(src[0].tolist(), [], options.max_len)
    memory = translator.model.encode(src)
    return translator.model.decode(torch.tensor([[BOS_ID, *tokens]]), memory, src)


def earlier_decoding(tree: Path) -> ModuleType:
    """``tree``'s model/decoding.py, stepping ``tree``'s model/lean.py (the rest is ours)."""
    modules = {}
    ours = sys.modules.get("model.lean")
    try:
        for name in ("lean", "decoding"):
            spec = importlib.util.spec_from_file_location(f"before_{name}", tree / "model" / f"{name}.py")
            modules[name] = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = modules[name]
            if name == "lean":  # the earlier decoding imports its own lean step by this name
                sys.modules["model.lean"] = modules[name]
            spec.loader.exec_module(modules[name])
    finally:
        if ours is not None:
            sys.modules["model.lean"] = ours
    return modules["decoding"]


@contextmanager
def decoding_from(module: ModuleType):
    """``Translator.trace`` decoding with ``module.generate`` for the duration."""
    ours = model.translator.generate

    def generate(*args, **kwargs):
        result = module.generate(*args, **kwargs)
        if not hasattr(result, "hypotheses"):  # a tree from before beam search ranked its own
            result.hypotheses = []
        return result

    model.translator.generate = generate
    try:
        yield
    finally:
        model.translator.generate = ours


def tree(result) -> tuple:
    return (result.tokens, [(n.step, n.token_id, n.parent, n.score, n.finished, n.selected)
                            for n in result.beam_nodes])


def compare(translator: Translator, engine, texts: list[str], options: DecodingOptions,
            repeats: int, before: ModuleType | None = None) -> dict:
    """Every path on every sentence, interleaved (trace, translate, decode, ct2, trace, …)."""
    stepwise = Translator(translator.model, translator.english, translator.chinese)
    stepwise.set_drafter(None)
    drafter = translator.drafter()
    paths = {
        "trace": lambda text, src: translator.trace(text, options),
        "stepwise": lambda text, src: stepwise.trace(text, options),
        "translate": lambda text, src: translator.translate(text, options),
        "decode": lambda text, src: generate(translator.model, src, options),
        "ct2": lambda text, src: ct2_decode(engine, translator, text, options),
    }
    if before is not None:
        old = before.DecodingOptions(**vars(options))

        def trace_before(text, src):
            with decoding_from(before):
                return translator.trace(text, old)

        paths["trace-before"] = trace_before
        paths["decode-before"] = lambda text, src: before.generate(translator.model, src, old)
    if options.strategy == "greedy" and drafter is not None:
        paths["draft"] = lambda text, src: drafter.propose(src[0].tolist(), [], options.max_len)
        paths["floor"] = lambda text, src: floor(translator, drafter, src, options)
    for text in texts[:3]:  # warm-up
        for path in paths.values():
            path(text, torch.tensor([translator.source_ids(text)]))
    times: dict[str, list[float]] = {name: [] for name in paths}
    identical = accepted = same_tree = 0
    for text in texts:
        src = torch.tensor([translator.source_ids(text)])
        if before is not None:
            same_tree += tree(paths["decode"](text, src)) == tree(paths["decode-before"](text, src))
        output = translator.trace(text, options).target_ids
        identical += output == ct2_decode(engine, translator, text, options) == stepwise.trace(
            text, options).target_ids
        if "draft" in paths:
            accepted += paths["draft"](text, src) == output
        for _ in range(repeats):
            for name, path in paths.items():
                started = time.perf_counter()
                path(text, src)
                times[name].append((time.perf_counter() - started) * 1000)
    return {"identical": identical, "sentences": len(texts), "accepted": accepted,
            "same_tree": same_tree if before is not None else None,
            "stats": {name: percentiles(values) for name, values in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per sentence and path")
    parser.add_argument("--greedy-only", action="store_true", help="skip the two beam-4 comparisons")
    parser.add_argument("--before", type=Path, default=None,
                        help="an earlier checkout whose decode step to time beside ours")
    args = parser.parse_args()
    before = earlier_decoding(args.before) if args.before else None

    torch.set_num_threads(1)
    translator = Translator.load(args.checkpoint)
    texts = sentences(10, args.sentences, offset=4242)
    print("machine:", machine())
    engine = ct2.load(translator, "float32", threads=1)
    for label, options in (
        ("greedy", DecodingOptions()),
        ("beam 4, length penalty 0.6 (the app's default)",
         DecodingOptions(strategy="beam", beam_size=4)),
        ("beam 4, no length penalty", DecodingOptions(strategy="beam", beam_size=4,
                                                      length_penalty=0.0)),
    ):
        if args.greedy_only and options.strategy != "greedy":
            continue
        result = compare(translator, engine, texts, options, args.repeats, before)
        stats = result["stats"]
        base = stats["ct2"]
        print(f"\n{label}: {result['sentences']} sentences × {args.repeats} runs, one thread; "
              f"identical outputs (trace = stepwise = CTranslate2) "
              f"{result['identical']}/{result['sentences']}"
              + (f"; drafts accepted unchanged {result['accepted']}/{result['sentences']}"
                 if options.strategy == "greedy" else "")
              + (f"; decodes identical to --before, every node's score as a float, "
                 f"{result['same_tree']}/{result['sentences']}" if before is not None else ""))
        for name, s in stats.items():
            print(f"  {name:<10} p50 {s['p50']:7.2f} ms  p90 {s['p90']:7.2f} ms   "
                  f"p50 {s['p50'] / base['p50']:4.2f}×  p90 {s['p90'] / base['p90']:4.2f}× "
                  "CTranslate2")


if __name__ == "__main__":
    main()
