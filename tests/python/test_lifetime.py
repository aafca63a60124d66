"""A client nobody references any more is freed: Redis sees none of its
connections once the last reference to it (and to its locks) is gone and the
garbage collector ran, whatever its locks went through: a wait that timed out
or was cancelled in line, a handoff through the line, renewals, Redlock."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Iterator, List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

# A client that stood in line keeps its waiter channel 2 s after it left.
SETTLES_WITHIN = 6.0


def connections(servers: List[RedisServer]) -> List[int]:
    """The connections each server counts, but the one asking."""
    return [sum(1 for c in s.redis.client_list() if c["cmd"] != "client|list") for s in servers]


def settles_to(servers: List[RedisServer], baseline: List[int], after: str) -> None:
    def back() -> bool:
        gc.collect()
        return connections(servers) == baseline

    assert eventually(back, within=SETTLES_WITHIN), (
        f"{after}: the dropped client left {connections(servers)} connections, "
        f"against {baseline} before it"
    )


def in_line(server: RedisServer, name: str) -> int:
    return int(server.redis.llen(f"{lock_key(name)}:queue"))


@pytest.fixture
def own() -> Iterator[RedisServer]:
    """A server of this test alone: no other test's client comes or goes."""
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def held(own: RedisServer, name: str) -> Iterator[rlock.Lock]:
    """`name` held by another client, so that waiters have to wait."""
    with rlock.Client(own.url) as rival:
        lock = rival.lock(name)
        assert lock.acquire()
        yield lock


def test_a_dropped_client_whose_wait_timed_out_in_line_is_freed(
    own: RedisServer, held: rlock.Lock, name: str
) -> None:
    baseline = connections([own])
    for fair in (False, True):
        client = rlock.Client(own.url)
        lock = client.lock(name, queue_after=0, fair=fair, blocking_timeout=0.2)
        assert not lock.acquire()
        assert connections([own]) != baseline, "the client was never seen"
        del client, lock
        settles_to([own], baseline, f"timed out in line (fair={fair})")


def test_a_dropped_client_whose_wait_was_cancelled_in_line_is_freed(
    own: RedisServer, held: rlock.Lock, name: str
) -> None:
    baseline = connections([own])

    async def wait_then_cancel() -> None:
        client = rlock.AsyncClient(own.url)
        task = asyncio.ensure_future(client.lock(name, queue_after=0).acquire())
        for _ in range(500):
            if in_line(own, name) == 1:
                break
            await asyncio.sleep(0.01)
        assert in_line(own, name) == 1, "never stood in line"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(wait_then_cancel())
    settles_to([own], baseline, "cancelled in line")
    assert in_line(own, name) == 0


def test_a_dropped_client_that_was_handed_the_lock_through_the_line_is_freed(
    own: RedisServer, held: rlock.Lock, name: str
) -> None:
    baseline = connections([own])
    client = rlock.Client(own.url)
    lock = client.lock(name, fair=True)
    got: List[bool] = []
    waiter = threading.Thread(target=lambda: got.append(lock.acquire(timeout=10) and lock.release() is None))
    waiter.start()
    assert eventually(lambda: in_line(own, name) == 1), "never stood in line"
    held.release()
    waiter.join(timeout=10)
    assert got == [True]
    del client, lock, waiter
    settles_to([own], baseline, "handed over in line")


def test_a_dropped_client_whose_watchdog_renewed_a_released_lock_is_freed(
    own: RedisServer, name: str
) -> None:
    baseline = connections([own])
    client = rlock.Client(own.url)
    lock = client.lock(name, ttl=0.3)
    with lock:
        # Held for two leases: only renewals keep it.
        threading.Event().wait(0.6)
        assert lock.owned() and not lock.lost
    del client, lock
    settles_to([own], baseline, "renewed, then released")


def test_ten_clients_that_queued_and_were_dropped_leave_no_connection(
    own: RedisServer, held: rlock.Lock, name: str
) -> None:
    baseline = connections([own])
    for _ in range(10):
        assert not rlock.Client(own.url).lock(name, queue_after=0, blocking_timeout=0.05).acquire()
    settles_to([own], baseline, "ten clients queued")


def test_a_dropped_redlock_client_that_waited_is_freed_on_every_master(name: str) -> None:
    masters = [RedisServer() for _ in range(3)]
    try:
        urls = [m.url for m in masters]
        with rlock.Client(urls) as rival:
            assert rival.lock(name).acquire()
            baseline = connections(masters)
            client = rlock.Client(urls)
            assert not client.lock(name, blocking_timeout=0.2).acquire()
            del client
            settles_to(masters, baseline, "Redlock")
    finally:
        for m in masters:
            m.stop()
