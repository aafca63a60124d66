"""The storage a lock protects, as fencing tokens are meant to be used: it
remembers the highest token that wrote to each name and refuses any write
carrying a smaller one. Workers of every language write to it over a unix
socket, one line per write (`NAME TOKEN WORKER`), and read `ok` or `stale`.

It is deliberately not in Redis: its verdicts must not depend on the server
the faults are aimed at. Every write is logged with the time it arrived."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Dict, List

from rlock_test_support.background import Background


@dataclass(frozen=True)
class Write:
    t: int  # CLOCK_MONOTONIC ns, when the write arrived
    name: str
    token: int
    worker: str
    accepted: bool


class FencedStorage:
    def __init__(self, background: Background, path: str) -> None:
        self.path = path
        self.log: List[Write] = []
        self._highest: Dict[str, int] = {}
        if os.path.exists(path):
            os.unlink(path)
        self._server = background.run(asyncio.start_unix_server(self._serve, path))
        self.bg = background

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                t = time.monotonic_ns()
                name, token, worker = line.decode().rsplit(" ", 2)
                tok = int(token)
                accepted = tok >= self._highest.get(name, 0)
                if accepted:
                    self._highest[name] = tok
                self.log.append(Write(t, name, tok, worker.strip(), accepted))
                writer.write(b"ok\n" if accepted else b"stale\n")
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        async def close() -> None:
            self._server.close()

        self.bg.run(close())
