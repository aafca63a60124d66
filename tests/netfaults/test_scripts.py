"""The SHAs a schedule picks scripts by are the ones the core sends: after a
semaphore took, renewed, let go and gave up a wait, Redis knows every one."""

from __future__ import annotations

import threading

import rlock
from rlock_test_support.servers import RedisServer

from scripts import MUTEX, SHAS


def test_the_shared_scripts_redis_learns_are_the_ones_the_suite_picks() -> None:
    server = RedisServer()
    try:
        assert server.redis.script_exists(*SHAS.values()) == [False] * len(SHAS)
        client = rlock.Client(f"redis://127.0.0.1:{server.port}")
        sem = client.semaphore("scripts", 1, ttl=5)
        with sem:
            sem.extend()

            def give_up() -> None:
                # A wait given up leaves the line.
                assert not sem.acquire(timeout=0.05)

            t = threading.Thread(target=give_up)
            t.start()
            t.join()
        client.close()
        assert dict(zip(SHAS, server.redis.script_exists(*SHAS.values()))) == {name: True for name in SHAS}
    finally:
        server.stop()


def test_a_mutex_waiter_leaving_the_line_sends_the_script_the_nemesis_drops() -> None:
    server = RedisServer()
    try:
        assert server.redis.script_exists(*MUTEX.values()) == [False]
        client = rlock.Client(f"redis://127.0.0.1:{server.port}")
        lock = client.lock("scripts", ttl=5)
        with lock:
            t = threading.Thread(target=lambda: client.lock("scripts", fair=True).acquire(timeout=0.05))
            t.start()
            t.join()
        client.close()
        assert server.redis.script_exists(*MUTEX.values()) == [True]
    finally:
        server.stop()
