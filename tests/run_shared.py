"""What one test run makes once and shares between its pytest-xdist workers: the tiny models and the
browser tests' servers (issue 57: one tiny-model and one shipped-model server per run, not one per
worker; tiny models trained once per run).

The run's controller (the process that starts the workers, or pytest itself without xdist) makes a
folder for the run and names it in ITT_TEST_RUN_FOLDER, which the workers inherit. A worker that
needs a shared thing takes that thing's lock in the folder: the first makes it, the others find it
made. A shared server outlives the worker that started it (the other may still be using it): the
controller stops every server recorded in the folder when the run ends, and removes the folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

RUN_FOLDER = "ITT_TEST_RUN_FOLDER"
STOP_WAIT_S = 10  # a server's grace after SIGTERM (its own shutdown takes ~1 s) before SIGKILL


def begin_run() -> None:
    """In the controller: the run's folder, named in the environment the workers will inherit."""
    os.environ[RUN_FOLDER] = tempfile.mkdtemp(prefix="inside-transformer-test-run-")


def end_run() -> None:
    """In the controller, after every worker is done: stop the run's servers, remove its folder."""
    folder = Path(os.environ.pop(RUN_FOLDER, ""))
    if not folder.name:
        return
    for record in folder.glob("*.server.json"):
        stop(json.loads(record.read_text(encoding="utf-8"))["pid"])
    shutil.rmtree(folder, ignore_errors=True)


def run_folder() -> Path:
    folder = os.environ.get(RUN_FOLDER)
    if not folder:  # a worker of a controller without this conftest: cannot happen in this suite
        raise RuntimeError(f"{RUN_FOLDER} is not set: tests/conftest.py's pytest_configure sets it")
    return Path(folder)


@contextlib.contextmanager
def locked(name: str) -> Iterator[Path]:
    """The run's folder, while this process holds the lock called ``name`` (other workers wait)."""
    folder = run_folder()
    with (folder / f"{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def once(name: str, make: Callable[[Path], object]) -> Path:
    """``folder/name``, made by ``make(folder/name)`` in the first worker that asks; a make that
    failed half-way (no ``.done`` mark) is made again from nothing."""
    with locked(name) as folder:
        target, done = folder / name, folder / f"{name}.done"
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            make(target)
            done.touch()
    return target


def shared_server(name: str, start: Callable[[], tuple[int, str]]) -> str:
    """The URL of the run's server called ``name``: started by ``start()`` (which returns its pid and
    URL once it answers) in the first worker that asks, and recorded for ``end_run`` to stop."""
    with locked(name) as folder:
        record = folder / f"{name}.server.json"
        if record.exists():
            return json.loads(record.read_text(encoding="utf-8"))["url"]
        pid, url = start()
        record.write_text(json.dumps({"pid": pid, "url": url}), encoding="utf-8")
        return url


def stop(pid: int) -> None:
    """SIGTERM, then SIGKILL if it has not exited after STOP_WAIT_S: its exit is waited for on a
    pidfd (readable once the process ends, child or not); reaped if it is this process's child
    (without pytest-xdist the controller started it), else its parent or init reaps it."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        for sig, wait_s in ((signal.SIGTERM, STOP_WAIT_S), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(handle, sig)
            if select.select([handle], [], [], wait_s)[0]:
                break
    finally:
        os.close(handle)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
