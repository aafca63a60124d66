"""Leases: the watchdog keeps them, and every way a lease can end while held
shows as `lock.lost` and `LockLost` when the `with` block exits."""

from __future__ import annotations

import time

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually


def test_watchdog_keeps_a_1s_lease_for_4s(client: rlock.Client, server: RedisServer, name: str) -> None:
    lock = client.lock(name, ttl=1)
    with lock:
        token = lock.fencing_token
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # hold, and watch the lease all along
            assert 0 < server.redis.pttl(lock_key(name)) <= 1000
            time.sleep(0.05)
        assert not lock.lost and lock.owned()
        assert lock.fencing_token == token
    assert not server.redis.exists(lock_key(name))


def test_renewal_needs_no_GIL_while_python_spins(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name, ttl=0.6)
    with lock:
        # Pure Python for 3 s, never releasing the GIL on purpose: the lease
        # (0.6 s) survives only if renewals run without it.
        deadline = time.monotonic() + 3
        spins = 0
        while time.monotonic() < deadline:
            spins += 1
        assert server.redis.pttl(lock_key(name)) > 0
        assert not lock.lost


def test_auto_renew_off_lets_the_ttl_expire(client: rlock.Client, server: RedisServer, name: str) -> None:
    lock = client.lock(name, ttl=0.4, auto_renew=False)
    with pytest.raises(rlock.LockLost) as caught:
        with lock:
            assert not lock.lost
            assert eventually(lambda: lock.lost, within=3)
            # Lost by this client's clock, which never runs later than Redis' expiry.
            assert eventually(lambda: not server.redis.exists(lock_key(name)), within=1)
    assert caught.value.name == name
    assert "auto-renew is off" in str(caught.value)


def test_max_hold_caps_the_hold_time(client: rlock.Client, server: RedisServer, name: str) -> None:
    lock = client.lock(name, ttl=0.6, max_hold=1.5)
    with pytest.raises(rlock.LockLost, match="max_hold"):
        with lock:
            start = time.monotonic()
            assert eventually(lambda: lock.lost, within=5)
            held_for = time.monotonic() - start
            assert 1.2 <= held_for < 2.5
            # Lost by this client's clock, which never runs later than Redis' expiry.
            assert eventually(lambda: not server.redis.exists(lock_key(name)), within=1)


def test_key_deleted_from_outside_is_lost_and_raises_at_exit(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name, ttl=0.6)
    with pytest.raises(rlock.LockLost) as caught:
        with lock:
            server.redis.delete(lock_key(name))
            assert eventually(lambda: lock.lost, within=3)
            assert lock.fencing_token is not None  # still this owner's holding, lost
    assert "disappeared" in str(caught.value)
    assert not lock.lost  # the holding ended with the block


def test_a_lock_taken_over_by_another_owner_is_lost(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name, ttl=0.6)
    with pytest.raises(rlock.LockLost, match="another owner"):
        with lock:
            server.redis.hset(lock_key(name), "owner", "someone-else")
            assert eventually(lambda: lock.lost, within=3)
    assert server.redis.hget(lock_key(name), "owner") == "someone-else"


def test_body_exception_is_never_masked_by_a_lost_lock(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name, ttl=0.6)
    with pytest.raises(KeyError) as caught:
        with lock:
            server.redis.delete(lock_key(name))
            assert eventually(lambda: lock.lost, within=3)
            raise KeyError("the block's own error")
    notes = getattr(caught.value, "__notes__", None)
    if notes is not None:  # Python 3.11+: the loss rides along as a note
        assert any("was lost" in n for n in notes)


def test_body_exception_is_never_masked_by_a_failed_release(server: RedisServer, name: str) -> None:
    c = rlock.Client(server.url)
    lock = c.lock(name)
    with pytest.raises(ZeroDivisionError):
        with lock:
            c.close()  # the lock is lost (and released): the exit reports it, as a note
            1 / 0
    server.redis.delete(lock_key(name))


def test_redis_unreachable_past_the_lease_is_lost() -> None:
    own = RedisServer()
    try:
        c = rlock.Client(own.url)
        lock = c.lock("unreachable", ttl=0.6)
        with pytest.raises(rlock.LockLost, match="unreachable"):
            with lock:
                own.stop()
                start = time.monotonic()
                assert eventually(lambda: lock.lost, within=3)
                assert time.monotonic() - start < 1.0  # by the lease, not later
        c.close()
    finally:
        own.stop()
