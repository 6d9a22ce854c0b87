"""The model engine: one thread that runs every model call, the admission in front of it, and the
trace cache in front of both.

Every page's JSON route asks :meth:`Engine.trace` for the trace of (sentence, decoding options):
the first request runs ``Translator.trace`` once, every later one — from any page — reads the
recorded trace, so moving between pages never runs the model twice. Calls that are not a
translation (the training page's teacher-forced score, the KV-cache race, the position table,
the x-ray's recorded pass) go through :meth:`Engine.run`, on the same thread. (Tokenizing alone
is not a model call.)

A class pressing "Translate" at once must not take the server down, so :meth:`Engine.run`

- **admits** at most ``max_queue`` calls (running + waiting) and none that would not finish in
  the time its request has left (the expected seconds of the calls ahead plus its own, learnt per
  kind of call): the others get :class:`Busy` at once (503 + Retry-After);
- **cancels**: each request carries a :class:`Ticket` (its deadline; cancelled when the client
  disconnects or the time limit answers 503). A queued call whose ticket is cancelled never runs;
  a running one stops at its next encoder or decoder layer (a forward pre-hook checks the ticket),
  so nothing keeps computing for an answer nobody will read;
- **splits the time** a request spent waiting for the model thread from the time it computed
  (the ticket adds both up; ``Server-Timing: queue;dur=…, model;dur=…``).

The cache is bounded by bytes (an estimate of each trace's size) as well as by count.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import CancelledError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextvars import ContextVar
from dataclasses import asdict, replace
from typing import TypeVar
from weakref import WeakSet

from app.schemas import TranslateRequest
from model.decoding import DecodingOptions
from model.explain.trace import Trace
from model.translator import Translator

Result = TypeVar("Result")


class Busy(RuntimeError):
    """The model thread has more work than it can finish in time: come back in ``retry_after`` s."""

    def __init__(self, retry_after: int):
        super().__init__(f"the model is busy with other requests; try again in {retry_after} s")
        self.retry_after = retry_after


class Cancelled(RuntimeError):
    """The request's deadline passed or its client went away: its model call was stopped."""


class Ticket:
    """One request's claim on the model thread: its deadline, whether it was cancelled, and the
    milliseconds it spent queued and computing (summed over every engine call it made)."""

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s = timeout_s
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

_running = threading.local()  # on the model thread: the engine and ticket of the call in progress
_hooked: WeakSet = WeakSet()  # models whose layers already check the running ticket


def _checkpoint(module, args) -> None:
    """Forward pre-hook on every encoder/decoder layer: stop if cancelled, else count the layer."""
    job = getattr(_running, "job", None)
    if job is not None:
        engine, ticket = job
        ticket.check()
        engine.layer_calls += 1


