"""Browser tests: a real uvicorn server on a free loopback port and Debian's headless Chromium
(the ``browser`` fixture of tests/conftest.py, one for the whole run).

Chromium must be at /usr/bin/chromium (scripts/test.sh installs it); without it these tests fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bench.server import wait_for_port
from tests.conftest import MARIAN_NAME, warm_page
from tests.run_shared import once, shared_server

ROOT = Path(__file__).resolve().parents[2]
# screenshots and server logs: under the system temp folder, never left in the checkout
ARTIFACTS = Path(tempfile.gettempdir()) / "inside-transformer-test-artifacts"
# The screenshots of the pages' states (``shot``) are for a person to look at and no test reads
# them: they are written when asked (ITT_TEST_SHOTS=1: ~100 PNGs, ~40 MB, and ~40 s of CPU on the
# 2-core machine, ~7 % of the suite), and a failed browser test's page is always saved.
SHOTS = os.environ.get("ITT_TEST_SHOTS") == "1"
LOOPBACK = {"127.0.0.1", "localhost"}
# What the shipped checkpoint answers, greedy and beam 4 alike (looked up once through
# /api/translate; tests/e2e/test_first_views.py asks again, so a retrained checkpoint fails there
# first): the browser tests on ``shipped_server`` check these real translations.
SHIPPED_TRANSLATIONS = {
    "The cat sits on the mat.": "猫坐在垫子上。",
    "The dog runs in the park.": "狗在公园里跑步。",
    "Where is the station?": "车站在哪里？",
    "I like green tea.": "我喜欢绿茶。",
}


def start_server(checkpoint: Path | None, log_name: str, flag: str = "--checkpoint"):
    """``python -m app`` on a loopback port the kernel picks (``--port 0``: no race with other
    servers starting at once), with the shipped checkpoint when ``checkpoint`` is None
    (``flag="--model"`` serves it as a model folder, e.g. a Hugging Face Marian one); returns the
    process and its URL once /healthz answers. Its output goes to ARTIFACTS."""
    ARTIFACTS.mkdir(exist_ok=True)
    # a server of the run's (tests/run_shared.py) or a worker's own: one log each
    log = ARTIFACTS / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{log_name}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ITT_ACCESS_LOG": "false"}
    env.pop("ITT_CHECKPOINT", None)
    env.pop("ITT_MODEL", None)
    # one worker process: the default (one per core) would load the model in a supervisor's check
    # and in two workers, ~3 torch imports more per server, and split a page's cache between two
    # processes; tests/prod/test_setup.py and test_supervisor.py cover several workers
    command = [sys.executable, "-m", "app", "--port", "0", "--workers", "1"]
    if checkpoint is not None:
        command += [flag, str(checkpoint)]
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    try:
        url = f"http://127.0.0.1:{wait_for_port(process, 120)}"
    except RuntimeError:
        process.kill()
        pytest.fail(f"the server did not start; see {log}")
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the server did not start; see {log}")
        time.sleep(0.3)


@contextmanager
def running_server(checkpoint: Path | None, log_name: str, flag: str = "--checkpoint"):
    """A server of the test's own (``start_server``), stopped afterwards: for a checkpoint that one
    test or file makes."""
    process, url = start_server(checkpoint, log_name, flag)
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def run_server(name: str, checkpoint: Path | None, flag: str = "--checkpoint") -> str:
    """The URL of the run's server ``name``: one for every worker and file (tests/run_shared.py),
    started by the first that asks and stopped when the run ends."""
    def start() -> tuple[int, str]:
        process, url = start_server(checkpoint, f"{name}.log", flag)
        return process.pid, url

    return shared_server(name, start)


@pytest.fixture(scope="session")
def server(tiny_checkpoint):
    """The tiny model (it has learned the eight TINY_PAIRS): for what needs only shapes."""
    return run_server("e2e-server", tiny_checkpoint)


@pytest.fixture(scope="session")
def shipped_server():
    """The shipped checkpoint, one server for every file that checks real translations."""
    return run_server("e2e-shipped-server", None)


@pytest.fixture(scope="session")
def tiny_marian() -> Path:
    """The browser tests' tiny Hugging Face Marian folder (tests/marian_folder.py), taught its ten
    pairs (120 steps, about a second), so that its pages draw a few steps, not max_len's 128."""
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from tests.marian_folder import make_tiny_marian

    folder = once("e2e-marian", lambda folder: make_tiny_marian(folder / MARIAN_NAME, learn_steps=120))
    return folder / MARIAN_NAME


@pytest.fixture(scope="session")
def marian_server(tiny_marian):
    """``--model`` on the tiny Hugging Face Marian folder (tests/marian_folder.py)."""
    return run_server("e2e-marian-server", tiny_marian, flag="--model")


