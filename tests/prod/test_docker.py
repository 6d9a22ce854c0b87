"""The Dockerfile only copies what exists, runs the command the README documents, and stays CPU-only."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list), "use the exec form: CMD [\"python\", ...]"
    return value


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/")
               for pattern in dockerignore())


def test_every_copied_path_exists_and_is_in_the_build_context():
    copies = [args for keyword, args in instructions() if keyword == "COPY"]
    assert copies
    for args in copies:
        *sources, _destination = shlex.split(args)
        for source in sources:
            assert not source.startswith("--"), "no COPY --from/--chown needed"
            assert (ROOT / source).exists(), f"COPY {source}: no such path"
            assert not ignored(source.rstrip("/")), f"COPY {source} but .dockerignore drops it"


def test_shipped_checkpoint_goes_into_the_image():
    from model.translator import CHECKPOINT_FILES

    copied = {shlex.split(args)[0].rstrip("/") for keyword, args in instructions() if keyword == "COPY"}
    assert "model" in copied
    for name in CHECKPOINT_FILES:
        assert not ignored(f"model/checkpoints/{name}")
    for heavy in ("runs", ".git", "tests"):
        assert ignored(heavy)


def test_cmd_is_the_documented_command():
    cmd = exec_form(next(args for keyword, args in instructions() if keyword == "CMD"))
    assert cmd[:3] == ["python", "-m", "app"]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0" and cmd[cmd.index("--port") + 1] == "8000"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert " ".join(cmd) in readme, f"README should document the image's command: {' '.join(cmd)}"
    assert "docker build" in readme and "docker run" in readme


def test_cpu_only_base_and_torch_from_the_lock():
    """torch comes from requirements.lock like every package: the lock names PyTorch's CPU index."""
    steps = instructions()
    assert steps[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(args for keyword, args in steps if keyword == "RUN")
    assert "--require-hashes -r requirements.lock" in runs
    assert "torch" not in runs and "--index-url" not in runs  # no second way to install torch
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lock
    assert "cu1" not in runs and "cuda" not in runs.lower()


def test_non_root_port_and_healthcheck():
    steps = instructions()
    users = [args for keyword, args in steps if keyword == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert ("EXPOSE", "8000") in steps
    health = next(args for keyword, args in steps if keyword == "HEALTHCHECK")
    assert "/healthz" in health and "curl" not in health and "wget" not in health
    probe = exec_form(health[health.index("CMD") + 3:].strip())
    assert probe[0] == "python"
