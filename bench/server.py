"""Start the real server (``python -m app``) as a subprocess on a loopback port of its own.

Shared by the HTTP benchmarks and the tests that need a real socket (raw clients, a browser)::

    with LiveServer(checkpoint) as server:
        httpx.get(server.url + "/healthz")
        server.rss_mb()
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def listening_port(pid: int) -> int | None:
    """The TCP port process ``pid`` listens on, read from /proc (None while it listens on none).

    A server started with ``--port 0`` binds a port the kernel picks: nothing else can take it
    between choosing and binding, the race a "free port" found beforehand and then passed on has
    when several servers start at once."""
    sockets = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                sockets.add(target[len("socket:["):-1])
    except OSError:  # the process is gone
        return None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in sockets:  # 0A: LISTEN
                return int(fields[1].rsplit(":", 1)[1], 16)
    return None


def wait_for_port(process: subprocess.Popen, timeout_s: float) -> int:
    """The port a just-started server (``--port 0``) listens on, once it listens; RuntimeError if
    it exits or does not listen within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}: {process.args}")
        port = listening_port(process.pid)
        if port:
            return port
        time.sleep(0.05)
    raise RuntimeError(f"server did not listen within {timeout_s:.0f} s: {process.args}")


class LiveServer:
    """``python -m app`` on 127.0.0.1:<a port the kernel picks>; stops (SIGTERM, then SIGKILL)
    on exit."""

    def __init__(self, checkpoint: Path | str | None = None, workers: int | None = 1,
                 env: dict[str, str] | None = None, log: Path | None = None,
                 startup_s: float = 120.0):
        self.checkpoint = checkpoint
        self.workers = workers
        self.env = env or {}
        self.log = log
        self.startup_s = startup_s
        self.port = 0  # known once the server listens: it binds a port the kernel picks
        self.url = ""
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> LiveServer:
        command = [sys.executable, "-m", "app", "--port", "0"]
        if self.workers is not None:  # None: the server's default (one per core, app/settings.py)
            command += ["--workers", str(self.workers)]
        if self.checkpoint is not None:
            command += ["--checkpoint", str(self.checkpoint)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        output = open(self.log, "wb") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_s
        try:
            self.port = wait_for_port(self.process, self.startup_s)
        except RuntimeError:
            self.__exit__(None, None, None)
            raise
        self.url = f"http://127.0.0.1:{self.port}"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {command}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"server did not answer /healthz within {self.startup_s:.0f} s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pids(self) -> list[int]:
        """The server process and its worker processes (``--workers N``)."""
        assert self.process is not None
        pids = [self.process.pid]
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        if children.is_file():
            pids += [int(p) for p in children.read_text().split()]
        return pids

    def rss_by_process(self) -> dict[int, int]:
        """Resident memory (MB) of each of the server's processes, by pid."""
        out = {}
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[pid] = round(int(line.split()[1]) / 1024)
            except FileNotFoundError:
                continue
        return out

    def rss_mb(self) -> float:
        """Resident memory of the server (all its processes), from /proc/<pid>/status."""
        total_kb = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
            except FileNotFoundError:
                continue
        return total_kb / 1024
