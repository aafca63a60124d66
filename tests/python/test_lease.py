"""Leases: the watchdog keeps them, every way a lease can end while held
shows as `lock.lost` and `LockLost` when the `with` block exits, and a lease
over an hour that nothing says is meant warns once."""

from __future__ import annotations

import time
from typing import List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

from children import run_python


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


def test_a_nested_with_inside_a_lost_scope_raises_lock_lost_and_frees_nothing(
    client: rlock.Client, server: RedisServer, name: str
) -> None:
    lock = client.lock(name, ttl=0.4, auto_renew=False)
    with pytest.raises(rlock.LockLost) as outer:
        with lock:
            # Redis keeps the key longer than this client's lease: lost by the
            # clock while the key is still this owner's.
            server.redis.pexpire(lock_key(name), 30_000)
            assert eventually(lambda: lock.lost, within=3)
            with pytest.raises(rlock.LockLost, match="auto-renew is off"):
                with lock:
                    pytest.fail("entered a nested scope of a lost lock")
            assert server.redis.hget(lock_key(name), "count") == "1"
            assert not client.lock(name).acquire(blocking=False)
    assert outer.value.name == name
    assert not server.redis.exists(lock_key(name)), "freed when the outer scope ended"
    with lock:  # and taken afresh after it
        assert not lock.lost


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


def warnings_of(code: str) -> List[str]:
    """The warnings `code` gives in a fresh process (the core warns once per
    process), each as "category line message"."""
    done = run_python(
        "import warnings, rlock\n"
        "warnings.simplefilter('always')\n"
        "client, aclient = rlock.Client('redis://127.0.0.1:1'), rlock.AsyncClient('redis://127.0.0.1:1')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"{code}\n"
        "for w in seen:\n"
        "    print(w.category.__name__, w.filename, w.lineno, w.message)\n",
        env={"REDIS_URL": "redis://127.0.0.1:1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    "call",
    [
        "client.lock('a', ttl=10_000)",
        "aclient.lock('a', ttl=10_000)",
        "rlock.lock('a', ttl=10_000)",
        "rlock.synchronized('a', ttl=10_000)",
    ],
)
def test_a_ttl_over_an_hour_warns_once_at_the_callers_line(call: str) -> None:
    # Line 6 of the child is the first call: the warning points there.
    seen = warnings_of(f"    {call}\n    {call}\n    client.lock('b', ttl=7200)")
    assert len(seen) == 1, seen
    category, filename, line, message = seen[0].split(" ", 3)
    assert (category, filename, line) == ("LongTtlWarning", "<string>", "6")
    assert message.startswith("ttl=10000 is a lease of 2.8 hours") and "allow_long_ttl" in message


def test_max_hold_or_allow_long_ttl_say_a_long_lease_is_meant() -> None:
    seen = warnings_of(
        "    client.lock('a', ttl=10_000, max_hold=20_000)\n"
        "    client.lock('b', ttl=10_000, allow_long_ttl=True)\n"
        "    client.lock('c', ttl=3600)\n"
        "    client.lock('d', ttl=3601)"
    )
    assert [w.split(" ", 3)[:3] for w in seen] == [["LongTtlWarning", "<string>", "9"]]
