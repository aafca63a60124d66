"""One asyncio loop on a daemon thread, for a suite's own servers (wire
proxies, a fenced storage), so they answer while the test's main thread
waits on workers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, Optional, TypeVar

T = TypeVar("T")


class Background:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="background-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], within: Optional[float] = 10.0) -> T:
        """Runs `coro` on the loop and returns its result (raises after `within` s)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(within)

    def call(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
