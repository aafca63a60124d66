"""asyncio: tasks are owners, waiting never blocks the loop, and cancelling a
waiting task leaves no lock behind."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Coroutine, List, TypeVar

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

from children import run_python

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


async def ticking_during(awaitable: Coroutine[Any, Any, T], every: float = 0.01) -> "tuple[T, int]":
    """Awaits `awaitable` while a ticker task counts how often it got to run."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(every)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        return await awaitable, ticks
    finally:
        task.cancel()


async def until_waiting(server: RedisServer, name: str) -> None:
    """Returns once a waiter waits: it listens for the lock's release, or it
    stands in the line (which it joins at once while an abandoned waiter's
    place is still being cleaned up, and then listens only for its handoff)."""
    channel = f"{lock_key(name)}:released"
    line = f"{lock_key(name)}:queue"

    def waiting() -> bool:
        return server.redis.pubsub_numsub(channel)[0][1] >= 1 or server.redis.llen(line) >= 1

    deadline = time.monotonic() + 5
    while not waiting():
        assert time.monotonic() < deadline, "the waiter never started waiting"
        await asyncio.sleep(0.005)


def test_async_lock_acquire_release_and_queries(
    aclient: rlock.AsyncClient, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        lock = aclient.lock(name)
        assert await lock.acquire()
        assert await lock.owned() and await lock.locked()
        token = lock.fencing_token
        assert isinstance(token, int)
        await lock.extend(20)
        assert server.redis.pttl(lock_key(name)) > 15_000
        await lock.release()
        assert not await lock.locked()
        assert lock.fencing_token is None
        with pytest.raises(rlock.LockNotOwned):
            await lock.release()
        with pytest.raises(rlock.LockNotOwned):
            await lock.extend()
        async with lock as held:
            assert isinstance(held, rlock.AsyncLock) and held.name == lock.name
            assert lock.fencing_token == held.fencing_token and held.fencing_token > token

    run(main())


def test_task_is_the_owner_and_never_releases_another_tasks_lock(
    aclient: rlock.AsyncClient, name: str
) -> None:
    async def main() -> None:
        lock = aclient.lock(name)  # one Lock object shared by two tasks
        holding = asyncio.Event()
        done = asyncio.Event()

        async def holder() -> None:
            async with lock:
                holding.set()
                await done.wait()
                assert await lock.owned()

        async def intruder() -> List[str]:
            await holding.wait()
            seen = []
            seen.append(f"acquire={await lock.acquire(blocking=False)}")
            seen.append(f"owned={await lock.owned()}")
            seen.append(f"token={lock.fencing_token}")
            try:
                await lock.release()
            except rlock.LockNotOwned as e:
                seen.append(f"release refused: {e.reason}")
            done.set()
            return seen

        _, seen = await asyncio.gather(holder(), intruder())
        assert seen == [
            "acquire=False",
            "owned=False",
            "token=None",
            "release refused: not acquired by this owner",
        ]
        assert not await lock.locked()

    run(main())


def test_same_task_reenters_through_a_new_lock_object(
    aclient: rlock.AsyncClient, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        async with aclient.lock(name):
            async with aclient.lock(name):
                assert server.redis.hget(lock_key(name), "count") == "2"
            assert await aclient.lock(name).owned()
        assert not await aclient.lock(name).locked()

    run(main())


def test_async_with_raises_LockTimeout(aclient: rlock.AsyncClient, client: rlock.Client, name: str) -> None:
    async def main() -> None:
        with client.lock(name):
            with pytest.raises(rlock.LockTimeout):
                async with aclient.lock(name, blocking_timeout=0.2):
                    pytest.fail("entered a held lock")
            start = time.monotonic()
            assert await aclient.lock(name).acquire(timeout=0.3) is False
            assert 0.3 <= time.monotonic() - start < 1.0

    run(main())


def test_waiting_never_blocks_the_event_loop(
    aclient: rlock.AsyncClient, client: rlock.Client, name: str
) -> None:
    async def main() -> None:
        with client.lock(name):  # another owner holds it for the whole wait
            got, ticks = await ticking_during(aclient.lock(name).acquire(timeout=1))
        assert got is False
        assert ticks >= 30  # ~100 possible in 1 s; 0 if the loop were blocked

    run(main())


def test_async_with_on_a_sync_lock_never_blocks_the_loop(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        other = rlock.Client(server.url)
        held = other.lock(name)
        held.acquire()
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, held.release)

        async def enter() -> bool:
            async with client.lock(name):  # a sync Lock, used from a task
                assert client.lock(name).fencing_token is not None
                return True

        entered, ticks = await ticking_during(enter())
        assert entered and ticks >= 15
        other.close()

    run(main())


def test_cancelling_a_waiting_task_leaves_no_lock_behind(
    aclient: rlock.AsyncClient, client: rlock.Client, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        held = client.lock(name)
        held.acquire()
        waiter = asyncio.create_task(aclient.lock(name).acquire())
        await until_waiting(server, name)
        assert not waiter.done()
        start = time.monotonic()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert time.monotonic() - start < 0.2
        held.release()
        # The cancelled waiter's client is still alive (a leaked acquisition
        # would be renewed): the lock must be free for another owner.
        assert client.lock(name).acquire(timeout=2)
        client.lock(name).release()

    run(main())


def test_cancelling_tasks_around_the_handoff_never_leaks(
    aclient: rlock.AsyncClient, client: rlock.Client, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        for delay in (0.0, 0.0005, 0.001, 0.002, 0.005):
            held = client.lock(name)
            held.acquire()
            waiter = asyncio.create_task(aclient.lock(name).acquire())
            await until_waiting(server, name)
            held.release()  # the waiter is woken; cancel it about then
            await asyncio.sleep(delay)
            waiter.cancel()
            try:
                got = await waiter
            except asyncio.CancelledError:
                got = False
            if got:  # it won before the cancel: it owns the lock, as it was told
                assert await aclient.lock(name).locked()
                # The owner is the finished task: release on its behalf.
                server.redis.delete(lock_key(name))
            assert client.lock(name).acquire(timeout=2), f"leaked at delay {delay}"
            client.lock(name).release()

    run(main())


def test_synchronized_async_functions(server: RedisServer, name: str) -> None:
    code = f"""
import asyncio, rlock
active = []
peak = []

@rlock.synchronized({name!r})
async def critical(i):
    active.append(i)
    peak.append(len(active))
    await asyncio.sleep(0.01)
    active.remove(i)
    return i

async def main():
    got = await asyncio.gather(*(critical(i) for i in range(6)))
    print(sorted(got) == list(range(6)), max(peak), asyncio.iscoroutinefunction(critical))

asyncio.run(main())
"""
    done = run_python(code, env={"REDIS_URL": server.url})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1", "True"]


def test_async_client_context_manager(server: RedisServer, name: str) -> None:
    async def main() -> None:
        async with rlock.AsyncClient(server.url) as c:
            async with c.lock(name):
                pass
        assert c.closed
        with pytest.raises(rlock.ConnectionError):
            await c.lock(name).acquire()

    run(main())


def test_an_acquisition_completed_as_its_task_is_cancelled_is_released(
    aclient: rlock.AsyncClient, server: RedisServer, name: str
) -> None:
    async def main() -> None:
        for _ in range(5):
            task = asyncio.create_task(aclient.lock(name).acquire())
            await asyncio.sleep(0)  # the task starts its acquire
            # Block the loop until the lock is taken in Redis, so the result
            # is on its way to the loop when the task is cancelled: asyncio
            # drops it, and the acquisition must not stay behind.
            assert eventually(lambda: bool(server.redis.exists(lock_key(name))), within=5)
            time.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            deadline = time.monotonic() + 3
            while server.redis.exists(lock_key(name)):
                assert time.monotonic() < deadline, "a cancelled acquisition was left held"
                await asyncio.sleep(0.01)

    run(main())


def test_async_with_gives_the_lock_with_this_acquisitions_fencing_token(
    aclient: rlock.AsyncClient, client: rlock.Client, name: str
) -> None:
    async def main() -> None:
        lock = aclient.lock(name)
        async with lock as held:
            assert isinstance(held, rlock.AsyncHeldLock) and isinstance(held, rlock.AsyncLock)
            assert held.fencing_token == lock.fencing_token
            assert await held.owned()
        assert lock.fencing_token is None
        async with client.lock(name) as sync_held:  # a sync Lock in `async with`
            assert isinstance(sync_held, rlock.HeldLock)
            assert sync_held.fencing_token > held.fencing_token

    run(main())
