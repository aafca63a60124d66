"""cached: one load per miss across threads, tasks and clients; a failed
load reaches its caller as raised and its waiters as CacheLoaderError;
stale-while-revalidate and early refresh in the background; negative
entries; jittered ttls; invalidation; values tagged by format; bad input
refused before any I/O; the decorator; a hit is one command."""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import threading
import time
from typing import Any, Callable, Coroutine, Dict, Iterator, List, Optional, Tuple, TypeVar

import pytest

import rlock
from rlock_test_support.monitor import Monitor
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import wait_until

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


def entry_key(key: str) -> str:
    return f"rlock:{{{key}}}:cached"


def rebuild_key(key: str) -> str:
    return f"rlock:{{{key}}}:rebuild"


def subscribers(server: RedisServer, key: str) -> int:
    return int(server.redis.pubsub_numsub(f"{entry_key(key)}:news")[0][1])


def server_ms(server: RedisServer) -> int:
    seconds, micros = server.redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


def until_stale(server: RedisServer, key: str) -> None:
    """Returns once the entry's fresh time has passed on the server's clock."""
    fresh = int(server.redis.hget(entry_key(key), "fresh"))
    wait_until(lambda: server_ms(server) > fresh, within=10, what="the entry to turn stale")


class Counted:
    """A loader that counts its calls, optionally waiting on `gate` first."""

    def __init__(self, value: Any, delay: float = 0.0, gate: Optional[threading.Event] = None) -> None:
        self.value = value
        self.delay = delay
        self.gate = gate
        self.calls = 0
        self.guard = threading.Lock()

    def __call__(self) -> Any:
        with self.guard:
            self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(20), "the test never opened the gate"
        time.sleep(self.delay)
        return self.value


def in_threads(n: int, call: Callable[[int], T]) -> List[T]:
    """`call(i)` in `n` threads started together; their results (or exceptions)."""
    start = threading.Barrier(n)
    results: List[Any] = [None] * n

    def one(i: int) -> None:
        start.wait()
        try:
            results[i] = call(i)
        except BaseException as e:
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a caller hung"
    return results


@pytest.fixture
def clients(server: RedisServer) -> Iterator[List[rlock.Client]]:
    """Clients of their own: each one subscribes to an entry's news once."""
    made = [rlock.Client(server.url) for _ in range(4)]
    yield made
    for c in made:
        c.close()


@pytest.fixture
def default_client(server: RedisServer) -> Iterator[None]:
    """The default client (of the decorator) pointed at the test's server."""
    old = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = server.url
    rlock._default = None
    yield
    if rlock._default is not None:
        rlock._default.close()
    rlock._default = None
    if old is None:
        del os.environ["REDIS_URL"]
    else:
        os.environ["REDIS_URL"] = old


def outcome(c: rlock.Client, key: str, loader: Callable[[], Any], **options: Any) -> Any:
    try:
        return c.cached(key, loader, ttl=60, **options)
    except BaseException as e:
        return e


def while_others_wait(
    server: RedisServer, key: str, loading: rlock.Client, loader: Callable[[], Any], gate: threading.Event,
    waiting: List[rlock.Client], waiters_loader: Callable[[], Any], **waiters_options: Any,
) -> Tuple[Any, List[Any]]:
    """Reads `key` from `loading` with `loader` (held at `gate`), then from
    each of `waiting` once that load holds the rebuild lock; opens the gate
    once every one of them waits for it. The outcomes: the loader's caller's
    and each waiter's (a value or an exception)."""
    first: List[Any] = []
    t = threading.Thread(target=lambda: first.append(outcome(loading, key, loader)))
    t.start()
    wait_until(lambda: server.redis.exists(rebuild_key(key)), within=5, what="the load to start")
    waiters: List[Any] = []
    threads = [threading.Thread(target=lambda c=c: waiters.append(outcome(c, key, waiters_loader, **waiters_options)))
               for c in waiting]
    for w in threads:
        w.start()
    wait_until(lambda: subscribers(server, key) == len(waiting), within=5, what="every client waiting")
    gate.set()
    for w in [t, *threads]:
        w.join(10)
        assert not w.is_alive(), "a caller hung"
    return first[0], waiters


# --------------------------------------------------------------------------
# One load per miss


