"""Bad arguments are refused when first given, before any I/O; connection
failures are rlock.ConnectionError, fast, and never show a password."""

from __future__ import annotations

import asyncio
import builtins
import inspect
import math
import os
import pathlib
import socket
import threading
import time
from functools import partial
from typing import Any, Callable, Dict, Iterator, List, Tuple, Type

import pytest

import rlock
from owners import HeldInThread
from rlock_test_support.monitor import Monitor
from rlock_test_support.servers import RedisServer, free_port

# Nothing listens there: an argument error raised through this client proves
# that no connection was attempted first.
NOWHERE = f"redis://127.0.0.1:{free_port()}"


@pytest.fixture
def nowhere() -> rlock.Client:
    return rlock.Client(NOWHERE)


# The invalid-argument matrix: every public entry point, every argument, each
# bad value with the exception it must raise. Each row runs against a client
# already connected to a real server, under a deadline, and must send nothing
# to Redis.
MIB = 1024 * 1024
Bad = List[Tuple[Any, Type[Exception]]]
Row = Tuple[str, Callable[[rlock.Client, rlock.AsyncClient], Any], Type[Exception]]
# A bool is an int to Python, never a number of seconds here: ttl=True is a mistake, not 1 s.
NOT_NUMBERS: Bad = [("10", TypeError), (b"1", TypeError), ([1], TypeError), (1j, TypeError), (object(), TypeError),
                    (True, TypeError)]
NON_FINITE: Bad = [(math.nan, ValueError), (math.inf, ValueError), (-math.inf, ValueError)]
HUGE: Bad = [(1e300, ValueError), (2.0**64, ValueError), (400 * 86400, ValueError), (10**400, ValueError), (-(10**400), ValueError)]
# Below the shortest usable lease (10 ms), which could never be counted as held.
LEASES: Bad = [(0, ValueError), (-1, ValueError), (1e-9, ValueError), (0.001, ValueError), (0.0099, ValueError)] + NON_FINITE + HUGE + NOT_NUMBERS
WAITS: Bad = [(-0.5, ValueError), (-1e-9, ValueError)] + NON_FINITE + HUGE + NOT_NUMBERS
NOT_BOOLS: Bad = [("yes", TypeError), (1, TypeError), (0.0, TypeError)]
OPTIONS = (
    [("ttl", v, e) for v, e in LEASES + [(None, TypeError)]]
    + [("max_hold", v, e) for v, e in LEASES]
    + [("blocking_timeout", v, e) for v, e in WAITS]
    + [("queue_after", v, e) for v, e in WAITS]
    + [("sync_replicas", v, TypeError) for v in (True, 1.0, "1")]
    # redis-py's lease, which would be taken for the wait: refused whatever its value.
    + [("timeout", v, TypeError) for v in (10, None, 0.5)]
    + [(k, v, e) for k in ("blocking", "auto_renew", "allow_long_ttl") for v, e in NOT_BOOLS + [(None, TypeError)]]
    + [(misspelt, 3, TypeError) for misspelt in ("timout", "ttl_ms", "colour")]
)
NAMES: Bad = [
    ("", ValueError),
    ("}starts-with-a-brace", ValueError),
    ("x" * (MIB + 1), ValueError),
    ("\u00e9" * (MIB // 2 + 1), ValueError),  # over 1 MiB of UTF-8
    ("lone \udc80 surrogate", ValueError),
    (42, TypeError),
    (b"bytes", TypeError),
    (None, TypeError),
    (["x"], TypeError),
]
URLS: Bad = [
    ("", ValueError),
    ("not a url", ValueError),
    ("http://127.0.0.1:6379", ValueError),
    ("http://user:hunter2@127.0.0.1:1", ValueError),
    ("REDIS://127.0.0.1", ValueError),
    ("unix:///tmp/redis.sock", ValueError),
    ("redis://", ValueError),
    ("rediss://", ValueError),
    ("redis+sentinel://", ValueError),
    ("127.0.0.1:6379", ValueError),
    ("redis://127.0.0.1:99999", ValueError),
    ("redis://[::1", ValueError),
    ("redis://host/notadb", ValueError),
    ("redis://host/-1", ValueError),
    ("redis://:@", ValueError),
    (42, TypeError),
    (b"redis://127.0.0.1", TypeError),
]
PREFIXES: Bad = [
    ("", ValueError),
    ("has space", ValueError),
    ("{x}", ValueError),
    ("tab\t", ValueError),
    ("nul\0", ValueError),
    ("p" * 257, ValueError),
    (None, TypeError),
    (5, TypeError),
    (b"rlock", TypeError),
]


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} chars)"


