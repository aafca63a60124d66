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


class HeldInThread:
    """`lock` held by a thread of its own (named `thread_name`) from
    `start()` until `stop()`."""

    def __init__(self, lock: "object", thread_name: str = "holder") -> None:
        self._lock = lock
        self._held = threading.Event()
        self._go = threading.Event()
        self._thread = threading.Thread(target=self._hold, name=thread_name)

    def _hold(self) -> None:
        with self._lock:  # type: ignore[attr-defined]
            self._held.set()
            self._go.wait(10)

    def start(self) -> "HeldInThread":
        self._thread.start()
        assert self._held.wait(10), "the holder thread took the lock"
        return self

    def stop(self) -> None:
        self._go.set()
        self._thread.join(10)
