"""Translate English from standard input: ``python -m model.translate < sentences.txt``.

One English sentence per line in, one Chinese translation per line out (greedy by default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.decoding import STRATEGIES, DecodingOptions
from model.translator import DEFAULT_CHECKPOINT, CheckpointError, InputError, Translator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--strategy", choices=STRATEGIES, default="greedy")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-len", type=int, default=128)
    args = parser.parse_args(argv)
    try:
        translator = Translator.load(args.checkpoint)
        options = DecodingOptions(
            strategy=args.strategy, beam_size=args.beam_size, temperature=args.temperature,
            top_k=args.top_k, top_p=args.top_p, seed=args.seed, max_len=args.max_len,
        )
    except (CheckpointError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    status = 0
    for line in sys.stdin:
        text = line.strip()
        if not text:
            print()
            continue
        try:
            print(translator.translate(text, options).translation, flush=True)
        except InputError as error:
            print(f"error: line skipped: {error}", file=sys.stderr)
            print()
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
