"""A loopback TCP proxy between clients and Redis that can delay, stall and
cut the wire: what a congested or flaky network does to a lock client.

- `delay_ms`: every chunk is forwarded that long after it arrived, both ways
  (order kept), so a round trip costs twice that.
- `stall()` / `resume()`: nothing is forwarded in either direction until
  resumed; what arrived meanwhile is delivered then, late (as TCP would).
- `cut(refuse_ms)`: every open connection is reset at once, and new ones are
  reset on arrival for `refuse_ms`.
"""

from __future__ import annotations

import asyncio
import time
from typing import List, Set, Tuple

from rlock_test_support.background import Background
from rlock_test_support.wire import relay, reset


class Proxy:
    def __init__(self, background: Background, target_port: int) -> None:
        self.bg = background
        self.target_port = target_port
        self.delay_ms = 0.0
        self.refuse_until = 0.0
        self.connections = 0
        self._flowing = asyncio.Event()
        self._open: Set[asyncio.StreamWriter] = set()
        self._server = background.run(self._serve())
        self.port: int = self._server.sockets[0].getsockname()[1]
        background.call(self._flowing.set)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    async def _serve(self) -> asyncio.base_events.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if time.monotonic() < self.refuse_until:
            reset(client_w)
            return
        try:
            redis_r, redis_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            reset(client_w)
            return
        self.connections += 1
        pair = (client_w, redis_w)
        self._open.update(pair)
        await asyncio.gather(self._pump(client_r, redis_w, pair), self._pump(redis_r, client_w, pair))
        self._open.difference_update(pair)

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        pair: Tuple[asyncio.StreamWriter, asyncio.StreamWriter],
    ) -> None:
        try:
            await relay(src, dst, lambda: self.delay_ms / 1000, self._flowing_now)
        finally:
            for w in pair:
                reset(w)

    async def _flowing_now(self) -> bool:
        """Holds a chunk while the wire is stalled."""
        await self._flowing.wait()
        return True

    def stall(self) -> None:
        self.bg.call(self._flowing.clear)

    def resume(self) -> None:
        self.bg.call(self._flowing.set)

    def cut(self, refuse_ms: float = 0) -> int:
        """Resets every open connection; returns how many there were."""

        async def cut() -> int:
            self.refuse_until = time.monotonic() + refuse_ms / 1000
            writers: List[asyncio.StreamWriter] = list(self._open)
            for w in writers:
                reset(w)
            return len(writers) // 2

        return self.bg.run(cut())

    def close(self) -> None:
        async def close() -> None:
            self._server.close()
            for w in list(self._open):
                reset(w)

        self.bg.run(close())

