"""Admission: which requests the model thread takes on, in what order, and when a refused client
should come back.

The engine (``app/engine.py``) asks :meth:`Admission.admit` at a request's first model call, and
:meth:`Admission.next_job` which queued call its thread runs next. Holding the engine's lock,

- a request is **admitted** only if the model thread can finish it in the time it has left, and
  every request admitted before it still in theirs: the plan is rebuilt from the measured seconds
  of each kind of call (``app/costs.py``) and of what each route asks after its first call. At most
  ``max_queue`` requests are admitted at once. When a measurement shows that a waiting request can
  no longer finish in time, it is refused then, not at its deadline;
- the thread is **shared fairly**: requests of a route that has begun computing finish first (its
  next calls go ahead of new requests, earliest deadline first); between new requests, the route
  that has had the least model time so far goes next, so a burst of one expensive kind cannot
  starve another; a request admitted a moment ago may be taken back to give a route with a
  smaller share its turn;
- a refused request gets an **appointment**: ``Retry-After`` is the earliest moment it can come
  back and be admitted — when the work admitted now is done, and late enough that it still fits
  behind the clients told to come back before it (each is told a later time, not all the same
  one). Until then its room is kept: a new request is admitted only if every appointment still
  fits after it. The same request (route and first call's arguments) coming back within
  ``EARLY_S`` before to ``LATE_S`` after its time keeps its place in its route's line; one that
  does not come back frees its room ``LATE_S`` after its time.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field

from app.costs import Costs
from app.tickets import Busy, Ticket
from model.api import DecodingOptions

# Of each request's time limit, what the plan keeps free: the route's own work before and after
# the model (figures, JSON) and estimates that run long.
SLACK = 0.1
EARLY_S = 1.0  # an appointment is kept for a client that comes back this much early …
LATE_S = 5.0  # … or this much late (a busy client, a slow network); then its room is freed
APPOINTMENTS_PER_QUEUE = 4  # appointments kept at most, per place in the queue
log = logging.getLogger("app.admission")


@dataclass(eq=False)
class Job:
    """One model call: queued, then run by the model thread."""

    claim: Claim
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
class Claim:
    """One admitted request: its calls, the model seconds it has used, and what it is expected to
    need: its first call's kind and what its route asks after the first call."""

    ticket: Ticket
    route: str
    first_kind: tuple
    order: int
    key: Hashable = None  # the same request sent again has the same key (see ``request_key``)
    jobs: list[Job] = field(default_factory=list)  # queued, not started
    running: Job | None = None
    started: bool = False  # a call of it has begun: its next calls go ahead of new requests
    spent: float = 0.0  # seconds its finished calls ran
    first_s: float | None = None
    failed: bool = False
    admitted: float = 0.0  # monotonic
    appointed: bool = False  # it came back when its Retry-After said

    @property
    def deadline(self) -> float:
        return self.ticket.deadline if self.ticket.deadline is not None else math.inf

    def slack(self) -> float:
        return SLACK * (self.ticket.timeout_s or 0.0)

    def budget(self) -> float:
        """The seconds from its arrival that it may use, less the slack (inf: no limit)."""
        return (self.ticket.timeout_s or math.inf) - self.slack()


@dataclass
class Appointment:
    """A refused request's promised return: at ``at`` its work (its first call's ``kind`` and what
    its ``route`` asks after it, estimated afresh each time: a kind measured since it was refused
    plans with the measurement) fits within its ``budget``; ``order`` keeps its place in its
    route's line."""

    key: Hashable
    at: float  # monotonic
    kind: tuple
    route: str
    budget: float
    order: int


def request_key(route: str, call: Callable, args: tuple) -> Hashable:
    """What a request sent again has in common with its first try: its route, its first call and
    that call's plain arguments (the text, the numbers, the decoding options)."""
    plain = tuple(repr(a) for a in args
                  if a is None or isinstance(a, str | int | float | DecodingOptions))
    return (route, getattr(call, "__qualname__", type(call).__name__), plain)


