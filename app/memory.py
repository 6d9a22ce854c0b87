"""Memory a worker gives back: glibc's allocator keeps what a burst of model calls freed (in one
arena per thread that allocated) unless asked to return it; these two calls ask. The engine
trims each time its model thread falls idle; the server limits the arenas before it starts its
threads (``app/cli.py``). What a worker holds, measured: bench/README.md.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("app")
M_ARENA_MAX = -8  # mallopt parameter (glibc's malloc.h)
ARENAS = 2  # the event loop and the model thread allocate most; the threadpool little


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - present only in glibc
    except (OSError, AttributeError):
        return None  # not glibc (macOS, musl): nothing to ask
    return libc


_LIBC = _glibc()


def limit_arenas(arenas: int = ARENAS) -> None:
    """At most ``arenas`` malloc arenas for this process (glibc makes up to 8 per core, one per
    thread that allocates, and memory freed in one cannot serve another). Call it before the
    server starts its threads."""
    if _LIBC is not None and not _LIBC.mallopt(M_ARENA_MAX, arenas):
        log.warning("mallopt(M_ARENA_MAX, %d) failed", arenas)


def trim() -> None:
    """Return the memory freed since the last trim to the system (a few ms)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
