"""A loopback fault proxy in front of one redis-server, in the spirit of
toxiproxy's toxics: it reads the client->server stream as RESP requests, so it
can act between two requests, and tells command connections from pub/sub ones
(a connection becomes pub/sub once it sends SUBSCRIBE, SSUBSCRIBE or
PSUBSCRIBE), so a fault can target either. The fault suites (tests/faults,
tests/netfaults) both run their wires through it.

It runs on an asyncio loop (a `Background`'s): the faults are called on that
loop; from another thread, through `now()`.

Faults (each counted in `injected` by kind when it actually hits a wire):

- `drop_reply(kind, n, commands, scripts)`: the next `n` requests of that kind
  of connection (optionally only those commands, and only those scripts: an
  EVALSHA of one of the SHAs, or an EVAL of a body with one of them) are
  forwarded to Redis, their replies are thrown away, and the connection is
  reset once Redis had time to apply them: Redis did the work, the client
  never hears.
- `delay(kind, ms, for_ms, each_way)`: for `for_ms` (None: until `clear()`),
  every server->client chunk on those connections is delivered `ms` late
  (order kept); with `each_way`, every client->server one too, so a round
  trip costs twice `ms`.
- `stall(kind, for_ms)`: nothing is forwarded either way on those connections
  for `for_ms` (None: until `clear()`); what arrived meanwhile is delivered
  afterwards, late.
- `reset(kind, which)`: resets one open connection of that kind (`which`
  "one", picked by the proxy's seeded generator) or all of them, now; with
  `which` "mid", the next request on such a connection is cut halfway through
  instead (Redis never sees it whole, so never applies it) and reset, counted
  as `cut_request`.
- `drop_request(kind, scripts, for_ms, naming)`: for `for_ms`, every
  request of that kind of connection running one of those scripts (by SHA,
  as for `drop_reply`), and with `naming` only those whose bytes hold it (a
  lock's name), is thrown away before Redis sees it and its connection
  reset: one script's requests lost on the way (a client's leaving the
  waiting line that never arrives, each of its retries too), counted as
  `drop_request` each time.

`kind` is "cmd", "pubsub" or "any". A replica's replication link (a Cluster
replica reaches its master at the port the master announces: its proxy's)
is neither: no fault touches it.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar

from rlock_test_support.wire import relay, reset

# Long enough on a loaded loopback for Redis to read and run a request the
# proxy forwarded, before the proxy resets the connection under it.
APPLY_S = 0.05

T = TypeVar("T")

SUBSCRIBES = {b"SUBSCRIBE", b"SSUBSCRIBE", b"PSUBSCRIBE"}
# What only a replica sends its master: the connection is a replication link.
REPLICATION = {b"REPLCONF", b"PSYNC", b"SYNC"}


def split_requests(buf: bytearray) -> List[bytes]:
    """Removes the complete RESP requests at the front of `buf` and returns
    them as raw bytes; a partial request stays in `buf`. Inline commands (one
    line) count too."""
    out: List[bytes] = []
    while buf:
        end = _request_end(buf)
        if end is None:
            break
        out.append(bytes(buf[:end]))
        del buf[:end]
    return out


def _request_end(buf: bytearray) -> Optional[int]:
    if buf[:1] != b"*":
        nl = buf.find(b"\n")
        return None if nl < 0 else nl + 1
    nl = buf.find(b"\r\n")
    if nl < 0:
        return None
    n, at = int(buf[1:nl]), nl + 2
    for _ in range(n):
        nl = buf.find(b"\r\n", at)
        if nl < 0:
            return None
        size = int(buf[at + 1:nl])
        at = nl + 2 + size + 2
        if at > len(buf):
            return None
    return at


def command_of(request: bytes) -> bytes:
    """The command name of one request, upper-cased."""
    if request[:1] != b"*":
        return request.split(None, 1)[0].upper() if request.strip() else b""
    first = request.index(b"\r\n")
    nl = request.index(b"\r\n", first + 2)
    size = int(request[first + 3:nl])
    return request[nl + 2:nl + 2 + size].upper()


def script_of(request: bytes) -> Optional[str]:
    """The SHA-1 (hex) of the script an EVALSHA or EVAL request runs, else None."""
    command = command_of(request)
    if command not in (b"EVALSHA", b"EVAL") or request[:1] != b"*":
        return None
    at = request.index(b"\r\n") + 2
    for _ in range(2):  # the command, then its first argument
        nl = request.index(b"\r\n", at)
        size = int(request[at + 1:nl])
        arg, at = request[nl + 2:nl + 2 + size], nl + 2 + size + 2
    return arg.decode().lower() if command == b"EVALSHA" else hashlib.sha1(arg).hexdigest()


@dataclass(eq=False)  # hashed by identity: kept in a set of open connections
class _Conn:
    client_w: asyncio.StreamWriter
    redis_w: asyncio.StreamWriter
    kind: str = "cmd"  # cmd | pubsub | replica
    doomed: bool = False  # a dropped reply is pending: nothing more reaches the client
    closed: bool = False
    tasks: List["asyncio.Task[None]"] = field(default_factory=list)

    def matches(self, kind: str) -> bool:
        return self.kind != "replica" and (kind == "any" or kind == self.kind)


@dataclass
class _Window:
    kind: str
    until: float
    ms: float = 0.0
    scripts: Optional[Set[str]] = None  # a drop_request's: SHA-1s (hex) of the scripts it drops
    naming: Optional[bytes] = None  # a drop_request's: what the requests it drops hold
    each_way: bool = False  # a delay's: client->server chunks too


@dataclass
class _Drop:
    kind: str
    left: int
    commands: Optional[Set[bytes]]
    mid: bool = False  # cut the request halfway instead of dropping its reply
    scripts: Optional[Set[str]] = None  # SHA-1s (hex) of the scripts it waits for

    def takes(self, command: bytes, request: bytes) -> bool:
        if self.commands is not None and command not in self.commands:
            return False
        return self.scripts is None or script_of(request) in self.scripts


class FaultProxy:
    def __init__(self, loop: asyncio.AbstractEventLoop, target_port: int, seed: int = 0) -> None:
        self.loop = loop
        self.target_port = target_port
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.connections = 0  # every connection relayed to Redis so far
        # Every fault as it hit: {"at": monotonic ns, "what", "kind", "for_ms", "ms",
        # "script": the SHA-1 of the script whose reply a drop picked by script}.
        self.log: List[Dict[str, Any]] = []
        self.conns: Set[_Conn] = set()
        self.delays: List[_Window] = []
        self.stalls: List[_Window] = []
        self.drops: List[_Drop] = []
        self.request_drops: List[_Window] = []
        self.server: Optional[asyncio.base_events.Server] = None
        self.port = 0

    async def start(self) -> "FaultProxy":
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def now(self, fn: Callable[..., T], *args: Any) -> T:
        """From another thread: calls `fn` (a fault) on the proxy's loop and
        returns its result once it ran, so it is armed before the next request."""

        async def call() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    # Faults, called on the loop.

    def drop_reply(self, kind: str, n: int = 1, commands: Optional[Sequence[str]] = None,
                   scripts: Optional[Sequence[str]] = None) -> None:
        self.drops.append(_Drop(kind, n, {c.upper().encode() for c in commands} if commands else None,
                                scripts={s.lower() for s in scripts} if scripts else None))

    def delay(self, kind: str, ms: float, for_ms: Optional[float] = None, each_way: bool = False) -> None:
        for_ms = math.inf if for_ms is None else for_ms
        self.delays.append(_Window(kind, time.monotonic() + for_ms / 1000, ms, each_way=each_way))
        self._hit("delay", kind, for_ms=for_ms, ms=ms)

    def stall(self, kind: str, for_ms: Optional[float] = None) -> None:
        for_ms = math.inf if for_ms is None else for_ms
        self.stalls.append(_Window(kind, time.monotonic() + for_ms / 1000))
        self._hit("stall", kind, for_ms=for_ms)

    def drop_request(self, kind: str, scripts: Sequence[str], for_ms: float, naming: Optional[bytes] = None) -> None:
        self.request_drops.append(_Window(kind, time.monotonic() + for_ms / 1000,
                                          scripts={s.lower() for s in scripts}, naming=naming))

    def reset(self, kind: str, which: str = "one") -> int:
        if which == "mid":
            self.drops.append(_Drop(kind, 1, None, mid=True))
            return 0
        open_ = sorted((c for c in self.conns if c.matches(kind) and not c.closed), key=id)
        if which == "one" and open_:
            open_ = [self.rng.choice(open_)]
        for c in open_:
            self._hit("reset", c.kind)
            self._close(c)
        return len(open_)

    def clear(self) -> None:
        """Ends every pending fault (between schedules)."""
        self.delays.clear()
        self.stalls.clear()
        self.drops.clear()
        self.request_drops.clear()

    def reset_all(self) -> None:
        for c in list(self.conns):
            self._close(c)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.reset_all()
        tasks = [t for c in self.conns for t in c.tasks]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _hit(self, what: str, kind: str, for_ms: float = 0.0, ms: float = 0.0, script: Optional[str] = None) -> None:
        self.injected[what] += 1
        self.log.append({"at": time.monotonic_ns(), "what": what, "kind": kind, "for_ms": for_ms, "ms": ms,
                         "script": script})

    # The wire.

    def _stalled(self, c: _Conn) -> float:
        """Seconds until no stall covers `c` (0: none does)."""
        t = time.monotonic()
        self.stalls = [s for s in self.stalls if s.until > t]
        return max((s.until - t for s in self.stalls if c.matches(s.kind)), default=0.0)

    def _delay_s(self, c: _Conn, upstream: bool = False) -> float:
        t = time.monotonic()
        self.delays = [d for d in self.delays if d.until > t]
        return max((d.ms / 1000 for d in self.delays if c.matches(d.kind) and (d.each_way or not upstream)),
                   default=0.0)

    def _drops_request(self, c: _Conn, request: bytes) -> bool:
        t = time.monotonic()
        self.request_drops = [w for w in self.request_drops if w.until > t]
        if not any(c.matches(w.kind) for w in self.request_drops):
            return False
        script = script_of(request)
        return any(c.matches(w.kind) and script in (w.scripts or ()) and (w.naming is None or w.naming in request)
                   for w in self.request_drops)

    def _take_drop(self, c: _Conn, command: bytes, request: bytes) -> Optional[_Drop]:
        for d in self.drops:
            if d.left > 0 and c.matches(d.kind) and d.takes(command, request):
                d.left -= 1
                self.drops = [x for x in self.drops if x.left > 0]
                return d
        return None

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            redis_r, redis_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            reset(client_w)
            return
        self.connections += 1
        c = _Conn(client_w, redis_w)
        self.conns.add(c)
        up = asyncio.ensure_future(self._upstream(c, client_r))
        down = asyncio.ensure_future(self._downstream(c, redis_r))
        c.tasks = [up, down]
        await asyncio.gather(up, down, return_exceptions=True)
        self._close(c)
        self.conns.discard(c)

    async def _hold_while_stalled(self, c: _Conn) -> None:
        while not c.closed:
            left = self._stalled(c)
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.01))  # short slices: `clear()` ends a stall early

    async def _upstream(self, c: _Conn, src: asyncio.StreamReader) -> None:
        # Chunks queue with the time they are due (a delay each way), so a
        # delay never reorders them, nor adds up over a pipeline.
        arrivals: "asyncio.Queue[Tuple[float, bytes]]" = asyncio.Queue()

        async def read() -> None:
            chunk = b"-"
            try:
                while chunk and not c.closed:
                    chunk = await src.read(65536)
                    arrivals.put_nowait((time.monotonic() + self._delay_s(c, upstream=True), chunk))
            except (ConnectionError, OSError):
                pass
            finally:
                arrivals.put_nowait((0.0, b""))  # the end, however it came

        reader = asyncio.ensure_future(read())
        buf = bytearray()
        try:
            while not c.closed:
                due, chunk = await arrivals.get()
                if not chunk:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                buf += chunk
                for request in split_requests(buf):
                    await self._hold_while_stalled(c)
                    if c.closed or c.doomed:
                        return
                    command = command_of(request)
                    if command in SUBSCRIBES:
                        c.kind = "pubsub"
                    elif command in REPLICATION:
                        c.kind = "replica"
                    if self._drops_request(c, request):
                        self._hit("drop_request", c.kind, script=script_of(request))
                        self._close(c)
                        return
                    drop = self._take_drop(c, command, request)
                    if drop is not None and drop.mid:
                        c.redis_w.write(request[: len(request) // 2])
                        await c.redis_w.drain()
                        self._hit("cut_request", c.kind)
                        self._close(c)
                        return
                    if drop is not None:
                        # Before the request leaves: its reply may come back
                        # while this task waits for the write to drain.
                        c.doomed = True
                    c.redis_w.write(request)
                    await c.redis_w.drain()
                    if drop is not None:
                        self._hit("drop_reply", c.kind, script=script_of(request) if drop.scripts else None)
                        await asyncio.sleep(APPLY_S)
                        self._close(c)
                        return
        except (ConnectionError, OSError, ValueError):
            pass
        finally:
            reader.cancel()
            self._close(c)

    async def _downstream(self, c: _Conn, src: asyncio.StreamReader) -> None:
        async def cleared() -> bool:
            await self._hold_while_stalled(c)
            return not (c.closed or c.doomed)

        try:
            await relay(src, c.client_w, lambda: self._delay_s(c), cleared, lambda: not c.closed)
        finally:
            self._close(c)

    def _close(self, c: _Conn) -> None:
        if c.closed:
            return
        c.closed = True
        reset(c.client_w)
        reset(c.redis_w)

