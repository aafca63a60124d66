"""Running one fault scenario: mixed Python, Node and CLI workers against a
real redis-server (directly or through the wire proxy), three independent ones
(a Redlock) or a Redis Cluster, the faults the test injects, and the records
the checker reads afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Union

from rlock_test_support.background import Background
from rlock_test_support.keys import lock_key
from rlock_test_support.processes import Child
from rlock_test_support.report import Report

from checker import check
from storage import FencedStorage

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RLOCK = os.path.join(TARGET, "debug", "rlock")
now = time.monotonic_ns

Command = Callable[[Dict[str, Any]], List[str]]
COMMANDS: Dict[str, Command] = {
    "py": lambda cfg: [sys.executable, os.path.join(HERE, "worker.py"), json.dumps(cfg)],
    "node": lambda cfg: ["node", os.path.join(HERE, "worker.js"), json.dumps(cfg)],
    "cli": lambda cfg: [sys.executable, "-S", "-E", os.path.join(HERE, "cli_worker.py"), json.dumps(cfg)],
}
# The readers of a cache entry (cache_worker.py): the same protocol, each
# reading its config's `key` with `cached` instead of taking locks.
CACHE_COMMANDS: Dict[str, Command] = {
    "py": lambda cfg: [sys.executable, os.path.join(HERE, "cache_worker.py"), json.dumps(cfg)],
    "node": lambda cfg: ["node", os.path.join(HERE, "cache_worker.js"), json.dumps(cfg)],
    "cli": lambda cfg: [sys.executable, "-S", "-E", os.path.join(HERE, "cache_cli_worker.py"), json.dumps(cfg)],
}


class Worker(Child):
    """One worker process, in its own process group (so a kill or a pause
    reaches everything it runs, `rlock exec` and its command included)."""

    def __init__(self, cfg: Dict[str, Any], dir: str) -> None:
        self.id = cfg["id"]
        self.cfg = cfg
        command = (CACHE_COMMANDS if "key" in cfg else COMMANDS)[cfg["lang"]]
        super().__init__(command(cfg), self.id, stderr_path=os.path.join(dir, f"{self.id}.stderr"),
                         start_new_session=True)

    def expect(self, line: str, within: float) -> None:
        got = self.line(within)
        assert got == line, f"{self.id} said {got!r}, expected {line!r}: {self.stderr()}"

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)


class Scenario:
    """Workers, the suite's actions (`events`), and the fenced storage of one
    scenario. Use as a context manager: leftover workers are killed at exit.

    The deployment: one server (`servers` of one), a Redlock over several
    independent ones, or with `cluster` (a RedisCluster) the masters of one
    Redis Cluster. `url` is what the workers connect to: one URL, or the
    list of them."""

    def __init__(
        self, name: str, dir: str, servers: Sequence[Any], background: Background, cluster: Any = None
    ) -> None:
        self.name = name
        self.dir = dir
        self.servers = list(servers)  # RedisServers
        self.server = self.servers[0]
        self.cluster = cluster
        self.url: Union[str, List[str]] = (
            self.server.url if len(self.servers) == 1 else [s.url for s in self.servers]
        )
        self.events: List[Dict[str, Any]] = []
        self.workers: Dict[str, Worker] = {}
        self.storage = FencedStorage(background, os.path.join(dir, "storage.sock"))
        self._going: Set[str] = set()

    def __enter__(self) -> "Scenario":
        return self

    def __exit__(self, *exc: Any) -> None:
        for w in self.workers.values():
            if w.proc.poll() is None:
                w.signal(signal.SIGKILL)
                w.proc.wait()
        self.storage.close()

    def lock_name(self, label: str) -> str:
        return f"faults:{self.name}:{label}"

    def pttls(self, name: str) -> List[int]:
        """The lock's remaining lease on every server that keeps it: each
        Redlock master, or the Cluster master of its slot (-2: no key)."""
        servers = [self.cluster.master_of(lock_key(name))] if self.cluster else self.servers
        return [int(s.redis.pttl(lock_key(name))) for s in servers]

    def lease_left(self, name: str) -> int:
        """How long until the lock is free if nobody renews or releases it:
        its PTTL on one server; on a Redlock, until a majority of the masters
        has let the key expire."""
        pttls = sorted(self.pttls(name))
        return pttls[(len(pttls) - 1) // 2]

    def worker(self, lang: str, **cfg: Any) -> Worker:
        """Starts a worker; `cfg` as worker.py documents (names, ttl_ms, ...)."""
        wid = f"{lang}{len(self.workers) + 1}"
        full = {
            "id": wid,
            "lang": lang,
            "url": self.url,
            **({"cluster": True} if self.cluster else {}),
            "records": os.path.join(self.dir, f"{wid}.jsonl"),
            "storage": self.storage.path,
            "rlock": RLOCK,
            "seed": len(self.workers) + 1,
            **cfg,
        }
        w = self.workers[wid] = Worker(full, self.dir)
        return w

    def reader(self, lang: str, key: str, **cfg: Any) -> Worker:
        """Starts a reader of the cache entry `key` (see cache_worker.py)."""
        return self.worker(lang, key=key, **cfg)

    def go(self, *workers: Worker, within: float = 30) -> None:
        """Waits until the workers (default: all not started yet) are
        connected, then starts them together."""
        chosen = list(workers) or [w for w in self.workers.values() if w.id not in self._going]
        for w in chosen:
            w.expect("ready", within)
        for w in chosen:
            self._going.add(w.id)
            w.send("go")

    def event(self, e: str, **fields: Any) -> None:
        self.events.append({"e": e, "t": now(), **fields})

    def kill(self, w: Worker) -> None:
        self.event("kill", w=w.id)
        w.signal(signal.SIGKILL)
        w.proc.wait()

    def pause(self, w: Worker, seconds: float) -> None:
        """SIGSTOP for `seconds`, then SIGCONT: a process frozen by the OS, a
        long GC pause, a VM migration."""
        self.freeze(w)
        time.sleep(seconds)
        self.thaw(w)

    def freeze(self, w: Worker) -> None:
        """SIGSTOP: the first half of pause(), for a scenario that acts
        while the worker is frozen."""
        self.event("stop", w=w.id)
        w.signal(signal.SIGSTOP)

    def thaw(self, w: Worker) -> None:
        self.event("cont", w=w.id)  # stamped first: nothing of the worker runs before it
        w.signal(signal.SIGCONT)

    def records(self, w: Optional[Worker] = None) -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        for wid in [w.id] if w else list(self.workers):
            path = os.path.join(self.dir, f"{wid}.jsonl")
            if os.path.exists(path):
                with open(path) as f:
                    # A line being written as we read is incomplete: skip it.
                    out.extend(json.loads(line) for line in f if line.endswith("\n"))
        return out

    def wait_record(self, w: Worker, pred: Callable[[Dict[str, Any]], bool], within: float) -> Dict[str, Any]:
        """The first record of `w` satisfying `pred`, waiting for it to appear."""
        deadline = time.monotonic() + within
        while True:
            for r in self.records(w):
                if pred(r):
                    return r
            if time.monotonic() > deadline:
                raise AssertionError(f"{w.id} recorded nothing like that within {within} s: {w.stderr()}")
            time.sleep(0.005)

    def finish(self, within: float) -> None:
        """Every worker must end on its own within `within` seconds (none is
        stranded) and cleanly (no crash)."""
        deadline = time.monotonic() + within
        for w in self.workers.values():
            if w.proc.poll() is not None and w.proc.returncode == -signal.SIGKILL:
                continue  # killed by the scenario
            try:
                w.proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{w.id} still running {within} s after the scenario: {w.stderr()}") from None
            assert w.proc.returncode == 0, f"{w.id} exited {w.proc.returncode}: {w.stderr()}"

    def check(self, **limits: Any) -> Report:
        with open(os.path.join(self.dir, "events.json"), "w") as f:
            json.dump(self.events, f)
        workers = {wid: w.cfg for wid, w in self.workers.items()}
        report = check(self.records(), workers, self.events, self.storage.log, **limits)
        langs: Dict[str, int] = {}
        for w in self.workers.values():
            langs[w.cfg["lang"]] = langs.get(w.cfg["lang"], 0) + 1
        report.figures["workers"] = " ".join(f"{n} {lang}" for lang, n in sorted(langs.items()))
        return report