def make_lock(c: rlock.Client, a: rlock.AsyncClient, entry: str, name: Any, **kw: Any) -> Any:
    if entry == "Client.lock":
        return c.lock(name, **kw)
    if entry == "AsyncClient.lock":
        return a.lock(name, **kw)
    if entry == "rlock.lock":
        return rlock.lock(name, **kw)
    return rlock.synchronized(name, **kw)


def call_lock(c: rlock.Client, a: rlock.AsyncClient, entry: str, method: str, **kw: Any) -> Any:
    lock = c.lock("x") if entry == "Lock" else a.lock("x")
    return getattr(lock, method)(**kw)


def make_client(c: rlock.Client, a: rlock.AsyncClient, cls: Any, url: Any, **kw: Any) -> Any:
    return cls(url, **kw)


def matrix() -> Iterator[Row]:
    """(entry point, call(client, aclient), expected) for every row."""
    for entry in ("Client.lock", "AsyncClient.lock", "rlock.lock", "rlock.synchronized"):
        for key, value, exc in OPTIONS:
            yield f"{entry}({key}={short(value)})", partial(make_lock, entry=entry, name="x", **{key: value}), exc
        for value, exc in NAMES:
            yield f"{entry}({short(value)})", partial(make_lock, entry=entry, name=value), exc
    for entry in ("Lock", "AsyncLock"):
        for value, exc in WAITS:
            yield f"{entry}.acquire(timeout={short(value)})", partial(call_lock, entry=entry, method="acquire", timeout=value), exc
        for value, exc in NOT_BOOLS:
            yield f"{entry}.acquire(blocking={short(value)})", partial(call_lock, entry=entry, method="acquire", blocking=value), exc
        for value, exc in WAITS:
            yield f"{entry}.acquire(blocking_timeout={short(value)})", partial(call_lock, entry=entry, method="acquire", blocking_timeout=value), exc
        yield f"{entry}.acquire(timeout=1, blocking_timeout=1)", partial(call_lock, entry=entry, method="acquire", timeout=1, blocking_timeout=1), TypeError
        for value, exc in LEASES:
            yield f"{entry}.extend({short(value)})", partial(call_lock, entry=entry, method="extend", ttl=value), exc
        yield f"{entry}.acquire(timout=1)", partial(call_lock, entry=entry, method="acquire", timout=1), TypeError
        yield f"{entry}.extend(ttl_ms=1)", partial(call_lock, entry=entry, method="extend", ttl_ms=1), TypeError
    for cls in (rlock.Client, rlock.AsyncClient):
        for value, exc in URLS:
            yield f"{cls.__name__}({short(value)})", partial(make_client, cls=cls, url=value), exc
        for value, exc in PREFIXES:
            yield f"{cls.__name__}(prefix={short(value)})", partial(make_client, cls=cls, url=NOWHERE, prefix=value), exc
        for value, exc in NOT_BOOLS:
            yield f"{cls.__name__}(cluster={short(value)})", partial(make_client, cls=cls, url=NOWHERE, cluster=value), exc


ROWS = list(matrix())


