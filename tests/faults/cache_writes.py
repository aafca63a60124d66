"""Every write of a cache entry, as Redis ran it: the fault suite's record of
what `cached` stored, read through MONITOR, so it needs nothing of the
workers (the write happens inside `cached`, out of their reach) and misses
nothing a poller could (two writes between two polls).

MONITOR shows a script call, then the commands the script ran (`[db lua]`),
in the order the server ran them. A write attempt is a call of the fenced
write script (core/lua/cache/write.lua: four keys, the entry first and its
channel last), its token the script's second argument; it landed when the
script's HSET of the entry follows, carrying that token in `fence`."""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import List, Optional

from rlock_test_support.waiting import eventually

# `prefix:{KEY}:cached`: the entry of cache key KEY.
ENTRY = re.compile(r"^[^{]*:\{(.*)\}:cached$")
# What settle() sends through MONITOR.
MARK = "rlock-cache-writes-mark"
# One argument as MONITOR quotes it.
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class EntryWrite:
    t: int  # CLOCK_MONOTONIC ns, when the line arrived (after Redis ran it)
    key: str  # the cache key
    token: int
    landed: bool  # False: an attempt (the script called); True: its HSET ran


def parse(line: str) -> Optional[EntryWrite]:
    """The write of a cache entry a MONITOR line shows, if it shows one."""
    source, _, rest = line.partition("] ")
    args = [unquote(a) for a in ARG.findall(rest)]
    if not args:
        return None
    cmd = args[0].upper()
    if source.endswith(" lua"):
        entry = ENTRY.match(args[1]) if cmd == "HSET" and len(args) > 2 else None
        fields = dict(zip(args[2::2], args[3::2]))
        if entry and "fence" in fields:
            return EntryWrite(time.monotonic_ns(), entry.group(1), int(fields["fence"]), True)
        return None
    if cmd in ("EVALSHA", "EVAL") and len(args) > 8 and args[2] == "4":
        entry = ENTRY.match(args[3])
        if entry and args[6] == f"{args[3]}:news":
            return EntryWrite(time.monotonic_ns(), entry.group(1), int(args[8]), False)
    return None


def unquote(arg: str) -> str:
    """MONITOR's quoting undone: a backslash before a quote or a backslash,
    and hex escapes of other bytes."""

    def one(m: "re.Match[str]") -> str:
        escaped = m.group(1)
        return chr(int(escaped[1:], 16)) if len(escaped) == 3 else escaped

    return re.sub(r"\\(x[0-9a-fA-F]{2}|.)", one, arg)


class EntryWrites:
    """The writes of every cache entry on the server at `port`, from now
    on, in the order Redis ran them (`log`)."""

    def __init__(self, port: int) -> None:
        self.log: List[EntryWrite] = []
        self.marks: List[str] = []
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.file = self.sock.makefile("r", encoding="utf-8", errors="replace")
        assert self.file.readline().strip() == "+OK"
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for line in self.file:
                write = parse(line)
                if write is not None:
                    self.log.append(write)
                elif MARK in line:
                    self.marks.append(line)
        except (OSError, ValueError):
            pass  # closed

    def settle(self) -> None:
        """Returns once every write Redis ran before this call is in `log`:
        a marker sent after them has come through."""
        marker = f"{MARK}-{len(self.marks)}"
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(f"ECHO {marker}\r\n".encode())
            s.recv(100)
        assert eventually(lambda: any(marker in m for m in self.marks), within=10), "MONITOR never showed the marker"

    def of(self, key: str) -> List[EntryWrite]:
        return [w for w in self.log if w.key == key]

    def close(self) -> None:
        self.sock.close()
