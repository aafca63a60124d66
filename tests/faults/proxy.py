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
import socket
import time
from typing import List, Set, Tuple

from background import Background


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
            _reset(client_w)
            return
        try:
            redis_r, redis_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            _reset(client_w)
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
        # Chunks queue with the time they are due, so a delay never reorders them.
        queue: "asyncio.Queue[Tuple[float, bytes]]" = asyncio.Queue()

        async def forward() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                dst.write(chunk)
                await dst.drain()

        sender = asyncio.ensure_future(forward())
        try:
            while True:
                chunk = await src.read(65536)
                queue.put_nowait((time.monotonic() + self.delay_ms / 1000, chunk))
                if not chunk:
                    break
            await sender
        except (ConnectionError, OSError):
            pass
        finally:
            sender.cancel()
            for w in pair:
                _reset(w)

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
                _reset(w)
            return len(writers) // 2

        return self.bg.run(cut())

    def close(self) -> None:
        async def close() -> None:
            self._server.close()
            for w in list(self._open):
                _reset(w)

        self.bg.run(close())


def _reset(writer: asyncio.StreamWriter) -> None:
    """Closes with a RST, as a dropped connection looks to its peer."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    writer.transport.abort()