@pytest.fixture(scope="module")
def watched(server: RedisServer) -> Iterator[Tuple[rlock.Client, rlock.AsyncClient, Monitor]]:
    """Clients already connected (so a stray command would show), the default
    client pointed at the same server, and a MONITOR on it."""
    old = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = server.url
    rlock._default = None
    client, aclient = rlock.Client(server.url), rlock.AsyncClient(server.url)
    client.lock("warm").locked()
    asyncio.run(aclient.lock("warm").locked())
    rlock.lock("warm").locked()
    monitor = server.monitor()
    yield client, aclient, monitor
    monitor.close()
    client.close()
    aclient.close()
    rlock._default = None
    if old is None:
        del os.environ["REDIS_URL"]
    else:
        os.environ["REDIS_URL"] = old


@pytest.mark.parametrize("call, expected", [(c, e) for _, c, e in ROWS], ids=[r[0] for r in ROWS])
def test_every_bad_argument_raises_a_typed_error_at_once_and_sends_nothing(
    watched: Tuple[rlock.Client, rlock.AsyncClient, Monitor],
    server: RedisServer,
    call: Callable[[rlock.Client, rlock.AsyncClient], Any],
    expected: Type[Exception],
) -> None:
    client, aclient, monitor = watched
    keys = server.redis.dbsize()
    monitor.mark()
    outcome: List[BaseException] = []

    def run() -> None:
        try:
            result = call(client, aclient)
            if inspect.isawaitable(result):
                asyncio.run(result)  # type: ignore[arg-type]
        except BaseException as e:  # a PanicException is a BaseException
            outcome.append(e)

    worker = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "the call hung"
    assert outcome, "accepted"
    assert type(outcome[0]) is expected or (
        expected is ValueError and isinstance(outcome[0], UnicodeEncodeError)
    ), f"{type(outcome[0]).__name__}: {outcome[0]}"
    assert "hunter2" not in str(outcome[0])
    assert time.monotonic() - start < 1, "refused before any I/O, so at once"
    assert monitor.mark() == [], "nothing reached Redis"
    # Earlier tests' leases may end meanwhile: the count can only fall.
    assert server.redis.dbsize() <= keys, "nothing was written"


# A misspelt keyword, and the option the TypeError suggests instead.
MISSPELT = [("blocking_timout", "blocking_timeout"), ("blockingTimeout", "blocking_timeout"), ("ttl_ms", "ttl"),
            ("maxHold", "max_hold"), ("autorenew", "auto_renew"), ("queue_after_ms", "queue_after"),
            ("allow_long", "allow_long_ttl")]


@pytest.mark.parametrize("entry", ["Client.lock", "AsyncClient.lock", "rlock.lock", "rlock.synchronized"])
def test_a_misspelt_option_is_a_TypeError_naming_the_closest_option(nowhere: rlock.Client, entry: str) -> None:
    aclient = rlock.AsyncClient(NOWHERE)
    for given, meant in MISSPELT:
        with pytest.raises(TypeError) as caught:
            make_lock(nowhere, aclient, entry, "x", **{given: 3})
        assert str(caught.value) == f"unexpected keyword argument {given!r} (did you mean {meant!r}?)"
    # Nothing close: the key alone.
    with pytest.raises(TypeError) as caught:
        make_lock(nowhere, aclient, entry, "x", colour="blue")
    assert str(caught.value) == "unexpected keyword argument 'colour'"


@pytest.mark.parametrize("entry", ["Lock", "AsyncLock"])
def test_a_misspelt_keyword_of_acquire_or_extend_names_the_closest_one(nowhere: rlock.Client, entry: str) -> None:
    aclient = rlock.AsyncClient(NOWHERE)
    with pytest.raises(TypeError, match=r"^unexpected keyword argument 'timout' \(did you mean 'timeout'\?\)$"):
        call_lock(nowhere, aclient, entry, "acquire", timout=1)
    with pytest.raises(TypeError, match=r"^unexpected keyword argument 'ttl_ms' \(did you mean 'ttl'\?\)$"):
        call_lock(nowhere, aclient, entry, "extend", ttl_ms=1)
    # A bad value of a known keyword keeps its own TypeError.
    with pytest.raises(TypeError) as caught:
        result = call_lock(nowhere, aclient, entry, "acquire", timeout="1")
        if inspect.isawaitable(result):
            asyncio.run(result)  # type: ignore[arg-type]
    assert "unexpected keyword" not in str(caught.value)


