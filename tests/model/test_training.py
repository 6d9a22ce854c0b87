"""A short run of the real training command on a synthetic task learns it."""

import json
import random

from model.decoding import DecodingOptions
from model.train import main as train_main
from model.translator import Translator

WORDS = {"one": "一", "two": "二", "three": "三", "four": "四", "five": "五", "six": "六"}


def _write_synthetic_data(folder):
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


def test_training_learns_a_synthetic_task(tmp_path):
    _write_synthetic_data(tmp_path / "data")
    out = tmp_path / "checkpoint"
    train_main([
        "--data", str(tmp_path / "data"), "--out", str(out), "--work", str(tmp_path / "work"),
        "--epochs", "20", "--batch-tokens", "150", "--warmup", "100", "--lr-factor", "2",
        "--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--dropout", "0",
        "--en-vocab", "60", "--average", "2", "--test-size", "40", "--dev-size", "40",
        "--no-progress", "--threads", "1",
    ])
    history = json.loads((out / "history.json").read_text())
    first, last = history["steps"][0]["loss"], history["epochs"][-1]["train_loss"]
    assert last < first / 3, (first, last)
    assert history["epochs"][-1]["dev_bleu"] > 50
    translator = Translator.load(out)
    assert translator.translate("two five one", DecodingOptions()).translation == "二五一"
