"""Waiting on a condition with a deadline, for state that has no event to wait
on (a key in Redis, a flag set by the core, a process's threads)."""

from __future__ import annotations

import time
from typing import Callable


def eventually(cond: Callable[[], object], within: float = 5.0, every: float = 0.01) -> bool:
    """Polls `cond` until it holds or `within` seconds pass; whether it held."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return bool(cond())


def wait_until(cond: Callable[[], object], within: float, what: str, every: float = 0.02) -> None:
    """`eventually`, for a condition the caller cannot go on without: raises
    TimeoutError naming `what` once `within` seconds pass."""
    if not eventually(cond, within, every):
        raise TimeoutError(f"timed out after {within} s waiting for {what}")
