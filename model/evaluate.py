"""Score the shipped checkpoint on the held-out test sets: ``python -m model.evaluate``.

Rebuilds the fixed split from ``--data`` (the same seed as training, so the test sentences never
entered training), translates the Tatoeba test set and the HSK test set greedily and with beam
search, and writes BLEU (sacrebleu, tokenize "zh") and chrF to ``eval.json`` beside the weights.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from model.data import load_pairs, split_pairs
from model.decoding import DecodingOptions, generate
from model.train import bleu_chrf, translate_batch
from model.translator import DEFAULT_CHECKPOINT, Translator


def beam_translate(translator: Translator, sentences: list[str], beam_size: int) -> list[str]:
    options = DecodingOptions(strategy="beam", beam_size=beam_size, max_len=80)
    outputs = []
    for sentence in sentences:
        src = torch.tensor([translator.english.encode(sentence)[:64]])
        outputs.append(translator.chinese.decode(generate(translator.model, src, options).tokens))
    return outputs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--beam", type=int, default=4, help="beam size (0 to skip beam search)")
    parser.add_argument("--seed", type=int, default=13, help="the split seed used in training")
    parser.add_argument("--examples", type=int, default=20, help="sample translations to keep")
    args = parser.parse_args(argv)

    translator = Translator.load(args.checkpoint)
    seed = int(translator.history.get("settings", {}).get("seed", args.seed))
    settings = translator.history.get("settings", {})
    splits = split_pairs(
        load_pairs(args.data, use_dictionary=bool(settings.get("dictionary"))), seed=seed,
        n_test=int(settings.get("test_size", 1000)), n_dev=int(settings.get("dev_size", 500)),
        n_test_hsk=min(300, int(settings.get("test_size", 1000))),
    )
    report: dict = {"split_seed": seed, "tokenize": "zh", "sets": {}}
    for name, pairs in (("tatoeba_test", splits.test), ("hsk_test", splits.test_hsk)):
        sources = [p.english for p in pairs]
        references = [p.chinese for p in pairs]
        started = time.time()
        greedy = translate_batch(translator.model, translator.english, translator.chinese, sources)
        bleu, chrf = bleu_chrf(greedy, references)
        result = {"pairs": len(pairs), "greedy": {"bleu": bleu, "chrf": chrf,
                                                   "seconds": round(time.time() - started, 1)}}
        best = greedy
        if args.beam > 1:
            started = time.time()
            beamed = beam_translate(translator, sources, args.beam)
            bleu_b, chrf_b = bleu_chrf(beamed, references)
            result[f"beam{args.beam}"] = {"bleu": bleu_b, "chrf": chrf_b,
                                          "seconds": round(time.time() - started, 1)}
            best = beamed
        result["examples"] = [
            {"english": s, "reference": r, "greedy": g, "output": b}
            for s, r, g, b in list(zip(sources, references, greedy, best, strict=True))[
                : args.examples
            ]
        ]
        report["sets"][name] = result
        print(name, {k: v for k, v in result.items() if k != "examples"}, flush=True)
    main_set = report["sets"]["tatoeba_test"]
    report["test"] = main_set.get(f"beam{args.beam}", main_set["greedy"])
    report["test"]["decoding"] = f"beam {args.beam}" if args.beam > 1 else "greedy"
    path = args.checkpoint / "eval.json"
    path.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
