"""The model engine: one thread that runs every model call, and the trace cache in front of it.

Every page's JSON route asks :meth:`Engine.trace` for the trace of (sentence, decoding options):
the first request runs ``Translator.trace`` once, every later one — from any page — reads the
recorded trace, so moving between pages never runs the model twice. Calls that are not a
translation (the training page's teacher-forced score, the KV-cache race, the position table)
go through :meth:`Engine.run`, on the same thread. (Tokenizing alone is not a model call.)
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from app.schemas import TranslateRequest
from model.decoding import DecodingOptions
from model.trace import Trace
from model.translator import Translator

Result = TypeVar("Result")


class Engine:
    def __init__(self, translator: Translator, cache_size: int = 64):
        self.translator = translator
        self.size = cache_size
        self.model_calls = 0  # how many traces the model really computed (tests read this)
        self._traces: OrderedDict[tuple, Trace] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[tuple, threading.Lock] = {}
        # Every model run happens on this one thread, one at a time: on a small CPU, parallel runs
        # only fight over the cores and the GIL (measured in bench/: throughput went up, not down).
        self._model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")

    def run(self, call: Callable[..., Result], *args, **kwargs) -> tuple[Result, float]:
        """``call(*args, **kwargs)`` on the model thread, and the milliseconds it took there."""
        started = time.perf_counter()
        result = self._model_thread.submit(call, *args, **kwargs).result()
        return result, (time.perf_counter() - started) * 1000

    def trace(self, request: TranslateRequest) -> tuple[Trace, float]:
        """The trace for ``request`` and the milliseconds this call spent in the model (0 if cached)."""
        key = request.cache_key()
        with self._lock:
            if key in self._traces:
                self._traces.move_to_end(key)
                return self._traces[key], 0.0
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        # Identical requests arriving together wait for one model run instead of starting several.
        with key_lock:
            with self._lock:
                if key in self._traces:
                    self._traces.move_to_end(key)
                    return self._traces[key], 0.0
            try:
                trace, elapsed = self.run(
                    self.translator.trace,
                    request.text, options(request), getattr(request, "forced_prefix", None) or None,
                )
            except BaseException:  # a request the model refuses must not leave its lock behind
                with self._lock:
                    self._key_locks.pop(key, None)
                raise
            with self._lock:
                self._key_locks.pop(key, None)
                self.model_calls += 1
                self._traces[key] = trace
                self._traces.move_to_end(key)
                while len(self._traces) > self.size:
                    self._traces.popitem(last=False)
        return trace, elapsed


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
