"""A line-driven lock worker: the Python side of tests/interop.

Connects to $REDIS_URL, then answers one line per command read on stdin
(the protocol of core/examples/interop_worker.rs):

    acquire NAME TTL_MS WAIT_MS     -> ok FENCE | busy      (WAIT_MS 0: one attempt)
    release NAME                    -> ok | err MESSAGE
    count NAME KEY N PARALLEL       -> ok SEEN:FENCE ...

Commands run on the main thread, so acquiring a name twice nests (the owner
is the thread). `count` runs PARALLEL threads, each its own owner, each N
times taking the lock and incrementing the integer at KEY with a GET then a
SET; it answers the value each holding read with the fencing token it held.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Dict, List

import redis

import rlock

client = rlock.Client()
data = redis.Redis.from_url(os.environ["REDIS_URL"])
locks: Dict[str, rlock.Lock] = {}


def acquire(name: str, ttl_ms: str, wait_ms: str) -> str:
    lock = locks.setdefault(name, client.lock(name, ttl=int(ttl_ms) / 1000))
    wait = int(wait_ms) / 1000
    got = lock.acquire(blocking=False) if wait == 0 else lock.acquire(timeout=wait)
    return f"ok {lock.fencing_token}" if got else "busy"


def release(name: str) -> str:
    try:
        locks[name].release()
        return "ok"
    except (KeyError, rlock.LockError) as e:
        return f"err {e!r}"


def count(name: str, key: str, n: str, parallel: str) -> str:
    seen: List[str] = []

    def increment() -> None:
        lock = client.lock(name, timeout=60)
        for _ in range(int(n)):
            with lock:
                value = int(data.get(key) or 0)
                # Let the other threads run between GET and SET: only the
                # lock keeps the increment exact.
                time.sleep(0)
                data.set(key, value + 1)
                seen.append(f"{value}:{lock.fencing_token}")

    threads = [threading.Thread(target=increment) for _ in range(int(parallel))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return "ok " + " ".join(seen)


COMMANDS: Dict[str, Callable[..., str]] = {"acquire": acquire, "release": release, "count": count}

for line in sys.stdin:
    command, *args = line.split()
    try:
        reply = COMMANDS[command](*args)
    except Exception as e:  # noqa: BLE001 - every failure becomes an answer the test shows
        reply = f"err {e!r}"
    print(reply, flush=True)
