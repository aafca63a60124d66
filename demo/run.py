"""The cache-breakdown demo (`make demo`).

A cold cache entry, product:1001, is hit by many requests at once: threads of
a Python process (demo/worker.py), promises of a Node process
(demo/worker.js) and a few shell invocations of `rlock exec`
(demo/request.sh). Every request reads the cache; on a miss it takes the lock
product:1001, re-checks the cache and rebuilds it from a slow "database" only
if it is still missing. One lock across three runtimes means exactly one
rebuild; the report says so, and the exit status is non-zero otherwise.

Uses $REDIS_URL when set; otherwise starts a throwaway redis-server on a free
loopback port and stops it at the end, also on Ctrl-C or failure.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from typing import Any, Dict, List, Optional

import redis

from rlock_test_support.processes import Lines, Silent, die_with_parent
from rlock_test_support.servers import RedisServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "demo")
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RLOCK = os.environ.get("RLOCK") or os.path.join(TARGET, "debug", "rlock")

NAME = "product:1001"
CACHE_KEY = "cache:product:1001"
REBUILDS_KEY = "demo:rebuilds:product:1001"
DB_DELAY = 0.3  # seconds the slow database takes
PYTHON_THREADS = 50
NODE_PROMISES = 50
SHELL_REQUESTS = 5
DEADLINE = 60.0  # seconds for the whole run, once the processes are started


def terminate(proc: "subprocess.Popen[Any]") -> None:
    """SIGTERM (`rlock exec` forwards it to its command and releases its lock),
    then SIGKILL if the process is still there 5 s later."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Worker:
    """A child process in a session of its own (Ctrl-C reaches the demo, which
    stops it in order), whose stdout is read with a deadline."""

    def __init__(self, label: str, argv: List[str], env: Dict[str, str]) -> None:
        self.label = label
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        assert self.proc.stdout is not None
        self.lines = Lines(self.proc.stdout, label)

    def line(self, deadline: float) -> Optional[str]:
        """The next line, None at end of output; raises Silent after the deadline."""
        return self.lines.next(max(0.0, deadline - time.monotonic()))

    def send(self, text: str = "") -> None:
        """Writes `text` as one line (if any) and closes stdin."""
        assert self.proc.stdin is not None
        if text:
            self.proc.stdin.write(text + "\n")
        self.proc.stdin.close()

    def records(self, deadline: float) -> List[Dict[str, Any]]:
        out = []
        while (line := self.line(deadline)) is not None:
            out.append(json.loads(line))
        code = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        if code != 0:
            raise RuntimeError(f"{self.label} exited with status {code}")
        return out

    def stop(self) -> None:
        terminate(self.proc)


def shown(url: str) -> str:
    """The URL without its password."""
    u = urllib.parse.urlsplit(url)
    if u.password is None:
        return url
    netloc = f"{u.username or ''}:***@{u.hostname}" + (f":{u.port}" if u.port else "")
    return urllib.parse.urlunsplit(u._replace(netloc=netloc))


def percentile(values: List[float], p: float) -> float:
    """Nearest-rank percentile."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(len(ranked) * p / 100) - 1)]


def run(url: str, where: str, workers: List[Worker]) -> int:
    store = redis.Redis.from_url(url, decode_responses=True)
    store.delete(CACHE_KEY, REBUILDS_KEY)  # a cold cache
    env = {**os.environ, "REDIS_URL": url, "RLOCK": RLOCK, "DEMO_LOCK": NAME,
           "DEMO_CACHE_KEY": CACHE_KEY, "DEMO_REBUILDS_KEY": REBUILDS_KEY,
           "DEMO_DB_DELAY": str(DB_DELAY)}
    deadline = time.monotonic() + DEADLINE
    python = Worker("Python worker", [sys.executable, os.path.join(DEMO, "worker.py"),
                                      str(PYTHON_THREADS)], env)
    workers.append(python)
    node = Worker("Node worker", ["node", os.path.join(DEMO, "worker.js"), str(NODE_PROMISES)], env)
    workers.append(node)
    for w in (python, node):
        if w.line(deadline) != "ready":
            raise RuntimeError(f"{w.label} did not start")

    started = time.monotonic()
    python.send("go")
    node.send("go")
    shells = []
    for i in range(SHELL_REQUESTS):
        shell = Worker(f"rlock exec request {i + 1}", [os.path.join(DEMO, "request.sh")], env)
        workers.append(shell)
        shells.append(shell)
        shell.send()  # nothing to read: each request starts at once
    records = [r for w in [python, node, *shells] for r in w.records(deadline)]
    elapsed = time.monotonic() - started

    total = PYTHON_THREADS + NODE_PROMISES + SHELL_REQUESTS
    rebuilds = int(store.get(REBUILDS_KEY) or 0)
    rebuilt = [r for r in records if r["outcome"] == "rebuilt"]
    waited = [r["wait_ms"] for r in records if r["outcome"] == "waited"]
    hits = sum(1 for r in records if r["outcome"] == "hit")
    cached = json.loads(store.get(CACHE_KEY) or "null")
    fences = sorted(r["fence"] for r in records if r["fence"] is not None)

    print()
    print(f"Cache breakdown on {NAME}: {total} requests at once on a cold cache ({where})")
    print(f"  requests served      {len(records):4d}   (Python {PYTHON_THREADS} threads, "
          f"Node {NODE_PROMISES} promises, rlock exec {SHELL_REQUESTS})")
    rebuild_note = ""
    if cached is not None:
        rebuild_note = f"   by {cached['rebuilt_by']}, fencing token {cached['fence']}"
    print(f"  rebuilds             {rebuilds:4d}{rebuild_note}")
    if waited:
        print(f"  waited for the lock  {len(waited):4d}   wait p50 {percentile(waited, 50):.0f} ms, "
              f"p99 {percentile(waited, 99):.0f} ms (the rebuild takes {DB_DELAY * 1000:.0f} ms)")
    else:
        print("  waited for the lock     0")
    print(f"  cache hits at once   {hits:4d}   (arrived after the rebuild)")
    if fences:
        print(f"  lock acquisitions    {len(fences):4d}   fencing tokens {fences[0]}..{fences[-1]}, "
              "each issued once")
    print(f"  done in {elapsed:.2f} s")

    problems = []
    if rebuilds != 1:
        problems.append(f"{rebuilds} rebuilds instead of exactly 1")
    if len(records) != total:
        problems.append(f"{len(records)} of {total} requests served")
    if len(rebuilt) != rebuilds:
        problems.append(f"{len(rebuilt)} requests report a rebuild, the database counted {rebuilds}")
    if len(set(fences)) != len(fences):
        problems.append("a fencing token was issued twice")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print("OK: one rebuild; every other request got the entry it wrote.")
    return 0


def main() -> int:
    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    if not os.access(RLOCK, os.X_OK):
        print(f"demo: {RLOCK} is missing: run `make demo`, which builds it", file=sys.stderr)
        return 2
    server: Optional[RedisServer] = None
    workers: List[Worker] = []
    try:
        url = os.environ.get("REDIS_URL")
        where = f"REDIS_URL {shown(url)}" if url else ""
        if not url:
            server = RedisServer(own_session=True)
            url = server.url
            where = f"a throwaway redis-server on {url}"
        return run(url, where, workers)
    except KeyboardInterrupt:
        print("demo: interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, Silent, redis.RedisError, OSError) as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    finally:
        for w in workers:
            w.stop()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
