"""Demo requests from Python: one process, one thread per request.

Each request asks `client.cached` for the product. On a miss one caller,
across every process and language, runs the loader (the slow database
below) while the others wait for the value it stores; within the stale
window the old value comes back at once and the loader refreshes it on a
thread of its own.

Run by demo/run.py, which sets the environment, with two arguments: how many
threads request at once in act 1, how many keep requesting in act 2. It says
`ready`, then takes commands on stdin, one a line:

  burst    every act-1 thread requests once, all at the same moment
  steady   each act-2 thread requests every DEMO_INTERVAL s, until `stop`

and prints one JSON record per request as it ends, then `done`.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from typing import Any, Dict, List

import redis

import rlock

URL = os.environ["REDIS_URL"]
KEY = os.environ["DEMO_KEY"]
TTL = float(os.environ["DEMO_TTL"])
STALE = float(os.environ["DEMO_STALE"])
DB_DELAY = float(os.environ["DEMO_DB_DELAY"])
CALLS_KEY = os.environ["DEMO_CALLS_KEY"]
LOG_KEY = os.environ["DEMO_LOG_KEY"]
INTERVAL = float(os.environ["DEMO_INTERVAL"])

store = redis.Redis.from_url(URL, decode_responses=True)
client = rlock.Client(URL)
serials = itertools.count(1)
printing = threading.Lock()


def say(line: str) -> None:
    with printing:  # whole lines, whichever threads print at once
        print(line, flush=True)


def slow_database(request: str) -> Dict[str, Any]:
    """The query the cache protects. Every call is counted in Redis, and
    logged with its time and the request that ran it."""
    started = time.time()
    call = store.incr(CALLS_KEY)
    time.sleep(DB_DELAY)
    store.rpush(LOG_KEY, json.dumps({"call": call, "by": request, "started_ms": started * 1000,
                                     "ended_ms": time.time() * 1000}))
    return {"id": 1001, "name": "Mechanical keyboard", "price": 129,
            "version": call, "loaded_by": request}


def request(act: int) -> None:
    me = f"python-{next(serials)}"
    started = time.time()
    asked = time.monotonic()
    # early=0: no early refresh, so that in act 2 the entry does expire.
    value = client.cached(KEY, lambda: slow_database(me), ttl=TTL, stale=STALE, early=0)
    latency_ms = (time.monotonic() - asked) * 1000
    # `rlock cached` stores its command's stdout as bytes; Python and Node
    # store the product as JSON, which comes back as a dict.
    product = json.loads(value) if isinstance(value, bytes) else value
    say(json.dumps({"runtime": "python", "act": act, "request": me, "started_ms": started * 1000,
                    "latency_ms": latency_ms, "product": product}))


def at_once(go: threading.Event) -> None:
    go.wait()
    request(1)


def steadily(stop: threading.Event) -> None:
    while True:
        request(2)
        if stop.wait(INTERVAL):
            return


def fail(args: "threading.ExceptHookArgs") -> None:
    """A request that raised ends the worker, whose exit status the demo
    reports (a thread's exception would otherwise only be printed)."""
    threading.__excepthook__(args)
    os._exit(1)


def main() -> None:
    burst, users = int(sys.argv[1]), int(sys.argv[2])
    threading.excepthook = fail
    # Connected (and the client's tables built) before the start signal, so
    # the requests race on the cache entry and not on setting up.
    client.lock(KEY).locked()
    store.ping()
    go, stop = threading.Event(), threading.Event()
    # Daemons: a run ended before `burst` leaves them waiting, not the process.
    at_once_threads = [threading.Thread(target=at_once, args=(go,), daemon=True)
                       for _ in range(burst)]
    for t in at_once_threads:
        t.start()
    steady_threads: List[threading.Thread] = []
    say("ready")
    while command := sys.stdin.readline().strip():
        if command == "burst":
            go.set()
            for t in at_once_threads:
                t.join()
            say("done")
        elif command == "steady":
            steady_threads = [threading.Thread(target=steadily, args=(stop,)) for _ in range(users)]
            for t in steady_threads:
                t.start()
        elif command == "stop":
            stop.set()
            for t in steady_threads:
                t.join()
            say("done")
    stop.set()
    for t in steady_threads:
        t.join()
    client.close()


if __name__ == "__main__":
    main()
