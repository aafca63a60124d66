"""Runs schedules: long-lived Python, Node, Rust and Go workers take their tasks
as JSON commands, the faults fire on the proxies at their planned times (the
nemesis' changes to the servers on a thread of their own), and the checker
judges the records. One lock per schedule: a mutex, a read-write lock or a
semaphore.

`RLOCK_NETFAULTS_PROGRAM=rust` (or py, node, go) runs every worker with that
language's program: the tasks keep their four workers, so their four
clients (a core built elsewhere, with `CARGO_TARGET_DIR`, runs them all).
An owner waiting again with another lease (a task with `rounds`) is only
Python's and Rust's to play: a language whose tasks have rounds keeps its own
program in that schedule (`programs`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from rlock_test_support.background import Background
from rlock_test_support.keys import lock_key
from rlock_test_support.processes import Child, Silent
from rlock_test_support.report import Report

import deployments
import nemesis
from nemesis import ROUNDS_LANGS
import scripts
from netchecker import Fault, check
from schedule import PlannedFault, Schedule, make

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
COMMANDS = {
    "py": [sys.executable, os.path.join(HERE, "worker.py")],
    "node": ["node", os.path.join(HERE, "worker.js")],
    "rust": [os.path.join(TARGET, "debug", "examples", "netfaults_worker")],
    "go": [os.path.join(TARGET, "debug", "go_netfaults_worker")],
}
PROGRAM = os.environ.get("RLOCK_NETFAULTS_PROGRAM")
# A schedule's tasks finish in a few seconds; past this a worker is stuck
# (a wait that never ends), which is a violation in itself.
RUN_LIMIT_S = 60
# The core's default (ClientOptions::node_timeout), which every face's client uses here.
REDLOCK_NODE_TIMEOUT_MS = 200
# The nemesis' changes to the servers (nemesis.py) that are no wire fault.
SERVER_FAULTS = ("forget", "migrate", "failover")


def warm_up(lang: str) -> Dict[str, Any]:
    """A lock taken and let go at once by a worker's client, on a name of its own."""
    return {"task": f"{lang}.warm", "lang": lang, "ttl_ms": 1000, "auto_renew": True, "fair": False,
            "timeout_ms": 5000, "acquisitions": 1, "hold_ms": [0, 0], "gap_ms": [0, 0], "step_ms": 5,
            "nest": False, "seed": 1}


def plan(seed: int) -> Schedule:
    """The schedule of `seed`: the nemesis' from its first seed on."""
    return nemesis.make(seed) if seed >= nemesis.NEMESIS_FIRST else make(seed)


def programs(tasks: List[Dict[str, Any]]) -> Dict[str, str]:
    """The program that runs each language's tasks in one schedule."""
    rounds = {t["lang"] for t in tasks if "rounds" in t}

    def of(lang: str) -> str:
        if PROGRAM is None or (PROGRAM not in ROUNDS_LANGS and lang in rounds):
            return lang
        return PROGRAM

    return {lang: of(lang) for lang in COMMANDS}


