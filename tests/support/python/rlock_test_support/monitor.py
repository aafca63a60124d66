"""The commands clients send to a server, as MONITOR shows them."""

from __future__ import annotations

import socket
import threading
from typing import List

import redis

from .waiting import eventually


class Monitor:
    """The commands clients send (not those scripts run inside Redis), read
    through MONITOR; `mark()` returns those since the last mark, made exact by
    a marker command the server executes after all of them."""

    def __init__(self, port: int) -> None:
        self.seen: List[str] = []
        self.marks = 0
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.file = self.sock.makefile("r", encoding="utf-8", errors="replace")
        assert self.file.readline().strip() == "+OK"
        self.marker = redis.Redis(port=port)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.file:
            # `+ts [db addr] "cmd" "arg" ...`; script calls show `[db lua]`.
            source, _, rest = line.partition("] ")
            if source.endswith(" lua"):
                continue
            parts = rest.split('"')
            cmd = parts[1].lower() if len(parts) > 1 else ""
            if cmd == "echo" and len(parts) > 3:
                cmd = f"echo {parts[3]}"
            self.seen.append(cmd)

    def mark(self) -> List[str]:
        self.marks += 1
        marker = f"echo rlock-mark-{self.marks}"
        self.marker.echo(f"rlock-mark-{self.marks}")
        assert eventually(lambda: marker in self.seen, within=10), "MONITOR never showed the marker"
        at = self.seen.index(marker)
        out, self.seen[: at + 1] = self.seen[:at], []
        return out

    def close(self) -> None:
        self.sock.close()
        self.marker.close()
