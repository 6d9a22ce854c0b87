"""The trace cache: every trace the model computed, kept by request key, bounded by count and by
bytes (an estimate of each trace's size), with what pages derived from each trace kept beside it.

The engine (``app/engine.py``) asks it before running the model and stores what the model
returned; identical requests arriving together share one key lock, so they wait for one run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from model.api import Trace


class TraceCache:
    """Least recently used traces, at most ``size`` of them and ``max_bytes`` in all."""

    def __init__(self, size: int, max_bytes: int):
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self.traces: OrderedDict[tuple, tuple[Trace, int]] = OrderedDict()  # key → (trace, bytes)
        self.key_locks: dict[tuple, threading.Lock] = {}
        self.lock = threading.RLock()

    def get(self, key: tuple) -> Trace | None:
        with self.lock:
            if key not in self.traces:
                return None
            self.traces.move_to_end(key)
            return self.traces[key][0]

    def store(self, key: tuple, trace: Trace) -> None:
        size = trace_bytes(trace)
        with self.lock:
            if size > self.max_bytes:
                return  # larger than the whole cache: served, not kept
            if key in self.traces:
                self.bytes -= self.traces.pop(key)[1]
            self.traces[key] = (trace, size)
            self.bytes += size
            while len(self.traces) > self.size or self.bytes > self.max_bytes:
                _, (_, evicted) = self.traces.popitem(last=False)
                self.bytes -= evicted

    def derived(self, trace: Trace, name: Hashable) -> tuple[bool, object]:
        """(True, value) when ``name`` was derived from ``trace`` already, else (False, None)."""
        with self.lock:
            if name in trace.derived:
                return True, trace.derived[name]
        return False, None

    def keep_derived(self, key: tuple, trace: Trace, name: Hashable, value: object) -> None:
        """Keep ``value`` with ``trace``, counted into the bound while the trace is cached."""
        size = _approx_bytes(value)
        with self.lock:
            trace.derived[name] = value
            entry = self.traces.get(key)
            if entry is not None and entry[0].derived is trace.derived:  # still cached: count it
                self.traces[key] = (entry[0], entry[1] + size)
                self.bytes += size
                while self.bytes > self.max_bytes and len(self.traces) > 1:
                    _, (_, evicted) = self.traces.popitem(last=False)
                    self.bytes -= evicted

    def key_lock(self, key: tuple) -> threading.Lock:
        """The lock identical requests share while one of them runs the model."""
        with self.lock:
            return self.key_locks.setdefault(key, threading.Lock())

    def release(self, key: tuple, key_lock: threading.Lock) -> None:
        """Release ``key_lock``, forgetting it when nobody else holds or waits on it."""
        key_lock.release()
        with self.lock:  # a request the model refuses must not leave its lock behind either
            if self.key_locks.get(key) is key_lock and not key_lock.locked():
                del self.key_locks[key]


# CPython sizes: a float 24 bytes + 8 for its slot in a list; an int or short string about as much.
_ITEM_BYTES = 32
_CONTAINER_BYTES = 64


def trace_bytes(trace: Trace) -> int:
    """An estimate of the memory one trace holds (nested lists of floats, and the tensors of its
    recorded pass), without walking every number. The lists a page builds from the recorded pass
    on first read (``Trace.lists``) count from the start, as if built: they stay with the trace."""
    held = sum(_approx_bytes(value) for name, value in vars(trace).items() if name != "lists")
    return held + _ITEM_BYTES * trace.list_items()


def _approx_bytes(value) -> int:
    if isinstance(value, bytes | str):
        return _CONTAINER_BYTES + len(value)
    if hasattr(value, "element_size") and hasattr(value, "nelement"):  # a tensor
        return value.element_size() * value.nelement() + _CONTAINER_BYTES
    if isinstance(value, dict):
        return _CONTAINER_BYTES + sum(_approx_bytes(v) + _ITEM_BYTES for v in value.values())
    if isinstance(value, list | tuple):
        if not value:
            return _CONTAINER_BYTES
        first = value[0]
        if isinstance(first, int | float | bool | None | str):  # a row of numbers: count, don't walk
            return _CONTAINER_BYTES + len(value) * _ITEM_BYTES
        return _CONTAINER_BYTES + sum(_approx_bytes(v) for v in value)
    if hasattr(value, "__dict__"):  # Step, Candidate, BeamNodeInfo
        return _CONTAINER_BYTES + sum(_approx_bytes(v) + _ITEM_BYTES for v in vars(value).values())
    return _ITEM_BYTES
