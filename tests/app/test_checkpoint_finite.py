"""A checkpoint whose weights are not all finite, or that cannot translate a probe sentence, is
refused when it loads (issue 59, item 4): one line naming the folder's file and the fix, and the
server exits with status 2 — never "loaded" followed by empty translations and 500s."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.adapters.loading import load_translator
from model.translator import CheckpointError

ROOT = Path(__file__).resolve().parents[2]


def with_weights(source: Path, tmp_path: Path, change) -> Path:
    """A copy of ``source`` whose weights went through ``change(state)``."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(source, folder)
    state = load_file(str(folder / "weights.safetensors"))
    change(state)
    save_file(state, str(folder / "weights.safetensors"))
    return folder


def one_nan(state: dict) -> None:
    name = sorted(state)[len(state) // 2]
    state[name] = state[name].clone()
    state[name].view(-1)[0] = float("nan")


def all_nan(state: dict) -> None:
    for name in state:
        state[name] = torch.full_like(state[name], float("nan"))


def one_inf(state: dict) -> None:
    name = sorted(state)[0]
    state[name] = state[name].clone()
    state[name].view(-1)[-1] = float("-inf")


def overflowing(state: dict) -> None:
    """Finite weights whose products overflow float32: the forward pass turns to inf and NaN."""
    for name in state:
        if name.endswith("weight") and state[name].dim() == 2:
            state[name] = state[name] * 1e30


@pytest.mark.parametrize("change", [one_nan, all_nan, one_inf], ids=lambda c: c.__name__)
def test_non_finite_weights_are_refused(tiny_checkpoint, tmp_path, change):
    folder = with_weights(tiny_checkpoint, tmp_path, change)
    with pytest.raises(CheckpointError) as error:
        load_translator(folder)
    message = str(error.value)
    assert "\n" not in message
    assert str(folder / "weights.safetensors") in message and "not finite" in message, message
    assert "python -m model.training.train" in message  # the fix


def test_a_model_that_cannot_translate_the_probe_is_refused(tiny_checkpoint, tmp_path):
    folder = with_weights(tiny_checkpoint, tmp_path, overflowing)
    with pytest.raises(CheckpointError) as error:
        load_translator(folder)
    message = str(error.value)
    assert "\n" not in message
    assert str(folder) in message and "cannot translate" in message, message


def test_the_tiny_random_model_still_loads(tiny_checkpoint):
    assert load_translator(tiny_checkpoint).translate("The cat sits on the mat.").steps


@pytest.mark.parametrize(("workers", "change"), [("1", all_nan), ("2", one_nan), ("1", overflowing)],
                         ids=["1-all_nan", "2-one_nan", "1-overflowing"])
def test_the_server_refuses_them_with_one_line_and_exit_2(tiny_checkpoint, tmp_path, workers,
                                                          change):
    folder = with_weights(tiny_checkpoint, tmp_path, change)
    result = subprocess.run(
        [sys.executable, "-m", "app", "--port", "0", "--workers", workers, "--checkpoint",
         str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and str(folder) in lines[0], result.stderr[-2000:]
