"""The model engine: one thread that runs every model call, the admission in front of it, and the
trace cache in front of both.

Every page's JSON route asks :meth:`Engine.trace` for the trace of (sentence, decoding options):
the first request runs ``Translator.trace`` once, every later one — from any page — reads the
recorded trace, so moving between pages never runs the model twice. Calls that are not a
translation (the training page's teacher-forced score, the KV-cache race, the position table,
the x-ray's recorded pass) go through :meth:`Engine.run`, on the same thread. (Tokenizing alone
is not a model call.)

A class pressing "Translate" at once must not take the server down, so :meth:`Engine.run`

- **admits** a request (at its first model call) only if the model thread can finish it in the
  time it has left, and every request admitted before it still in theirs: the thread's plan is
  rebuilt from the measured seconds of each kind of call (a moving mean and deviation, learnt per
  kind; before a kind's first measurement, a prior from the same function's measured kinds, or
  1 s) and of what each route asks after its first call. At most ``max_queue`` requests are
  admitted at once. The others get :class:`Busy` at once (503 + Retry-After: the expected seconds
  of the work admitted, which is when the thread is free again). When a measurement shows that a
  waiting request can no longer finish in time, it is refused then, not at its deadline;
- **shares the thread fairly**: requests of a route that has begun computing finish first (its
  next calls go ahead of new requests, earliest deadline first); between new requests, the route
  that has had the least model time so far goes next, so a burst of one expensive kind cannot
  starve another;
- **cancels**: each request carries a :class:`Ticket` (its deadline; cancelled when the client
  disconnects or the time limit answers 503). A queued call whose ticket is cancelled never runs;
  a running one stops at its next encoder or decoder layer (a forward pre-hook checks the ticket),
  so nothing keeps computing for an answer nobody will read;
- **splits the time** a request spent waiting for the model thread from the time it computed
  (the ticket adds both up; ``Server-Timing: queue;dur=…, model;dur=…``).

The rooms it uses: ``app/tickets.py`` (the ticket, cancellation, the layer hook),
``app/costs.py`` (what each kind of call costs, learnt) and ``app/trace_cache.py`` (the traces
kept, bounded by bytes as well as by count).
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field, replace
from typing import TypeVar

from app.costs import Costs, Estimate, kind
from app.schemas import TranslateRequest
from app.tickets import (
    CURRENT_TICKET,
    REQUEST_OVER,
    Busy,
    Cancelled,
    Ticket,
    cancellable,
    running,
)
from app.trace_cache import TraceCache, trace_bytes
from model.decoding import DecodingOptions
from model.explain.trace import Trace
from model.translator import Translator

__all__ = ["CURRENT_TICKET", "REQUEST_OVER", "Busy", "Cancelled", "Engine", "Estimate", "Ticket",
           "cancellable", "options", "trace_bytes"]  # the engine's names, wherever they live
Result = TypeVar("Result")
log = logging.getLogger("app")

# Of each request's time limit, what the plan keeps free: the route's own work before and after
# the model (figures, JSON) and estimates that run long.
SLACK = 0.1
# Warm-up at start-up: the model's first calls are slow (allocations, kernels being chosen), and
# admission needs a first measurement of a trace before the first visitor arrives.
WARM_UP_TEXT = "The teacher reads a book in the kitchen every morning."


@dataclass(eq=False)
class _Job:
    """One model call: queued, then run by the model thread."""

    claim: _Claim
    kind: tuple
    call: Callable
    args: tuple
    kwargs: dict
    future: Future = field(default_factory=Future)
    submitted: float = 0.0  # perf_counter times, for Server-Timing
    started: float | None = None
    started_mono: float = 0.0
    ended: float | None = None


@dataclass(eq=False)
class _Claim:
    """One admitted request: its calls, the model seconds it has used, and what it is expected to
    need: its first call's kind and what its route asks after the first call."""

    ticket: Ticket
    route: str
    first_kind: tuple
    order: int
    jobs: list[_Job] = field(default_factory=list)  # queued, not started
    running: _Job | None = None
    started: bool = False  # a call of it has begun: its next calls go ahead of new requests
    spent: float = 0.0  # seconds its finished calls ran
    first_s: float | None = None
    failed: bool = False
    admitted: float = 0.0  # monotonic

    @property
    def deadline(self) -> float:
        return self.ticket.deadline if self.ticket.deadline is not None else math.inf

    def slack(self) -> float:
        return SLACK * (self.ticket.timeout_s or 0.0)


