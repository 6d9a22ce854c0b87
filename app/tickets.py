"""Cancellation: each request's ticket (its deadline, whether it was cancelled, the time it spent
queued and computing), and the layer hook that stops a model call once its ticket is cancelled.

The RequestTimeout middleware gives every request a :class:`Ticket` (``CURRENT_TICKET``); the
engine (``app/engine.py``) runs its calls with it. A running call stops at its next encoder or
decoder layer: :func:`cancellable` hangs a forward pre-hook on every layer that checks the ticket
of the call the model thread is running (the cached decode step, ``model/lean.py``, runs each
layer through its module call, so the hook runs at every step too).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from weakref import WeakSet


class Busy(RuntimeError):
    """The model thread has more work than it can finish in time: come back in ``retry_after`` s."""

    def __init__(self, retry_after: int):
        super().__init__(f"the model is busy with other requests; try again in {retry_after} s")
        self.retry_after = retry_after


class Cancelled(RuntimeError):
    """The request's deadline passed or its client went away: its model call was stopped."""


class Ticket:
    """One request's claim on the model thread: its deadline, whether it was cancelled, and the
    milliseconds it spent queued and computing (summed over every engine call it made).
    ``route`` names the kind of request (its path) for the fair shares."""

    def __init__(self, timeout_s: float | None = None, route: str | None = None):
        self.timeout_s = timeout_s
        self.route = route
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self.queue_ms = 0.0
        self.model_ms = 0.0
        self.reason: str | None = None
        self._lock = threading.Lock()
        self._on_cancel: list[Callable[[], object]] = []

    def remaining(self) -> float | None:
        """Seconds until the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    @property
    def cancelled(self) -> bool:
        return self.reason is not None or (self.deadline is not None
                                           and time.monotonic() >= self.deadline)

    def cancel(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            callbacks, self._on_cancel = self._on_cancel, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if self.reason is None:
                self._on_cancel.append(callback)
                return
        callback()

    def check(self) -> None:
        """Raise :class:`Cancelled` if this request should stop computing."""
        if self.cancelled:
            raise Cancelled(self.reason or self.too_long())

    def too_long(self) -> str:
        return (f"the model took longer than {self.timeout_s:g} s; "
                "try a shorter sentence, a smaller beam or a smaller max_len")


# The request being served: set by the RequestTimeout middleware, copied into the threadpool thread
# that runs a sync route. Direct callers (tests, scripts) have none: no deadline, never cancelled.
CURRENT_TICKET: ContextVar[Ticket | None] = ContextVar("itt_ticket", default=None)
REQUEST_OVER = "the request is over"  # the reason RequestTimeout closes a finished request with

_running = threading.local()  # on the model thread: the engine and ticket of the call in progress
_hooked: WeakSet = WeakSet()  # models whose layers already check the running ticket


@contextmanager
def running(engine, ticket: Ticket) -> Iterator[None]:
    """Mark ``ticket``'s call as the one the calling (model) thread runs for ``engine``: the layer
    hooks check that ticket and count the layers into ``engine.layer_calls``."""
    _running.job = (engine, ticket)
    try:
        yield
    finally:
        _running.job = None


def _checkpoint(module, args) -> None:
    """Forward pre-hook on every encoder/decoder layer: stop if cancelled, else count the layer."""
    job = getattr(_running, "job", None)
    if job is not None:
        engine, ticket = job
        ticket.check()
        engine.layer_calls += 1


def cancellable(model) -> None:
    """Make ``model``'s encoder and decoder layers check the running request's ticket, so a call
    on the model thread stops at its next layer once its request is cancelled (the served model
    gets this from its engine; another one, e.g. a training snapshot, when it is loaded)."""
    if model not in _hooked:
        for layer in (*model.encoder_layers, *model.decoder_layers):
            layer.register_forward_pre_hook(_checkpoint)
        _hooked.add(model)
