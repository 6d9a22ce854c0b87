"""A tiny training recipe on made-up counting data (one → 一 …), and one run of it per test run
(the ``tiny_recipe_run`` fixture of tests/conftest.py) that every test only reading a finished
run shares: tests/model/test_training.py, and /training's Adam settings in tests/app."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

WORDS = {"one": "一", "two": "二", "three": "三", "four": "四", "five": "五", "six": "六"}

TINY = """
name = "tiny"
description = {{ en = "counting words", zh = "数词" }}
[data]
sources = ["tatoeba", "hsk"]
test_size = 40
dev_size = 40
[tokenizer]
english_vocab = 60
[model]
d_model = 32
n_heads = 2
n_layers = 1
d_ff = 64
dropout = 0.0
[train]
threads = 1
batch_tokens = 150
save_every = 4
[transforms]
concat = {{ count = 20 }}
[[stages]]
label = {{ en = "from random weights", zh = "从随机权重开始" }}
epochs = {epochs}
warmup = {warmup}
lr_factor = 0.5
average = 2
snapshots = [0, 5]
[[stages]]
label = {{ en = "lower rate", zh = "较低学习率" }}
epochs = 1
warmup = 10
lr_factor = 0.2
"""


def write_synthetic_data(folder: Path) -> None:
    """700 Tatoeba-like lines of two to four number words and their characters, six HSK lines."""
    rng = random.Random(0)
    folder.mkdir()
    lines = []
    seen = set()
    while len(lines) < 700:
        words = [rng.choice(list(WORDS)) for _ in range(rng.randint(2, 4))]
        english = " ".join(words)
        if english in seen:
            continue
        seen.add(english)
        lines.append(f"{english}\t{''.join(WORDS[w] for w in words)}\tsynthetic")
    (folder / "tatoeba-cmn-eng.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    header = "id\thsk_level\ttopic\tenglish\tchinese_simplified\tchinese_traditional\tpinyin\n"
    hsk = "".join(
        f"h{i}\t1\tt\t{w} {w}\t{z}{z}\t{z}{z}\tx\n" for i, (w, z) in enumerate(WORDS.items())
    )
    (folder / "hsk-sentences-en-zh.tsv").write_text(header + hsk, encoding="utf-8")


def write_recipe(path: Path, epochs: int = 2, warmup: int = 50) -> Path:
    path.write_text(TINY.format(epochs=epochs, warmup=warmup), encoding="utf-8")
    return path


def run_recipe(recipe: Path, data: Path, folder: Path, *more: str) -> Path:
    """``python -m model.training.train`` in-process; returns the finished checkpoint's folder."""
    from model.training.train import main as train_main

    train_main([str(recipe), "--data", str(data), "--out", str(folder / "out"),
                "--work", str(folder / "work"), "--no-progress", *more])
    return folder / "out"


@dataclass(frozen=True)
class TinyRun:
    """A finished run of the default tiny recipe (2 + 1 epochs): read it, never write into it."""

    data: Path
    recipe: Path
    folder: Path  # out/ (the checkpoint) and work/ (each stage's state.pt, snapshots, epochs)

    @property
    def out(self) -> Path:
        return self.folder / "out"


def make_tiny_run(root: Path) -> TinyRun:
    write_synthetic_data(root / "data")
    recipe = write_recipe(root / "tiny.toml")
    run_recipe(recipe, root / "data", root / "run")
    return TinyRun(root / "data", recipe, root / "run")
