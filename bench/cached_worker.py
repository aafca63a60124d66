"""The Python worker of S10 (`cached`): one process, driven by the harness
over JSON lines like worker.py (one request per line on stdin, one reply per
line on stdout).

    python cached_worker.py URL

Contenders, each a cache-aside read of one key through a library that keeps
its entries in Redis:
  cached:rlock          redis-rlock's Client.cached (threads), no stale window
  cached:rlock-stale    the same with `stale`: an expired entry is served while
                        one caller refreshes it in the background
  cached:dogpile        dogpile.cache's get_or_create, redis backend with
                        distributed_lock=True (threads); an expired value is
                        served to every reader but the one that regenerates it
  cached:dogpile-async  the same with an async_creation_runner: the regenerating
                        reader gets the expired value too, a thread regenerates
  cached:cashews-lock   cashews' @cache(ttl, lock=True), redis backend (asyncio)
  cached:cashews-early  cashews' @cache.early(ttl=ttl + stale, early_ttl=ttl):
                        recomputed in the background once early_ttl has passed

The loader of every contender sleeps `loader_ms`, then RPUSHes "t0 t1 pid"
(its start and end, CLOCK_MONOTONIC ns, and its process) to the `loads`
list, so the harness counts every loader call of every process exactly; its
value carries t1, so a reader can tell whether the value it got was made
after its read began (it waited for a loader).

Requests: read (readers loop on one key from `start` to `end`), cold
(readers share out `keys` distinct keys), seq (`n` reads one after another).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, Union

import redis
import redis.asyncio

URL = sys.argv[1]
now = time.monotonic_ns
Value = Dict[str, Any]
Read = Callable[[str], Union[Value, Awaitable[Value]]]
_rlock: List[Any] = []


def t1_of(value: Any) -> int:
    """The t1 a value carries: a dict, or its JSON as bytes (a value another
    face stored as bytes, in the mixed block)."""
    if isinstance(value, (bytes, str)):
        value = json.loads(value)
    return int(value["t1"])


def rlock_client() -> Any:
    if not _rlock:
        import rlock

        _rlock.append(rlock.Client(URL))
    return _rlock[0]


def stamp(r: redis.Redis, loads: str, t0: int) -> Value:
    t1 = now()
    r.rpush(loads, f"{t0} {t1} {os.getpid()}")
    return {"t0": t0, "t1": t1}


def sync_loader(req: Dict[str, Any]) -> Callable[[], Value]:
    r = redis.Redis.from_url(URL)
    pause, loads = req["loader_ms"] / 1000, req["loads"]

    def load() -> Value:
        t0 = now()
        time.sleep(pause)
        return stamp(r, loads, t0)

    return load


# The reads made so far, by what defines them: a request reading with the
# same contender and options as an earlier one reuses its read, connections
# and all, so a warm-up block warms the block measured after it.
_reads: Dict[str, Any] = {}
# The one event loop of the asyncio contenders (cashews binds its
# connections to the loop they were opened on).
LOOP = asyncio.new_event_loop()


def read_of(req: Dict[str, Any]) -> Any:
    """The read of a request's contender (a coroutine function for asyncio ones)."""
    name = req["contender"]
    spec = json.dumps([name, req["ttl"], req.get("stale", 0), req["loader_ms"], req["loads"]])
    if spec not in _reads:
        _reads[spec] = asynchronous(req) if is_async(name) else threaded(req)
    return _reads[spec]


def threaded(req: Dict[str, Any]) -> Callable[[str], Value]:
    """The read of a contender whose readers are threads."""
    name, ttl, stale = req["contender"], req["ttl"], req.get("stale", 0)
    load = sync_loader(req)
    if name in ("cached:rlock", "cached:rlock-stale"):
        client = rlock_client()
        extra = {"stale": stale} if name == "cached:rlock-stale" else {}
        return lambda key: client.cached(key, load, ttl=ttl, **extra)
    if name in ("cached:dogpile", "cached:dogpile-async"):
        from dogpile.cache import make_region

        def regenerate_in_a_thread(cache: Any, key: str, creator: Callable[[], Value], mutex: Any) -> None:
            # dogpile's documented runner: the caller returns the expired
            # value, the mutex is released once the new one is stored.
            def run() -> None:
                try:
                    cache.set(key, creator())
                finally:
                    mutex.release()

            threading.Thread(target=run, daemon=True).start()

        runner = regenerate_in_a_thread if name == "cached:dogpile-async" else None
        region = make_region(async_creation_runner=runner).configure(
            "dogpile.cache.redis", expiration_time=ttl,
            arguments={"url": URL, "distributed_lock": True, "thread_local_lock": False,
                       # Redis keeps the value through the stale window, so an
                       # expired value is there to serve while one regenerates.
                       "redis_expiration_time": max(1, round(ttl + stale)), "lock_timeout": 30})
        return lambda key: region.get_or_create(key, load)
    raise ValueError(f"unknown threaded contender {name!r}")


