"""Counting the commands a client sends, apart from those its scripts run."""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from collections import Counter
from typing import Callable, List, Tuple

from .server import BenchServer


class Monitor:
    """MONITOR on a raw connection: the commands each client sent, told apart
    from those scripts ran (MONITOR shows those with the source `lua`)."""

    LINE = re.compile(r'^\+?\d+\.\d+ \[\d+ (\S+)\] "([^"]*)"')

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.lines: List[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\r\n")
            self.lines.extend(l.decode(errors="replace") for l in lines)

    def count(self, server: BenchServer, run: Callable[[], object]) -> Tuple[Counter, Counter]:
        """(commands sent by clients, commands run by scripts) while `run` runs."""
        tag = f"bench-mark-{random.getrandbits(48)}"
        server.redis.echo(f"{tag}-start")
        run()
        server.redis.echo(f"{tag}-end")
        deadline = time.monotonic() + 10
        while not any(f"{tag}-end" in l for l in self.lines[-50:]) and time.monotonic() < deadline:
            time.sleep(0.01)
        sent: Counter = Counter()
        scripted: Counter = Counter()
        inside = False
        for line in self.lines:
            if f"{tag}-start" in line:
                inside = True
                continue
            if f"{tag}-end" in line:
                break
            m = self.LINE.match(line)
            if inside and m:
                (scripted if m.group(1) == "lua" else sent)[m.group(2).lower()] += 1
        self.lines.clear()
        return sent, scripted

    def close(self) -> None:
        # shutdown() also ends the reader's recv(); close() alone may not.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)