def wait_idle(page) -> None:
    """Until the page has no request in flight and no model call pending (its busy counter): on a
    page of ``warm_page``, which tracks its requests, ``settle`` (no fixed wait); on any other,
    Playwright's networkidle (500 ms without a request) and the busy counter."""
    in_flight = getattr(page, "in_flight", None)
    if in_flight is not None:
        settle(page, in_flight)
        return
    page.wait_for_load_state("networkidle")
    page.locator("body.busy").wait_for(state="detached")  # no wait_for_function: CSP forbids eval


# two animation frames: whatever the page's scripts queued after their last answer has run
FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


def settle(page, in_flight: set, timeout_s: float = 60) -> None:
    """Until the page has loaded, no model call is pending (its busy counter), no request is in
    flight (``track_requests``) and it stays so over two animation frames: what networkidle
    checks, without its fixed 500 ms of quiet after every load."""
    deadline = time.monotonic() + timeout_s
    page.wait_for_load_state("load")
    while True:
        # no wait_for_function: CSP forbids eval
        page.locator("body.busy").wait_for(state="detached",
                                           timeout=max(1.0, deadline - time.monotonic()) * 1000)
        page.evaluate(FRAMES)
        if not in_flight and page.locator("body.busy").count() == 0:
            return
        assert time.monotonic() < deadline, f"still loading after {timeout_s} s: {in_flight}"


def unfold(page, *folds: str) -> None:
    """Open each closed fold (a <details>) by its summary, as a reader does, and wait until every
    chart in it is drawn: a chart in a closed fold waits for its fold to open (data-waiting,
    static/js/common.js), so a test that reads one opens its fold first."""
    for fold in folds:
        if not page.locator(fold).evaluate("(d) => d.open"):
            page.locator(f"{fold} > summary").click()
        page.locator(f"{fold} [data-waiting]").first.wait_for(state="detached")


class Watch:
    """Console errors and every request URL a page made."""

    def __init__(self):
        self.errors: list[str] = []
        self.urls: list[str] = []

    def check(self) -> None:
        assert self.errors == [], self.errors
        foreign = [u for u in self.urls
                   if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname not in LOOPBACK]
        assert foreign == [], foreign


def save_failure(page, request) -> None:
    """The page as it was when its test failed (tests/conftest.py keeps each phase's report)."""
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed and not page.is_closed():
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^\w.-]+", "-", request.node.nodeid.split("::", 1)[-1])[:120]
        try:
            page.screenshot(path=str(ARTIFACTS / f"failed-{name}.png"), full_page=True, timeout=10_000)
        except Exception as error:  # a crashed page: the failure itself says more
            print(f"no screenshot of the failed page: {error}")


@pytest.fixture()
def page(warm_context, request):
    page = warm_page(warm_context)
    watch = Watch()
    page.on("console", lambda m: watch.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: watch.errors.append(str(e)))
    page.on("request", lambda r: watch.urls.append(r.url))
    page.watch = watch
    page.set_default_timeout(30_000)
    yield page
    save_failure(page, request)
    page.close()
    watch.check()


def _sized_page(context, request, width: int, height: int, console: bool = False):
    """A page of that viewport (English) that fails the test on any uncaught script error (and,
    with ``console``, on any console error)."""
    page = warm_page(context, width, height)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    if console:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_default_timeout(30_000)
    yield page
    save_failure(page, request)
    page.close()
    assert errors == [], errors


@pytest.fixture()
def phone(warm_context, request):
    """A 390 px page (English) that fails the test on any uncaught script error."""
    yield from _sized_page(warm_context, request, 390, 844)


@pytest.fixture()
def wide(warm_context, request):
    """A 1440×900 page (English) that fails the test on any script or console error."""
    yield from _sized_page(warm_context, request, 1440, 900, console=True)


def shot(target, name: str) -> None:
    """With ITT_TEST_SHOTS=1, ``name``.png in ARTIFACTS: the whole page, or one element (a locator)."""
    if not SHOTS:
        return
    ARTIFACTS.mkdir(exist_ok=True)
    if hasattr(target, "goto"):
        target.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    else:
        target.screenshot(path=str(ARTIFACTS / f"{name}.png"))


# /tokens' padded mini-batch: per chart, each column's width in px (its cells print a piece and
# its id), whether its box scrolls sideways and whether that box is reachable from the keyboard
BATCH_CELLS = """() => ['#batch-source', '#batch-decoder', '#batch-labels'].map((id) => {
    const node = document.querySelector(id);
    const box = node.parentElement;
    return { id, column: node._fullLayout.xaxis._length / node.data[0].z[0].length,
             scrolls: box.scrollWidth > box.clientWidth + 2, focusable: box.tabIndex === 0 };
})"""
