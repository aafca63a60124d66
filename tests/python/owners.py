"""Other owners for a test: each call runs in a new thread, so it is an
owner of its own (a pooled thread would be the owner of the task before)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

T = TypeVar("T")


def in_thread(fn: Callable[[], T]) -> "Future[T]":
    """Runs `fn` in a new thread; its result (or exception) comes through the
    future, which the test reads with a deadline: `.result(timeout=...)`."""
    done: "Future[T]" = Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as e:
            done.set_exception(e)

    threading.Thread(target=run, daemon=True).start()
    return done
