"""Demo requests from Python: one process, one thread per request.

Each thread waits for the start signal, then does what a web handler does
with a cache in front of a slow database: read the cache; on a miss take the
lock, re-check the cache, rebuild it if still missing, release. It prints one
JSON record per request. Run by demo/run.py, which sets the environment.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import Any, Dict, List

import redis

import rlock

URL = os.environ["REDIS_URL"]
NAME = os.environ["DEMO_LOCK"]
CACHE_KEY = os.environ["DEMO_CACHE_KEY"]
REBUILDS_KEY = os.environ["DEMO_REBUILDS_KEY"]
DB_DELAY = float(os.environ["DEMO_DB_DELAY"])

store = redis.Redis.from_url(URL, decode_responses=True)
client = rlock.Client(URL)


def slow_database(fence: int) -> str:
    """The expensive query the cache protects; every call is counted in Redis."""
    store.incr(REBUILDS_KEY)
    time.sleep(DB_DELAY)
    return json.dumps({"id": 1001, "name": "Mechanical keyboard", "price": 129,
                       "rebuilt_by": "python", "fence": fence})


def request(start: threading.Event, records: List[Dict[str, Any]]) -> None:
    start.wait()
    if store.get(CACHE_KEY) is not None:
        records.append({"runtime": "python", "outcome": "hit", "wait_ms": None, "fence": None})
        return
    asked = time.monotonic()
    with client.lock(NAME, ttl=10, timeout=30) as held:
        wait_ms = (time.monotonic() - asked) * 1000
        fence = held.fencing_token
        assert fence is not None
        if store.get(CACHE_KEY) is None:
            # Jittered TTL: entries filled together must not all expire together.
            store.set(CACHE_KEY, slow_database(fence), ex=300 + random.randint(0, 60))
            outcome = "rebuilt"
        else:
            outcome = "waited"
    records.append({"runtime": "python", "outcome": outcome, "wait_ms": wait_ms, "fence": fence})


def main() -> None:
    count = int(sys.argv[1])
    # Connect before the start signal, so the requests race on the lock and
    # not on connection set-up.
    client.lock(NAME).locked()
    store.ping()
    start = threading.Event()
    records: List[Dict[str, Any]] = []
    threads = [threading.Thread(target=request, args=(start, records)) for _ in range(count)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    start.set()
    for t in threads:
        t.join()
    for r in records:
        print(json.dumps(r))
    client.close()


if __name__ == "__main__":
    main()
