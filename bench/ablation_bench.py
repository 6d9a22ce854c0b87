"""What switching parts off costs (/ablation, issue 28), in-process, by sentence length.

    python -m bench.ablation_bench [--checkpoint DIR] [--repeats 5]

For distinct 5/10/20/40-word sentences (greedy trace first, not timed), the model time of:
the importance grid (every head scored as a row of one batched teacher-forced pass,
``head_importance``) beside the same numbers from one plain forward pass per head; one
re-translation with a cross-attention head off (greedy, and beam 4 on a beam-4 trace); the
word-order test (two encoder passes each way and three translations). One torch thread, as the
server runs.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from bench.common import fmt, machine, percentiles, sentences
from model.decoding import DecodingOptions
from model.explain import ablation as ablate
from model.transformer import mask_special
from model.translator import DEFAULT_CHECKPOINT, Translator


def ms(call, *args) -> tuple[float, object]:
    started = time.perf_counter()
    value = call(*args)
    return (time.perf_counter() - started) * 1000, value


@torch.inference_mode()
def one_pass_per_head(translator: Translator, trace) -> list[float]:
    """Δ log p for every head the plain way: a forward pass with that head off, one head at a time."""
    model = translator.model
    src, tgt = torch.tensor([trace.source_ids]), torch.tensor([trace.decoder_ids])
    labels = torch.tensor([step.id for step in trace.steps])

    def log_p(switched) -> float:
        logits = mask_special(model(src, tgt, ablation=switched)[0])
        return float(torch.log_softmax(logits, -1)[torch.arange(len(labels)), labels].sum())

    clean = log_p(None)
    return [log_p(ablate.ablation([head])) - clean for head in ablate.all_heads(model.config)]


def run(checkpoint, repeats: int = 5) -> dict:
    translator = Translator.load(checkpoint)
    warm = translator.trace(sentences(10, 1, offset=8000)[0])
    ablate.head_importance(translator, warm)
    ablate.retranslate(translator, warm, [ablate.parse_part("cross.1.1", translator.config)])
    results = {"machine": machine(), "heads": len(ablate.all_heads(translator.config)), "length": {}}
    beam = DecodingOptions(strategy="beam", beam_size=4, max_len=128)
    greedy = DecodingOptions(max_len=128)
    head = [ablate.parse_part("cross.2.1", translator.config)]
    for words in (5, 10, 20, 40):
        rows = {name: [] for name in ("grid", "per_head", "greedy", "beam", "order")}
        steps, tokens, largest = [], [], 0.0
        for text in sentences(words, repeats if words < 40 else max(3, repeats // 2), offset=300 + words):
            trace = translator.trace(text, greedy)
            steps.append(len(trace.steps))
            tokens.append(len(trace.source_ids))
            grid_ms, grid = ms(ablate.head_importance, translator, trace)
            plain_ms, plain = ms(one_pass_per_head, translator, trace)
            largest = max(largest, max(abs(a["delta"] - b) for a, b in zip(grid["heads"], plain,
                                                                             strict=True)))
            rows["grid"].append(grid_ms)
            rows["per_head"].append(plain_ms)
            rows["greedy"].append(ms(ablate.retranslate, translator, trace, head)[0])
            rows["order"].append(ms(ablate.word_order, translator, trace, 1)[0])
            beam_trace = translator.trace(text, beam)
            rows["beam"].append(ms(ablate.retranslate, translator, beam_trace, head)[0])
        results["length"][words] = {
            **{name: percentiles(values) for name, values in rows.items()},
            "steps": sum(steps) / len(steps), "source_tokens": sum(tokens) / len(tokens),
            "largest_difference": largest,
        }
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1, as the server runs; 0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = run(args.checkpoint, args.repeats)
    print("machine:", json.dumps(results["machine"]))
    for words, r in results["length"].items():
        print(f"{words:2d} words ({r['source_tokens']:.0f} src tokens, {r['steps']:.1f} steps):")
        print(f"   importance grid, {results['heads']} heads batched: {fmt(r['grid'])}")
        print(f"   the same, one forward pass per head:   {fmt(r['per_head'])}"
              f"   (largest |difference| {r['largest_difference']:.1e})")
        print(f"   re-translation, one head off, greedy:  {fmt(r['greedy'])}")
        print(f"   re-translation, one head off, beam 4:  {fmt(r['beam'])}")
        print(f"   word-order test:                       {fmt(r['order'])}")
    print(json.dumps(results, default=str))


if __name__ == "__main__":
    main()
