"""Start-up: settings from flags and ITT_* variables, and a one-line error without a checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_settings_defaults_and_environment(monkeypatch, tmp_path):
    settings = Settings()
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.1", 8000, 1)
    assert settings.checkpoint == ROOT / "model" / "checkpoints"
    monkeypatch.setenv("ITT_CHECKPOINT", str(tmp_path))
    monkeypatch.setenv("ITT_PORT", "9123")
    settings = Settings()
    assert settings.checkpoint == tmp_path and settings.port == 9123
    assert Settings(port=9000).port == 9000  # flags win over the environment


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


def test_missing_checkpoint_is_a_one_line_error(tmp_path):
    result = run("-m", "app", "--checkpoint", str(tmp_path / "nowhere"), "--port", "1")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no usable checkpoint" in lines[0] and "python -m model.train" in lines[0]
    assert "Traceback" not in result.stderr


def test_console_script_entry_point_shares_the_code(tmp_path):
    result = run("-c", "from app.cli import main; main()", "serve", "--checkpoint",
                 str(tmp_path), env={"ITT_PORT": "1"})
    assert result.returncode == 2
    assert "no usable checkpoint" in result.stderr
    usage = run("-c", "from app.cli import main; main()", "--help")
    assert "serve" in usage.stdout and "--checkpoint" in usage.stdout
