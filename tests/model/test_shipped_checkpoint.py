"""The checkpoint committed in model/checkpoints: loads without pickle, traces, translates."""

import json
import math
import subprocess
import sys

from model.decoding import DecodingOptions
from tests.conftest import SHIPPED_CHECKPOINT

TEXT = "The cat sits on the mat."


def test_checkpoint_is_small_and_pickle_free():
    files = {p.name: p.stat().st_size for p in SHIPPED_CHECKPOINT.iterdir() if p.is_file()}
    assert {"weights.safetensors", "config.json", "tokenizer_en.json", "vocab_zh.json",
            "history.json", "eval.json"} <= set(files)
    assert sum(files.values()) <= 40 * 1024 * 1024
    assert not any(name.endswith((".pt", ".pth", ".pkl", ".bin")) for name in files)


def test_shipped_trace_of_the_cat_sentence(shipped_translator):
    trace = shipped_translator.trace(TEXT, DecodingOptions())
    assert "猫" in trace.translation
    S, T = len(trace.source_tokens), len(trace.decoder_input)
    config = shipped_translator.config
    assert len(trace.encoder) == config.n_encoder_layers
    assert len(trace.decoder) == config.n_decoder_layers
    for layer in trace.decoder:
        assert len(layer["cross_attention"]) == config.n_heads
        assert all(len(head) == T and len(head[0]) == S for head in layer["cross_attention"])
    assert trace.steps[-1].token == "<eos>"
    beam = shipped_translator.trace(TEXT, DecodingOptions(strategy="beam", beam_size=4))
    assert "猫" in beam.translation


def test_shipped_model_quality_is_recorded(shipped_translator):
    """eval.json scores every held-out split and the probe set in both decodings, with figures a
    trained model reaches, and its headline is one of them; history.json ends on a trained dev
    score. (How good the weights are is measured again in tests/model/test_shipped_quality.py.)"""
    evaluation = shipped_translator.evaluation
    decodings = set(evaluation["decodings"])
    assert decodings == {"greedy", "beam4"}
    splits = {**evaluation["sets"], "probe": evaluation["probe"]}
    assert len(splits) >= 6
    for name, split in splits.items():
        assert split["pairs"] > 0, name
        for decoding in decodings:
            score = split[decoding]
            assert 5 <= score["bleu"] <= 100 and 5 <= score["chrf"] <= 100, (name, decoding, score)
    headline = evaluation["test"]
    decoding = headline["decoding"].replace(" ", "")
    assert headline["bleu"] in {split[decoding]["bleu"] for split in evaluation["sets"].values()}
    history = shipped_translator.history
    assert history["epochs"] and history["epochs"][-1]["dev_bleu"] > 15
    assert history["final"]["dev_bleu"] > 15


def test_translate_cli_reads_stdin():
    result = subprocess.run(
        [sys.executable, "-m", "model.translate"], input="The cat sits on the mat.\nI love you.\n",
        capture_output=True, text=True, timeout=120, check=True,
    )
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and "猫" in lines[0]


def test_translate_cli_missing_checkpoint(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "model.translate", "--checkpoint", str(tmp_path)],
        input="hi\n", capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1 and "checkpoint" in result.stderr


def test_history_is_plottable():
    """/training draws these curves: steps in order, finite numbers, and an epoch to score."""
    history = json.loads((SHIPPED_CHECKPOINT / "history.json").read_text(encoding="utf-8"))
    steps, epochs = history["steps"], history["epochs"]
    assert len(steps) >= 2 and epochs
    assert all({"step", "loss", "lr", "grad_norm"} <= set(s) for s in steps)
    numbers = [s["step"] for s in steps]
    assert numbers == sorted(set(numbers)), "steps out of order or repeated"
    assert all(math.isfinite(s["loss"]) and s["loss"] > 0 and s["lr"] >= 0
               and math.isfinite(s["grad_norm"]) for s in steps)
    assert all({"epoch", "dev_bleu", "dev_chrf"} <= set(e) for e in epochs)
    assert numbers[-1] <= epochs[-1]["step"]