def test_fifty_threads_on_a_miss_run_the_loader_once_and_all_get_its_value(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    load = Counted({"name": "keyboard", "price": 12}, delay=0.1)
    got = in_threads(50, lambda i: client.cached(name, load, ttl=60))
    assert load.calls == 1
    assert got == [{"name": "keyboard", "price": 12}] * 50
    assert json.loads(server.redis.hget(entry_key(name), "value")) == {"name": "keyboard", "price": 12}


def test_fifty_tasks_on_a_miss_run_an_async_loader_once(aclient: rlock.AsyncClient, name: str) -> None:
    calls = 0

    async def load() -> List[int]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.1)
        return [1, 2, 3]

    async def main() -> List[Any]:
        return await asyncio.gather(*(aclient.cached(name, load, ttl=60) for _ in range(50)))

    assert run(main()) == [[1, 2, 3]] * 50
    assert calls == 1


def test_an_async_client_runs_a_sync_loader_in_a_thread_never_blocking_the_loop(
    aclient: rlock.AsyncClient, name: str
) -> None:
    load = Counted(b"slow", delay=0.3)

    async def main() -> Tuple[bytes, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        try:
            return await aclient.cached(name, load, ttl=60), ticks
        finally:
            task.cancel()

    value, ticks = run(main())
    assert value == b"slow" and load.calls == 1
    assert ticks >= 10, "the event loop ran while the loader did"


def test_a_sync_client_given_an_async_loader_returns_an_awaitable(client: rlock.Client, name: str) -> None:
    async def load() -> str:
        return "from a coroutine"

    pending = client.cached(name, load, ttl=60)
    assert asyncio.iscoroutine(pending)
    assert run(pending) == "from a coroutine"
    assert client.cached(name, lambda: "not called", ttl=60) == "from a coroutine"


def test_a_sync_loader_returning_an_awaitable_is_a_TypeError_and_stores_nothing(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    async def fetch() -> int:
        return 1

    with pytest.raises(TypeError, match="async def"):
        client.cached(name, lambda: fetch(), ttl=60)
    assert not server.redis.exists(entry_key(name), rebuild_key(name))


# --------------------------------------------------------------------------
# A failed load


def test_a_failed_loader_raises_in_its_caller_and_CacheLoaderError_in_every_waiter(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    gate = threading.Event()
    boom = ValueError("database down")

    def failing() -> Any:
        assert gate.wait(20)
        raise boom

    never = Counted("never")
    first, shared = while_others_wait(server, name, client, failing, gate, clients[:3], never)
    assert first is boom, "the loader's own exception, as raised"
    assert len(shared) == 3 and never.calls == 0
    for e in shared:
        assert isinstance(e, rlock.CacheLoaderError) and isinstance(e, rlock.LockError)
        assert e.name == name
        assert e.reason == "ValueError: database down"
        assert "database down" in str(e)
    assert not server.redis.exists(entry_key(name), rebuild_key(name))


def test_an_async_loader_that_raises_raises_in_its_caller_and_leaves_nothing(
    aclient: rlock.AsyncClient, server: RedisServer, name: str
) -> None:
    async def failing() -> Any:
        await asyncio.sleep(0)
        raise KeyError("no such product")

    with pytest.raises(KeyError, match="no such product"):
        run(aclient.cached(name, failing, ttl=60))
    assert not server.redis.exists(entry_key(name), rebuild_key(name)), "no lock, no entry left"
    assert run(aclient.cached(name, lambda: "loaded", ttl=60)) == "loaded"


def test_with_on_error_retry_a_waiter_loads_after_a_failure(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    gate = threading.Event()

    def failing() -> Any:
        assert gate.wait(20)
        raise RuntimeError("flaky")

    second = Counted("second try")
    first, results = while_others_wait(server, name, client, failing, gate, clients[:3], second, on_error="retry")
    assert isinstance(first, RuntimeError)
    assert results == ["second try"] * 3
    assert second.calls == 1, "one of the waiters loaded, once"


def test_a_cancelled_load_frees_the_entry_for_the_next_caller_at_once(
    aclient: rlock.AsyncClient, client: rlock.Client, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def forever() -> str:
            started.set()
            await asyncio.sleep(3600)
            return "never"

        task = asyncio.create_task(aclient.cached(name, forever, ttl=60, lock_ttl=30))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    # The lock is given back now, not at the end of its 30 s lease.
    start = time.monotonic()
    assert client.cached(name, lambda: "next", ttl=60) == "next"
    assert time.monotonic() - start < 5


def test_a_wait_past_timeout_is_LockTimeout(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    gate = threading.Event()
    t = threading.Thread(target=lambda: client.cached(name, Counted("late", gate=gate), ttl=60))
    t.start()
    try:
        wait_until(lambda: server.redis.exists(rebuild_key(name)), within=5, what="the load to start")
        start = time.monotonic()
        with pytest.raises(rlock.LockTimeout) as caught:
            clients[0].cached(name, Counted("never"), ttl=60, timeout=0.2)
        assert 0.15 < time.monotonic() - start < 3
        assert caught.value.name == name
    finally:
        gate.set()
        t.join(10)


# --------------------------------------------------------------------------
# What is kept, and for how long


def test_none_is_kept_for_none_ttl_and_read_back_as_none(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    load = Counted(None)
    assert [client.cached(name, load, ttl=60, none_ttl=5) for _ in range(20)] == [None] * 20
    assert load.calls == 1
    assert server.redis.hget(entry_key(name), "none") == "1"
    assert 0 < server.redis.pttl(entry_key(name)) <= 5000


def test_the_ttl_is_jittered_down_by_at_most_the_jitter_share(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    pttls = []
    spent = []
    for i in range(10):
        began = time.monotonic()
        client.cached(f"{name}:{i}", lambda: "v", ttl=100)
        pttls.append(server.redis.pttl(entry_key(f"{name}:{i}")))
        spent.append(int((time.monotonic() - began) * 1000) + 10)
    assert all(90_000 - s <= p <= 100_000 for p, s in zip(pttls, spent)), (pttls, spent)
    assert len(set(pttls)) > 1, "jittered apart"
    began = time.monotonic()
    client.cached(f"{name}:exact", lambda: "v", ttl=100, jitter=0, stale=20)
    left = server.redis.pttl(entry_key(f"{name}:exact"))
    spent = int((time.monotonic() - began) * 1000) + 10
    assert 120_000 - spent <= left <= 120_000, (left, spent)


def test_within_the_stale_window_readers_get_the_old_value_at_once_and_one_refresh_runs(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    options: Dict[str, Any] = dict(ttl=0.3, stale=30, early=0)
    assert client.cached(name, lambda: "old", **options) == "old"
    until_stale(server, name)
    gate = threading.Event()
    refresh = Counted("new", gate=gate)
    every = clients + [client]
    try:
        # The refresh's loader waits on the gate: every reader returns before it ends.
        got = in_threads(20, lambda i: every[i % len(every)].cached(name, refresh, **options))
        assert got == ["old"] * 20
        wait_until(lambda: refresh.calls == 1, within=5, what="the refresh to start")
    finally:
        gate.set()
    wait_until(lambda: server.redis.hget(entry_key(name), "value") == "new", within=10,
               what="the refresh to be written")
    assert client.cached(name, refresh, **options) == "new"
    assert refresh.calls == 1, "one refresh for all of them"


def test_a_failed_refresh_is_logged_never_raised_and_the_old_value_stays(
    client: rlock.Client, server: RedisServer, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    options: Dict[str, Any] = dict(ttl=0.3, stale=30, early=0)
    client.cached(name, lambda: "old", **options)
    until_stale(server, name)
    fence = server.redis.hget(entry_key(name), "fence")

    def broken() -> str:
        raise ConnectionRefusedError("database down")

    with caplog.at_level(logging.WARNING, logger="rlock"):
        assert client.cached(name, broken, **options) == "old"
        wait_until(lambda: any("database down" in r.getMessage() for r in caplog.records),
                   within=5, what="the refresh's failure to be logged")
    assert server.redis.hget(entry_key(name), "fence") == fence, "the old entry is still there"
    # The next reader refreshes again (and gets the old value meanwhile).
    assert client.cached(name, lambda: "next", **options) == "old"
    wait_until(lambda: server.redis.hget(entry_key(name), "value") == "next", within=5, what="the next refresh")


def test_an_async_refresh_runs_as_a_task_of_its_own(aclient: rlock.AsyncClient, server: RedisServer, name: str) -> None:
    options: Dict[str, Any] = dict(ttl=0.3, stale=30, early=0)

    async def main() -> None:
        assert await aclient.cached(name, lambda: "old", **options) == "old"
        until_stale(server, name)
        done = asyncio.Event()

        async def fresh() -> str:
            done.set()
            return "new"

        assert await aclient.cached(name, fresh, **options) == "old"
        await asyncio.wait_for(done.wait(), 5)
        deadline = time.monotonic() + 5
        while await aclient.cached(name, fresh, **options) != "new":
            assert time.monotonic() < deadline, "the refresh was never written"
            await asyncio.sleep(0.01)

    run(main())


def test_a_slow_to_load_entry_is_refreshed_early_while_still_fresh(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    # XFetch: a load that took 300 ms, an entry fresh for at most 2 s, and
    # early=100: within the last quarter of the ttl (the last 500 ms), each
    # read refreshes it with a probability above 0.9.
    options: Dict[str, Any] = dict(ttl=2, jitter=0, early=100)
    slow = Counted("v1", delay=0.3)
    client.cached(name, slow, **options)
    fresh = int(server.redis.hget(entry_key(name), "fresh"))
    slow.value = "v2"
    refreshing = False
    while not refreshing and server_ms(server) < fresh - 100:
        start = time.monotonic()
        assert client.cached(name, slow, **options) == "v1"
        assert time.monotonic() - start < 0.25, "the current value at once, not after the load"
        # This read took the rebuild lock: it refreshes.
        refreshing = bool(server.redis.exists(rebuild_key(name)))
        time.sleep(0.02)
    assert refreshing, "no read refreshed the entry while it was fresh"
    assert server_ms(server) < fresh, "before the entry turned stale"
    assert fresh - server_ms(server) < 600, "earlier than the last quarter of its ttl"
    wait_until(lambda: slow.calls == 2, within=5, what="one read to refresh early")
    wait_until(lambda: server.redis.hget(entry_key(name), "value") == "v2", within=5, what="the early refresh")
    assert slow.calls == 2


def test_invalidate_makes_the_next_read_load_again(client: rlock.Client, name: str) -> None:
    load = Counted("v")
    client.cached(name, load, ttl=60)
    client.cached(name, load, ttl=60)
    assert load.calls == 1
    assert client.invalidate(name) is True
    assert client.invalidate(name) is False
    client.cached(name, load, ttl=60)
    assert load.calls == 2


def test_async_invalidate(aclient: rlock.AsyncClient, name: str) -> None:
    async def main() -> Tuple[bool, bool]:
        await aclient.cached(name, lambda: "v", ttl=60)
        return await aclient.invalidate(name), await aclient.invalidate(name)

    assert run(main()) == (True, False)


# --------------------------------------------------------------------------
# Formats


@pytest.mark.parametrize(
    "value, format, stored",
    [
        ({"id": 1, "tags": ["a", "é"]}, "json", '{"id":1,"tags":["a","é"]}'),
        ([1, 2.5, None, True], "json", "[1,2.5,null,true]"),
        (42, "json", "42"),
        ("plain text é", "text", "plain text é"),
        (b"\x00\xffraw", "bytes", None),
    ],
    ids=["dict", "list", "int", "str", "bytes"],
)
def test_values_are_stored_tagged_and_read_back_by_another_client(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str,
    value: Any, format: str, stored: Optional[str],
) -> None:
    assert client.cached(name, lambda: value, ttl=60) == value
    assert server.redis.hget(entry_key(name), "format") == format
    if stored is not None:
        assert server.redis.hget(entry_key(name), "value") == stored
    read = clients[0].cached(name, lambda: "not called", ttl=60)
    assert read == value and type(read) is type(value)


def test_json_round_trips_as_json_does_for_other_callers(client: rlock.Client, clients: List[rlock.Client], name: str) -> None:
    value = {"pair": (1, 2), 3: "three"}
    assert client.cached(name, lambda: value, ttl=60) is value, "the loader's caller gets its own object"
    assert clients[0].cached(name, lambda: None, ttl=60) == {"pair": [1, 2], "3": "three"}


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


def test_pickle_only_when_asked_and_its_entries_read_only_by_callers_who_ask(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    with pytest.raises(TypeError, match="cannot be stored as json"):
        client.cached(name, lambda: Point(1, 2), ttl=60)
    assert not server.redis.exists(entry_key(name))
    assert client.cached(name, lambda: Point(1, 2), ttl=60, serializer="pickle") == Point(1, 2)
    assert server.redis.hget(entry_key(name), "format") == "pickle"
    assert clients[0].cached(name, lambda: None, ttl=60, serializer="pickle") == Point(1, 2)
    with pytest.raises(ValueError, match='serializer="pickle"'):
        clients[1].cached(name, lambda: "never", ttl=60)
    # A pickle reader reads JSON entries too.
    client.cached(f"{name}:json", lambda: {"a": 1}, ttl=60)
    assert clients[2].cached(f"{name}:json", lambda: None, ttl=60, serializer="pickle") == {"a": 1}


class Upper:
    """A serializer of one's own: text, upper-cased."""

    format = "upper"

    def dumps(self, value: Any) -> bytes:
        return str(value).upper().encode()

    def loads(self, data: bytes) -> Any:
        return data.decode().lower()


def test_a_serializer_of_ones_own_writes_and_reads_its_format(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    assert client.cached(name, lambda: 12, ttl=60, serializer=Upper()) == 12
    assert server.redis.hget(entry_key(name), "format") == "upper"
    assert clients[0].cached(name, lambda: None, ttl=60, serializer=Upper()) == "12"
    with pytest.raises(ValueError, match="'upper'"):
        clients[1].cached(name, lambda: None, ttl=60)


def test_an_unencodable_value_is_a_TypeError_that_writes_nothing_and_tells_the_waiters(
    client: rlock.Client, clients: List[rlock.Client], server: RedisServer, name: str
) -> None:
    gate = threading.Event()
    first, waiters = while_others_wait(server, name, client, Counted({1, 2, 3}, gate=gate), gate, clients[:1],
                                       Counted("never"))
    assert isinstance(first, TypeError) and "set" in str(first)
    assert isinstance(waiters[0], rlock.CacheLoaderError) and str(waiters[0].reason).startswith("TypeError")
    assert not server.redis.exists(entry_key(name)), "no entry"
    assert not server.redis.exists(rebuild_key(name)), "no rebuild lock left"


def test_nan_is_no_json_and_refused(client: rlock.Client, server: RedisServer, name: str) -> None:
    with pytest.raises(TypeError, match="json"):
        client.cached(name, lambda: float("nan"), ttl=60)
    assert not server.redis.exists(entry_key(name), rebuild_key(name))


# --------------------------------------------------------------------------
# Bad input: refused before any I/O


BAD: List[Tuple[str, Callable[[rlock.Client, rlock.AsyncClient], Any], type]] = [
    ("empty key", lambda c, a: c.cached("", lambda: 1, ttl=60), ValueError),
    ("key starting with }", lambda c, a: c.cached("}x", lambda: 1, ttl=60), ValueError),
    ("key not a str", lambda c, a: c.cached(42, lambda: 1, ttl=60), TypeError),
    ("ttl missing", lambda c, a: c.cached("k", lambda: 1), ValueError),
    ("ttl 0", lambda c, a: c.cached("k", lambda: 1, ttl=0), ValueError),
    ("ttl -1", lambda c, a: c.cached("k", lambda: 1, ttl=-1), ValueError),
    ("ttl nan", lambda c, a: c.cached("k", lambda: 1, ttl=float("nan")), ValueError),
    ("ttl a str", lambda c, a: c.cached("k", lambda: 1, ttl="60"), TypeError),
    ("stale -1", lambda c, a: c.cached("k", lambda: 1, ttl=60, stale=-1), ValueError),
    ("none_ttl 0", lambda c, a: c.cached("k", lambda: 1, ttl=60, none_ttl=0), ValueError),
    ("jitter 1", lambda c, a: c.cached("k", lambda: 1, ttl=60, jitter=1), ValueError),
    ("early -1", lambda c, a: c.cached("k", lambda: 1, ttl=60, early=-1), ValueError),
    ("early huge int", lambda c, a: c.cached("k", lambda: 1, ttl=60, early=10**400), ValueError),
    ("timeout -1", lambda c, a: c.cached("k", lambda: 1, ttl=60, timeout=-1), ValueError),
    ("on_error raise", lambda c, a: c.cached("k", lambda: 1, ttl=60, on_error="raise"), ValueError),
    ("lock_ttl 0", lambda c, a: c.cached("k", lambda: 1, ttl=60, lock_ttl=0), ValueError),
    ("loader not callable", lambda c, a: c.cached("k", 42, ttl=60), TypeError),
    ("loader missing", lambda c, a: c.cached("k", ttl=60), TypeError),
    ("serializer yaml", lambda c, a: c.cached("k", lambda: 1, ttl=60, serializer="yaml"), ValueError),
    ("serializer without loads", lambda c, a: c.cached("k", lambda: 1, ttl=60, serializer=json), TypeError),
    ("serializer format text", lambda c, a: c.cached("k", lambda: 1, ttl=60, serializer=type(
        "S", (), {"format": "text", "dumps": staticmethod(str.encode), "loads": staticmethod(bytes.decode)})()),
     ValueError),
    ("unknown keyword", lambda c, a: c.cached("k", lambda: 1, ttl=60, ttl_ms=5), TypeError),
    ("invalidate empty key", lambda c, a: c.invalidate(""), ValueError),
    ("invalidate not a str", lambda c, a: c.invalidate(b"k"), TypeError),
    ("async client empty key", lambda c, a: a.cached("", lambda: 1, ttl=60), ValueError),
    ("async client jitter", lambda c, a: a.cached("k", lambda: 1, ttl=1, jitter=-1),
     ValueError),
    ("async invalidate empty key", lambda c, a: a.invalidate(""), ValueError),
    ("async client loader not callable", lambda c, a: a.cached("k", 42, ttl=60), TypeError),
    ("decorating what is not callable", lambda c, a: rlock.cached("k", ttl=1)(42), TypeError),
    ("decorator ttl 0", lambda c, a: rlock.cached("k", ttl=0), ValueError),
    ("decorator unknown keyword", lambda c, a: rlock.cached("k", ttl=1, stal=3), TypeError),
    ("decorator key not str", lambda c, a: rlock.cached(42, ttl=1), TypeError),
    ("decorator template of no parameter", lambda c, a: rlock.cached("u:{idd}", ttl=1)(lambda id: id), ValueError),
    ("decorator template past the arguments", lambda c, a: rlock.cached("u:{1}", ttl=1)(lambda id: id), ValueError),
    ("decorator malformed template", lambda c, a: rlock.cached("u:{", ttl=1)(lambda id: id), ValueError),
]


@pytest.fixture(scope="module")
def watched(server: RedisServer) -> Iterator[Tuple[rlock.Client, rlock.AsyncClient, Monitor]]:
    """Clients already connected (so a stray command would show), and a
    MONITOR of their server."""
    client, aclient = rlock.Client(server.url), rlock.AsyncClient(server.url)
    client.lock("warm").locked()
    run(aclient.lock("warm").locked())
    monitor = server.monitor()
    yield client, aclient, monitor
    monitor.close()
    client.close()
    aclient.close()


@pytest.mark.parametrize("call, expected", [(c, e) for _, c, e in BAD], ids=[r[0] for r in BAD])
def test_bad_input_is_a_typed_error_before_any_io(
    watched: Tuple[rlock.Client, rlock.AsyncClient, Monitor],
    call: Callable[[rlock.Client, rlock.AsyncClient], Any],
    expected: type,
) -> None:
    client, aclient, monitor = watched
    monitor.mark()
    with pytest.raises(expected) as caught:
        result = call(client, aclient)
        if asyncio.iscoroutine(result):
            run(result)
    assert type(caught.value) is expected, f"{type(caught.value).__name__}: {caught.value}"
    assert monitor.mark() == [], "nothing reached Redis"


def test_a_misspelt_option_names_the_closest_one(client: rlock.Client) -> None:
    for given, meant in [("ttl_ms", "ttl"), ("stael", "stale"), ("none_tl", "none_ttl"), ("serialiser", "serializer"),
                         ("onerror", "on_error")]:
        with pytest.raises(TypeError) as caught:
            client.cached("k", lambda: 1, ttl=60, **{given: 1})
        assert str(caught.value) == f"unexpected keyword argument {given!r} (did you mean {meant!r}?)"


def test_a_bad_option_names_itself(client: rlock.Client) -> None:
    for option, bad in [("stale", -1), ("none_ttl", 0), ("jitter", 2), ("early", 1000), ("lock_ttl", -3),
                        ("on_error", "ignore")]:
        with pytest.raises(ValueError, match=rf"\b{option}\b"):
            client.cached("k", lambda: 1, ttl=60, **{option: bad})


# --------------------------------------------------------------------------
# The decorator


def test_the_decorator_caches_by_template_and_invalidates(
    default_client: None, server: RedisServer, name: str
) -> None:
    calls: List[Tuple[int, str]] = []

    @rlock.cached(name + ":{0}:{lang}", ttl=60)
    def product(id: int, lang: str = "en") -> Dict[str, Any]:
        calls.append((id, lang))
        return {"id": id, "lang": lang}

    assert product(1) == {"id": 1, "lang": "en"}
    assert product(id=1) == {"id": 1, "lang": "en"}
    assert product(1, lang="fr") == {"id": 1, "lang": "fr"}
    assert calls == [(1, "en"), (1, "fr")]
    assert server.redis.exists(entry_key(f"{name}:1:en"), entry_key(f"{name}:1:fr")) == 2
    assert product.__name__ == "product"
    assert product.invalidate(1) is True
    assert product.invalidate(1) is False
    product(1)
    assert calls[-1] == (1, "en") and len(calls) == 3


def test_the_decorator_takes_a_key_function(default_client: None, name: str) -> None:
    load = Counted("v")

    @rlock.cached(lambda user, **_: f"{name}:{user['id']}", ttl=60)
    def profile(user: Dict[str, int], verbose: bool = False) -> Any:
        return load()

    assert profile({"id": 3}) == profile({"id": 3}, verbose=True) == "v"
    assert load.calls == 1
    assert profile.invalidate({"id": 3})


def test_the_decorator_on_an_async_function(default_client: None, name: str) -> None:
    calls = 0

    @rlock.cached(name + ":{id}", ttl=60)
    async def user(id: int) -> List[int]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return [id]

    async def main() -> None:
        assert await asyncio.gather(*(user(7) for _ in range(20))) == [[7]] * 20
        assert calls == 1
        assert await user.invalidate(7) is True
        assert await user(id=7) == [7]
        assert calls == 2

    run(main())


def _child_of_a_loading_parent(client: rlock.Client, rebuild: Any, key: str, results: Any) -> None:
    try:
        out: List[Any] = []
        try:
            rebuild.store(b"from the child", "bytes")
            out.append("stored the parent's rebuild")
        except ValueError as e:
            out.append(str(e))
        del rebuild  # dropped here: must not give the parent's lock back
        out.append(client.cached(f"{key}:child", lambda: "the child's own", ttl=60))
        results.put(out)
    except BaseException as e:  # reported to the parent, which asserts on it
        results.put(repr(e))


def test_a_forked_child_never_finishes_or_drops_the_parents_load(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    # A load in progress across fork(): only the face's internals hold one.
    kind, _, _, _, rebuild = client._native.cache(name, rlock._native.CacheSpec(ttl=60)).read()
    assert kind == "load" and rebuild is not None
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    child = ctx.Process(target=_child_of_a_loading_parent, args=(client, rebuild, name, results))
    child.start()
    try:
        out = results.get(timeout=20)
        assert "started before fork()" in out[0], out
        assert out[1] == "the child's own"
        child.join(10)
        assert server.redis.exists(rebuild_key(name)), "the parent still holds its rebuild lock"
        assert rebuild.store(b"from the parent", "bytes") == "written"
        assert client.cached(name, lambda: b"never", ttl=60) == b"from the parent"
    finally:
        child.kill()
        child.join()


# --------------------------------------------------------------------------
# Cost


def test_a_hit_is_one_command(client: rlock.Client, server: RedisServer, name: str) -> None:
    client.cached(name, lambda: {"v": 1}, ttl=60)
    monitor = server.monitor()
    try:
        monitor.mark()
        assert client.cached(name, lambda: None, ttl=60) == {"v": 1}
        assert monitor.mark() == ["evalsha"]
    finally:
        monitor.close()


def test_a_loader_error_class_is_a_LockError() -> None:
    assert issubclass(rlock.CacheLoaderError, rlock.LockError)
    e = rlock.CacheLoaderError("m", name="k", reason="ValueError: x")
    assert (e.name, e.reason) == ("k", "ValueError: x")
