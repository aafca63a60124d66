"""Client.close(): the locks still held are released and reported lost, waits
in progress end, the connections close, and every later call of the client or
of its locks raises rlock.ClientClosed (a rlock.ConnectionError)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually


def connections(server: RedisServer) -> int:
    """The connections the server counts, but the one asking."""
    return sum(1 for c in server.redis.client_list() if c["cmd"] != "client|list")


def test_close_releases_what_is_held_and_reports_it_lost(server: RedisServer, name: str) -> None:
    c = rlock.Client(server.url)
    single, nested = c.lock(name), c.lock(name + ":nested")
    assert single.acquire()
    assert nested.acquire() and nested.acquire()
    c.close()
    assert server.redis.exists(lock_key(name)) == 0
    assert server.redis.exists(lock_key(name + ":nested")) == 0, "every re-entry released"
    assert single.lost and nested.lost
    # Another client takes it at once, not after the lease.
    with rlock.Client(server.url) as other:
        assert other.lock(name).acquire(blocking=False)


def test_every_call_after_close_raises_client_closed(server: RedisServer, name: str) -> None:
    c = rlock.Client(server.url)
    held = c.lock(name)
    assert held.acquire()
    c.close()
    assert c.closed
    calls = {
        "acquire": lambda: held.acquire(),
        "acquire(blocking=False)": lambda: held.acquire(blocking=False),
        "release": held.release,
        "extend": held.extend,
        "locked": held.locked,
        "owned": held.owned,
        "a new lock": lambda: c.lock(name + ":new").acquire(),
    }
    for what, call in calls.items():
        with pytest.raises(rlock.ClientClosed, match="client closed"):
            call()
            pytest.fail(f"{what} worked after close()")
    assert issubclass(rlock.ClientClosed, rlock.ConnectionError)
    c.close()  # again: nothing more happens
    with pytest.raises(rlock.ClientClosed):
        held.acquire()


def test_a_client_closed_before_it_ever_connected_raises_client_closed(name: str) -> None:
    c = rlock.Client("redis://127.0.0.1:1")  # never reached: nothing connects
    c.close()
    with pytest.raises(rlock.ClientClosed):
        c.lock(name).acquire()


def test_a_with_block_open_at_close_raises_lock_lost(server: RedisServer, name: str) -> None:
    c = rlock.Client(server.url)
    with pytest.raises(rlock.LockLost) as caught:
        with c.lock(name):
            c.close()
    assert caught.value.reason == "the client was closed"
    assert server.redis.exists(lock_key(name)) == 0


def test_close_ends_a_wait_in_another_thread(server: RedisServer, name: str) -> None:
    with rlock.Client(server.url) as rival:
        assert rival.lock(name).acquire()
        c = rlock.Client(server.url)
        outcome: List[BaseException] = []

        def wait() -> None:
            try:
                c.lock(name).acquire()
            except BaseException as e:  # noqa: BLE001 - the outcome is the test
                outcome.append(e)

        waiter = threading.Thread(target=wait)
        waiter.start()
        assert eventually(lambda: server.redis.pubsub_numsub(f"{lock_key(name)}:released")[0][1] == 1
                          or server.redis.llen(f"{lock_key(name)}:queue") == 1), "never waited"
        closed_at = time.monotonic()
        c.close()
        waiter.join(timeout=5)
        assert not waiter.is_alive(), "the wait did not end"
        assert time.monotonic() - closed_at < 3
        assert len(outcome) == 1 and isinstance(outcome[0], rlock.ClientClosed), outcome


def test_close_closes_the_connections_while_the_client_is_still_referenced(name: str) -> None:
    own = RedisServer()
    try:
        baseline = connections(own)
        c = rlock.Client(own.url)
        lock = c.lock(name, queue_after=0)
        assert lock.acquire()
        # A wait from another thread starts the pub/sub connection.
        outcome: List[bool] = []
        waiter = threading.Thread(target=lambda: outcome.append(c.lock(name, blocking_timeout=0.1).acquire()))
        waiter.start()
        waiter.join(timeout=5)
        assert outcome == [False]
        assert connections(own) == baseline + 2
        c.close()
        assert eventually(lambda: connections(own) == baseline, within=3), connections(own)
        assert c.closed and lock.lost
    finally:
        own.stop()


def test_async_client_aclose_releases_and_refuses_later_calls(server: RedisServer, name: str) -> None:
    async def main() -> None:
        async with rlock.AsyncClient(server.url) as c:
            lock = c.lock(name)
            assert await lock.acquire()
        assert server.redis.exists(lock_key(name)) == 0
        assert lock.lost
        with pytest.raises(rlock.ClientClosed):
            await lock.acquire()

    asyncio.run(main())


def test_async_client_close_is_awaitable_and_closes_even_when_not_awaited(server: RedisServer, name: str) -> None:
    async def main() -> None:
        awaited = rlock.AsyncClient(server.url)
        lock = awaited.lock(name)
        assert await lock.acquire()
        await awaited.close()
        assert awaited.closed and lock.lost
        assert server.redis.exists(lock_key(name)) == 0, "released once awaited"
        await awaited.close()  # closing again does nothing
        await awaited.aclose()

        left = rlock.AsyncClient(server.url)
        lock = left.lock(name)
        assert await lock.acquire()
        left.close()  # not awaited: closed at once, the release on its way
        assert left.closed
        with pytest.raises(rlock.ClientClosed):
            await lock.acquire()
        deadline = time.monotonic() + 5
        while server.redis.exists(lock_key(name)):
            assert time.monotonic() < deadline, "the release never came"
            await asyncio.sleep(0.01)

    asyncio.run(main())


def test_async_client_close_without_a_running_loop_returns_once_released(server: RedisServer, name: str) -> None:
    c = rlock.AsyncClient(server.url)
    lock = c.lock(name)
    assert asyncio.run(lock.acquire())  # held by that task, which has ended
    c.close()
    assert c.closed
    assert server.redis.exists(lock_key(name)) == 0
