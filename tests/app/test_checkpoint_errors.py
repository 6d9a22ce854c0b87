"""A corrupt or partial model folder stops the server with one line that names the file and the
fix, exit status 2, never a traceback (issue 30, item 4) — ours and a Hugging Face Marian one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from model.adapters.loading import load_translator
from model.translator import CheckpointError

ROOT = Path(__file__).resolve().parents[2]


def garbage(file: Path) -> None:
    file.write_bytes(b"\x00not what this file should hold{{")


def truncated(file: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def empty(file: Path) -> None:
    file.write_bytes(b"")


def wrong_json(file: Path) -> None:
    file.write_text(json.dumps([1, 2, 3]))  # valid JSON, not the object the loader expects


DAMAGE = [garbage, truncated, empty, wrong_json]
OUR_FILES = ["config.json", "weights.safetensors", "tokenizer_en.json", "vocab_zh.json",
             "history.json", "eval.json"]


def damaged(source: Path, tmp_path: Path, name: str, damage) -> Path:
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    damage(folder / name)
    return folder


def one_line_naming(error: CheckpointError, file: Path | str) -> str:
    message = str(error)
    assert "\n" not in message, message
    assert str(file) in message, message
    return message


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", OUR_FILES)
def test_a_damaged_checkpoint_file_is_named(tiny_checkpoint, tmp_path, name, damage):
    folder = damaged(tiny_checkpoint, tmp_path, name, damage)
    with pytest.raises(CheckpointError) as error:
        load_translator(folder)
    message = one_line_naming(error.value, folder / name)
    assert "python -m model.training.train" in message  # the fix


def test_weights_that_do_not_fit_config_json_are_named(tiny_checkpoint, tmp_path):
    folder = tmp_path / "checkpoint"
    shutil.copytree(tiny_checkpoint, folder)
    config = json.loads((folder / "config.json").read_text())
    config["d_ff"] *= 2
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as error:
        load_translator(folder)
    one_line_naming(error.value, folder / "weights.safetensors")


MARIAN_FILES = ["config.json", "model.safetensors", "vocab.json", "source.spm", "target.spm"]


@pytest.mark.parametrize("damage", [garbage, truncated], ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", MARIAN_FILES)
def test_a_damaged_marian_folder_is_named(tiny_marian, tmp_path, name, damage):
    folder = damaged(tiny_marian, tmp_path, name, damage)
    with pytest.raises(CheckpointError) as error:
        load_translator(folder)
    one_line_naming(error.value, folder)


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app", "--port", "0", *args], cwd=ROOT, capture_output=True,
        text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize(("workers", "name"), [("1", "config.json"),
                                               ("2", "weights.safetensors")])
def test_the_server_stops_with_one_line_and_exit_2(tiny_checkpoint, tmp_path, workers, name):
    folder = damaged(tiny_checkpoint, tmp_path, name, garbage)
    result = serve("--workers", workers, "--checkpoint", str(folder))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and str(folder / name) in lines[0], result.stderr
