"""What a client tells about itself: the core's events on the `rlock` logger
(a lost lease once, at WARNING, with its name and reason; nothing per cycle
at INFO; each operation at DEBUG), its counters as `stats()` and Prometheus
text, and `inspect()` naming the holder's and waiters' host, pid and
thread."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from typing import List

import pytest

import rlock
from rlock_test_support.keys import lock_key
from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import wait_until

from owners import HeldInThread




def _lose(client: rlock.Client, server: RedisServer, name: str) -> None:
    """Holds `name` and deletes its key from outside, so its lease is lost."""
    lock = client.lock(name, ttl=0.6)
    with pytest.raises(rlock.LockLost):
        with lock:
            server.redis.delete(lock_key(name))
            wait_until(lambda: lock.lost, 5, "the loss to be found")


def _about(records: List[logging.LogRecord], name: str) -> List[logging.LogRecord]:
    return [r for r in records if r.name == "rlock" and name in r.getMessage()]


def test_a_lost_lease_is_one_warning_naming_the_lock_and_its_reason(
    server: RedisServer, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.INFO, logger="rlock")
    records = caplog.records
    client = rlock.Client(server.url)
    try:
        _lose(client, server, name)
        # Records arrive in order: once the second loss is logged, every
        # record about the first one is in.
        later = name + ":later"
        _lose(client, server, later)
        wait_until(lambda: _about(records, later), 5, "the second loss's record")
        about = [r for r in _about(records, name) if later not in r.getMessage()]
        assert len(about) == 1, [r.getMessage() for r in about]
        assert about[0].levelno == logging.WARNING
        assert "lock lost" in about[0].getMessage()
        assert "reason=expired" in about[0].getMessage()
        # Where the core made it, not where the forwarding thread logged it.
        assert about[0].pathname.endswith(".rs") and about[0].lineno > 0
        assert client.stats()["lost"]["expired"] == 2
    finally:
        client.close()


def test_lock_cycles_log_nothing_at_info_and_each_operation_at_debug(
    server: RedisServer, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.INFO, logger="rlock")
    client = rlock.Client(server.url)
    try:
        for _ in range(20):
            with client.lock(name):
                pass
        # A record that must come, after any the cycles made.
        _lose(client, server, name + ":mark")
        wait_until(lambda: _about(caplog.records, name + ":mark"), 5, "the loss's record")
        assert [r.getMessage() for r in caplog.records if r.levelno < logging.WARNING] == []
    finally:
        client.close()

    # The level is read when a client is made (and at each record).
    caplog.set_level(logging.DEBUG, logger="rlock")
    client = rlock.Client(server.url)
    try:
        with client.lock(name):
            pass
        wait_until(
            lambda: any("released" in r.getMessage() for r in _about(caplog.records, name)),
            5,
            "the release's DEBUG record",
        )
        acquired = [r for r in _about(caplog.records, name) if r.getMessage().startswith("acquired")]
        assert acquired and all(r.levelno == logging.DEBUG for r in acquired)
    finally:
        client.close()


def test_no_password_reaches_a_record(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="rlock")
    secret = "s3cret-pw"
    # Nothing listens there: the connection fails, and says so.
    port = _free_port()
    client = rlock.Client(f"redis://user:{secret}@127.0.0.1:{port}")
    with pytest.raises(rlock.ConnectionError) as caught:
        client.lock("x", blocking_timeout=0).acquire()
    assert secret not in str(caught.value)
    assert all(secret not in r.getMessage() for r in caplog.records)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_stats_count_cycles_contention_and_renewals(server: RedisServer, name: str) -> None:
    client = rlock.Client(server.url)
    try:
        assert client.stats()["acquisitions"] == 0  # not connected yet: all zeros
        for _ in range(5):
            with client.lock(name):
                pass
        holder = HeldInThread(client.lock(name)).start()
        waiter = threading.Thread(target=lambda: client.lock(name, blocking_timeout=10).acquire() and None)
        waiter.start()
        wait_until(lambda: client.inspect(name)["waiting"] == 1, 10, "the waiter in line")
        holder.stop()
        waiter.join(10)
        stats = client.stats()
        assert stats["acquisitions"] == 7
        assert stats["contended_acquisitions"] == 1
        assert stats["releases"] == 6  # the waiter still holds its lock
        assert stats["hold"]["count"] == 6
        assert stats["wait"]["count"] == 7
        assert stats["wait"]["buckets"][-1] == [None, 7]
        text = client.prometheus()
        assert "rlock_acquisitions_total 7\n" in text
        assert 'rlock_lost_leases_total{reason="expired"} 0\n' in text
        assert 'rlock_wait_seconds_bucket{le="+Inf"} 7\n' in text
    finally:
        client.close()


def test_inspect_names_the_holders_and_waiters_host_pid_and_thread(
    server: RedisServer, name: str
) -> None:
    client = rlock.Client(server.url)
    try:
        holder = HeldInThread(client.lock(name, ttl=20), "rebuild-worker").start()
        waiter = threading.Thread(
            target=lambda: client.lock(name, blocking_timeout=10).acquire() and None, name="second-in-line"
        )
        waiter.start()
        wait_until(lambda: client.inspect(name)["waiting"] == 1, 10, "the waiter in line")
        seen = client.inspect(name)
        holder.stop()
        waiter.join(10)

        assert seen["held"] and seen["count"] == 1
        assert 0 < seen["ttl_ms"] <= 20_000
        assert seen["held_ms"] is not None and seen["held_ms"] >= 0
        h = seen["holder"]
        assert h["owner"] == seen["owner"]
        assert h["unit"].startswith(f"{os.getpid()}:t") and h["unit"].endswith(":rebuild-worker")
        assert h["client"]["host"] == socket.gethostname()
        assert h["client"]["pid"] == os.getpid()
        assert h["client"]["face"].startswith("python 3.")
        assert h["client"]["version"] == rlock.__version__
        [w] = seen["waiters"]
        assert w["unit"].endswith(":second-in-line")
        assert w["waited_ms"] is not None and w["waited_ms"] >= 0
        assert h["waited_ms"] is None
        assert w["client_id"] == h["client_id"]
    finally:
        client.close()


def test_inspect_of_a_free_lock_and_bad_names(client: rlock.Client, name: str) -> None:
    seen = client.inspect(name)
    assert not seen["held"] and seen["holder"] is None and seen["waiters"] == []
    with pytest.raises(ValueError):
        client.inspect("")


def test_async_inspect_names_the_task(aclient: rlock.AsyncClient, name: str) -> None:
    asyncio.run(asyncio.wait_for(_inspect_a_task(aclient, name), timeout=30))


async def _inspect_a_task(aclient: rlock.AsyncClient, name: str) -> None:
    async def hold(entered: asyncio.Event, go: asyncio.Event) -> None:
        async with aclient.lock(name):
            entered.set()
            await go.wait()

    entered, go = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(hold(entered, go), name="async-holder")
    await asyncio.wait_for(entered.wait(), 10)
    seen = await aclient.inspect(name)
    go.set()
    await asyncio.wait_for(task, 10)
    assert seen["holder"]["unit"].endswith(":async-holder")
    assert ":a" in seen["holder"]["unit"]


def test_a_loss_just_before_the_program_ends_is_still_logged(server: RedisServer) -> None:
    from children import run_python

    code = f"""
import logging, sys, redis, rlock
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")
c = rlock.Client({server.url!r})
lock = c.lock("forked:log", ttl=0.6)
try:
    with lock:
        redis.Redis.from_url({server.url!r}).delete("rlock:{{forked:log}}")
        import time
        deadline = time.monotonic() + 5
        while not lock.lost and time.monotonic() < deadline:
            time.sleep(0.01)
except rlock.LockLost:
    pass
c.close()
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert "rlock WARNING lock lost" in done.stdout, (done.stdout, done.stderr)


def test_a_task_renamed_while_holding_stays_the_same_owner(aclient: rlock.AsyncClient, server: RedisServer, name: str) -> None:
    async def body() -> None:
        async with aclient.lock(name):
            task = asyncio.current_task()
            assert task is not None
            task.set_name("renamed-while-holding")
            async with aclient.lock(name, blocking_timeout=1):  # nests: the same owner
                pass
        assert not server.redis.exists(lock_key(name)), "released by its owner"

    asyncio.run(asyncio.wait_for(body(), timeout=30))
