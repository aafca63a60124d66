"""The sync face: acquiring, waiting, re-entry, ownership, fencing, the
default client and the decorator."""

from __future__ import annotations

import threading
import time
from typing import Iterator, List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

from children import run_python


@pytest.fixture
def other(server: RedisServer) -> Iterator[rlock.Client]:
    """A second client: a different owner for every lock."""
    c = rlock.Client(server.url)
    yield c
    c.close()


def test_default_client_reads_REDIS_URL(server: RedisServer, client: rlock.Client, name: str) -> None:
    code = f"""
import rlock
with rlock.lock({name!r}) as held:
    print(held.fencing_token, rlock.lock({name!r}).owned())
print(rlock.lock({name!r}).locked())
"""
    done = run_python(code, env={"REDIS_URL": server.url})
    assert done.returncode == 0, done.stderr
    token, owned, locked = done.stdout.split()
    assert (owned, locked) == ("True", "False")
    # Taken on this server: its next holder here gets a larger token.
    with client.lock(name) as held:
        assert held.fencing_token is not None and held.fencing_token > int(token)


def test_with_acquires_and_releases(client: rlock.Client, server: RedisServer, name: str) -> None:
    lock = client.lock(name)
    with lock as held:
        assert isinstance(held, rlock.Lock) and held.name == lock.name
        assert server.redis.hget(lock_key(name), "owner")
        assert lock.owned() and lock.locked()
    assert not server.redis.exists(lock_key(name))
    assert not lock.locked()


def test_busy_nonblocking_acquire_returns_false_quickly(
    client: rlock.Client, other: rlock.Client, name: str
) -> None:
    with other.lock(name):
        start = time.monotonic()
        assert client.lock(name).acquire(blocking=False) is False
        assert client.lock(name, blocking=False).acquire() is False
        assert time.monotonic() - start < 0.5


def test_acquire_timeout_is_honoured(client: rlock.Client, other: rlock.Client, name: str) -> None:
    with other.lock(name):
        start = time.monotonic()
        assert client.lock(name).acquire(timeout=0.3) is False
        waited = time.monotonic() - start
        assert 0.3 <= waited < 1.0
        start = time.monotonic()
        assert client.lock(name, blocking_timeout=0.2).acquire() is False
        assert 0.2 <= time.monotonic() - start < 1.0


def test_acquire_waits_for_a_release(client: rlock.Client, other: rlock.Client, name: str) -> None:
    holding = threading.Event()

    def holder() -> None:
        with other.lock(name):
            holding.set()
            time.sleep(0.2)  # the hold the waiter must sit out

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(5)
    start = time.monotonic()
    assert client.lock(name).acquire(timeout=5)
    assert 0.1 <= time.monotonic() - start < 2.0
    thread.join()


def test_with_raises_LockTimeout_when_the_wait_ends(
    client: rlock.Client, other: rlock.Client, name: str
) -> None:
    with other.lock(name):
        with pytest.raises(rlock.LockTimeout) as caught:
            with client.lock(name, blocking_timeout=0.2):
                pytest.fail("entered a lock held by another owner")
        assert isinstance(caught.value, TimeoutError)
        assert isinstance(caught.value, rlock.LockError)
        assert caught.value.name == name
        with pytest.raises(rlock.LockTimeout):
            with client.lock(name, blocking=False):
                pass


def test_fencing_tokens_increase_and_reentry_keeps_them(client: rlock.Client, name: str) -> None:
    lock = client.lock(name)
    assert lock.fencing_token is None
    tokens: List[int] = []
    for _ in range(3):
        with lock:
            token = lock.fencing_token
            assert isinstance(token, int)
            tokens.append(token)
            with lock:
                assert lock.fencing_token == token
        assert lock.fencing_token is None
    assert tokens[0] < tokens[1] < tokens[2]