class Admission:
    """The admitted requests, the plan the model thread follows, and the appointments kept for
    refused ones. Every method is called with the engine's lock held."""

    def __init__(self, costs: Costs, max_queue: int):
        self.costs = costs
        self.max_queue = max_queue
        self.shed = 0  # requests refused with Busy (at once, or when they could no longer fit)
        self.claims: dict[Ticket, Claim] = {}  # admitted requests not finished
        self.service: dict[str, float] = {}  # model seconds per route with requests admitted
        self.appointments: list[Appointment] = []  # in the order of their times
        self._order = itertools.count()

    def claim(self, ticket: Ticket, route: str, first_kind: tuple, key: Hashable) -> Claim:
        return Claim(ticket, route, first_kind, next(self._order), key)

    def admit(self, claim: Claim, now: float) -> None:
        """Admit ``claim`` (taking back what must make room for it), or raise :class:`Busy` with
        the seconds until it may come back."""
        self.drop_expired(now)
        self.shed_late(now)
        appointment = self._appointment(claim.key, now)
        if appointment is not None:
            claim.order, claim.appointed = appointment.order, True
        else:
            early_late = [round(a.at - now, 1) for a in self.appointments if a.key == claim.key]
            if early_late:
                log.debug("%s came %s s from its appointment", claim.route, early_late)
        victims = self._make_room(claim, now)
        if victims is None:
            if appointment is not None:  # kept for it, and still no room: a later one
                self.appointments.remove(appointment)
            self.shed += 1
            seconds = self._appoint(claim, now)
            log.debug("refused %s%s: come back in %d s (%d admitted, %d appointments)",
                      claim.route, " back at its appointment" if claim.appointed else
                      " (no appointment)" if any(a.key == claim.key for a in self.appointments)
                      else "", seconds, len(self.claims), len(self.appointments))
            raise Busy(seconds)
        if appointment is not None:
            self.appointments.remove(appointment)
        for victim in victims:
            self.refuse(victim, now)
        claim.admitted = now
        self.claims[claim.ticket] = claim
        self.service.setdefault(claim.route, min(self.service.values(), default=0.0))

    def close(self, ticket: Ticket, learn: bool) -> None:
        """The request is over: forget its claim, and learn what its route asked after its
        first call when it ran to the end."""
        claim = self.claims.pop(ticket, None)
        if claim is None:
            return
        if learn and not claim.failed and claim.first_s is not None and claim.running is None:
            self.costs.learn_follow(claim.route, max(0.0, claim.spent - claim.first_s))
        self._forget_route(claim.route)

    def drop_expired(self, now: float) -> None:
        """Claims whose deadline passed with nothing queued or running (a ticket nobody closed),
        and appointments nobody came back for."""
        for ticket, claim in list(self.claims.items()):
            if claim.deadline < now and not claim.jobs and claim.running is None:
                self.close(ticket, learn=False)
        self.appointments = [a for a in self.appointments if a.at + LATE_S >= now]

    # -- the plan: estimates, order, who fits ----------------------------------------------------

    def planned(self, first_kind: tuple, route: str) -> tuple[float, float]:
        """The model seconds a request of ``route`` whose first call is of ``first_kind`` is
        expected to need in all: mean and deviation."""
        first = self.costs.estimate(first_kind)
        follow = self.costs.follow.get(route)
        return (first.mean + (follow.mean if follow else 0.0),
                math.hypot(first.dev, follow.dev if follow else 0.0))

    def need(self, claim: Claim, now: float) -> tuple[float, float]:
        """The model seconds the claim still needs: expected (mean) and its deviation."""
        planned, dev = self.planned(claim.first_kind, claim.route)
        used = claim.spent
        left_now = sum(self.costs.estimate(job.kind).mean for job in claim.jobs)
        if claim.running is not None:
            elapsed = now - claim.running.started_mono
            used += elapsed
            left_now += max(0.0, self.costs.estimate(claim.running.kind).mean - elapsed)
        return max(planned - used, left_now), dev

    def plan(self, now: float, extra: Claim | None = None,
             without: list[Claim] = ()) -> list[tuple[Claim, float]]:
        """Every admitted request (and ``extra``, less ``without``) in the order the model thread
        will serve them, with the time each should be done by: the expected seconds of all up to
        it, plus two deviations of their sum (deviations add as squares: they do not all run
        long at once). Requests that have begun go first, earliest deadline first; then those
        that came back at their appointment, in their first try's order; then new requests, the
        route with the least model time first."""
        claims = [c for c in self.claims.values() if c not in without]
        claims += [extra] if extra is not None else []
        begun = sorted((c for c in claims if c.started),
                       key=lambda c: (c.running is None, c.deadline, c.order))
        begun += sorted((c for c in claims if c.appointed and not c.started),
                        key=lambda c: c.order)
        waiting: dict[str, list[Claim]] = {}
        for claim in sorted((c for c in claims if not c.started and not c.appointed),
                            key=lambda c: c.order):
            waiting.setdefault(claim.route, []).append(claim)
        base = min(self.service.values(), default=0.0)
        service = {route: self.service.get(route, base) for route in waiting}
        plan, total, variance = [], 0.0, 0.0

        def add(claim: Claim) -> float:
            nonlocal total, variance
            mean, dev = self.need(claim, now)
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

    def misses(self, now: float, extra: Claim | None = None,
               without: list[Claim] = ()) -> list[Claim]:
        """New requests the plan cannot finish before their deadline, less the slack."""
        return [claim for claim, done in self.plan(now, extra, without)
                if not claim.started and done > claim.deadline - claim.slack()]

    def _make_room(self, claim: Claim, now: float) -> list[Claim] | None:
        """The requests to take back so that ``claim`` fits (none if it fits as it is), or None
        when it cannot fit without taking more than its route's share. A new request must also
        leave room for every appointment; one that comes back at its appointment may go past
        ``max_queue`` (up to twice it): its place was kept."""
        if not self.claims:  # nothing ahead: only a call measured too slow for its time is refused
            remaining = claim.deadline - now - claim.slack()
            known = self.costs.measured(claim.first_kind)
            fits = known is None or known.mean <= remaining
            if not fits:
                self.costs.relax(claim.first_kind, remaining)
            keeps = claim.appointed or self._keeps_appointments(claim, now, [])
            return [] if fits and keeps else None
        limit = self.max_queue * (2 if claim.appointed else 1)
        victims: list[Claim] = []
        while len(self.claims) - len(victims) >= limit or self._late(now, claim, victims):
            victim = (self._promised(claim, victims) if claim.appointed
                      else self._victim(claim, now, victims))
            if victim is None:
                return None
            victims.append(victim)
        return victims

    def _late(self, now: float, claim: Claim, victims: list[Claim]) -> bool:
        """Whether admitting ``claim`` (less ``victims``) leaves a new request late or breaks an
        appointment; for a request that came back at its appointment, only whether it is late
        itself (the ones admitted while it was away and pushed late by it are refused instead,
        and told when to come back)."""
        late = self.misses(now, claim, victims)
        if claim.appointed:
            return claim in late
        return bool(late) or not self._keeps_appointments(claim, now, victims)

    def _promised(self, claim: Claim, taken: list[Claim]) -> Claim | None:
        """Room for a request back at its appointment (the server's promise): the newest request
        admitted without one that has not begun, whatever its route's share (it is told when to
        come back, and that time is kept for it in turn)."""
        candidates = [c for c in self.claims.values()
                      if c not in taken and not c.started and not c.appointed]
        return max(candidates, key=lambda c: c.order, default=None)

    def _victim(self, claim: Claim, now: float, taken: list[Claim]) -> Claim | None:
        """Fair shares in a burst: the newest request of the route with the largest share of
        the model thread (its model time so far and what its admitted requests need), if it was
        admitted a moment ago (within its slack), has not begun and did not come back at its
        appointment, and if taking it back still leaves that route at least the share
        ``claim``'s route would have."""
        base = min(self.service.values(), default=0.0)
        shares: dict[str, float] = {}
        for c in self.claims.values():
            if c not in taken:
                shares[c.route] = (shares.get(c.route, self.service.get(c.route, base))
                                   + self.need(c, now)[0])
        mine = (shares.get(claim.route, self.service.get(claim.route, base))
                + self.need(claim, now)[0])
        candidates = [c for c in self.claims.values() if c not in taken and not c.started
                      and not c.appointed and c.route != claim.route
                      and now - c.admitted <= c.slack()]
        if not candidates:
            return None
        route = max({c.route for c in candidates}, key=shares.__getitem__)
        victim = max((c for c in candidates if c.route == route), key=lambda c: c.order)
        return victim if shares[route] - self.need(victim, now)[0] >= mine else None

    def shed_late(self, now: float) -> None:
        """Refuse, now, each waiting request the latest estimates say cannot finish in time."""
        while late := self.misses(now):
            # the first one late (refusing it helps the ones after it), sparing one that came
            # back at its appointment while another can go
            self.refuse(next((c for c in late if not c.appointed), late[0]), now)

    def refuse(self, claim: Claim, now: float) -> None:
        """Take an admitted request back: :class:`Busy` (and an appointment) for its waiting call."""
        del self.claims[claim.ticket]
        self._forget_route(claim.route)
        self.shed += 1
        busy = Busy(self._appoint(claim, now))
        log.debug("took back %s%s: come back in %d s", claim.route,
                  " (back at its appointment)" if claim.appointed else "", busy.retry_after)
        for job in list(claim.jobs):
            if not job.future.done():
                job.future.set_exception(busy)  # its done-callback takes it off the queue

    def latest_start(self, job: Job, now: float) -> float | None:
        """When the first call of a new request must start for it to finish in time (None: it
        has started, is done, or has no deadline)."""
        claim = job.claim
        if claim.started or job.future.done() or claim.ticket.deadline is None \
                or self.claims.get(claim.ticket) is not claim:
            return None
        mean, dev = self.need(claim, now)
        return claim.deadline - claim.slack() - mean - 2 * dev

    def next_job(self, queue: list[Job]) -> Job | None:
        """The call to run next: a begun request's (earliest deadline), else one that came back
        at its appointment (in order), else the oldest new request of the route with the least
        model time."""
        queue = [job for job in queue if not job.future.done()]
        begun = [job for job in queue if job.claim.started]
        if begun:
            return min(begun, key=lambda j: (j.claim.deadline, j.claim.order))
        if not queue:
            return None
        appointed = [job for job in queue if job.claim.appointed]
        if appointed:
            return min(appointed, key=lambda j: j.claim.order)
        base = min(self.service.values(), default=0.0)
        return min(queue, key=lambda j: (self.service.get(j.claim.route, base), j.claim.order))

    def count(self, claim: Claim, seconds: float) -> None:
        """A call of ``claim`` ran ``seconds``: its route's share of the thread grows."""
        if claim.route in self.service:
            self.service[claim.route] += seconds

    # -- appointments ----------------------------------------------------------------------------

    def _appointment(self, key: Hashable, now: float) -> Appointment | None:
        """The appointment kept for a request with ``key`` coming back now, if any."""
        return next((a for a in self.appointments
                     if a.key == key and a.at - EARLY_S <= now <= a.at + LATE_S), None)

    def _admitted_until(self, now: float, extra: Claim | None = None,
                        without: list[Claim] = ()) -> float:
        """When the work admitted (and ``extra``, less ``without``) is expected to be done."""
        claims = [c for c in self.claims.values() if c not in without]
        claims += [extra] if extra is not None else []
        return now + sum(self.need(c, now)[0] for c in claims)

    def _keeps_appointments(self, claim: Claim, now: float, without: list[Claim]) -> bool:
        """Whether every client told to come back still fits when it does, if ``claim`` is
        admitted now (served before them) and ``without`` taken back."""
        free = self._admitted_until(now, claim, without)
        for a in self.appointments:
            mean, dev = self.planned(a.kind, a.route)
            if mean + 2 * dev > a.budget / 2:  # not even an idle thread could keep it: no room held
                continue
            start = max(free, a.at)
            if start + mean + 2 * dev > a.at + a.budget / 2:
                return False
            free = start + mean
        return True

    def _appoint(self, claim: Claim, now: float) -> int:
        """Whole seconds until ``claim``'s request may come back and be admitted (at least 1):
        when the work admitted now is done, and no sooner than it fits behind the appointments
        made before it (their expected seconds, and its own bound) in half its time limit: the
        other half is for the work ahead running longer than expected. Its room is kept until
        then. (The deviations of the work ahead are not summed: an appointment told a time
        later than needed leaves the thread idle, one that comes early only waits its turn.)"""
        mean, dev = self.need(claim, now)
        bound, budget = mean + 2 * dev, claim.budget()
        done = self._admitted_until(now)
        free = done
        for a in self.appointments:
            free = max(free, a.at) + self.planned(a.kind, a.route)[0]
        at = max(done, free + bound - budget / 2, now + 1)
        seconds = max(1, math.ceil(at - now))
        # a call expected to take more than half its time limit keeps its place in line and
        # moves the later appointments back, but holds no room (``_keeps_appointments``): a
        # booked slot nobody could use would turn away every new request until it lapsed
        if len(self.appointments) < APPOINTMENTS_PER_QUEUE * self.max_queue:
            self.appointments.append(Appointment(claim.key, now + seconds, claim.first_kind,
                                                 claim.route, budget, claim.order))
            self.appointments.sort(key=lambda a: a.at)
        return seconds

    def _forget_route(self, route: str) -> None:
        """A route with no request admitted any more starts afresh in the fair shares."""
        if not any(c.route == route for c in self.claims.values()):
            self.service.pop(route, None)