# A value of the wrong type, and the TypeError naming its argument (never the
# native function's, never PyO3's wording alone).
WRONG_TYPES: List[Tuple[str, Callable[[rlock.Client], Any], str]] = [
    ("lock(None)", lambda c: c.lock(None), "name must be a str, got None"),  # type: ignore[arg-type]
    ("lock(42)", lambda c: c.lock(42), "name must be a str, got int"),  # type: ignore[arg-type]
    ("rlock.lock(None)", lambda c: rlock.lock(None), "name must be a str, got None"),  # type: ignore[arg-type]
    ("semaphore(permits=2.5)", lambda c: c.semaphore("x", 2.5), "permits must be an int, got float"),  # type: ignore[arg-type]
    ("semaphore(permits=True)", lambda c: c.semaphore("x", True), "permits must be an int, got bool"),
    ("semaphore.lock(1.5)", lambda c: c.semaphore("x", 3).lock(1.5), "n must be an int, got float"),  # type: ignore[arg-type]
    ("semaphore.acquire(n=1.5)", lambda c: c.semaphore("x", 3).acquire(n=1.5), "n must be an int, got float"),  # type: ignore[arg-type]
    ("ttl=True", lambda c: c.lock("x", ttl=True), "ttl must be a number, got bool"),
    ("ttl='10'", lambda c: c.lock("x", ttl="10"), "ttl must be a number, got str"),  # type: ignore[arg-type]
    ("blocking_timeout=True", lambda c: c.lock("x", blocking_timeout=True), "blocking_timeout must be a number, got bool"),
    ("sync_replicas=1.5", lambda c: c.lock("x", sync_replicas=1.5), "sync_replicas must be an int, got float"),  # type: ignore[arg-type]
    ("extend(True)", lambda c: c.lock("x").extend(True), "ttl must be a number, got bool"),
    ("acquire(timeout=True)", lambda c: c.lock("x").acquire(timeout=True), "timeout must be a number, got bool"),
    ("Client(prefix=None)", lambda c: rlock.Client(NOWHERE, prefix=None), "prefix must be a str, got None"),  # type: ignore[arg-type]
    ("cached(ttl=True)", lambda c: c.cached("k", lambda: 1, ttl=True), "ttl must be a number, got bool"),
]