def asynchronous(req: Dict[str, Any]) -> Callable[[str], Awaitable[Value]]:
    """The read of an asyncio contender, whose readers run on LOOP."""
    from cashews import Cache

    name, ttl, stale = req["contender"], req["ttl"], req.get("stale", 0)
    pause, loads = req["loader_ms"] / 1000, req["loads"]
    cache = Cache()
    cache.setup(URL)
    r = redis.asyncio.Redis.from_url(URL)

    async def load(key: str) -> Value:
        t0 = now()
        await asyncio.sleep(pause)
        t1 = now()
        await r.rpush(loads, f"{t0} {t1} {os.getpid()}")
        return {"t0": t0, "t1": t1}

    if name == "cached:cashews-lock":
        return cache(ttl=ttl, lock=True, key="{key}")(load)
    if name == "cached:cashews-early":
        return cache.early(ttl=ttl + stale, early_ttl=ttl, key="{key}")(load)
    raise ValueError(f"unknown asyncio contender {name!r}")


def is_async(name: str) -> bool:
    return name.startswith("cached:cashews")


def read(req: Dict[str, Any]) -> Dict[str, Any]:
    """`readers` readers loop on `key` from `start` to `end`, each pausing a
    random 0 to 2 × `pace_ms` between reads (so they do not move in step): one
    record `[began, ended, value's t1]` per read."""
    if is_async(req["contender"]):
        return LOOP.run_until_complete(read_async(req))
    get = read_of(req)
    pace, end = req["pace_ms"] / 1000, req["end"]
    recs: List[List[List[int]]] = [[] for _ in range(req["readers"])]
    errors = [0]

    def reader(rec: List[List[int]]) -> None:
        time.sleep(max(0, req["start"] - now()) / 1e9 + random.uniform(0, pace))
        while True:
            began = now()
            if began >= end:
                return
            try:
                rec.append([began, now(), t1_of(get(req["key"]))])
            except Exception:  # counted; the reader goes on
                errors[0] += 1
            time.sleep(random.uniform(0, 2 * pace))

    run_threads(reader, recs)
    return {"rec": [r for rec in recs for r in rec], "errors": errors[0]}


async def read_async(req: Dict[str, Any]) -> Dict[str, Any]:
    get = read_of(req)
    pace, end = req["pace_ms"] / 1000, req["end"]
    recs: List[List[int]] = []
    errors = 0

    async def reader() -> None:
        nonlocal errors
        await asyncio.sleep(max(0, req["start"] - now()) / 1e9 + random.uniform(0, pace))
        while True:
            began = now()
            if began >= end:
                return
            try:
                value = await get(req["key"])
                recs.append([began, now(), value["t1"]])
            except Exception:  # counted; the reader goes on
                errors += 1
            await asyncio.sleep(random.uniform(0, 2 * pace))

    await asyncio.gather(*(reader() for _ in range(req["readers"])))
    return {"rec": recs, "errors": errors}


def cold(req: Dict[str, Any]) -> Dict[str, Any]:
    """From `start`, `readers` readers share out keys `prefix:0` to
    `prefix:{keys - 1}` in that order, each key read once by this process:
    every process of the block reads the same keys at about the same time."""
    if is_async(req["contender"]):
        return LOOP.run_until_complete(cold_async(req))
    get = read_of(req)
    keys = iter(range(req["keys"]))  # next() on a range iterator is atomic under the GIL
    errors = [0]

    def reader(_: Any) -> None:
        for i in keys:
            try:
                get(f"{req['prefix']}:{i}")
            except Exception:  # counted; the reader goes on
                errors[0] += 1

    time.sleep(max(0, req["start"] - now()) / 1e9)
    run_threads(reader, [None] * req["readers"])
    return {"ended": now(), "errors": errors[0]}


async def cold_async(req: Dict[str, Any]) -> Dict[str, Any]:
    get = read_of(req)
    keys = iter(range(req["keys"]))
    errors = 0

    async def reader() -> None:
        nonlocal errors
        for i in keys:
            try:
                await get(f"{req['prefix']}:{i}")
            except Exception:  # counted; the reader goes on
                errors += 1

    await asyncio.sleep(max(0, req["start"] - now()) / 1e9)
    await asyncio.gather(*(reader() for _ in range(req["readers"])))
    return {"ended": now(), "errors": errors}


def seq(req: Dict[str, Any]) -> Dict[str, Any]:
    """`n` reads of `key` one after another (the harness counts what they send)."""
    if is_async(req["contender"]):
        return LOOP.run_until_complete(seq_async(req))
    get = read_of(req)
    lat = []
    for _ in range(req["n"]):
        t = now()
        get(req["key"])
        lat.append(now() - t)
    return {"lat": lat}


async def seq_async(req: Dict[str, Any]) -> Dict[str, Any]:
    get = read_of(req)
    lat = []
    for _ in range(req["n"]):
        t = now()
        await get(req["key"])
        lat.append(now() - t)
    return {"lat": lat}


def run_threads(target: Callable[[Any], None], args: List[Any]) -> None:
    threads = [threading.Thread(target=target, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    ops = {"read": read, "cold": cold, "seq": seq}
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "exit":
            break
        try:
            reply = ops[req["op"]](req)
        except Exception as e:  # reported to the harness, which stops the run
            reply = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
