"""A fresh machine needs two commands: the README's run and test commands, and CI runs the latter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import pytest

from app import cli
from bench.server import wait_for_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


RUN_COMMAND = ("pip install --retries 1 --require-hashes -r requirements.lock "
               "&& pip install --no-deps -e . && python -m app")


def test_readme_has_the_two_commands():
    assert RUN_COMMAND in README
    assert "bash scripts/test.sh" in README


def test_ci_runs_the_readme_test_command_in_a_new_virtual_environment():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "-m venv" in ci and "activate" in ci
    assert ci.index("-m venv") < ci.rindex("bash scripts/test.sh")
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements-dev.lock" in script
    assert "--no-deps" in script and "pytest" in script and "ruff check" in script


def _locked(name: str) -> dict[str, str]:
    """package → pinned version in a lock file; every pin carries at least one hash."""
    text = (ROOT / name).read_text(encoding="utf-8")
    pins = {}
    for block in text.split("\n"):
        if "==" in block and not block.startswith((" ", "#")):
            package, version = block.split(" ")[0].split("==")
            pins[package.lower()] = version
    assert text.count("--hash=sha256:") >= len(pins)
    return pins


def test_locks_pin_every_dependency_and_agree():
    """Both locks pin every dependency pyproject.toml names, and the same version where they share one."""
    import re

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    runtime, dev = _locked("requirements.lock"), _locked("requirements-dev.lock")

    def name(requirement: str) -> str:
        return re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower()

    assert {name(r) for r in project["dependencies"]} <= set(runtime)
    assert {name(r) for r in project["optional-dependencies"]["dev"]} <= set(dev)
    assert set(runtime) <= set(dev)
    assert all(dev[package] == version for package, version in runtime.items())
    assert runtime["torch"].startswith("2.13.0")  # the CPU build on this project's machines


def test_dev_extra_has_what_the_tests_import():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    names = " ".join(extras["dev"])
    for package in ("pytest", "httpx", "playwright", "schemathesis", "ruff"):
        assert package in names


def test_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    assert scripts["inside-transformer"] == "app.cli:main"


def test_serve_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--host", "--port", "--checkpoint", "--workers"):
        assert flag in out


def test_missing_checkpoint_says_what_to_do(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["serve", "--checkpoint", str(tmp_path / "nothing")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "python -m model.training.train" in err and "Traceback" not in err


def test_console_script_serves(tiny_checkpoint):
    """``inside-transformer serve`` (installed by ``pip install -e .``) starts a working server."""
    beside_python = Path(sys.executable).parent / "inside-transformer"
    script = str(beside_python) if beside_python.exists() else shutil.which("inside-transformer")
    assert script, "console script missing: run `pip install -e .`"
    process = subprocess.Popen(
        [script, "serve", "--port", "0", "--checkpoint", str(tiny_checkpoint)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        try:
            port = wait_for_port(process, 120)  # the port the kernel gave it: no race to bind
        except RuntimeError as error:
            process.kill()
            raise AssertionError(process.stderr.read().decode()) from error
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
                break
            except httpx.HTTPError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert response.status_code == 200 and response.json() == {"status": "ok"}
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=15)
    # the access log: one JSON object per request on stderr
    entries = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    health = [e for e in entries if e["path"] == "/healthz" and e["status"] == 200]
    assert health and {"method", "path", "status", "duration_ms"} <= set(health[-1])


def test_readme_links_and_screenshots_exist():
    """Every local file the README links to exists; screenshots are small PNGs."""
    import re

    links = re.findall(r"\]\((?!https?:)([^)#]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).exists(), f"README links to missing {link}"
    shots = [ROOT / link for link in links if link.endswith(".png")]
    assert len(shots) >= 4
    for shot in shots:
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert shot.stat().st_size < 200 * 1024, f"{shot.name} is over 200 KB"


def test_several_workers(tiny_checkpoint):
    """``--workers 2``: two processes, each with its own model and cache, answer alike."""
    from bench.server import LiveServer

    with LiveServer(tiny_checkpoint, workers=2, env={"ITT_ACCESS_LOG": "false"}) as server:
        assert len(server.pids()) >= 3  # the supervisor and its two workers
        answers = set()
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for _ in range(8):
                response = client.post("/api/translate", json={"text": "Where is the station?"},
                                       headers={"connection": "close"})
                assert response.status_code == 200
                answers.add(response.json()["translation"])
        assert len(answers) == 1  # stateless: whichever worker answers, the same translation