class Engine:
    def __init__(self, translator: Translator, cache_size: int = 64, cache_mb: float = 256,
                 max_queue: int = 16):
        self.translator = translator
        self.size = cache_size
        self.max_bytes = int(cache_mb * 1024 * 1024)
        self.max_queue = max_queue
        self.model_calls = 0  # how many traces the model really computed (tests read this)
        self.layer_calls = 0  # encoder/decoder layers run on the model thread (tests read this)
        self.cache_bytes = 0
        self.pending = 0  # calls admitted and not finished: running + queued
        self.queued_s = 0.0  # their expected seconds on the model thread, summed
        self.shed = 0  # calls refused with Busy
        self._seconds: dict[tuple, float] = {}  # moving average of one call's seconds, per kind
        self._traces: OrderedDict[tuple, tuple[Trace, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[tuple, threading.Lock] = {}
        # Every model run happens on this one thread, one at a time: on a small CPU, parallel runs
        # only fight over the cores and the GIL (measured in bench/: throughput went up, not down).
        self._model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        model = translator.model
        if model not in _hooked:
            for layer in (*model.encoder_layers, *model.decoder_layers):
                layer.register_forward_pre_hook(_checkpoint)
            _hooked.add(model)

    # -- the model thread ------------------------------------------------------------------------

    def run(self, call: Callable[..., Result], *args, **kwargs) -> tuple[Result, float]:
        """``call(*args, **kwargs)`` on the model thread, and the milliseconds it computed there.

        Raises :class:`Busy` at once when the queue is full or the call could not finish before
        the request's deadline, :class:`Cancelled` when the request's ticket is cancelled or its
        deadline passes (queued or running)."""
        ticket = CURRENT_TICKET.get() or Ticket()
        ticket.check()
        kind = _kind(call, args)
        estimate = self._admit(ticket, kind)
        timing = {"submitted": time.perf_counter()}
        try:
            future = self._model_thread.submit(self._call, ticket, kind, estimate, timing, call,
                                               args, kwargs)
        except BaseException:
            self._release(estimate)
            raise
        future.add_done_callback(lambda _: self._release(estimate))
        ticket.on_cancel(future.cancel)  # a queued call is dropped; a running one stops itself
        try:
            result = future.result(timeout=ticket.remaining())
        except CancelledError:
            raise Cancelled(ticket.reason or "cancelled") from None
        except FutureTimeout:
            ticket.cancel(ticket.too_long())
            raise Cancelled(ticket.reason) from None
        finally:
            now = time.perf_counter()
            started = timing.get("started", now)
            ticket.queue_ms += (started - timing["submitted"]) * 1000
            ticket.model_ms += (timing.get("ended", now) - started) * 1000
        return result, (timing["ended"] - timing["started"]) * 1000

    def _admit(self, ticket: Ticket, kind: tuple) -> float:
        """Count the call in, or raise :class:`Busy`; the seconds it is expected to take."""
        with self._lock:
            # A kind never seen is assumed as slow as the slowest seen (1 s before any).
            estimate = self._seconds.get(kind, max(self._seconds.values(), default=1.0))
            wait = self.queued_s
            remaining = ticket.remaining()
            if self.pending >= self.max_queue or (remaining is not None
                                                  and wait + estimate > remaining):
                self.shed += 1
                raise Busy(max(1, math.ceil(wait)))
            self.pending += 1
            self.queued_s += estimate
            return estimate

    def _release(self, estimate: float) -> None:
        with self._lock:
            self.pending -= 1
            self.queued_s = max(0.0, self.queued_s - estimate)

    def _call(self, ticket: Ticket, kind: tuple, estimate: float, timing: dict,
              call: Callable[..., Result], args, kwargs) -> Result:
        """On the model thread: skip a call whose request is gone, else run it with its ticket."""
        timing["started"] = time.perf_counter()
        try:
            ticket.check()
            remaining = ticket.remaining()
            if remaining is not None and remaining < estimate / 2:
                # it would be stopped at the deadline anyway: leave the time to calls that finish
                raise Cancelled(ticket.too_long())
            _running.job = (self, ticket)
            result = call(*args, **kwargs)
        finally:
            _running.job = None
            timing["ended"] = time.perf_counter()
        with self._lock:  # only calls that ran to the end teach the admission how long one takes
            seconds = timing["ended"] - timing["started"]
            known = self._seconds.get(kind)
            self._seconds[kind] = seconds if known is None else 0.7 * known + 0.3 * seconds
        return result

    # -- the trace cache -------------------------------------------------------------------------

    def trace(self, request: TranslateRequest) -> tuple[Trace, float]:
        """The trace for ``request`` and the milliseconds this call spent in the model (0 if cached).

        The trace echoes ``request``'s own options, even when another spelling filled the cache."""
        key = request.cache_key()
        echo = asdict(options(request))
        cached = self._cached(key)
        if cached is not None:
            return _with_options(cached, echo), 0.0
        ticket = CURRENT_TICKET.get()
        key_lock = self._key_lock(key)
        # Identical requests arriving together wait for one model run instead of starting several.
        remaining = ticket.remaining() if ticket else None
        if not key_lock.acquire(timeout=-1 if remaining is None else max(0.0, remaining)):
            raise Cancelled(ticket.too_long())
        try:
            cached = self._cached(key)
            if cached is not None:
                return _with_options(cached, echo), 0.0
            trace, elapsed = self.run(
                self.translator.trace,
                request.text, options(request), getattr(request, "forced_prefix", None) or None,
            )
            self._store(key, trace)
        finally:
            key_lock.release()
            with self._lock:  # a request the model refuses must not leave its lock behind either
                if self._key_locks.get(key) is key_lock and not key_lock.locked():
                    del self._key_locks[key]
        return _with_options(trace, echo), elapsed

    def derived(self, request: TranslateRequest, trace: Trace, name: Hashable,
                call: Callable[..., Result], *args, on_model_thread: bool = True
                ) -> tuple[Result, float]:
        """What a page derives from a trace (the x-ray's payload, the logit lens, one step's
        attributions…): ``call(*args)`` once per trace and ``name``, kept with the trace in the
        trace cache — one cache, bounded as one — and the milliseconds it computed (0 when it was
        kept). ``on_model_thread`` runs the call there (anything that runs the model must)."""
        with self._lock:
            if name in trace.derived:
                return trace.derived[name], 0.0
        if on_model_thread:
            value, elapsed = self.run(call, *args)
        else:
            value, elapsed = call(*args), 0.0
        size = _approx_bytes(value)
        key = request.cache_key()
        with self._lock:
            trace.derived[name] = value
            entry = self._traces.get(key)
            if entry is not None and entry[0].derived is trace.derived:  # still cached: count it
                self._traces[key] = (entry[0], entry[1] + size)
                self.cache_bytes += size
                while self.cache_bytes > self.max_bytes and len(self._traces) > 1:
                    _, (_, evicted) = self._traces.popitem(last=False)
                    self.cache_bytes -= evicted
        return value, elapsed

    def _key_lock(self, key: tuple) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _cached(self, key: tuple) -> Trace | None:
        with self._lock:
            if key not in self._traces:
                return None
            self._traces.move_to_end(key)
            return self._traces[key][0]

    def _store(self, key: tuple, trace: Trace) -> None:
        size = trace_bytes(trace)
        with self._lock:
            self.model_calls += 1
            if size > self.max_bytes:
                return  # larger than the whole cache: served, not kept
            if key in self._traces:
                self.cache_bytes -= self._traces.pop(key)[1]
            self._traces[key] = (trace, size)
            self.cache_bytes += size
            while len(self._traces) > self.size or self.cache_bytes > self.max_bytes:
                _, (_, evicted) = self._traces.popitem(last=False)
                self.cache_bytes -= evicted


def _kind(call: Callable, args: tuple) -> tuple:
    """What a call costs depends on: the function, its integer arguments (KV-cache steps) and the
    decoding options (strategy, beam size, max_len)."""
    kind: list = [getattr(call, "__qualname__", type(call).__name__)]
    for arg in args:
        if isinstance(arg, int):
            kind.append(arg)
        elif isinstance(arg, DecodingOptions):
            kind += [arg.strategy, arg.beam_size if arg.strategy == "beam" else 1, arg.max_len]
    return tuple(kind)


def options(request: TranslateRequest) -> DecodingOptions:
    return DecodingOptions(
        strategy=request.strategy,
        temperature=request.temperature,
        top_k=request.top_k,
        top_p=request.top_p,
        beam_size=request.beam_size,
        max_len=request.max_len,
        seed=request.seed,
    )


def _with_options(trace: Trace, echo: dict) -> Trace:
    """The cached trace as this request sees it: the same data, its own options (a shallow copy)."""
    return trace if trace.options == echo else replace(trace, options=echo)


# CPython sizes: a float 24 bytes + 8 for its slot in a list; an int or short string about as much.
_ITEM_BYTES = 32
_CONTAINER_BYTES = 64


def trace_bytes(trace: Trace) -> int:
    """An estimate of the memory one trace holds (nested lists of floats, and the tensors of its
    recorded pass), without walking every number."""
    return sum(_approx_bytes(value) for value in vars(trace).values())


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