class Engine:
    def __init__(self, translator: Translator, cache_size: int = 64, cache_mb: float = 256,
                 max_queue: int = 16):
        self.translator = translator
        self.cache = TraceCache(cache_size, int(cache_mb * 1024 * 1024))
        self.costs = Costs()
        self.max_queue = max_queue
        self.model_calls = 0  # how many traces the model really computed (tests read this)
        self.layer_calls = 0  # encoder/decoder layers run on the model thread (tests read this)
        self.pending = 0  # calls submitted and not finished: running + queued
        self.shed = 0  # requests refused with Busy (at once, or when they could no longer fit)
        self._follow = self.costs.follow  # (tests read what a route was learnt to ask)
        self._claims: dict[Ticket, _Claim] = {}  # admitted requests not finished
        self._queue: list[_Job] = []
        self._service: dict[str, float] = {}  # model seconds per route with requests admitted
        self._order = itertools.count()
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        # Every model run happens on this one thread, one at a time: on a small CPU, parallel runs
        # only fight over the cores and the GIL (measured in bench/: throughput went up, not down).
        self._thread: threading.Thread | None = None
        cancellable(translator.model)

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
        job = self._submit(ticket, kind(call, args), call, args, kwargs)
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
            ticket.model_ms += ((job.ended or now) - started) * 1000
            if own:
                self._close(ticket, learn=True)
        return result, (job.ended - job.started) * 1000

    def _wait(self, job: _Job):
        """The call's result; a new request whose call has not started by the latest moment it
        could still finish in time is refused then (a call ahead ran longer than measured)."""
        ticket = job.claim.ticket
        while True:
            remaining = ticket.remaining()
            with self._lock:
                latest = self._latest_start(job)
            timeout = remaining if latest is None else max(0.005, latest - time.monotonic())
            if remaining is not None:
                timeout = min(timeout, remaining)
            try:
                return job.future.result(timeout=timeout)
            except FutureTimeout:
                if ticket.cancelled:
                    raise
                with self._lock:
                    latest = self._latest_start(job)
                    if latest is not None and time.monotonic() >= latest:
                        self._refuse(job.claim, time.monotonic())

    def _latest_start(self, job: _Job) -> float | None:
        """When the first call of a new request must start for it to finish in time (None: it
        has started, is done, or has no deadline)."""
        claim = job.claim
        if claim.started or job.future.done() or claim.ticket.deadline is None \
                or self._claims.get(claim.ticket) is not claim:
            return None
        mean, dev = self._need(claim, time.monotonic())
        return claim.deadline - claim.slack() - mean - 2 * dev

    def warm_up(self) -> None:
        """Run the model once per common decoding strategy before serving: the first calls pay
        for allocations, and admission starts with measured traces instead of a prior."""
        for strategy in ("greedy", "beam"):
            decoding = DecodingOptions(strategy=strategy, max_len=128)
            self.run(self.translator.trace, WARM_UP_TEXT, decoding, None)
            with self._lock:  # the cold call measured the first-call cost, not the call
                self.costs.calls.pop(kind(self.translator.trace, (WARM_UP_TEXT, decoding, None)))
            self.run(self.translator.trace, WARM_UP_TEXT, decoding, None)

    def _submit(self, ticket: Ticket, cost: tuple, call: Callable, args: tuple,
                kwargs: dict) -> _Job:
        """Queue the call, admitting its request first if this is its first call."""
        with self._lock:
            now = time.monotonic()
            if hasattr(call, "prior_s"):
                self.costs.priors[cost[0]] = float(call.prior_s)
            claim = self._claims.get(ticket)
            if claim is None:
                route = ticket.route or getattr(call, "__qualname__", type(call).__name__)
                claim = _Claim(ticket, route, cost, next(self._order))
                job = _Job(claim, cost, call, args, kwargs, submitted=time.perf_counter())
                claim.jobs.append(job)
                self._drop_expired(now)
                self._shed_late(now)
                victims = self._make_room(claim, now)
                if victims is None:
                    self.shed += 1
                    raise Busy(self._retry_after(now))
                for victim in victims:
                    self._refuse(victim, now)
                claim.admitted = now
                self._claims[ticket] = claim
                self._service.setdefault(route, min(self._service.values(), default=0.0))
                ticket.on_cancel(lambda: self._close(ticket))
            else:
                job = _Job(claim, cost, call, args, kwargs, submitted=time.perf_counter())
                claim.jobs.append(job)
            self._queue.append(job)
            self.pending += 1
            job.future.add_done_callback(lambda _: self._done(job))
            if claim.started:  # work its plan may not have counted: refuse who can no longer fit
                self.costs.guess_follow(claim.route)  # a route that asks more: the prior first
                self._shed_late(now)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="model", daemon=True)
                self._thread.start()
            self._wake.notify()
            return job

    def _done(self, job: _Job) -> None:
        with self._lock:
            self.pending -= 1
            if job in self._queue:  # cancelled while queued
                self._queue.remove(job)
                job.claim.jobs.remove(job)

    def _close(self, ticket: Ticket, learn: bool | None = None) -> None:
        """The request is over: forget its claim, and learn what its route asked after its
        first call when it ran to the end."""
        with self._lock:
            claim = self._claims.pop(ticket, None)
            if claim is None:
                return
            if learn is None:
                learn = ticket.reason == REQUEST_OVER
            if learn and not claim.failed and claim.first_s is not None and claim.running is None:
                self.costs.learn_follow(claim.route, max(0.0, claim.spent - claim.first_s))
            if not any(c.route == claim.route for c in self._claims.values()):
                self._service.pop(claim.route, None)

    def _drop_expired(self, now: float) -> None:
        """Claims whose deadline passed with nothing queued or running (a ticket nobody closed)."""
        for ticket, claim in list(self._claims.items()):
            if claim.deadline < now and not claim.jobs and claim.running is None:
                self._close(ticket, learn=False)

    # -- the plan: estimates, order, who fits ----------------------------------------------------

    def _need(self, claim: _Claim, now: float) -> tuple[float, float]:
        """The model seconds the claim still needs: expected (mean) and its deviation."""
        first = self.costs.estimate(claim.first_kind)
        follow = self.costs.follow.get(claim.route)
        planned = first.mean + (follow.mean if follow else 0.0)
        dev = math.hypot(first.dev, follow.dev if follow else 0.0)
        used = claim.spent
        left_now = sum(self.costs.estimate(job.kind).mean for job in claim.jobs)
        if claim.running is not None:
            elapsed = now - claim.running.started_mono
            used += elapsed
            left_now += max(0.0, self.costs.estimate(claim.running.kind).mean - elapsed)
        return max(planned - used, left_now), dev

    def _plan(self, now: float, extra: _Claim | None = None,
              without: list[_Claim] = ()) -> list[tuple[_Claim, float]]:
        """Every admitted request (and ``extra``, less ``without``) in the order the model thread
        will serve them, with the time each should be done by: the expected seconds of all up to
        it, plus two deviations of their sum (deviations add as squares: they do not all run
        long at once). Requests that have begun go first, earliest deadline first; then new
        requests, the route with the least model time first."""
        claims = [c for c in self._claims.values() if c not in without]
        claims += [extra] if extra is not None else []
        begun = sorted((c for c in claims if c.started),
                       key=lambda c: (c.running is None, c.deadline, c.order))
        waiting: dict[str, list[_Claim]] = {}
        for claim in sorted((c for c in claims if not c.started), key=lambda c: c.order):
            waiting.setdefault(claim.route, []).append(claim)
        base = min(self._service.values(), default=0.0)
        service = {route: self._service.get(route, base) for route in waiting}
        plan, total, variance = [], 0.0, 0.0

        def add(claim: _Claim) -> float:
            nonlocal total, variance
            mean, dev = self._need(claim, now)
            total += mean
            variance += dev * dev
            plan.append((claim, now + total + 2 * math.sqrt(variance)))
            return mean

        for claim in begun:
            add(claim)
        while waiting:
            route = min(waiting, key=lambda r: (service[r], waiting[r][0].order))
            claim = waiting[route].pop(0)
            if not waiting[route]:
                del waiting[route]
            service[route] += add(claim)
        return plan

    def _misses(self, now: float, extra: _Claim | None = None,
                without: list[_Claim] = ()) -> list[_Claim]:
        """New requests the plan cannot finish before their deadline, less the slack."""
        return [claim for claim, done in self._plan(now, extra, without)
                if not claim.started and done > claim.deadline - claim.slack()]

    def _make_room(self, claim: _Claim, now: float) -> list[_Claim] | None:
        """The requests to take back so that ``claim`` fits (none if it fits as it is), or None
        when it cannot fit without taking more than its route's share."""
        if not self._claims:  # nothing ahead: only a call measured too slow for its time is refused
            remaining = claim.deadline - now - claim.slack()
            known = self.costs.calls.get(claim.first_kind)
            return [] if known is None or known.mean <= remaining else None
        victims: list[_Claim] = []
        while (len(self._claims) - len(victims) >= self.max_queue
               or self._misses(now, claim, victims)):
            victim = self._victim(claim, now, victims)
            if victim is None:
                return None
            victims.append(victim)
        return victims

    def _victim(self, claim: _Claim, now: float, taken: list[_Claim]) -> _Claim | None:
        """Fair shares in a burst: the newest request of the route with the largest share of
        the model thread (its model time so far and what its admitted requests need), if it was
        admitted a moment ago (within its slack) and has not begun, and if taking it back still
        leaves that route at least the share ``claim``'s route would have."""
        base = min(self._service.values(), default=0.0)
        shares: dict[str, float] = {}
        for c in self._claims.values():
            if c not in taken:
                shares[c.route] = (shares.get(c.route, self._service.get(c.route, base))
                                   + self._need(c, now)[0])
        mine = (shares.get(claim.route, self._service.get(claim.route, base))
                + self._need(claim, now)[0])
        candidates = [c for c in self._claims.values() if c not in taken and not c.started
                      and c.route != claim.route and now - c.admitted <= c.slack()]
        if not candidates:
            return None
        route = max({c.route for c in candidates}, key=shares.__getitem__)
        victim = max((c for c in candidates if c.route == route), key=lambda c: c.order)
        return victim if shares[route] - self._need(victim, now)[0] >= mine else None

    def _shed_late(self, now: float) -> None:
        """Refuse, now, each waiting request the latest estimates say cannot finish in time."""
        while late := self._misses(now):
            self._refuse(late[0], now)  # the first one late: refusing it helps the ones after it

    def _refuse(self, claim: _Claim, now: float) -> None:
        """Take a new request back: :class:`Busy` for its waiting call."""
        del self._claims[claim.ticket]
        if not any(c.route == claim.route for c in self._claims.values()):
            self._service.pop(claim.route, None)
        self.shed += 1
        busy = Busy(self._retry_after(now))
        for job in list(claim.jobs):
            if not job.future.done():
                job.future.set_exception(busy)  # its done-callback takes it off the queue

    def _retry_after(self, now: float) -> int:
        """Whole seconds until the work admitted now is expected to be done (at least 1)."""
        return max(1, math.ceil(sum(self._need(c, now)[0]
                                    for c in self._claims.values())))

    def _next(self) -> _Job | None:
        """The call to run next: a begun request's (earliest deadline), else the oldest new
        request of the route with the least model time."""
        queue = [job for job in self._queue if not job.future.done()]
        begun = [job for job in queue if job.claim.started]
        if begun:
            return min(begun, key=lambda j: (j.claim.deadline, j.claim.order))
        if not queue:
            return None
        base = min(self._service.values(), default=0.0)
        return min(queue, key=lambda j: (self._service.get(j.claim.route, base), j.claim.order))

    def _serve(self) -> None:
        """The model thread: take the next call, run it, learn how long it took."""
        while True:
            with self._lock:
                while (job := self._next()) is None:
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

    def _execute(self, job: _Job) -> None:
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
            with running(self, ticket):
                result = job.call(*job.args, **job.kwargs)
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

    def _learn(self, job: _Job, seconds: float, finished: bool) -> None:
        """After a call: count its time to its request and route, learn how long its kind
        takes (only from calls that ran to the end), refuse who can no longer fit."""
        claim = job.claim
        with self._lock:
            claim.running = None
            claim.spent += seconds
            if claim.first_s is None:
                claim.first_s = seconds
            if claim.route in self._service:
                self._service[claim.route] += seconds
            if finished:
                self.costs.learn(job.kind, seconds)
            else:
                claim.failed = True
            self._shed_late(time.monotonic())
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
