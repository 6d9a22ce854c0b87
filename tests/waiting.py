"""Wait for a condition, never for a fixed time: a test on a busy machine only takes longer."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

# how long a condition may take on a very busy machine before the test fails
PATIENCE_S = float(os.environ.get("ITT_TEST_PATIENCE_S", "60"))


def wait_until(condition: Callable[[], object], what: str, timeout: float = PATIENCE_S,
               interval: float = 0.005) -> None:
    """Return as soon as ``condition()`` is true; fail saying ``what`` did not happen in time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s: {what}")
        time.sleep(interval)
