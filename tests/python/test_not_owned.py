"""LockNotOwned.reason says why a release or extend was refused: the owner
never acquired the lock, it released it already, its holding expired (or its
key was deleted), or another owner took the lock meanwhile. The same for the
thread of a sync Lock and the task of an AsyncLock."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, Iterator, TypeVar

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

T = TypeVar("T")

NOT_ACQUIRED = "not acquired by this owner"
ALREADY_RELEASED = "already released"
EXPIRED = "expired"
HELD_BY_ANOTHER = "held by another owner"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


@pytest.fixture
def other(server: RedisServer) -> Iterator[rlock.Client]:
    c = rlock.Client(server.url)
    yield c
    c.close()


def test_release_and_extend_of_a_lock_never_acquired_say_not_acquired(client: rlock.Client, name: str) -> None:
    lock = client.lock(name)
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.release()
    assert caught.value.reason == NOT_ACQUIRED and caught.value.name == name
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.extend()
    assert caught.value.reason == NOT_ACQUIRED


def test_a_second_release_or_an_extend_after_release_says_already_released(client: rlock.Client, name: str) -> None:
    lock = client.lock(name)
    assert lock.acquire()
    lock.release()
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.release()
    assert caught.value.reason == ALREADY_RELEASED
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.extend()
    assert caught.value.reason == ALREADY_RELEASED


@pytest.mark.parametrize("gone", ["deleted", "lapsed"])
def test_a_release_after_the_key_is_gone_says_expired(
    client: rlock.Client, server: RedisServer, name: str, gone: str
) -> None:
    lock = client.lock(name, ttl=0.3, auto_renew=False) if gone == "lapsed" else client.lock(name)
    assert lock.acquire()
    if gone == "deleted":
        server.redis.delete(lock_key(name))
    assert eventually(lambda: not server.redis.exists(lock_key(name)), within=3)
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.release()
    assert caught.value.reason == EXPIRED


def test_a_release_after_another_owner_took_the_lock_says_held_by_another(
    client: rlock.Client, other: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name)
    assert lock.acquire()
    server.redis.delete(lock_key(name))
    with other.lock(name, blocking_timeout=5):
        with pytest.raises(rlock.LockNotOwned) as caught:
            lock.release()
        assert caught.value.reason == HELD_BY_ANOTHER
        assert other.lock(name).locked()


def test_an_async_lock_gives_the_same_reasons(
    aclient: rlock.AsyncClient, other: rlock.Client, server: RedisServer, name: str
) -> None:
    async def refusal(lock: rlock.AsyncLock) -> str:
        with pytest.raises(rlock.LockNotOwned) as caught:
            await lock.release()
        assert caught.value.reason is not None
        return caught.value.reason

    async def main() -> None:
        lock = aclient.lock(name)
        assert await refusal(lock) == NOT_ACQUIRED
        assert await lock.acquire()
        await lock.release()
        assert await refusal(lock) == ALREADY_RELEASED

        assert await lock.acquire()
        server.redis.delete(lock_key(name))
        assert await refusal(lock) == EXPIRED

        assert await lock.acquire()
        server.redis.delete(lock_key(name))
        with other.lock(name, blocking_timeout=5):
            assert await refusal(lock) == HELD_BY_ANOTHER

    run(main())
