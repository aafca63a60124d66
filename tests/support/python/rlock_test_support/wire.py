"""What the fault proxy (proxy.py) is built on: relaying one direction of a
connection late but in order, and dropping a connection the way a broken
network does."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Awaitable, Callable, Tuple


async def relay(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter,
    delay_s: Callable[[], float],
    cleared: Callable[[], Awaitable[bool]],
    open_: Callable[[], bool] = lambda: True,
) -> None:
    """Forwards `src` to `dst` chunk by chunk, each `delay_s()` seconds (as it
    was when the chunk arrived) late. Before each write, `cleared()` may hold
    the chunk back (a stall), or answer False to deliver nothing more. Ends at
    the end of `src`, once `open_()` is false, or when either side breaks."""
    # Chunks queue with the time they are due, so a delay never reorders them.
    queue: "asyncio.Queue[Tuple[float, bytes]]" = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                return
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not await cleared():
                return
            dst.write(chunk)
            await dst.drain()

    sender = asyncio.ensure_future(deliver())
    try:
        while open_():
            chunk = await src.read(65536)
            queue.put_nowait((time.monotonic() + delay_s(), chunk))
            if not chunk:
                break
        await sender
    except (ConnectionError, OSError):
        pass
    finally:
        sender.cancel()


def reset(writer: asyncio.StreamWriter) -> None:
    """Closes with a RST, as a dropped connection looks to its peer."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    writer.transport.abort()
