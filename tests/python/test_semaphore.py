"""Semaphores: never more than `size` permits held, an acquisition may take
several, bad counts are refused before any I/O. A Semaphore is the Lock
taking one permit, acting for the calling thread or task."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer, free_port
from rlock_test_support.waiting import wait_until

from owners import in_thread

# Nothing listens there: an argument error raised through this client proves
# that no connection was attempted first.
NOWHERE = f"redis://127.0.0.1:{free_port()}"


def test_never_more_than_size_holders_among_eight_threads(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    sem = client.semaphore(name, 3, blocking_timeout=30)
    guard = threading.Lock()
    inside = 0
    most = 0

    def work() -> None:
        nonlocal inside, most
        for _ in range(10):
            with sem:
                with guard:
                    inside += 1
                    most = max(most, inside)
                # A round trip inside: the others run meanwhile.
                assert 1 <= sem.held() <= 3
                with guard:
                    inside -= 1

    for worker in [in_thread(work) for _ in range(8)]:
        worker.result(timeout=60)
    assert most <= 3, f"{most} inside at once"
    assert most >= 2, "the permits were never shared"
    assert (sem.available(), sem.held()) == (3, 0)
    assert not server.redis.exists(f"{lock_key(name)}:semaphore")


def test_an_acquisition_may_take_several_permits(client: rlock.Client, name: str) -> None:
    sem = client.semaphore(name, 3)
    assert sem.size == 3
    assert sem.acquire(n=2)
    assert (sem.available(), sem.held()) == (1, 2)
    assert not sem.locked(), "one permit is free"
    assert sem.lock(2).locked(), "two are not"

    def others() -> List[bool]:
        theirs = client.semaphore(name, 3)
        got = [theirs.acquire(blocking=False, n=2), theirs.acquire(blocking=False)]
        theirs.release()
        return got

    assert in_thread(others).result(timeout=5) == [False, True]
    with pytest.raises(ValueError, match=r"^n "):
        sem.acquire(n=1)  # this owner holds two: a re-entry takes the same
    with sem.lock(2) as again:
        assert sem.fencing_token == again.fencing_token
        assert sem.held() == 2, "a re-entry takes no more permits"
    sem.release()
    assert sem.available() == 3


def test_a_release_lets_a_waiter_in_with_a_fresh_token(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    sem = client.semaphore(name, 2)
    with sem.lock(2) as held:

        def waiter() -> int:
            with client.semaphore(name, 2, blocking_timeout=20) as theirs:
                return theirs.fencing_token

        waiting = in_thread(waiter)
        wait_until(lambda: server.redis.llen(f"{lock_key(name)}:semaphore:queue") == 1, 5, "the waiter in line")
        assert not waiting.done(), "a waiter got in with every permit held"
    assert waiting.result(timeout=10) > held.fencing_token


def test_another_size_while_the_semaphore_is_held_is_a_ValueError(client: rlock.Client, name: str) -> None:
    with client.semaphore(name, 3):
        with pytest.raises(ValueError, match="permits"):
            in_thread(lambda: client.semaphore(name, 4).acquire(blocking=False)).result(timeout=5)


BAD_COUNTS = [(0, ValueError), (-1, ValueError), (10**7, ValueError), (10**30, ValueError),
              (1.5, TypeError), ("3", TypeError), (None, TypeError)]


@pytest.mark.parametrize("bad, expected", BAD_COUNTS, ids=repr)
def test_a_bad_count_is_refused_before_any_io(bad: Any, expected: type) -> None:
    client, aclient = rlock.Client(NOWHERE), rlock.AsyncClient(NOWHERE)
    for make in (client.semaphore, aclient.semaphore):
        with pytest.raises(expected) as caught:
            make("x", bad)
        if expected is ValueError:
            assert str(caught.value).startswith("permits ")
    with pytest.raises(expected):
        client.semaphore("x", 3).acquire(n=bad)
    with pytest.raises(expected):
        client.semaphore("x", 3).lock(bad)
    with pytest.raises(expected):
        asyncio.run(aclient.semaphore("x", 3).acquire(n=bad))
    with pytest.raises(ValueError, match=r"^n must be at most the semaphore's 3 permits, got 4"):
        client.semaphore("x", 3).lock(4)


def test_a_misspelt_option_names_the_closest_one() -> None:
    client = rlock.Client(NOWHERE)
    with pytest.raises(TypeError, match=r"did you mean 'blocking_timeout'"):
        client.semaphore("x", 3, blocking_timout=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"did you mean 'timeout'"):
        client.semaphore("x", 3).acquire(timout=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"did you mean 'ttl'"):
        client.rw_lock("x", ttl_ms=1)  # type: ignore[call-arg]


def test_tasks_never_hold_more_than_size_permits(aclient: rlock.AsyncClient, name: str) -> None:
    async def main() -> None:
        sem = aclient.semaphore(name, 2, blocking_timeout=20)
        inside = 0
        most = 0

        async def work() -> None:
            nonlocal inside, most
            for _ in range(5):
                async with sem as held:
                    inside += 1
                    most = max(most, inside)
                    assert held.fencing_token == sem.fencing_token
                    assert 1 <= await sem.held() <= 2
                    inside -= 1

        await asyncio.gather(*(work() for _ in range(8)))
        assert most == 2, f"{most} inside at once (2: the permits were shared, never exceeded)"
        assert await sem.acquire(n=2, blocking=False)
        assert await sem.available() == 0 and await sem.locked()
        await sem.release()
        assert await sem.available() == 2

    asyncio.run(asyncio.wait_for(main(), timeout=30))
