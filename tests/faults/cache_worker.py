"""A Python reader of a cache entry for the fault suite (sync or asyncio face
of `rlock`'s cached).

Run as `python cache_worker.py CONFIG_JSON`. It connects, prints `ready`,
waits for `go` on stdin, then reads the entry `key` `reads` times (default
once) with `cached`, appending one JSON line per event to its records file,
stamped with CLOCK_MONOTONIC as worker.py's are:

  read    a read begins
  load    this worker's loader begins (tok: the token of the rebuild it runs
          for, as the rebuild lock in Redis holds it; pid)
  loaded  the loader is done, `load_ms` later (with `until_file`: once
          that file exists): it gives "ID:TOK" as bytes
  got     the read gave a value (val: that "ID:TOK", naming the loader that
          made it)
  failed  the read raised (out: loader-failed | timeout | error:...)

The config's `ttl_ms`, `lock_ttl_ms` and `timeout_ms` (none: wait as long
as it takes) are cached's ttl, lock_ttl and timeout; early refreshes are
off, so a read loads only on a miss."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any, Dict, Optional

import redis

import rlock
from rlock_test_support.keys import CacheKeys

now = time.monotonic_ns
cfg: Dict[str, Any] = json.loads(sys.argv[1])
key: str = cfg["key"]
out = open(cfg["records"], "a", buffering=1)
data = redis.Redis.from_url(cfg["url"])


def rec(**fields: Any) -> None:
    fields.update(w=cfg["id"], n=key)
    out.write(json.dumps(fields, separators=(",", ":")) + "\n")


def seconds(ms: Optional[float]) -> Optional[float]:
    return None if ms is None else ms / 1000


OPTIONS: Dict[str, Any] = {
    "ttl": cfg["ttl_ms"] / 1000,
    "lock_ttl": cfg["lock_ttl_ms"] / 1000,
    "timeout": seconds(cfg.get("timeout_ms")),
    "early": 0,
}


def loading() -> int:
    """Records the load's start; its token."""
    tok = int(data.hget(CacheKeys(key).rebuild, "fence") or 0)
    rec(e="load", t=now(), tok=tok, pid=os.getpid())
    return tok


def loading_done() -> bool:
    until = cfg.get("until_file")
    return os.path.exists(until) if until else True


def value(tok: int) -> bytes:
    rec(e="loaded", t=now(), tok=tok)
    return f"{cfg['id']}:{tok}".encode()


def load() -> bytes:
    tok = loading()
    time.sleep(cfg["load_ms"] / 1000)
    while not loading_done():
        time.sleep(0.005)
    return value(tok)


async def load_async() -> bytes:
    tok = loading()
    await asyncio.sleep(cfg["load_ms"] / 1000)
    while not loading_done():
        await asyncio.sleep(0.005)
    return value(tok)


def settle(got: Any, error: Optional[BaseException]) -> None:
    if error is None:
        rec(e="got", t=now(), val=got.decode())
    elif isinstance(error, rlock.CacheLoaderError):
        rec(e="failed", t=now(), out="loader-failed")
    elif isinstance(error, rlock.LockTimeout):
        rec(e="failed", t=now(), out="timeout")
    else:
        rec(e="failed", t=now(), out=f"error:{type(error).__name__}:{error}"[:300])


def run_sync(client: rlock.Client) -> None:
    for _ in range(cfg.get("reads", 1)):
        rec(e="read", t=now())
        got, error = None, None
        try:
            got = client.cached(key, load, **OPTIONS)
        except Exception as e:
            error = e
        settle(got, error)


async def run_async(client: rlock.AsyncClient) -> None:
    for _ in range(cfg.get("reads", 1)):
        rec(e="read", t=now())
        got, error = None, None
        try:
            got = await client.cached(key, load_async, **OPTIONS)
        except Exception as e:
            error = e
        settle(got, error)


def main() -> None:
    flavour = cfg.get("flavour", "sync")
    client = (rlock.AsyncClient if flavour == "async" else rlock.Client)(cfg["url"])
    # Connect before saying ready, so start-up costs stay out of the scenario.
    probe = client.lock(key).locked()
    if flavour == "async":
        asyncio.run(probe)  # type: ignore[arg-type]
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    if flavour == "async":
        asyncio.run(run_async(client))  # type: ignore[arg-type]
    else:
        run_sync(client)  # type: ignore[arg-type]
    client.close()
    out.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
