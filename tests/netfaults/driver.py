"""Runs schedules: long-lived Python, Node and Rust workers take their tasks
as JSON commands, the faults fire on the proxies at their planned times, and
the checker judges the records. One lock per schedule: a mutex, a read-write
lock or a semaphore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from rlock_test_support.background import Background
from rlock_test_support.keys import lock_key
from rlock_test_support.processes import Child, Silent
from rlock_test_support.report import Report

import deployments
import scripts
from netchecker import Fault, check
from schedule import Schedule, make

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
COMMANDS = {
    "py": [sys.executable, os.path.join(HERE, "worker.py")],
    "node": ["node", os.path.join(HERE, "worker.js")],
    "rust": [os.path.join(TARGET, "debug", "examples", "netfaults_worker")],
}
# A schedule's tasks finish in a few seconds; past this a worker is stuck
# (a wait that never ends), which is a violation in itself.
RUN_LIMIT_S = 60
# The core's default (ClientOptions::node_timeout), which every face's client uses here.
REDLOCK_NODE_TIMEOUT_MS = 200


class Worker(Child):
    """A long-lived worker of one language, taking one JSON command a line."""

    def __init__(self, lang: str, dir: str) -> None:
        super().__init__(COMMANDS[lang], f"the {lang} worker", stderr_path=os.path.join(dir, f"{lang}.stderr"),
                         start_new_session=True)
        self.lang = lang
        self.expect("ready", 30)

    def command(self, cmd: Dict[str, Any]) -> None:
        self.send(json.dumps(cmd))

    def expect(self, key: str, within: float) -> Optional[Dict[str, Any]]:
        """The worker's next line with `key`, or None if none came in time."""
        deadline = time.monotonic() + within
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                line = self.lines.next(left)
            except Silent:
                return None
            if not line:
                return None
            reply: Dict[str, Any] = json.loads(line)
            if key in reply:
                return reply

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.command({"op": "exit"})
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


@dataclass
class Outcome:
    schedule: Schedule
    report: Report
    injected: Counter = field(default_factory=Counter)

    def explain(self) -> str:
        return (f"seed {self.schedule.seed} ({self.schedule.mode}, {self.schedule.kind}): "
                f"{self.report.violations} violation(s)\n"
                + "\n".join(f"  {p}" for p in self.report.problems)
                + f"\n  schedule: {self.schedule.describe()}"
                + f"\n  replay: RLOCK_NETFAULTS_SEED={self.schedule.seed} make test-netfaults")


