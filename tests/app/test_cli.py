"""Start-up: settings from flags and ITT_* variables, and a one-line error without a checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.settings import AUTO_WORKERS_MAX, Settings, usable_cores

ROOT = Path(__file__).resolve().parents[2]


def test_settings_defaults_and_environment(monkeypatch, tmp_path):
    settings = Settings()
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.1", 8000, 0)
    assert settings.checkpoint == ROOT / "model" / "checkpoints"
    monkeypatch.setenv("ITT_CHECKPOINT", str(tmp_path))
    monkeypatch.setenv("ITT_PORT", "9123")
    settings = Settings()
    assert settings.checkpoint == tmp_path and settings.port == 9123
    assert Settings(port=9000).port == 9000  # flags win over the environment


def test_default_workers_one_per_usable_core(monkeypatch, tmp_path):
    """``workers`` 0 (the default) starts one worker per core the server may use, at most
    AUTO_WORKERS_MAX; a container's CPU limit (cgroup v2 ``cpu.max``) lowers the count."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    limit = tmp_path / "cpu.max"
    assert usable_cores(limit) == 16  # no file: the affinity decides
    limit.write_text("max 100000\n")
    assert usable_cores(limit) == 16
    limit.write_text("150000 100000\n")  # docker run --cpus 1.5
    assert usable_cores(limit) == 2
    limit.write_text("garbage\n")
    assert usable_cores(limit) == 16
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert Settings().worker_count == min(usable_cores(), AUTO_WORKERS_MAX) <= 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert Settings().worker_count == min(usable_cores(), AUTO_WORKERS_MAX)
    assert 1 <= Settings().worker_count <= AUTO_WORKERS_MAX
    assert Settings(workers=3).worker_count == 3  # an explicit count is kept as it is
    monkeypatch.setenv("ITT_WORKERS", "2")
    assert Settings().worker_count == 2


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
    assert "no usable checkpoint" in lines[0] and "python -m model.training.train" in lines[0]
    assert "Traceback" not in result.stderr


def test_console_script_entry_point_shares_the_code(tmp_path):
    result = run("-c", "from app.cli import main; main()", "serve", "--checkpoint",
                 str(tmp_path), env={"ITT_PORT": "1"})
    assert result.returncode == 2
    assert "no usable checkpoint" in result.stderr
    usage = run("-c", "from app.cli import main; main()", "--help")
    assert "serve" in usage.stdout and "--checkpoint" in usage.stdout