@pytest.mark.parametrize("call, message", [(c, m) for _, c, m in WRONG_TYPES], ids=[r[0] for r in WRONG_TYPES])
def test_a_value_of_the_wrong_type_is_a_TypeError_naming_its_argument(
    nowhere: rlock.Client, call: Callable[[rlock.Client], Any], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        call(nowhere)
    assert str(caught.value) == message


@pytest.mark.parametrize("make", [rlock.Client, rlock.AsyncClient])
def test_an_unknown_keyword_of_a_client_names_the_closest_one_not_an_inner_function(make: Any) -> None:
    with pytest.raises(TypeError) as caught:
        make(NOWHERE, prefx="app")
    assert str(caught.value) == "unexpected keyword argument 'prefx' (did you mean 'prefix'?)"
    # redis-py's, which means nothing here: refused by name, not by a private method's.
    with pytest.raises(TypeError) as caught:
        make(NOWHERE, decode_responses=True)
    assert str(caught.value) == "unexpected keyword argument 'decode_responses'"
    with pytest.raises(TypeError) as caught:
        make.from_redis(object(), tls_cA=b"")
    assert str(caught.value) == "unexpected keyword argument 'tls_cA' (did you mean 'tls_ca'?)"


def test_a_single_attempt_that_finds_the_lock_held_says_so_not_a_deadline(client: rlock.Client, name: str) -> None:
    holder = HeldInThread(client.lock(name)).start()
    try:
        for lock in (client.lock(name, blocking=False), client.lock(name, blocking_timeout=0)):
            with pytest.raises(rlock.LockTimeout) as caught:
                with lock:
                    pass
            assert str(caught.value) == f'lock "{name}" is held by someone else'
            assert caught.value.name == name
        with pytest.raises(rlock.LockTimeout, match="before the deadline"):
            with client.lock(name, blocking_timeout=0.05):
                pass
    finally:
        holder.stop()


async def _single_attempt_async(aclient: rlock.AsyncClient, other: rlock.AsyncClient, name: str) -> str:
    async with other.lock(name):
        try:
            async with aclient.lock(name, blocking=False):
                return "acquired"
        except rlock.LockTimeout as e:
            return str(e)


def test_a_single_async_attempt_that_finds_the_lock_held_says_so(server: RedisServer, name: str) -> None:
    aclient, other = rlock.AsyncClient(server.url), rlock.AsyncClient(server.url)
    try:
        said = asyncio.run(asyncio.wait_for(_single_attempt_async(aclient, other, name), 10))
        assert said == f'lock "{name}" is held by someone else'
    finally:
        aclient.close()
        other.close()


def test_unreachable_redis_is_a_fast_ConnectionError(nowhere: rlock.Client) -> None:
    start = time.monotonic()
    with pytest.raises(rlock.ConnectionError) as caught:
        nowhere.lock("x").acquire()
    assert time.monotonic() - start < 1.5
    assert isinstance(caught.value, builtins.ConnectionError)
    assert isinstance(caught.value, rlock.LockError)


def test_a_refused_connection_fails_in_milliseconds_not_after_reconnect_backoffs() -> None:
    # The first connection is tried once: the back-off between tries (about
    # 270 ms in all) is for reconnecting a connection that dropped. The best
    # of five, so that a busy machine does not decide it.
    took = []
    for _ in range(5):
        client = rlock.Client(f"redis://127.0.0.1:{free_port()}")
        start = time.monotonic()
        with pytest.raises(rlock.ConnectionError):
            client.lock("x").acquire()
        took.append(time.monotonic() - start)
    assert min(took) < 0.1, took


class _NotRedis:
    """A loopback server that answers every connection as an HTTP server
    answers a request it cannot read, then hangs up."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("urls", ["one", "redlock"])
def test_a_server_that_is_not_redis_is_named_in_one_line_with_what_it_sent(urls: str) -> None:
    http = _NotRedis()
    try:
        url = f"redis://127.0.0.1:{http.port}"
        given = url if urls == "one" else [url, f"redis://127.0.0.1:{free_port()}", f"redis://127.0.0.1:{free_port()}"]
        with pytest.raises(rlock.ConnectionError) as caught:
            rlock.Client(given).lock("x").acquire()
        message = str(caught.value)
        assert "\n" not in message, message
        assert f"127.0.0.1:{http.port}: the server did not answer as Redis does" in message, message
        assert '(it sent "HTTP/1.1 400 Bad Request" first)' in message, message
    finally:
        http.close()


def test_a_connection_error_names_the_server_and_never_its_password() -> None:
    port = free_port()
    for make in (rlock.Client, rlock.AsyncClient):
        lock = make(f"redis://:hunter2@127.0.0.1:{port}").lock("x")
        with pytest.raises(rlock.ConnectionError) as caught:
            result = lock.acquire()
            if inspect.isawaitable(result):
                asyncio.run(result)  # type: ignore[arg-type]
        shown = f"{caught.value!s} {caught.value!r}"
        assert f"127.0.0.1:{port}" in shown
        assert "hunter2" not in shown


def test_wrong_password_is_a_ConnectionError_that_never_shows_it() -> None:
    guarded = RedisServer("--requirepass", "right-password")
    try:
        client = rlock.Client(f"redis://:wrong-hunter2@127.0.0.1:{guarded.port}")
        with pytest.raises(rlock.ConnectionError) as caught:
            with client.lock("x"):
                pass
        shown = f"{caught.value!s} {caught.value!r} {client!r}"
        assert "wrong-hunter2" not in shown
        assert f"127.0.0.1:{guarded.port}" in str(caught.value), "names the server that refused"
        good = rlock.Client(f"redis://:right-password@127.0.0.1:{guarded.port}")
        with good.lock("x") as held:
            assert held.fencing_token is not None and held.fencing_token >= 1
        assert "right-password" not in repr(good)
    finally:
        guarded.stop()


def test_url_lists_are_checked_by_the_constructor() -> None:
    for make in (rlock.Client, rlock.AsyncClient):
        with pytest.raises(ValueError, match="at least one"):
            make([])
        for bad_items in ([NOWHERE, 42], [None], (b"redis://127.0.0.1:1",)):
            with pytest.raises(TypeError):
                make(bad_items)  # type: ignore[arg-type]
        for not_a_list in ({NOWHERE: 1}, b"redis://127.0.0.1:1", 3.5):
            with pytest.raises(TypeError):
                make(not_a_list)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            make([NOWHERE, "redis://host/notadb"])
        with pytest.raises(ValueError):
            make(["http://u:hunter2@127.0.0.1:1"], cluster=True)
    shown = repr(rlock.Client([NOWHERE, "redis://:hunter2@127.0.0.1:1"], cluster=True))
    assert "hunter2" not in shown and "cluster=True" in shown


@pytest.mark.parametrize("bad", [0, -1, 101], ids=repr)
def test_sync_replicas_out_of_range_is_a_ValueError(nowhere: rlock.Client, bad: int) -> None:
    with pytest.raises(ValueError, match="sync_replicas"):
        nowhere.lock("x", sync_replicas=bad)
    with pytest.raises(ValueError, match="sync_replicas"):
        rlock.AsyncClient(NOWHERE).lock("x", sync_replicas=bad)
    with pytest.raises(ValueError, match="sync_replicas"):
        rlock.synchronized("x", sync_replicas=bad)


@pytest.mark.parametrize("bad", [1.5, "1", [1]], ids=repr)
def test_sync_replicas_not_an_int_is_a_TypeError(nowhere: rlock.Client, bad: Any) -> None:
    with pytest.raises(TypeError):
        nowhere.lock("x", sync_replicas=bad)
    with pytest.raises(TypeError):
        rlock.lock("x", sync_replicas=bad)


def test_tls_ca_must_be_a_path_or_pem_bytes(tmp_path: "os.PathLike[str]") -> None:
    with pytest.raises(TypeError, match="tls_ca"):
        rlock.Client(NOWHERE, tls_ca=42)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        rlock.Client(NOWHERE, tls_ca=os.path.join(str(tmp_path), "missing.pem"))


def test_tls_ca_trusts_a_private_ca_given_as_a_path_or_as_bytes() -> None:
    server = RedisServer(tls=True)
    try:
        with open(server.ca_file, "rb") as f:
            pem = f.read()
        for tls_ca in (server.ca_file, pathlib.Path(server.ca_file), pem):
            client = rlock.Client(server.url, tls_ca=tls_ca)
            with client.lock("over-tls", blocking_timeout=5) as held:
                assert server.redis.exists("rlock:{over-tls}")
                assert held.fencing_token is not None
            client.close()
        # Without the CA the server's certificate is not trusted.
        with pytest.raises(rlock.ConnectionError):
            rlock.Client(server.url).lock("over-tls").acquire()
    finally:
        server.stop()
