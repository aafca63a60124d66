"""A line-driven lock worker: the Python side of tests/interop.

Connects to $REDIS_URL, then answers one line per command read on stdin
(the protocol of core/examples/interop_worker.rs):

    acquire LOCK NAME TTL_MS WAIT_MS  -> ok FENCE | busy | upgrade | invalid MESSAGE
    release LOCK NAME                 -> ok | err MESSAGE
    count NAME KEY N PARALLEL         -> ok SEEN:FENCE ...
    cached KEY COUNTER GATE LOADER    -> ready, then after a `go` line:
                                         loaded|got TYPE HEX | failed MESSAGE
                                         | loader-failed KEY MESSAGE | timeout
    invalidate KEY                    -> ok true|false

LOCK is which lock of NAME: `mutex`, `read` or `write` (the sides of its
read-write lock), or `semaphore:N` (one permit of its semaphore of N
permits). WAIT_MS 0 is one attempt. `upgrade`: a write asked while holding
only the read; `invalid`: the arguments were refused (a semaphore's size
unlike its holders'), MESSAGE saying why.

Commands run on the main thread, so acquiring a lock twice nests (the owner
is the thread). `count` runs PARALLEL threads, each its own owner, each N
times taking the mutex and incrementing the integer at KEY with a GET then a
SET; it answers the value each holding read with the fencing token it held.

`cached` reads the cache entry KEY (ttl 60 s) once a `go` line follows its
`ready`, so the test can start readers of every runtime together. Its loader
INCRs COUNTER; unless GATE is `-` it then waits until it pops an item off
the list GATE (so the test holds it until every other reader waits); then it
returns what LOADER says: `bytes:HEX`, `text:HEX` (that UTF-8 as a str),
`json:HEX` (that JSON text, decoded), `none`, or `fail:HEX` (it raises with
that message). The answer: `loaded` (this reader's loader ran) or `got` (it
did not), with the value as `bytes HEX`, `text HEX` (UTF-8), `json HEX`
(re-encoded) or `none`; `failed` when this reader's own loader raised;
`loader-failed` with the error's key when the load it waited for failed;
`timeout`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List

import redis

import rlock

client = rlock.Client()
data = redis.Redis.from_url(os.environ["REDIS_URL"])
locks: Dict[str, rlock.Lock] = {}


def handle(which: str, name: str, ttl_ms: str) -> rlock.Lock:
    """This worker's Lock of `which` on `name`, made on first use."""
    key = f"{which} {name}"
    if key not in locks:
        ttl = int(ttl_ms) / 1000
        if which == "mutex":
            locks[key] = client.lock(name, ttl=ttl)
        elif which in ("read", "write"):
            rw = client.rw_lock(name, ttl=ttl)
            locks[f"read {name}"], locks[f"write {name}"] = rw.read(), rw.write()
        elif which.startswith("semaphore:"):
            locks[key] = client.semaphore(name, int(which.split(":")[1]), ttl=ttl)
        else:
            raise ValueError(f"unknown lock {which!r}")
    return locks[key]


def acquire(which: str, name: str, ttl_ms: str, wait_ms: str) -> str:
    lock = handle(which, name, ttl_ms)
    wait = int(wait_ms) / 1000
    try:
        got = lock.acquire(blocking=False) if wait == 0 else lock.acquire(timeout=wait)
    except rlock.LockUpgradeError:
        return "upgrade"
    except ValueError as e:
        return f"invalid {e}"
    return f"ok {lock.fencing_token}" if got else "busy"


def release(which: str, name: str) -> str:
    try:
        locks[f"{which} {name}"].release()
        return "ok"
    except (KeyError, rlock.LockError) as e:
        return f"err {e!r}"


def count(name: str, key: str, n: str, parallel: str) -> str:
    seen: List[str] = []

    def increment() -> None:
        lock = client.lock(name, blocking_timeout=60)
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


class LoaderFailure(Exception):
    """What a `fail:` loader raises."""


def opened(gate: str) -> None:
    """Returns once an item is popped off the list `gate`."""
    deadline = time.monotonic() + 20
    while data.lpop(gate) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"nobody pushed to {gate} within 20 s")
        time.sleep(0.005)


def loader(counter: str, gate: str, spec: str, ran: List[bool]) -> Callable[[], Any]:
    kind, _, arg = spec.partition(":")
    raw = bytes.fromhex(arg)

    def load() -> Any:
        ran.append(True)
        data.incr(counter)
        if gate != "-":
            opened(gate)
        if kind == "fail":
            raise LoaderFailure(raw.decode())
        if kind == "text":
            return raw.decode()
        if kind == "json":
            return json.loads(raw)
        return None if kind == "none" else raw

    return load


def described(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bytes):
        return f"bytes {value.hex()}"
    if isinstance(value, str):
        return f"text {value.encode().hex()}"
    return f"json {json.dumps(value).encode().hex()}"


def cached(key: str, counter: str, gate: str, spec: str) -> str:
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return "err expected go"
    ran: List[bool] = []
    try:
        value = client.cached(key, loader(counter, gate, spec, ran), ttl=60)
    except LoaderFailure as e:
        return f"failed {e}"
    except rlock.CacheLoaderError as e:
        return f"loader-failed {e.name} {e}"
    except rlock.LockTimeout:
        return "timeout"
    return f"{'loaded' if ran else 'got'} {described(value)}"


def invalidate(key: str) -> str:
    return f"ok {str(client.invalidate(key)).lower()}"


COMMANDS: Dict[str, Callable[..., str]] = {
    "acquire": acquire, "release": release, "count": count, "cached": cached, "invalidate": invalidate,
}

# readline(), not iteration: `cached` reads its `go` line from stdin too.
while line := sys.stdin.readline():
    command, *args = line.split()
    try:
        reply = COMMANDS[command](*args)
    except Exception as e:  # noqa: BLE001 - every failure becomes an answer the test shows
        reply = f"err {e!r}"
    print(reply, flush=True)
