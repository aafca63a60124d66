"""The cache demo (`make demo`): `cached` on one entry, product:1001, from
threads of a Python process (demo/worker.py), promises of a Node process
(demo/worker.js) and `rlock cached` in a shell (demo/request.sh), in two acts.
The loader is a slow "database" that counts its calls in Redis.

Act 1, a cache breakdown: the entry is cold and 105 requests ask for it at
once. One of them runs the loader and the others wait for the value it
stores: one database call.

Act 2, stale-while-revalidate: the entry's ttl runs out while every runtime
keeps reading it. Within the stale window the old value is served at once
while one caller refreshes it in the background: one database call, and no
request takes anywhere near the database's time.

The run checks its own claims and exits non-zero if one is false. It uses
$REDIS_URL when set; otherwise it starts a throwaway redis-server on a free
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
from typing import Any, Callable, Dict, List, Optional

import redis

import rlock
from rlock_test_support.processes import Lines, Silent, die_with_parent
from rlock_test_support.servers import RedisServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "demo")
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RLOCK = os.environ.get("RLOCK") or os.path.join(TARGET, "debug", "rlock")

KEY = "product:1001"
CALLS_KEY = "demo:db:calls:product:1001"  # the database's calls, counted
LOG_KEY = "demo:db:log:product:1001"  # and each one's time and caller
DB_DELAY = 2.0  # seconds the database takes: far above any request served from the cache
# The entry stays fresh for TTL (less up to 10% jitter), so act 1 is over well
# before it expires and act 2 does not wait long for that.
TTL = 3.0
STALE = 10.0
INTERVAL = 0.1  # seconds between the requests of one act-2 thread, promise or shell loop
TAIL = 1.0  # seconds act 2 goes on, at most, once the refreshed entry was read
RUNTIMES = ("python", "node", "cli")
LABELS = {"python": "Python", "node": "Node", "cli": "rlock cached"}
PER_REQUEST = {"cli": ", a process per request"}
AT_ONCE = {"python": 50, "node": 50, "cli": 5}  # act 1: threads, promises, shells
STEADY = {"python": 10, "node": 10, "cli": 2}  # act 2: threads, promises, shell loops
DEADLINE = 60.0  # seconds for the whole run, once the processes are started

Record = Dict[str, Any]


def terminate(proc: "subprocess.Popen[Any]") -> None:
    """SIGTERM to the process and what it started (a shell loop's `rlock
    cached`, which forwards it to its command), then SIGKILL if the process
    is still there 5 s later."""
    if proc.poll() is not None:
        return
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
        proc.wait()


def signal_group(proc: "subprocess.Popen[Any]", signum: int) -> None:
    # Each worker leads a session, and so a process group, of its own.
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


class Worker:
    """A child process in a session of its own (Ctrl-C reaches the demo, which
    stops it in order), printing one JSON record per request and `done` at the
    end of an act (or ending its output), read with deadlines."""

    def __init__(self, label: str, argv: List[str], env: Dict[str, str]) -> None:
        self.label = label
        self.proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        assert self.proc.stdout is not None
        self.lines = Lines(self.proc.stdout, label)

    def ready(self, deadline: float) -> None:
        if self.lines.next(max(0.0, deadline - time.monotonic())) != "ready":
            raise RuntimeError(f"{self.label} did not start")

    def say(self, command: Optional[str], close: bool = False) -> None:
        """Writes `command` as one line, if any; then closes stdin if asked."""
        assert self.proc.stdin is not None
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        if close:
            self.proc.stdin.close()

    def _take(self, line: Optional[str], into: List[Record]) -> bool:
        """Adds the record `line` to `into`; True when the act's output is
        over (`done`, or the end of the output of a process that exited 0)."""
        if line is None:
            code = self.proc.wait(timeout=5)
            if code != 0:
                raise RuntimeError(f"{self.label} exited with status {code}")
            return True
        if line == "done":
            return True
        into.append(json.loads(line))
        return False

    def drain(self, into: List[Record]) -> None:
        """The records printed so far, without waiting."""
        while self.lines.pending():
            if self._take(self.lines.next(0), into):
                raise RuntimeError(f"{self.label} ended the act before it was told to")

    def finish(self, into: List[Record], deadline: float) -> None:
        """The act's records to its end."""
        while not self._take(self.lines.next(max(0.0, deadline - time.monotonic())), into):
            pass

    def stop(self) -> None:
        terminate(self.proc)


# Starts request.sh with these arguments, under this label.
Spawn = Callable[[str, List[str]], Worker]


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


def ms(value: float) -> str:
    return f"{value:.1f} ms" if round(value, 1) < 10 else f"{value:.0f} ms"


def latencies(records: List[Record], *ps: float) -> List[str]:
    """The requests' latency at each percentile, then the largest."""
    values = [r["latency_ms"] for r in records]
    if not values:
        return ["-"] * (len(ps) + 1)
    return [ms(percentile(values, p)) for p in ps] + [ms(max(values))]


def of(runtime: str, records: List[Record]) -> List[Record]:
    return [r for r in records if r["runtime"] == runtime]


def act_1(workers: Dict[str, Worker], spawn: Spawn, deadline: float) -> List[Record]:
    """Every request at once on the cold entry."""
    for w in workers.values():
        w.say("burst")
    shells = [spawn(f"shell request {i}", ["once", "1", f"cli-{i}"]) for i in range(1, AT_ONCE["cli"] + 1)]
    for shell in shells:
        shell.say(None, close=True)  # nothing to read: each one requests at once
    records: List[Record] = []
    for w in [*workers.values(), *shells]:
        w.finish(records, deadline)
    return records


def act_2(workers: Dict[str, Worker], spawn: Spawn, loaded: int, deadline: float) -> List[Record]:
    """Steady requests until every runtime has read the refreshed entry: a
    value from a load after the first `loaded` database calls."""
    for w in workers.values():
        w.say("steady")
    loops = [spawn(f"shell loop {n}", ["steady", "2", f"cli-{n}"]) for n in "ab"[:STEADY["cli"]]]
    everyone = [*workers.values(), *loops]
    records: List[Record] = []
    # The ttl left, then the refresh; past that something is wrong, which the
    # claims report. Once one request has read the refreshed entry, the others
    # get at most TAIL more to read it too, well within that entry's ttl: on a
    # machine short of CPU a shell loop may not get there, which is no claim.
    until = min(deadline, time.monotonic() + TTL + DB_DELAY + 10)
    tail = False
    while time.monotonic() < until:
        for w in everyone:
            w.drain(records)
        refreshed = {r["runtime"] for r in records if r["product"]["version"] > loaded}
        if refreshed == set(RUNTIMES):
            break
        if refreshed and not tail:
            tail = True
            until = min(until, time.monotonic() + TAIL)
        time.sleep(0.02)
    for w in workers.values():
        w.say("stop")
    for loop in loops:
        loop.say("stop", close=True)
    for w in everyone:
        w.finish(records, deadline)
    return records


def show_act_1(first: List[Record], calls: int, took: float) -> List[str]:
    """Prints act 1's table; returns its claims that are false."""
    total = sum(AT_ONCE.values())
    loaders = [r for r in first if r["product"]["loaded_by"] == r["request"]]
    print()
    print(f"Act 1, a cache breakdown: the entry is cold and {total} requests ask for it at once")
    print(f"  {'':16}{'requests':>9}{'loaded it':>11}{'latency p50':>13}{'max':>9}")
    for rt in RUNTIMES:
        mine = of(rt, first)
        p50, top = latencies(mine, 50)
        loaded_here = sum(1 for r in mine if r in loaders)
        print(f"  {LABELS[rt]:16}{len(mine):9d}{loaded_here:11d}{p50:>13}{top:>9}")
    by = f"by {loaders[0]['request']}" if len(loaders) == 1 else ""
    print(f"  {'database calls':16}{calls:9d}   {by}")
    print(f"  done in {took:.2f} s")
    problems = []
    if len(first) != total:
        problems.append(f"act 1: {len(first)} of {total} requests served")
    if calls != 1:
        problems.append(f"act 1: {calls} database calls instead of exactly 1")
    if len(loaders) != 1 or any(r["product"] != loaders[0]["product"] for r in first):
        problems.append("act 1: not every request got the value of the one load")
    return problems


def show_act_2(second: List[Record], before: int, calls: int, log: List[Record],
               took: float) -> List[str]:
    """Prints act 2's table; returns its claims that are false. `before`:
    the database calls of act 1; `log`: every call's record."""
    refresh = next((e for e in log if e["call"] == before + 1), None)

    def served(r: Record) -> str:
        """What a request got: the entry `fresh`, `stale` (the old value
        after the refresh began: the entry had expired, as early refreshes
        are off), or `refreshed`."""
        if r["product"]["version"] > before:
            return "refreshed"
        if refresh is not None and (r["started_ms"] >= refresh["started_ms"] or r["request"] == refresh["by"]):
            return "stale"
        return "fresh"

    print()
    print(f"Act 2, stale-while-revalidate: the entry (ttl {TTL:g} s, stale {STALE:g} s) expires "
          "while every runtime keeps reading it")
    print(f"  (Python {STEADY['python']} threads, Node {STEADY['node']} promises and "
          f"{STEADY['cli']} shell loops, each a request every {ms(INTERVAL * 1000)})")
    print(f"  {'':16}{'requests':>9}{'fresh':>7}{'stale':>7}{'refreshed':>11}"
          f"{'latency p50':>13}{'p99':>10}{'max':>10}")
    problems = []
    for rt in RUNTIMES:
        mine = of(rt, second)
        kinds = [served(r) for r in mine]
        p50, p99, top = latencies(mine, 50, 99)
        print(f"  {LABELS[rt]:16}{len(mine):9d}{kinds.count('fresh'):7d}{kinds.count('stale'):7d}"
              f"{kinds.count('refreshed'):11d}{p50:>13}{p99:>10}{top:>10}")
    how = ""
    if refresh is not None:
        took_db = ms(refresh["ended_ms"] - refresh["started_ms"])
        caller = next((r for r in second if r["request"] == refresh["by"]), None)
        if caller is not None and served(caller) == "stale":
            how = f"a refresh by {refresh['by']} ({took_db}), in the background: it got the stale entry too"
        else:
            how = f"a load by {refresh['by']} ({took_db})"
    print(f"  {'database calls':16}{calls:9d}   {how}")
    slowest = max(second, key=lambda r: r["latency_ms"], default=None)
    if slowest is not None:
        print(f"  {'slowest request':16}{ms(slowest['latency_ms']):>9}   ({LABELS[slowest['runtime']]}"
              f"{PER_REQUEST.get(slowest['runtime'], '')}, served the "
              f"{'refreshed' if served(slowest) == 'refreshed' else 'old'} value; "
              f"the database takes {ms(DB_DELAY * 1000)})")
    print(f"  done in {took:.2f} s")
    if calls != 1:
        problems.append(f"act 2: {calls} database calls instead of exactly 1")
    if not any(served(r) == "stale" for r in second):
        problems.append("act 2: no request was served the stale entry while the database ran")
    # A request that got the old value did not wait on the database, however
    # long a busy machine took to run it; one that got the new value and took
    # the database's time did.
    waited = [r for r in second if served(r) == "refreshed" and r["latency_ms"] >= DB_DELAY * 1000]
    if waited:
        problems.append(f"act 2: {len(waited)} requests waited on the database "
                        "(the refreshed entry, after the database's time or more)")
    return problems


def run(url: str, where: str, workers: List[Worker]) -> int:
    store = redis.Redis.from_url(url, decode_responses=True)
    with rlock.Client(url) as client:
        client.invalidate(KEY)  # a cold cache
    store.delete(CALLS_KEY, LOG_KEY)
    env = {**os.environ, "REDIS_URL": url, "RLOCK": RLOCK, "DEMO_KEY": KEY,
           "DEMO_TTL": str(TTL), "DEMO_STALE": str(STALE), "DEMO_DB_DELAY": str(DB_DELAY),
           "DEMO_CALLS_KEY": CALLS_KEY, "DEMO_LOG_KEY": LOG_KEY, "DEMO_INTERVAL": str(INTERVAL)}

    def spawn(label: str, argv: List[str]) -> Worker:
        w = Worker(label, [os.path.join(DEMO, "request.sh"), *argv], env)
        workers.append(w)
        return w

    deadline = time.monotonic() + DEADLINE
    processes = {
        "python": Worker("Python worker", [sys.executable, os.path.join(DEMO, "worker.py"),
                                           str(AT_ONCE["python"]), str(STEADY["python"])], env),
        "node": Worker("Node worker", ["node", os.path.join(DEMO, "worker.js"),
                                       str(AT_ONCE["node"]), str(STEADY["node"])], env),
    }
    workers.extend(processes.values())
    for w in processes.values():
        w.ready(deadline)

    print()
    print(f"`cached` on {KEY} from Python, Node and rlock ({where})")
    print(f"The database takes {ms(DB_DELAY * 1000)} and counts its calls in Redis.")

    started = time.monotonic()
    first = act_1(processes, spawn, deadline)
    calls_1 = int(store.get(CALLS_KEY) or 0)
    problems = show_act_1(first, calls_1, time.monotonic() - started)

    started = time.monotonic()
    second = act_2(processes, spawn, calls_1, deadline)
    took = time.monotonic() - started
    calls_2 = int(store.get(CALLS_KEY) or 0) - calls_1
    log = [json.loads(entry) for entry in store.lrange(LOG_KEY, 0, -1)]
    problems += show_act_2(second, calls_1, calls_2, log, took)

    print()
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print(f"OK: act 1, one load for {sum(AT_ONCE.values())} requests, every one of them got its value; "
          "act 2, one refresh, and no request waited on the database.")
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
    except (RuntimeError, Silent, redis.RedisError, rlock.LockError, OSError) as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    finally:
        for w in workers:
            w.stop()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
