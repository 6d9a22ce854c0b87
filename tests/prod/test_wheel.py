"""A wheel that runs anywhere: built from this source tree, installed into a new virtual
environment and started as ``inside-transformer serve`` from a folder outside the repository, it
serves every page, its static files and a translation from what the wheel carries (templates,
static files, locales, the checkpoint)."""

from __future__ import annotations

import os
import shutil
import site
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

from app.layout import NAV

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 300  # generous: the machine may be busy; the server is polled, never waited for blindly


def _build_sources() -> list[str]:
    """What the build reads: pyproject.toml, the readme, every package folder it names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    folders = {name.split(".")[0] for name in setuptools["packages"]}
    folders |= {folder.split("/")[0] for folder in setuptools.get("package-dir", {}).values()}
    return ["pyproject.toml", config["project"]["readme"], *sorted(folders)]


def _run(*command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel`` of a copy of the source tree (the build writes build/ and *.egg-info beside
    pyproject.toml: a copy keeps the shared checkout as it is). No network: setuptools is the
    locked one already installed (``--no-build-isolation``), nothing else is fetched."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for name in _build_sources():
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=skip)
        else:
            shutil.copy2(ROOT / name, source / name)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--wheel-dir", work / "dist", source)
    (built,) = (work / "dist").glob("inside_transformer-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel) -> Path:
    """A new virtual environment with the wheel installed. Its dependencies (torch and the rest,
    exactly the locked versions this suite runs on) are not installed again: a .pth file puts the
    running environment's site-packages after the venv's own, as ``--system-site-packages``
    would for a base interpreter. Directories a .pth file adds are not site directories, so the
    editable install of this checkout that may live there (its finder is a .pth of its own) is
    not seen: ``app`` and ``model`` can only come from the wheel."""
    venv = wheel.parent / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    # the running pip installs into the new environment (pip ≥ 22.3); the venv needs no pip
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "--quiet", wheel)
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
                   .stdout.strip())
    running = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()]
    (purelib / "_running_environment.pth").write_text(
        "\n".join(dict.fromkeys(running)) + "\n", encoding="utf-8")
    return venv


def test_the_wheel_carries_templates_static_files_locales_and_the_checkpoint(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("app/templates/base.html", "app/templates/xray.html", "app/static/js/common.js",
                     "app/static/css/app.css", "app/locales/en/common.json",
                     "app/locales/zh/common.json", "model/checkpoints/weights.safetensors",
                     "model/checkpoints/config.json", "model/checkpoints/tokenizer_en.json",
                     "model/checkpoints/vocab_zh.json", "model/training/probe.tsv",
                     "model/adapters/tokenization_inside_transformer.py"):
        assert required in names, required
    shipped = {p.relative_to(ROOT).as_posix() for folder in ("templates", "static")
               for p in (ROOT / folder).rglob("*") if p.is_file()}
    assert {f"app/{name}" for name in shipped} <= names  # every template and static file
    assert not any(name.startswith(("tests/", "bench/", "scripts/")) for name in names)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(venv: Path, cwd: Path) -> tuple[subprocess.Popen, str]:
    """``inside-transformer serve`` on a free port, once it answers /healthz. Another process may
    take the port between choosing and binding: then the server exits and another port is tried."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("ITT_") and key not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(ITT_ACCESS_LOG="false", PYTHONUNBUFFERED="1")
    log = cwd / "server.log"
    for _ in range(3):
        port = _free_port()
        with log.open("wb") as output:
            process = subprocess.Popen(
                [venv / "bin" / "inside-transformer", "serve", "--port", str(port), "--workers", "1"],
                cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    return process, url
            except httpx.HTTPError:
                time.sleep(0.2)
        output_text = log.read_text(errors="replace")
        if process.poll() is None:
            process.kill()
            process.wait()
            pytest.fail(f"no answer from /healthz within {STARTUP_S} s:\n{output_text}")
        if "address already in use" not in output_text.lower():
            pytest.fail(f"the installed server exited with {process.returncode}:\n{output_text}")
    pytest.fail("no free port to serve on after 3 tries")


def test_installed_wheel_serves_every_page_from_another_folder(venv, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert not elsewhere.resolve().is_relative_to(ROOT)
    where = _run(venv / "bin" / "python", "-c",
                 "import app.layout as l, model.translator as t; "
                 "print(l.TEMPLATES, l.STATIC, t.DEFAULT_CHECKPOINT, sep='\\n')",
                 cwd=elsewhere, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    for folder in where.stdout.split():  # the wheel's copies, not the checkout's
        assert Path(folder).is_relative_to(venv) and Path(folder).is_dir(), folder
    process, url = _start(venv, elsewhere)
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            for lang in ("en", "zh"):
                client.cookies.set("lang", lang)
                for path, _ in NAV:
                    response = client.get(path)
                    assert response.status_code == 200, (path, lang, response.text[:300])
                    assert "<html" in response.text
            for asset in ("/static/js/common.js", "/static/css/app.css", "/static/favicon.svg",
                          "/vendor/plotly.min.js"):
                assert client.get(asset).status_code == 200, asset
            answer = client.post("/api/translate", json={"text": "The cat sits on the mat."})
            assert answer.status_code == 200, answer.text
            assert answer.json()["translation"]
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
