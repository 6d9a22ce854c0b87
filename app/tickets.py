"""Cancellation: each request's ticket (its deadline, whether it was cancelled, the time it spent
queued and computing).

The RequestTimeout middleware gives every request a :class:`Ticket` (``CURRENT_TICKET``); the
engine (``app/engine.py``) runs its calls with it. A running call stops at its next decoding
step: the engine runs it inside the model's ``stop_when(should_stop)``, and the decoding loop
(``model/decoding.py``) asks ``should_stop`` — "is this ticket cancelled?" — before every step.
No layer is hooked: the app never touches the model's modules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar


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