class Driver:
    """The deployments (started on first use) and one worker per language."""

    def __init__(self, keep: Optional[str] = None) -> None:
        self.bg = Background()
        self.dir = keep or tempfile.mkdtemp(prefix="rlock-netfaults-")
        os.makedirs(self.dir, exist_ok=True)
        self.keep = keep is not None
        self.deployments: Dict[str, deployments.Deployment] = {}
        self.workers: Dict[str, Worker] = {}
        self.outcomes: List[Outcome] = []

    def deployment(self, mode: str) -> deployments.Deployment:
        key = "single" if mode == "fair" else mode
        if key not in self.deployments:
            self.deployments[key] = deployments.start(self.bg, key)
        return self.deployments[key]

    def worker(self, lang: str) -> Worker:
        w = self.workers.get(lang)
        if w is None or w.proc.poll() is not None:
            w = self.workers[lang] = Worker(lang, self.dir)
        return w

    def run(self, seed: int) -> Outcome:
        sched = make(seed)
        d = self.deployment(sched.mode)
        name = f"nf:{seed}:{uuid.uuid4().hex[:8]}"
        for task in sched.tasks:
            self.worker(task["lang"])  # started before the faults' clock does
        marks = [len(p.log) for p in d.proxies]
        # The proxy in front of the Cluster master that serves this lock.
        home = d.servers.index(d.cluster.master_of(lock_key(name))) if d.cluster else 0
        handles: List[Any] = []

        def arm() -> None:
            for f in sched.faults:
                handles.append(self.bg.loop.call_later(f.at_ms / 1000, self._fire, d, f, home))

        self.bg.call(arm)
        rows, stuck = self.tasks(d, seed, name, sched.tasks)

        def disarm() -> None:
            for h in handles:
                h.cancel()

        self.bg.call(disarm)
        d.clear()
        hit = [e for p, m in zip(d.proxies, marks) for e in p.log[m:]]
        if self.keep:
            with open(os.path.join(self.dir, f"{seed}.faults.json"), "w") as f:
                json.dump({"schedule": json.loads(sched.describe()), "hit": hit}, f)
        faults = [Fault(e["at"], e["what"], e["kind"], e["for_ms"], e["ms"]) for e in hit]
        tasks = {t["task"]: t for t in sched.tasks}
        redlock = sched.mode == "redlock"
        report = check(rows, tasks, faults, fencing=not redlock,
                       node_timeout_ms=REDLOCK_NODE_TIMEOUT_MS if redlock else None)
        for s in stuck:
            report.fail(f"[3] {s}")
        injected = Counter(e["what"] for e in hit)
        # The shared scripts whose replies were dropped, by name.
        injected.update(f"drop_reply {scripts.NAMES[e['script']]}" for e in hit if e.get("script") in scripts.NAMES)
        outcome = Outcome(sched, report, injected)
        self.outcomes.append(outcome)
        return outcome

    def tasks(self, d: deployments.Deployment, run: int, name: str, tasks: List[Dict[str, Any]]
              ) -> Tuple[List[Dict[str, Any]], List[str]]:
        """Runs `tasks` on the lock `name` of deployment `d`, each by its
        language's worker: their records, and the workers that got stuck."""
        by_lang: Dict[str, List[Dict[str, Any]]] = {}
        for task in tasks:
            by_lang.setdefault(task["lang"], []).append({**task, "name": name})
        records = {lang: os.path.join(self.dir, f"{run}.{lang}.jsonl") for lang in by_lang}
        workers = {lang: self.worker(lang) for lang in by_lang}
        for lang, w in workers.items():
            w.command({"op": "run", "run": run, "url": d.url, "cluster": d.cluster is not None,
                       "records": records[lang], "tasks": by_lang[lang]})
        stuck = []
        for lang, w in workers.items():
            if w.expect("done", RUN_LIMIT_S) is None:
                stuck.append(f"{lang} worker did not finish within {RUN_LIMIT_S} s: {w.stderr()}")
                w.proc.kill()
                w.proc.wait()
        rows: List[Dict[str, Any]] = []
        for path in records.values():
            if os.path.exists(path):
                with open(path) as f:
                    rows.extend(json.loads(line) for line in f if line.endswith("\n"))
                if not self.keep:
                    os.unlink(path)
        return rows, stuck

    def refusals(self) -> Tuple[List[Dict[str, Any]], List[str]]:
        """Each language's worker making a read-write lock and a semaphore on
        the Redlock, one task each: their records, and the workers stuck."""
        tasks = [{"task": f"{lang}.{kind}", "lang": lang, "kind": kind, "permits": 2, "take": 1, "sides": ["write"],
                  "ttl_ms": 500, "auto_renew": True, "fair": False, "timeout_ms": 500, "acquisitions": 1,
                  "hold_ms": [10, 10], "gap_ms": [0, 0], "step_ms": 5, "nest": False, "seed": 1}
                 for lang in COMMANDS for kind in ("rw", "semaphore")]
        return self.tasks(self.deployment("redlock"), -1, f"nf:refused:{uuid.uuid4().hex[:8]}", tasks)

    def _fire(self, d: deployments.Deployment, f: Any, home: int) -> None:
        targets = d.proxies if f.target == "all" else [d.proxies[home if f.target == "home" else f.target]]
        for p in targets:
            if f.what == "drop_reply":
                p.drop_reply(f.kind, f.n, f.commands, [scripts.SHAS[s] for s in f.scripts] if f.scripts else None)
            elif f.what == "delay":
                p.delay(f.kind, f.ms, f.for_ms)
            elif f.what == "stall":
                p.stall(f.kind, f.for_ms)
            else:
                p.reset(f.kind, f.which)

    def summary(self) -> List[str]:
        modes = Counter(o.schedule.mode for o in self.outcomes)
        kinds = Counter(o.schedule.kind for o in self.outcomes)
        injected: Counter = Counter()
        for o in self.outcomes:
            injected.update(o.injected)
        failing = [o for o in self.outcomes if o.report.violations]
        margins = [o.report.figures["closest wait to its bound ms"] for o in self.outcomes
                   if "closest wait to its bound ms" in o.report.figures]
        by_script = {k.split(" ", 1)[1]: injected.pop(k) for k in list(injected) if k.startswith("drop_reply ")}
        return [
            f"schedules run: {len(self.outcomes)} ({', '.join(f'{m} {n}' for m, n in sorted(modes.items()))}; "
            f"{', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})",
            f"faults injected: {sum(injected.values())} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(injected.items())) or 'none'})",
            f"replies dropped of a read-write lock's or semaphore's script: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(by_script.items())) or 'none'}",
            f"longest free stretch a waiter saw, against its bound: {max(margins, default=0):+.0f} ms",
            f"violations: {sum(o.report.violations for o in failing)} in {len(failing)} schedule(s)"
            + (f", seeds {' '.join(str(o.schedule.seed) for o in failing)}" if failing else ""),
        ]

    def close(self) -> None:
        for w in self.workers.values():
            w.stop()
        for d in self.deployments.values():
            d.stop()
        self.bg.close()
