"""The model engine: one thread that runs every model call, the admission in front of it, and the
trace cache in front of both.

Every page's JSON route asks :meth:`Engine.trace` for the trace of (sentence, decoding options):
the first request runs ``Translator.trace`` once, every later one — from any page — reads the
recorded trace, so moving between pages never runs the model twice. Calls that are not a
translation (the training page's teacher-forced score, the KV-cache race, the position table,
the x-ray's recorded pass) go through :meth:`Engine.run`, on the same thread. (Tokenizing alone
is not a model call.)

A class pressing "Translate" at once must not take the server down, so :meth:`Engine.run`

- **admits** a request at its first model call only if the model thread can finish it in time,
  shares the thread fairly between kinds of request, and tells a refused one when to come back
  (:class:`Busy`: 503 + Retry-After) — ``app/admission.py`` makes that plan;
- **cancels**: each request carries a :class:`Ticket` (its deadline; cancelled when the client
  disconnects or the time limit answers 503). A queued call whose ticket is cancelled never runs;
  a running one stops at its next decoding step (the decoding loop asks the ticket, through
  the model's ``stop_when``), so nothing keeps computing for an answer nobody will read;
- **splits the time** a request spent waiting for the model thread from the time it computed
  (the ticket adds both up; ``Server-Timing: queue;dur=…, model;dur=…``);
- **gives memory back** when its thread falls idle (``app/memory.py``): what a burst allocated
  is returned to the system, not kept by the allocator for the next one.

The rooms it uses: ``app/admission.py`` (who is admitted, in what order, when to come back),
``app/tickets.py`` (the ticket and cancellation), ``app/costs.py`` (what each kind
of call costs, learnt) and ``app/trace_cache.py`` (the traces kept, bounded by bytes as well as
by count).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, replace
from typing import TypeVar

from app import memory
from app.admission import Admission, Job, request_key
from app.costs import Costs, Estimate, kind
from app.schemas import TranslateRequest
from app.tickets import (
    CURRENT_TICKET,
    REQUEST_OVER,
    Busy,
    Cancelled,
    Ticket,
)
from app.trace_cache import TraceCache, trace_bytes
from model.api import DecodingOptions, Stopped, Trace, Translator, stop_when

__all__ = ["CURRENT_TICKET", "REQUEST_OVER", "Busy", "Cancelled", "Engine", "Estimate", "Ticket",
           "options", "trace_bytes"]  # the engine's names, wherever they live
Result = TypeVar("Result")
log = logging.getLogger("app")

# Warm-up at start-up: the model's first calls are slow (allocations, kernels being chosen), and
# admission needs a first measurement of a trace before the first visitor arrives.
WARM_UP_TEXT = "The teacher reads a book in the kitchen every morning."


class Engine:
    def __init__(self, translator: Translator, cache_size: int = 64, cache_mb: float = 96,
                 max_queue: int = 16):
        self.translator = translator
        self.cache = TraceCache(cache_size, int(cache_mb * 1024 * 1024))
        self.costs = Costs()
        self.admission = Admission(self.costs, max_queue)
        self.model_calls = 0  # how many traces the model really computed (tests read this)
        self.stop_checks = 0  # decoding steps that asked their ticket first (tests read this)
        self.pending = 0  # calls submitted and not finished: running + queued
        self._follow = self.costs.follow  # (tests read what a route was learnt to ask)
        self._queue: list[Job] = []
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        # Every model run happens on this one thread, one at a time: on a small CPU, parallel runs
        # only fight over the cores and the GIL (measured in bench/: throughput went up, not down).
        self._thread: threading.Thread | None = None

    @property
    def max_queue(self) -> int:
        """Requests admitted at once (running + waiting); more are refused at once."""
        return self.admission.max_queue

    @max_queue.setter
    def max_queue(self, value: int) -> None:
        with self._lock:
            self.admission.max_queue = value

    @property
    def shed(self) -> int:
        """Requests refused with Busy (at once, or when they could no longer fit)."""
        return self.admission.shed

    # -- the model thread ------------------------------------------------------------------------

    def run(self, call: Callable[..., Result], *args, **kwargs) -> tuple[Result, float]:
        """``call(*args, **kwargs)`` on the model thread, and the milliseconds it computed there.

        Raises :class:`Busy` when the request cannot be admitted (at its first call) or can no
        longer finish in time while it waits, :class:`Cancelled` when the request's ticket is
        cancelled or its deadline passes (queued or running)."""
        ticket = CURRENT_TICKET.get()
        own = ticket is None  # a direct caller: this call is the whole request
        ticket = ticket or Ticket()
        ticket.check()
        job = self._submit(ticket, call, args, kwargs)
        ticket.on_cancel(job.future.cancel)  # a queued call is dropped; a running one stops itself
        try:
            result = self._wait(job)
        except CancelledError:
            raise Cancelled(ticket.reason or "cancelled") from None
        except FutureTimeout:
            ticket.cancel(ticket.too_long())
            raise Cancelled(ticket.reason) from None
        finally:
            now = time.perf_counter()
            started = job.started or now
            ticket.queue_ms += (started - job.submitted) * 1000
            computed_ms = ((job.ended or now) - started) * 1000
            ticket.model_ms += computed_ms
            if own:  # over, as the middleware ends a request: closed, learnt from, and its
                # ticket lets go of the callbacks that hold it and the call's future
                ticket.cancel(REQUEST_OVER)
            job = None  # an error raised from here keeps this frame, not the job: see ``_wait``
        return result, computed_ms

    def _wait(self, job: Job):
        """The call's result; a new request whose call has not started by the latest moment it
        could still finish in time is refused then (a call ahead ran longer than measured).

        An error it raises holds this frame in its traceback, so the frame lets go of the job,
        whose future holds the error: otherwise a failed call's trace, tensors and all, would
        wait in that cycle for Python's cyclic collector (``concurrent.futures`` does the same)."""
        ticket = job.claim.ticket
        try:
            while True:
                remaining = ticket.remaining()
                with self._lock:
                    latest = self.admission.latest_start(job, time.monotonic())
                timeout = remaining if latest is None else max(0.005, latest - time.monotonic())
                if remaining is not None:
                    timeout = min(timeout, remaining)
                try:
                    return job.future.result(timeout=timeout)
                except FutureTimeout:
                    if ticket.cancelled:
                        raise
                    with self._lock:
                        now = time.monotonic()
                        latest = self.admission.latest_start(job, now)
                        if latest is not None and now >= latest:
                            self.admission.refuse(job.claim, now)
        finally:
            job = None

    def warm_up(self, *calls: tuple[Callable, tuple]) -> None:
        """Run the model once per common decoding strategy before serving, then each of
        ``calls`` (a function and its arguments) once: the first calls pay for allocations, and
        admission starts with measured seconds instead of a prior (a prior is a guess made for
        the slowest machine: a kind planned at several times its real cost is refused, and
        told to come back, while the thread has room for it)."""
        for strategy in ("greedy", "beam"):
            decoding = DecodingOptions(strategy=strategy, max_len=128)
            self.run(self.translator.trace, WARM_UP_TEXT, decoding, None)
            with self._lock:  # the cold call measured the first-call cost, not the call
                self.costs.calls.pop(kind(self.translator.trace, (WARM_UP_TEXT, decoding, None)))
            self.run(self.translator.trace, WARM_UP_TEXT, decoding, None)
        for call, args in calls:
            self.run(call, *args)

    def _submit(self, ticket: Ticket, call: Callable, args: tuple, kwargs: dict) -> Job:
        """Queue the call, admitting its request first if this is its first call."""
        cost = kind(call, args)
        with self._lock:
            now = time.monotonic()
            if hasattr(call, "prior_s"):
                self.costs.priors[cost[0]] = float(call.prior_s)
            claim = self.admission.claims.get(ticket)
            if claim is None:
                route = ticket.route or getattr(call, "__qualname__", type(call).__name__)
                claim = self.admission.claim(ticket, route, cost, request_key(route, call, args))
                job = Job(claim, cost, call, args, kwargs, submitted=time.perf_counter())
                claim.jobs.append(job)
                self.admission.admit(claim, now)  # or Busy
                ticket.on_cancel(lambda: self._close(ticket))
            else:
                job = Job(claim, cost, call, args, kwargs, submitted=time.perf_counter())
                claim.jobs.append(job)
            self._queue.append(job)
            self.pending += 1
            # the callback holds the job weakly: a job holding its future holding a callback
            # holding the job is a cycle that keeps the result (a trace, tensors and all) until
            # the cyclic collector runs, long after the request is answered
            job_ref = weakref.ref(job)
            job.future.add_done_callback(lambda _: (job := job_ref()) is not None and self._done(job))
            if claim.started:  # work its plan may not have counted: refuse who can no longer fit
                self.costs.guess_follow(claim.route)  # a route that asks more: the prior first
                self.admission.shed_late(now)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="model", daemon=True)
                self._thread.start()
            self._wake.notify()
            return job

    def _done(self, job: Job) -> None:
        with self._lock:
            self.pending -= 1
            if job in self._queue:  # cancelled while queued
                self._queue.remove(job)
                job.claim.jobs.remove(job)

    def _close(self, ticket: Ticket, learn: bool | None = None) -> None:
        """The request is over: forget its claim (and learn from it when it ran to the end)."""
        with self._lock:
            if learn is None:
                learn = ticket.reason == REQUEST_OVER
            self.admission.close(ticket, learn)

    def _serve(self) -> None:
        """The model thread: take the next call, run it, learn how long it took; when nothing is
        left to run, give the memory the calls freed back to the system."""
        while True:
            with self._lock:
                trimmed = False
                while (job := self.admission.next_job(self._queue)) is None:
                    if not self._queue and not trimmed:  # once each time the thread falls idle
                        trimmed = True
                        self._lock.release()
                        try:
                            memory.trim()
                        finally:
                            self._lock.acquire()
                        continue
                    self._wake.wait()
                self._queue.remove(job)
                job.claim.jobs.remove(job)
                if not job.future.set_running_or_notify_cancel():
                    continue
                job.claim.running, job.claim.started = job, True
                job.started_mono = time.monotonic()
            try:
                self._execute(job)
            except Exception:  # the bookkeeping failed: log it, keep the model thread serving
                log.exception("model thread: %s", job.kind)

    def _execute(self, job: Job) -> None:
        """On the model thread: skip a call whose request is gone, else run it with its ticket."""
        ticket = job.claim.ticket
        job.started = time.perf_counter()
        result, error = None, None
        try:
            ticket.check()
            remaining = ticket.remaining()
            with self._lock:
                expected = self.costs.estimate(job.kind).mean
            if remaining is not None and remaining < expected:
                # it would be stopped at the deadline anyway: leave the time to calls that finish
                raise Cancelled(ticket.too_long())
            with stop_when(self._should_stop(ticket)):
                result = job.call(*job.args, **job.kwargs)
        except Stopped:  # the decoding loop asked the ticket: the request is gone or too late
            error = Cancelled(ticket.reason or ticket.too_long())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting request
            error = exc
        finally:
            job.ended = time.perf_counter()
        seconds = job.ended - job.started
        try:
            self._learn(job, seconds, error is None)
        finally:  # whatever the bookkeeping does, the waiting request gets its answer
            if error is None:
                job.future.set_result(result)
            else:
                job.future.set_exception(error)
                # the error's traceback holds this frame: without its locals, no cycle through
                # the job's future back to the error (as concurrent.futures' own workers do)
                job = error = None

    def _should_stop(self, ticket: Ticket) -> Callable[[], bool]:
        """The ``should_stop`` a call on the model thread decodes with: is its ticket cancelled?"""
        def should_stop() -> bool:
            if ticket.cancelled:
                return True
            self.stop_checks += 1  # only the model thread counts: no lock
            return False
        return should_stop

    def _learn(self, job: Job, seconds: float, finished: bool) -> None:
        """After a call: count its time to its request and route, learn how long its kind
        takes (only from calls that ran to the end), refuse who can no longer fit."""
        claim = job.claim
        with self._lock:
            claim.running = None
            claim.spent += seconds
            if claim.first_s is None:
                claim.first_s = seconds
            self.admission.count(claim, seconds)
            if finished:
                self.costs.learn(job.kind, seconds)
            else:
                claim.failed = True
                self.costs.at_least(job.kind, seconds)
            self.admission.shed_late(time.monotonic())

    # -- the trace cache -------------------------------------------------------------------------

    def trace(self, request: TranslateRequest) -> tuple[Trace, float]:
        """The trace for ``request`` and the milliseconds this call spent in the model (0 if cached).

        The trace echoes ``request``'s own options, even when another spelling filled the cache."""
        key = request.cache_key()
        echo = asdict(options(request))
        cached = self.cache.get(key)
        if cached is not None:
            return _with_options(cached, echo), 0.0
        ticket = CURRENT_TICKET.get()
        key_lock = self.cache.key_lock(key)
        # Identical requests arriving together wait for one model run instead of starting several.
        remaining = ticket.remaining() if ticket else None
        if not key_lock.acquire(timeout=-1 if remaining is None else max(0.0, remaining)):
            raise Cancelled(ticket.too_long())
        try:
            cached = self.cache.get(key)
            if cached is not None:
                return _with_options(cached, echo), 0.0
            trace, elapsed = self.run(
                self.translator.trace,
                request.text, options(request), getattr(request, "forced_prefix", None) or None,
            )
            with self._lock:
                self.model_calls += 1
            self.cache.store(key, trace)
        finally:
            self.cache.release(key, key_lock)
        return _with_options(trace, echo), elapsed

    def derived(self, request: TranslateRequest, trace: Trace, name: Hashable,
                call: Callable[..., Result], *args, on_model_thread: bool = True
                ) -> tuple[Result, float]:
        """What a page derives from a trace (the x-ray's payload, the logit lens, one step's
        attributions…): ``call(*args)`` once per trace and ``name``, kept with the trace in the
        trace cache — one cache, bounded as one — and the milliseconds it computed (0 when it was
        kept). ``on_model_thread`` runs the call there (anything that runs the model must)."""
        found, value = self.cache.derived(trace, name)
        if found:
            return value, 0.0
        if on_model_thread:
            value, elapsed = self.run(call, *args)
        else:
            value, elapsed = call(*args), 0.0
        self.cache.keep_derived(request.cache_key(), trace, name, value)
        return value, elapsed

    def cached(self, request: TranslateRequest) -> Trace | None:
        """The trace already kept for ``request``, without running anything (None if none)."""
        return self.cache.get(request.cache_key())


def options(request: TranslateRequest) -> DecodingOptions:
    return request.decoding()


def _with_options(trace: Trace, echo: dict) -> Trace:
    """The cached trace as this request sees it: the same data, its own options (a shallow copy)."""
    return trace if trace.options == echo else replace(trace, options=echo)