def test_same_thread_reentry_nests_even_through_a_new_lock_object(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    with client.lock(name):
        with client.lock(name):
            assert server.redis.hget(lock_key(name), "count") == "2"
        assert client.lock(name).owned()
        assert server.redis.hget(lock_key(name), "count") == "1"
    assert not client.lock(name).locked()


def test_another_thread_waits_until_the_holder_releases(client: rlock.Client, name: str) -> None:
    lock = client.lock(name)  # one Lock object shared by both threads
    events: List[str] = []
    entered = threading.Event()

    def contender() -> None:
        assert lock.acquire(blocking=False) is False
        entered.set()
        with lock:
            events.append("contender in")
            assert lock.owned()

    with lock:
        thread = threading.Thread(target=contender)
        thread.start()
        assert entered.wait(5)
        assert not eventually(lambda: bool(events), within=0.3)
        events.append("holder out")
    thread.join(5)
    assert events == ["holder out", "contender in"]


def test_another_thread_cannot_release_the_holders_lock(client: rlock.Client, name: str) -> None:
    lock = client.lock(name)
    caught: List[BaseException] = []

    def intruder() -> None:
        try:
            lock.release()
        except BaseException as e:  # noqa: B902 - the test inspects it
            caught.append(e)

    with lock:
        thread = threading.Thread(target=intruder)
        thread.start()
        thread.join(5)
        assert lock.owned()
    assert len(caught) == 1 and isinstance(caught[0], rlock.LockNotOwned)
    assert caught[0].reason == "not acquired by this owner"


def test_release_and_extend_of_a_lock_not_held_raise_LockNotOwned(
    client: rlock.Client, other: rlock.Client, name: str
) -> None:
    lock = client.lock(name)
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.release()
    assert caught.value.reason == "not acquired by this owner"
    with pytest.raises(rlock.LockNotOwned) as caught:
        lock.extend()
    assert caught.value.reason == "not acquired by this owner"
    with other.lock(name):
        with pytest.raises(rlock.LockNotOwned) as caught:
            lock.release()
        assert caught.value.reason == "not acquired by this owner"
        with pytest.raises(rlock.LockNotOwned):
            lock.extend(5)
        assert other.lock(name).locked()


def test_extend_resets_the_lease(client: rlock.Client, server: RedisServer, name: str) -> None:
    lock = client.lock(name, ttl=2)
    with lock:
        assert server.redis.pttl(lock_key(name)) <= 2000
        lock.extend(20)
        assert 15_000 < server.redis.pttl(lock_key(name)) <= 20_000
        lock.extend()
        assert server.redis.pttl(lock_key(name)) <= 2000


def test_manual_acquire_and_release(client: rlock.Client, server: RedisServer, name: str) -> None:
    lock = client.lock(name)
    assert lock.acquire() is True
    assert lock.owned() and lock.fencing_token is not None
    lock.release()
    assert not lock.owned() and not lock.locked()
    assert not server.redis.exists(lock_key(name))


def test_synchronized_runs_each_call_under_the_lock(server: RedisServer, name: str) -> None:
    code = f"""
import threading, rlock
active = []
peak = []

@rlock.synchronized({name!r}, ttl=5)
def critical(i):
    active.append(i)
    peak.append(len(active))
    assert rlock.lock({name!r}).owned()
    active.remove(i)
    return i * 2

threads = [threading.Thread(target=critical, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(critical(21), max(peak), critical.__name__, rlock.lock({name!r}).locked())
"""
    done = run_python(code, env={"REDIS_URL": server.url})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "1", "critical", "False"]


def test_client_close_and_context_manager(server: RedisServer, name: str) -> None:
    with rlock.Client(server.url) as c:
        assert not c.closed
        with c.lock(name):
            pass
    assert c.closed
    with pytest.raises(rlock.ConnectionError, match="closed"):
        c.lock(name).acquire()


def test_client_repr_never_shows_the_password() -> None:
    c = rlock.Client("redis://user:hunter2@127.0.0.1:1/3", prefix="app")
    assert "hunter2" not in repr(c)
    assert repr(c) == "rlock.Client('redis://user:***@127.0.0.1:1/3', prefix='app')"
    assert "hunter2" not in repr(c.lock("x"))


def test_prefix_names_the_keys(server: RedisServer, name: str) -> None:
    with rlock.Client(server.url, prefix="app") as c, c.lock(name):
        assert server.redis.exists(lock_key(name, prefix="app"))


def test_with_gives_the_lock_with_this_acquisitions_fencing_token(client: rlock.Client, name: str) -> None:
    lock = client.lock(name)
    with lock as held:
        assert isinstance(held, rlock.HeldLock) and isinstance(held, rlock.Lock)
        assert held.fencing_token == lock.fencing_token
        assert held.owned() and not held.lost
        held.extend(5)
        with lock as inner:  # re-entry: the same holding, the same token
            assert inner.fencing_token == held.fencing_token
        assert lock.owned()
    assert lock.fencing_token is None and not held.owned()
    with lock as again:
        assert again.fencing_token > held.fencing_token  # held keeps its own
