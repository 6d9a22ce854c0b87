"""The cost model: how many seconds each kind of model call takes, learnt as the server runs.

A call's kind is its function, its integer arguments, its decoding options and its text's size
(:func:`kind`); the engine's admission (``app/engine.py``) plans with :meth:`Costs.estimate` and
teaches it each finished call's seconds and what each route asked after its first call.
"""

from __future__ import annotations

from collections.abc import Callable

from model.api import DecodingOptions, Trace

# A call of a function never measured on this server is assumed to take this long, unless the
# function says how long it can take (a ``prior_s`` attribute: the KV-cache race stops itself
# after a budget); and a route seen asking more after its first call is assumed to ask this much
# until one of its requests has finished.
PRIOR_S = 1.0


class Estimate:
    """Seconds one kind of work takes: a moving mean and mean deviation, as TCP estimates a round
    trip. The plan counts ``bound`` (mean + 2 deviations), Retry-After the mean."""

    def __init__(self, seconds: float):
        # one measurement says little: a bound of 1.5× it (TCP starts at 2×; the same kind of
        # call here varies by tens of percent, and a bound of 2× an interpret's 8 s left no room
        # for it after anything else in a burst: bench/README.md, "Honoured retries")
        self.mean, self.dev = seconds, seconds / 4

    def add(self, seconds: float) -> None:
        self.dev = 0.75 * self.dev + 0.25 * abs(seconds - self.mean)
        self.mean = 0.75 * self.mean + 0.25 * seconds

    @property
    def bound(self) -> float:
        return self.mean + 2 * self.dev


def prior(seconds: float) -> Estimate:
    """A guess before any measurement: the guess is its own bound."""
    guess = Estimate(seconds)
    guess.dev = 0.0
    return guess


class Costs:
    """What the server has measured: seconds per kind of call, and per route the seconds its
    requests ask after their first call."""

    def __init__(self) -> None:
        self.calls: dict[tuple, Estimate] = {}  # seconds of one call, per kind
        self.follow: dict[str, Estimate] = {}  # seconds a route's request asks after its first call
        self.priors: dict[str, float] = {}  # what a function says it can take, before measured
        self.follow_guessed: set[str] = set()  # routes whose follow-up is still the prior

    def estimate(self, kind: tuple) -> Estimate:
        """What one call of ``kind`` is expected to take: measured; else guessed from the same
        function's measured kinds whose arguments differ least from these (a greedy trace of
        max_len 64 from one of max_len 128 rather than from a beam search): the nearest one at
        least as long as is, or the longest shorter one scaled up to this text's size; for a
        function that says the most it can take (its prior), also scaled up by each integer
        argument larger here (128 KV-cache steps cost about four times 32, a race of three runs
        about three of one), never past that most (another function's integers may be a seed,
        a layer or a head: they say nothing of its cost); else the prior, or :data:`PRIOR_S`."""
        known = self.calls.get(kind)
        if known is not None:
            return known
        ceiling = self.priors.get(kind[0])
        same = [(k, e) for k, e in self.calls.items() if k[0] == kind[0]]
        if not same:
            return prior(ceiling or PRIOR_S)

        def differences(k: tuple) -> int:
            if len(k) != len(kind):
                return len(kind)
            return sum(a != b for a, b in zip(k[:-1], kind[:-1], strict=True))

        closest = min(differences(k) for k, _ in same)
        pool = [(k, e) for k, e in same if differences(k) == closest]
        size = kind[-1]
        longer = [(k, e) for k, e in pool if k[-1] >= size]
        if longer:
            nearest = min(k[-1] for k, _ in longer)
            near, e = max(((k, e) for k, e in longer if k[-1] == nearest), key=lambda ke: ke[1].bound)
            scale = 1.0
        else:
            nearest = max(k[-1] for k, _ in pool)
            near, e = max(((k, e) for k, e in pool if k[-1] == nearest), key=lambda ke: ke[1].bound)
            scale = size / nearest if nearest else 1.0
        if ceiling is not None and len(near) == len(kind):
            for have, want in zip(near[1:-1], kind[1:-1], strict=True):
                if _integer(have) and _integer(want) and want > have > 0:
                    scale *= want / have
        if scale == 1.0:
            return e
        guess = Estimate(e.mean * scale)
        guess.dev = e.dev * scale
        if ceiling is not None and guess.mean > ceiling:
            return prior(ceiling)
        return guess

    def measured(self, kind: tuple) -> Estimate | None:
        """What one call of ``kind`` is expected to take, if this function was ever measured here
        (this kind or a neighbour, see :meth:`estimate`); None while only a prior is known."""
        return self.estimate(kind) if any(k[0] == kind[0] for k in self.calls) else None

    def learn(self, kind: tuple, seconds: float) -> None:
        """A call of ``kind`` ran to the end in ``seconds``."""
        known = self.calls.get(kind)
        if known is None:
            self.calls[kind] = Estimate(seconds)
        else:
            known.add(seconds)

    def at_least(self, kind: tuple, seconds: float) -> None:
        """A call of ``kind`` was stopped after ``seconds`` (its deadline, or its client gone):
        a lower bound, learnt only where it says more than the mean does."""
        known = self.calls.get(kind)
        if known is not None and seconds > known.mean:
            known.add(seconds)

    def relax(self, kind: tuple, seconds: float) -> None:
        """An idle thread refused a call of ``kind`` as slower than the ``seconds`` it had: take a
        quarter off every measured mean of its function, so that after a few such
        refusals one runs and is measured again (a guess scaled from a neighbour, 64 KV-cache steps
        from 32, lowers the neighbour). A mean learnt while the machine was overloaded
        is not kept for ever (nothing else could lower it: only a call that runs is measured)."""
        if self.estimate(kind).mean <= seconds:
            return
        for known_kind, known in self.calls.items():  # the kind's guess may be a scaled one
            if known_kind[0] == kind[0]:  # (64 KV steps from 32): its neighbours are lowered
                known.mean *= 0.75

    def learn_follow(self, route: str, seconds: float) -> None:
        """A request of ``route`` asked ``seconds`` of model time after its first call."""
        known = self.follow.get(route)
        if known is None or route in self.follow_guessed:
            self.follow[route] = Estimate(seconds)
            self.follow_guessed.discard(route)
        else:
            known.add(seconds)

    def guess_follow(self, route: str) -> None:
        """``route`` was seen asking more after its first call: assume the prior until measured."""
        if route not in self.follow:
            self.follow[route] = prior(PRIOR_S)
            self.follow_guessed.add(route)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def kind(call: Callable, args: tuple) -> tuple:
    """What a call costs depends on: the function, its integer arguments (KV-cache steps, steps
    of integrated gradients), the decoding options (strategy, beam size, max_len) and, last, how
    long its text is (characters, or a trace's source and target tokens; rounded up to a power of
    two)."""
    parts: list = [getattr(call, "__qualname__", type(call).__name__)]
    size = 0
    for arg in args:
        if isinstance(arg, bool):
            continue
        if isinstance(arg, int):
            parts.append(arg)
        elif isinstance(arg, DecodingOptions):
            parts += [arg.strategy, arg.beam_size if arg.strategy == "beam" else 1, arg.max_len]
        elif isinstance(arg, str):
            size += len(arg)
        elif isinstance(arg, Trace):
            size += len(arg.source_tokens) + len(arg.steps)
    return (*parts, 1 << max(0, size - 1).bit_length() if size else 0)
