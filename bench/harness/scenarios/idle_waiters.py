"""What waiting costs Redis: the commands it receives while many waiters of
one process and one client wait on a lock held with a long lease (all the
permits of a semaphore; the write side of a read-write lock, readers and
writers waiting)."""

from __future__ import annotations

import time
from typing import Any, Dict

from ..contenders import PERMITS, READ_WRITE_WAITERS, kind_of
from ..processes import Worker
from ..server import BenchServer


def idle_waiters(server: BenchServer, lang: str, contender: str, waiters: int, settle: float,
                 window: float) -> Dict[str, Any]:
    w = Worker(lang, [server.url])
    kind = kind_of(f"{lang}/{contender}")
    try:
        w.call({"op": "idle", "contender": contender, "key": f"idle:{lang}:{contender}",
                "waiters": waiters, "permits": PERMITS if kind == "sem" else 1,
                "waiter_kinds": READ_WRITE_WAITERS if kind == "write" else None}, timeout=60)
        # Counting starts once the waiters have settled into waiting: their
        # first attempts are not what waiting costs.
        time.sleep(settle)
        before = server.calls()
        t0 = time.monotonic()
        time.sleep(window)
        after = server.calls()
        secs = time.monotonic() - t0
    finally:
        w.kill()
        server.redis.flushall()
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta = {k: v for k, v in delta.items() if v and k != "info"}
    return {"per_s": sum(delta.values()) / secs, "commands": delta, "window_s": secs}
