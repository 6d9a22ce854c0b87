"""Server settings: command-line flags override ``ITT_*`` environment variables, which override
the defaults below."""

from __future__ import annotations

import math
import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# model/checkpoints, spelled out here so that reading settings never imports torch
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[1] / "model" / "checkpoints"
AUTO_WORKERS_MAX = 4  # what ``--workers 0`` starts at most: 4 workers are ~2.4 GB of memory
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # a container's CPU limit (cgroup v2)


def usable_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPU cores this process may run on: its affinity, lowered to a container's CPU limit
    (``docker run --cpus 2`` leaves every core in the affinity but allows only two cores' time)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        quota, period = cpu_max.read_text().split()
        if quota != "max":
            cores = min(cores or 1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 limit to read
    return max(1, cores or 1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ITT_", extra="ignore")

    host: str = "127.0.0.1"  # loopback only by default; pass --host 0.0.0.0 to expose it
    port: int = Field(8000, ge=0, le=65535)  # 0: any free port (the "Uvicorn running on" line says which)
    checkpoint: Path = DEFAULT_CHECKPOINT  # folder with weights.safetensors, config.json, ...
    # a model to serve instead: a local Hugging Face Marian folder (e.g. opus-mt-en-zh) or a
    # checkpoint folder, or a hub id (downloaded only where the machine can reach the hub)
    model: str | None = None
    # uvicorn worker processes, each with its own model and cache; 0 (the default): one per CPU
    # core this server may use, at most AUTO_WORKERS_MAX (see ``worker_count``). A worker holds
    # ~0.42 GB once started (torch ~0.22, the model, its tokenizers and drafter ~0.16, the app
    # ~0.04) plus up to ``cache_mb`` of traces: budget ~0.6 GB a worker (measured after bursts
    # of heavy calls: bench/README.md, issue 59; the CTranslate2 drafter has left since).
    workers: int = Field(0, ge=0, le=32)
    cache_size: int = Field(64, ge=1, le=4096)  # traces kept in memory (LRU), per process
    # ... and at most this many MB of them (estimated): one sampled trace at max_len 128 is ~25 MB,
    # a 40-word sentence's trace ~15 MB, a 10-word sentence's ~3.5 MB
    cache_mb: float = Field(96, ge=1, le=65536)
    # model calls admitted per process (running + waiting); more get 503 + Retry-After at once.
    # Also refused at once: a call whose estimated wait exceeds its request's time left.
    max_queue: int = Field(16, ge=1, le=1024)
    max_body_bytes: int = Field(16 * 1024, ge=1024)  # larger request bodies get 413
    log_level: str = "info"
    request_timeout_s: float = Field(20.0, gt=0, le=600)  # no response started by then → 503
    body_read_timeout_s: float = Field(10.0, gt=0, le=600)  # request body not in by then → 408
    header_timeout_s: float = Field(10.0, gt=0, le=600)  # request line + headers not in → closed
    # open connections per process (uvicorn's limit_concurrency); beyond it new requests get 503
    max_connections: int = Field(1000, ge=1, le=100_000)
    # torch threads per process; 0 keeps torch's default (all cores). One is fastest when serving:
    # the matrices are small, and a second thread slowed every request down (see bench/README.md).
    torch_threads: int = Field(1, ge=0, le=64)
    access_log: bool = True  # one JSON line per request on stderr (logger app.access)

    @property
    def model_source(self) -> str:
        """What to load: ``model`` if set, else ``checkpoint``."""
        return self.model or str(self.checkpoint)

    @property
    def worker_count(self) -> int:
        """``workers``, or with 0 one per usable core up to AUTO_WORKERS_MAX: every worker decodes
        on one thread (``torch_threads``), so one per core keeps every core busy under load."""
        return self.workers or min(usable_cores(), AUTO_WORKERS_MAX)
