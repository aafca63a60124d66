"""Read-write locks: readers share, a writer is alone, an upgrade is refused
at once, a downgrade lets no writer in between, and a waiting writer holds
back new readers. Each side is a Lock acting for the calling thread or task."""

from __future__ import annotations

import asyncio
import threading
import time
from functools import partial
from typing import Any, Coroutine, List, TypeVar

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import wait_until

from owners import in_thread

T = TypeVar("T")


def writers_in_line(server: RedisServer, name: str) -> int:
    return int(server.redis.llen(f"{lock_key(name)}:rwlock:queue"))


def test_readers_share_and_each_reading_gets_a_fresh_token(client: rlock.Client, name: str) -> None:
    rw = client.rw_lock(name)
    with rw.read() as mine:

        def another_reader() -> int:
            with client.rw_lock(name).read() as theirs:
                return theirs.fencing_token

        theirs = in_thread(another_reader).result(timeout=5)
        assert theirs > mine.fencing_token
        assert rw.read().owned() and not rw.read().locked(), "a reader does not lock readers out"
        assert rw.write().locked(), "a reader locks writers out"
    assert not rw.write().locked()


def test_a_writer_is_never_inside_with_anyone_else(client: rlock.Client, name: str) -> None:
    rw = client.rw_lock(name, blocking_timeout=30)
    guard = threading.Lock()
    inside = {"readers": 0, "writers": 0}
    most_readers = 0
    violations: List[str] = []

    def enter(side: str) -> None:
        nonlocal most_readers
        with guard:
            if inside["writers"] or (side == "writers" and inside["readers"]):
                violations.append(f"a {side[:-1]} entered beside {inside}")
            inside[side] += 1
            most_readers = max(most_readers, inside["readers"])

    def leave(side: str) -> None:
        with guard:
            inside[side] -= 1

    def work(i: int) -> int:
        side = "writers" if i % 3 == 0 else "readers"
        lock = rw.write() if side == "writers" else rw.read()
        for _ in range(15):
            with lock:
                enter(side)
                # A round trip inside: the others run meanwhile.
                assert lock.owned()
                leave(side)
        return i

    workers = [in_thread(partial(work, i)) for i in range(8)]
    assert sorted(w.result(timeout=60) for w in workers) == list(range(8))
    assert violations == []
    assert most_readers >= 2, "readers never shared the lock"
    assert not rw.write().locked()


def test_write_while_holding_only_read_raises_LockUpgradeError_at_once(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    rw = client.rw_lock(name, blocking_timeout=10)
    with rw.read():
        start = time.monotonic()
        with pytest.raises(rlock.LockUpgradeError) as caught:
            rw.write().acquire()
        with pytest.raises(rlock.LockUpgradeError):
            with rw.write():
                pass
        assert time.monotonic() - start < 1, "refused, not waited for"
        assert isinstance(caught.value, rlock.LockError)
        assert caught.value.name == name
        assert writers_in_line(server, name) == 0
        assert rw.read().owned() and not rw.write().owned()
    assert not rw.write().locked()


def test_each_side_re_enters_as_the_mutex_does(client: rlock.Client, name: str) -> None:
    rw = client.rw_lock(name)
    with rw.write() as outer:
        with rw.write() as inner:
            assert inner.fencing_token == outer.fencing_token
        with rw.read():  # a writer may read
            assert rw.read().owned() and rw.write().owned()
        assert rw.write().owned() and not rw.read().owned()
    with rw.read() as outer:
        with rw.read() as inner:
            assert inner.fencing_token == outer.fencing_token
    assert not rw.write().locked()


def test_a_downgrade_lets_no_waiting_writer_in_between(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    rw = client.rw_lock(name)
    assert rw.write().acquire()
    assert rw.read().acquire(blocking=False), "a writer may read"
    read_released = threading.Event()

    def writer() -> bool:
        with client.rw_lock(name, blocking_timeout=20).write():
            return read_released.is_set()

    waiting = in_thread(writer)
    wait_until(lambda: writers_in_line(server, name) == 1, 5, "the writer in line")
    rw.write().release()
    assert rw.read().owned() and not rw.write().owned()
    assert not waiting.done(), "the writer got in when the write was released"
    assert rw.write().locked()
    read_released.set()
    rw.read().release()
    assert waiting.result(timeout=10), "the writer held the lock beside the downgraded reader"


def test_a_writers_read_is_not_held_back_by_writers_waiting_behind_it(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    rw = client.rw_lock(name)
    assert rw.write().acquire()

    def writer() -> None:
        with client.rw_lock(name, blocking_timeout=20).write():
            pass

    waiting = in_thread(writer)
    wait_until(lambda: writers_in_line(server, name) == 1, 5, "the writer in line")
    # Waiting here would wait for the writer that waits for this one.
    assert rw.read().acquire(blocking=False), "the holder of the write could not read"
    rw.write().release()
    assert not waiting.done()
    rw.read().release()
    waiting.result(timeout=10)


def test_a_waiting_writer_holds_back_new_readers(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    rw = client.rw_lock(name)
    assert rw.read().acquire()
    writer_in = threading.Event()
    writer_may_go = threading.Event()

    def writer() -> None:
        with client.rw_lock(name, blocking_timeout=20).write():
            writer_in.set()
            assert writer_may_go.wait(10)

    writing = in_thread(writer)
    wait_until(lambda: writers_in_line(server, name) == 1, 5, "the writer in line")

    def late_reader() -> bool:
        return client.rw_lock(name).read().acquire(blocking=False)

    assert in_thread(late_reader).result(timeout=5) is False, "a new reader passed the waiting writer"
    rw.read().release()
    assert writer_in.wait(10), "the writer never got in"

    def reader_after() -> bool:
        lock = client.rw_lock(name, blocking_timeout=10).read()
        got = lock.acquire()
        lock.release()
        return got

    reading = in_thread(reader_after)
    writer_may_go.set()
    writing.result(timeout=10)
    assert reading.result(timeout=10), "the reader waited for the writer and got in"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


def test_tasks_read_together_write_alone_and_cannot_upgrade(
    aclient: rlock.AsyncClient, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        rw = aclient.rw_lock(name)
        tokens: List[int] = []

        async def reader() -> None:
            async with rw.read() as held:
                tokens.append(held.fencing_token)
                assert await rw.read().owned()
                while len(tokens) < 2:  # the other reader is inside too (run's deadline)
                    await asyncio.sleep(0.005)
                with pytest.raises(rlock.LockUpgradeError):
                    await rw.write().acquire()

        await asyncio.gather(reader(), reader())
        assert len(set(tokens)) == 2
        async with rw.write() as held:
            assert held.fencing_token > max(tokens)
            assert await rw.read().locked()
        assert not await rw.write().locked()

    run(main())
