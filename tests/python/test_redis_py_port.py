"""Code ported from redis-py's lock either means what it meant there or fails
loudly: no keyword a redis-py user reaches for is quietly taken for
something else. redis-py's ``timeout=`` is the lease (``ttl=`` here), its
``blocking_timeout=`` the wait (the same name here)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Iterator, Tuple

import pytest

import rlock
from owners import HeldInThread, in_thread
from rlock_test_support.monitor import Monitor
from rlock_test_support.servers import RedisServer

PORT_HINT = (
    "takes no timeout=: the lease is ttl= (redis-py's timeout=), "
    "the wait is blocking_timeout= (as in redis-py)"
)


@pytest.fixture
def watched(server: RedisServer, client: rlock.Client) -> Iterator[Monitor]:
    """A MONITOR on the server, the client already connected, so that a
    stray command would show."""
    client.lock("warm").locked()
    monitor = server.monitor()
    yield monitor
    monitor.close()


FACTORIES = [
    ("client.lock()", lambda c, a, **kw: c.lock("a", **kw)),
    ("client.lock()", lambda c, a, **kw: a.lock("a", **kw)),
    ("client.rw_lock()", lambda c, a, **kw: c.rw_lock("a", **kw)),
    ("client.semaphore()", lambda c, a, **kw: c.semaphore("a", 2, **kw)),
    ("client.semaphore()", lambda c, a, **kw: a.semaphore("a", 2, **kw)),
    ("rlock.lock()", lambda c, a, **kw: rlock.lock("a", **kw)),
    ("rlock.synchronized()", lambda c, a, **kw: rlock.synchronized("a", **kw)),
]


@pytest.mark.parametrize("made_by, make", FACTORIES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(FACTORIES)])
def test_redis_pys_timeout_given_to_a_factory_is_refused_before_any_io_saying_what_to_write(
    server: RedisServer, client: rlock.Client, watched: Monitor, made_by: str, make: Callable[..., Any]
) -> None:
    aclient = rlock.AsyncClient(server.url)
    watched.mark()
    # The verbatim port of r.lock("a", timeout=10, blocking_timeout=3), and its halves.
    for given in ({"timeout": 10, "blocking_timeout": 3}, {"timeout": 10}, {"timeout": None}):
        with pytest.raises(TypeError) as caught:
            make(client, aclient, **given)
        assert str(caught.value) == f"{made_by} {PORT_HINT}"
    assert watched.mark() == [], "refused before any I/O"
    aclient.close()


def test_the_port_with_ttl_and_blocking_timeout_holds_for_ttl_and_waits_blocking_timeout(
    client: rlock.Client, name: str
) -> None:
    with client.lock(name, ttl=10, blocking_timeout=0.3):
        assert 9 <= client.inspect(name)["ttl_ms"] / 1000 <= 10, "the lease is ttl"
        acquired, took = in_thread(lambda: _timed(client.lock(name, blocking_timeout=0.3).acquire)).result(10)
        assert acquired is False
        assert 0.25 <= took < 2, f"waited {took:.2f} s for a 0.3 s blocking_timeout"


def test_blocking_timeout_none_waits_until_the_lock_is_free(client: rlock.Client, name: str) -> None:
    holder = HeldInThread(client.lock(name)).start()
    threading.Timer(0.3, holder.stop).start()
    acquired, took = _timed(client.lock(name, blocking_timeout=None).acquire)
    assert acquired is True and took >= 0.1
    client.lock(name).release()


def test_acquire_takes_the_wait_as_blocking_timeout_or_timeout_but_not_both(client: rlock.Client, name: str) -> None:
    with client.lock(name):
        for wait in ({"blocking_timeout": 0.2}, {"timeout": 0.2}):
            acquired, took = in_thread(lambda: _timed(lambda: client.lock(name).acquire(**wait))).result(10)
            assert acquired is False and 0.15 <= took < 2, (wait, took)
        sem = client.semaphore(f"{name}:sem", 1)
        assert sem.acquire(blocking_timeout=0.1) is True
        assert in_thread(lambda: sem.acquire(blocking_timeout=0.1)).result(10) is False
        sem.release()
    with pytest.raises(TypeError, match=r"timeout= or blocking_timeout= \(the same\), not both"):
        client.lock(name).acquire(timeout=1, blocking_timeout=1)


def test_async_acquire_takes_blocking_timeout(server: RedisServer, name: str) -> None:
    async def main() -> bool:
        aclient, other = rlock.AsyncClient(server.url), rlock.AsyncClient(server.url)
        try:
            async with other.lock(name):
                return await aclient.lock(name).acquire(blocking_timeout=0.1)
        finally:
            await aclient.aclose()
            await other.aclose()

    assert asyncio.run(asyncio.wait_for(main(), 10)) is False


def _timed(call: Callable[[], Any]) -> Tuple[Any, float]:
    """What ``call()`` returned, and how long it took."""
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start
