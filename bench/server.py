"""Start the real server (``python -m app``) as a subprocess on a free loopback port.

Shared by the HTTP benchmarks and the tests that need a real socket (raw clients, a browser)::

    with LiveServer(checkpoint) as server:
        httpx.get(server.url + "/healthz")
        server.rss_mb()
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """``python -m app`` on 127.0.0.1:<free port>; stops (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, checkpoint: Path | str | None = None, workers: int | None = 1,
                 env: dict[str, str] | None = None, log: Path | None = None,
                 startup_s: float = 120.0):
        self.checkpoint = checkpoint
        self.workers = workers
        self.env = env or {}
        self.log = log
        self.startup_s = startup_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> LiveServer:
        command = [sys.executable, "-m", "app", "--port", str(self.port)]
        if self.workers is not None:  # None: the server's default (one per core, app/settings.py)
            command += ["--workers", str(self.workers)]
        if self.checkpoint is not None:
            command += ["--checkpoint", str(self.checkpoint)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        output = open(self.log, "wb") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_s
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
