"""A schedule from a seed: the mode, the kind of lock, the lease, the workers'
tasks on one lock and a timeline of network faults. The same seed gives the
same schedule, so `RLOCK_NETFAULTS_SEED=<seed>` replays a failing one (the
wire's own timing still varies from run to run).

Seeds below `SHARED_FIRST` take a mutex, on each deployment in turn; seeds
from it take a read-write lock (readers and writers mixed) or a semaphore of
2 or 3 permits with more tasks than permits, on one server, in fair mode or
on a Cluster (a Redlock refuses both), their dropped replies picking one
script of the lock's (`scripts.py`). Seeds from `nemesis.NEMESIS_FIRST` on
are the nemesis' (nemesis.py): faults of whole servers and of the waiting
line, each arranged around one promise."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from deployments import MODES
from scripts import SHARED

LANGS = ("py", "node", "rust", "go")
# Total hold time a schedule aims at, so one runs in about a second or two.
BUSY_MS = 1200
# The first seed of a read-write lock or a semaphore: far enough above the
# mutex's that a long soak of mutex schedules never reaches it.
SHARED_FIRST = 1_000_000
KINDS = ("rw", "semaphore")
SHARED_MODES = tuple(m for m in MODES if m != "redlock")


@dataclass
class PlannedFault:
    at_ms: float
    # drop_reply | delay | stall | reset, on the wire; drop_request (nemesis.py)
    # on the wire too; forget | migrate | failover (nemesis.py) to the servers
    what: str
    kind: str  # cmd | pubsub | any
    # a proxy's (and its server's) index, "home" (the lock's Cluster master) or "all"
    target: Union[int, str]
    ms: float = 0.0  # a delay's; how long a forgetting master stays down
    for_ms: float = 0.0
    n: int = 1
    commands: Optional[List[str]] = None
    scripts: Optional[List[str]] = None  # only these scripts' requests (names of scripts.PICKABLE)
    which: str = "one"  # a reset's; a forget's: restart | flush


@dataclass
class Schedule:
    seed: int
    mode: str
    ttl_ms: int
    auto_renew: bool
    kind: str = "mutex"  # mutex | rw | semaphore
    permits: Optional[int] = None  # a semaphore's size
    tasks: List[Dict[str, Any]] = field(default_factory=list)
    faults: List[PlannedFault] = field(default_factory=list)
    nemesis: Optional[str] = None  # the kind of a nemesis schedule (nemesis.py)

    def describe(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


def make(seed: int) -> Schedule:
    if seed >= SHARED_FIRST:
        return _shared(seed)
    rng = random.Random(seed)
    mode = MODES[seed % len(MODES)]
    ttl, auto_renew, hold = _lease(rng)
    n = rng.randint(2, 5)
    acquisitions = max(1, min(3, int(BUSY_MS / (n * sum(hold) / 2))))
    sched = Schedule(seed, mode, ttl, auto_renew)
    for i in range(n):
        lang = rng.choice(LANGS)
        timeout = None if rng.random() < 0.4 else ttl * rng.choice([1, 3])
        sched.tasks.append(_task(sched, f"{lang}.{i}", lang, timeout, acquisitions, hold, rng))
    _faults(rng, sched)
    return sched


def _shared(seed: int) -> Schedule:
    """A read-write lock's or a semaphore's schedule: more tasks than the lock
    admits at once, waits that give up (leaving the line), leases extended by
    hand, and replies dropped per script."""
    rng = random.Random(seed)
    # Each kind meets every deployment in turn.
    mode = SHARED_MODES[seed % len(SHARED_MODES)]
    kind = KINDS[seed // len(SHARED_MODES) % len(KINDS)]
    ttl, auto_renew, hold = _lease(rng)
    sched = Schedule(seed, mode, ttl, auto_renew, kind)
    if kind == "semaphore":
        sched.permits = rng.choice([2, 3])
        n = rng.randint(sched.permits + 1, sched.permits + 3)
        room = sched.permits
    else:
        n = rng.randint(3, 5)
        room = 2  # readers share it
    acquisitions = max(1, min(3, int(BUSY_MS * room / (n * sum(hold) / 2))))
    for i in range(n):
        lang = rng.choice(LANGS)
        # Short waits give up while others hold: their owners leave the line.
        timeout = None if rng.random() < 0.3 else round(ttl * rng.choice([0.5, 1, 3]))
        task = _task(sched, f"{lang}.{i}", lang, timeout, acquisitions, hold, rng)
        task["kind"] = kind
        task["extend"] = rng.random() < 0.3
        if kind == "semaphore":
            task["permits"] = sched.permits
            task["take"] = 2 if sched.permits == 3 and rng.random() < 0.25 else 1
        else:
            task["sides"] = ["write" if rng.random() < 0.35 else "read" for _ in range(acquisitions)]
            # A writer may read inside its write.
            task["nest_read"] = rng.random() < 0.5
        sched.tasks.append(task)
    if kind == "rw":
        # Readers and writers both, always.
        sides = [t["sides"] for t in sched.tasks]
        if not any("write" in s for s in sides):
            sides[0][0] = "write"
        if not any("read" in s for s in sides):
            sides[1][0] = "read"
    # Every script loses a reply in turn, on each kind and deployment: one
    # that must run while the faults are armed.
    script = SHARED[seed // (len(SHARED_MODES) * len(KINDS)) % len(SHARED)]
    if script == "extend":
        sched.tasks[0]["extend"] = True
    elif script == "dequeue":
        sched.tasks[-1]["timeout_ms"] = sched.tasks[-2]["timeout_ms"] = round(ttl * 0.5)
    sched.faults.append(PlannedFault(round(rng.uniform(0, BUSY_MS * 0.5)), "drop_reply", "cmd",
                                     "home" if mode == "cluster" else "all", commands=["EVALSHA", "EVAL"],
                                     scripts=[script]))
    _faults(rng, sched)
    return sched


def _lease(rng: random.Random) -> Tuple[int, bool, List[float]]:
    """The lease, whether it is renewed, and the range of holds."""
    ttl = rng.choice([300, 500, 800])
    auto_renew = rng.random() < 0.6
    # Long holds exercise renewal (auto-renew on) or a lease running out (off).
    hold_hi = ttl * rng.choice([0.3, 0.8, 1.5] if auto_renew else [0.3, 0.7, 1.3])
    return ttl, auto_renew, [min(20.0, hold_hi / 2), hold_hi]


def _task(sched: Schedule, k: str, lang: str, timeout: Optional[float], acquisitions: int,
          hold: List[float], rng: random.Random) -> Dict[str, Any]:
    return {
        "task": k,
        "lang": lang,
        "ttl_ms": sched.ttl_ms,
        "auto_renew": sched.auto_renew,
        "fair": sched.mode == "fair",
        "timeout_ms": timeout,
        "acquisitions": acquisitions,
        "hold_ms": hold,
        "gap_ms": [0, 30],
        "step_ms": 5,
        "nest": rng.random() < 0.2,
        "seed": rng.randrange(1, 1 << 31),
    }


def _faults(rng: random.Random, sched: Schedule) -> None:
    mode, ttl = sched.mode, sched.ttl_ms
    span = BUSY_MS * 0.8
    for _ in range(rng.randint(1, 4)):
        what = rng.choice(["drop_reply", "drop_reply", "delay", "stall", "reset"])
        kind = rng.choices(["cmd", "pubsub", "any"], [6, 2, 2])[0]
        target: Union[int, str] = "all"
        if mode in ("cluster", "redlock"):
            target = rng.choices(["home" if mode == "cluster" else 0, 1, 2, "all"], [6, 1, 1, 2])[0]
        f = PlannedFault(round(rng.uniform(0, span)), what, kind, target)
        if what == "drop_reply":
            f.n = rng.randint(1, 2)
            f.commands = ["EVALSHA", "EVAL"] if kind != "pubsub" and rng.random() < 0.7 else None
            if sched.kind != "mutex" and f.commands and rng.random() < 0.8:
                f.scripts = [rng.choice(SHARED)]
        elif what == "delay":
            f.ms = round(rng.uniform(20, min(300, ttl / 2)))
            f.for_ms = round(rng.uniform(100, 800))
        elif what == "stall":
            f.for_ms = round(rng.uniform(50, ttl * 1.2))
        else:
            f.which = rng.choice(["one", "all", "mid"])
        sched.faults.append(f)
