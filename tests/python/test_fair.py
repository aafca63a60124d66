"""Fair mode: waiters queue in Redis in arrival order and a release hands the
lock straight to the next one; a waiter that gives up (timeout, Ctrl-C, task
cancellation) leaves the line and strands nothing."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from typing import List

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

from children import waiting_child


def in_line(server: RedisServer, name: str) -> int:
    return int(server.redis.llen(f"{lock_key(name)}:queue"))


def test_threads_get_the_lock_in_arrival_order(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    holder = client.lock(name, fair=True)
    assert holder.acquire()
    order: List[int] = []
    threads = []

    def waiter(i: int) -> None:
        lock = client.lock(name, fair=True, blocking_timeout=20)
        with lock:
            order.append(i)

    for i in range(5):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        assert eventually(lambda: in_line(server, name) == i + 1), f"waiter {i} never queued"
    holder.release()
    for t in threads:
        t.join(20)
    assert order == [0, 1, 2, 3, 4]


def test_a_timeout_leaves_no_entry(client: rlock.Client, server: RedisServer, name: str) -> None:
    holder = client.lock(name, fair=True)
    assert holder.acquire()

    def give_up() -> None:
        assert not client.lock(name, fair=True).acquire(timeout=0.3)

    t = threading.Thread(target=give_up)
    t.start()
    t.join(10)
    assert in_line(server, name) == 0
    holder.release()
    assert not server.redis.exists(lock_key(name)), "nobody in line: the release frees it"


def test_ctrl_c_in_a_fair_wait_leaves_no_entry_and_no_lock(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    child = waiting_child(server, name, fair=True)
    try:
        held = client.lock(name, fair=True)
        assert held.acquire()
        assert child.line() == "waiting"
        assert eventually(lambda: in_line(server, name) == 1, within=10)
        child.proc.send_signal(signal.SIGINT)
        assert child.line(within=5) == "interrupted"
        assert eventually(lambda: in_line(server, name) == 0), "the interrupted waiter stayed in line"
        held.release()
        assert not server.redis.exists(lock_key(name)), "the lock was handed to the interrupted waiter"
        child.send("")
        assert child.proc.wait(10) == 0
    finally:
        child.kill()


def test_a_cancelled_task_leaves_no_entry_and_no_lock(
    aclient: rlock.AsyncClient, client: rlock.Client, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        held = client.lock(name, fair=True)
        assert held.acquire()
        waiter = asyncio.create_task(aclient.lock(name, fair=True).acquire())
        deadline = time.monotonic() + 10
        while in_line(server, name) != 1:
            assert time.monotonic() < deadline, "the task never queued"
            await asyncio.sleep(0.005)
        waiter.cancel()
        try:
            await waiter
        except asyncio.CancelledError:
            pass
        deadline = time.monotonic() + 5
        while in_line(server, name) != 0:
            assert time.monotonic() < deadline, "the cancelled task stayed in line"
            await asyncio.sleep(0.005)
        held.release()
        assert not server.redis.exists(lock_key(name))

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def lines_joined(server: RedisServer) -> int:
    """How many times any waiter has taken a place in any line (RPUSH)."""
    stats = server.redis.info("commandstats").get("cmdstat_rpush", {})
    return int(stats.get("calls", 0))


def test_queue_after_decides_whether_a_default_waiter_takes_a_place_in_line(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    # Another client's: this thread's locks of the same client would re-enter.
    other = rlock.Client(server.url)
    holder = other.lock(name)
    assert holder.acquire()
    before = lines_joined(server)
    # The default (0.01 s) would join the line within these 0.3 s waits.
    assert not client.lock(name, queue_after=600, blocking_timeout=0.3).acquire()
    assert lines_joined(server) == before, "took a place in line with 600 s to go"
    assert not client.lock(name, queue_after=0, blocking_timeout=0.3).acquire()
    assert lines_joined(server) == before + 1, "queue_after=0 never took a place in line"
    assert in_line(server, name) == 0, "the waiter that gave up left the line"
    holder.release()
    other.close()