class Worker(Child):
    """A long-lived worker of one language, with one program, taking one JSON
    command a line."""

    def __init__(self, lang: str, program: str, dir: str) -> None:
        super().__init__(COMMANDS[program], f"the {lang} worker ({program})",
                         stderr_path=os.path.join(dir, f"{lang}.{program}.stderr"), start_new_session=True)
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
        nemesis = f", {self.schedule.nemesis}" if self.schedule.nemesis else ""
        return (f"seed {self.schedule.seed} ({self.schedule.mode}, {self.schedule.kind}{nemesis}): "
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
        # The nemesis' changes to the servers, one at a time, off the proxies' loop.
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nemesis")

    def deployment(self, mode: str) -> deployments.Deployment:
        key = "single" if mode == "fair" else mode
        if key not in self.deployments:
            self.deployments[key] = deployments.start(self.bg, key)
        return self.deployments[key]

    def worker(self, lang: str, program: str) -> Worker:
        key = f"{lang}.{program}"
        w = self.workers.get(key)
        if w is None or w.proc.poll() is not None:
            w = self.workers[key] = Worker(lang, program, self.dir)
        return w

    def run(self, seed: int) -> Outcome:
        sched = plan(seed)
        d = self.deployment("cluster-replicas" if sched.nemesis in nemesis.ON_REPLICAS else sched.mode)
        name = f"nf:{seed}:{uuid.uuid4().hex[:8]}"
        run_by = programs(sched.tasks)
        for lang in {task["lang"] for task in sched.tasks}:
            self.worker(lang, run_by[lang])  # started before the faults' clock does
        if sched.nemesis:
            # Its tasks start in a planned order, 100 ms or more apart: no
            # client's first connection or first lock may upset that order.
            _, stuck = self.tasks(d, f"{seed}.warm", f"{name}:warm", [warm_up(lang) for lang in COMMANDS], run_by)
            if stuck:
                raise RuntimeError(f"warming the workers up: {stuck}")
        marks = [len(p.log) for p in d.proxies]
        # The proxy in front of the Cluster master that serves this lock.
        home = d.servers.index(d.cluster.master_of(lock_key(name))) if d.cluster else 0
        handles: List[Any] = []
        changes: List[Tuple["Future[None]", Dict[str, Any]]] = []

        def arm() -> None:
            for f in sched.faults:
                handles.append(self.bg.loop.call_later(f.at_ms / 1000, self._fire, d, f, home, name, changes))

        self.bg.call(arm)
        rows, stuck = self.tasks(d, seed, name, sched.tasks, run_by)

        async def disarm() -> None:
            for h in handles:
                h.cancel()

        self.bg.run(disarm())
        # A change to the servers under way ends before the next schedule
        # (each is bounded: a restart, a few commands, a failover's wait).
        for change, _ in list(changes):
            change.result(120)
        d.clear()
        hit = [e for p, m in zip(d.proxies, marks) for e in p.log[m:]] + [e for _, e in changes]
        if self.keep:
            with open(os.path.join(self.dir, f"{seed}.faults.json"), "w") as f:
                json.dump({"schedule": json.loads(sched.describe()), "hit": hit}, f)
        faults = [Fault(e["at"], e["what"], e["kind"], e["for_ms"], e["ms"], e.get("how")) for e in hit]
        tasks = {t["task"]: t for t in sched.tasks}
        redlock = sched.mode == "redlock"
        report = check(rows, tasks, faults, fencing=not redlock,
                       node_timeout_ms=REDLOCK_NODE_TIMEOUT_MS if redlock else None)
        for s in stuck:
            report.fail(f"[3] {s}")
        injected = Counter(e["what"] for e in hit)
        # The shared scripts whose replies were dropped, by name.
        injected.update(f"drop_reply {scripts.NAMES[e['script']]}" for e in hit
                        if e["what"] == "drop_reply" and e.get("script") in scripts.NAMES)
        outcome = Outcome(sched, report, injected)
        self.outcomes.append(outcome)
        return outcome

    def tasks(self, d: deployments.Deployment, run: Union[int, str], name: str, tasks: List[Dict[str, Any]],
              run_by: Dict[str, str]) -> Tuple[List[Dict[str, Any]], List[str]]:
        """Runs `tasks` on the lock `name` of deployment `d`, each by its
        language's worker, with the program `run_by` names: their records,
        and the workers that got stuck."""
        by_lang: Dict[str, List[Dict[str, Any]]] = {}
        for task in tasks:
            by_lang.setdefault(task["lang"], []).append({**task, "name": name})
        records = {lang: os.path.join(self.dir, f"{run}.{lang}.jsonl") for lang in by_lang}
        workers = {lang: self.worker(lang, run_by[lang]) for lang in by_lang}
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
        return self.tasks(self.deployment("redlock"), -1, f"nf:refused:{uuid.uuid4().hex[:8]}", tasks,
                          programs(tasks))

    def _fire(self, d: deployments.Deployment, f: PlannedFault, home: int, name: str,
              changes: List[Tuple["Future[None]", Dict[str, Any]]]) -> None:
        if f.what in SERVER_FAULTS:
            # Logged as the proxies log their faults, lasting as long as it took.
            entry: Dict[str, Any] = {"at": time.monotonic_ns(), "what": f.what, "kind": f.kind, "for_ms": 0.0,
                                     "ms": 0.0, "how": f.which if f.what == "forget" else None}
            changes.append((self.pool.submit(self._change, d, f, home, name, entry), entry))
            return
        targets = d.proxies if f.target == "all" else [d.proxies[home if f.target == "home" else f.target]]
        for p in targets:
            if f.what == "drop_reply":
                p.drop_reply(f.kind, f.n, f.commands, [scripts.PICKABLE[s] for s in f.scripts] if f.scripts else None)
            elif f.what == "drop_request":
                # This lock's requests only: an earlier schedule's clean-ups may still run.
                p.drop_request(f.kind, [scripts.PICKABLE[s] for s in f.scripts or ()], f.for_ms, name.encode())
            elif f.what == "delay":
                p.delay(f.kind, f.ms, f.for_ms)
            elif f.what == "stall":
                p.stall(f.kind, f.for_ms)
            else:
                p.reset(f.kind, f.which)

    @staticmethod
    def _change(d: deployments.Deployment, f: PlannedFault, home: int, name: str, entry: Dict[str, Any]) -> None:
        start = time.monotonic_ns()
        if f.what == "forget":
            d.forget(home if f.target == "home" else int(f.target), f.which, f.ms)
        elif f.what == "migrate":
            d.migrate(lock_key(name))
        else:
            d.fail_over(lock_key(name))
        entry["at"], entry["for_ms"] = start, (time.monotonic_ns() - start) / 1e6

    def summary(self) -> List[str]:
        modes = Counter(o.schedule.mode for o in self.outcomes)
        kinds = Counter(o.schedule.kind for o in self.outcomes)
        nemeses = Counter(o.schedule.nemesis for o in self.outcomes if o.schedule.nemesis)
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
            f"nemesis schedules: {sum(nemeses.values())} "
            f"({', '.join(f'{k} {n}' for k, n in sorted(nemeses.items())) or 'none'})",
            f"replies dropped of a read-write lock's or semaphore's script: "
            f"{', '.join(f'{k} {v}' for k, v in sorted(by_script.items())) or 'none'}",
            f"longest free stretch a waiter saw, against its bound: {max(margins, default=0):+.0f} ms",
            f"violations: {sum(o.report.violations for o in failing)} in {len(failing)} schedule(s)"
            + (f", seeds {' '.join(str(o.schedule.seed) for o in failing)}" if failing else ""),
        ]

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for w in self.workers.values():
            w.stop()
        for d in self.deployments.values():
            d.stop()
        self.bg.close()
