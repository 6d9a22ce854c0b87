"""Workers die with their supervisor (issue 30, item 5): after ``kill -9`` of the parent of a
``--workers 2`` server, both workers exit and the port is free for a restarted server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from bench.server import ROOT, listening_port, wait_for_port
from tests.waiting import wait_until


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.is_file() else []


def gone(pid: int) -> bool:
    """Exited (a zombie nobody reaped yet counts: it runs nothing and holds no socket)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def port_free(port: int) -> bool:
    """Nothing listens on the port: a new server could bind it (SO_REUSEADDR, as uvicorn binds,
    so connections of this test still in TIME_WAIT do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_workers_exit_when_their_supervisor_is_killed(tiny_checkpoint):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ITT_ACCESS_LOG": "false"}
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "app", "--workers", "2", "--port", "0", "--checkpoint",
         str(tiny_checkpoint)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        port = wait_for_port(supervisor, 120)

        def both_serving() -> bool:
            workers[:] = [pid for pid in children(supervisor.pid) if listening_port(pid) == port]
            if len(workers) < 2:
                return False
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(both_serving, "two workers serving /healthz")
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait()
        wait_until(lambda: all(gone(pid) for pid in workers),
                   f"workers {workers} exit after their supervisor was killed")
        wait_until(lambda: port_free(port), f"port {port} free again")
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        for pid in workers:  # started by this test: never leave one behind
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
