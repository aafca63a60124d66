"""A schedule from a seed: the mode, the lease, the workers' tasks on one lock
and a timeline of network faults. The same seed gives the same schedule, so
`RLOCK_NETFAULTS_SEED=<seed>` replays a failing one (the wire's own timing
still varies from run to run)."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Union

from deployments import MODES

LANGS = ("py", "node", "rust")
# Total hold time a schedule aims at, so one runs in about a second or two.
BUSY_MS = 1200


@dataclass
class PlannedFault:
    at_ms: float
    what: str  # drop_reply | delay | stall | reset
    kind: str  # cmd | pubsub | any
    target: Union[int, str]  # a proxy's index, "home" (the lock's Cluster master) or "all"
    ms: float = 0.0
    for_ms: float = 0.0
    n: int = 1
    commands: Optional[List[str]] = None
    which: str = "one"


@dataclass
class Schedule:
    seed: int
    mode: str
    ttl_ms: int
    auto_renew: bool
    tasks: List[Dict[str, Any]] = field(default_factory=list)
    faults: List[PlannedFault] = field(default_factory=list)

    def describe(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


def make(seed: int) -> Schedule:
    rng = random.Random(seed)
    mode = MODES[seed % len(MODES)]
    ttl = rng.choice([300, 500, 800])
    auto_renew = rng.random() < 0.6
    # Long holds exercise renewal (auto-renew on) or a lease running out (off).
    hold_hi = ttl * rng.choice([0.3, 0.8, 1.5] if auto_renew else [0.3, 0.7, 1.3])
    hold = [min(20.0, hold_hi / 2), hold_hi]
    n = rng.randint(2, 5)
    acquisitions = max(1, min(3, int(BUSY_MS / (n * sum(hold) / 2))))
    sched = Schedule(seed, mode, ttl, auto_renew)
    for i in range(n):
        lang = rng.choice(LANGS)
        timeout = None if rng.random() < 0.4 else ttl * rng.choice([1, 3])
        sched.tasks.append({
            "task": f"{lang}.{i}",
            "lang": lang,
            "ttl_ms": ttl,
            "auto_renew": auto_renew,
            "fair": mode == "fair",
            "timeout_ms": timeout,
            "acquisitions": acquisitions,
            "hold_ms": hold,
            "gap_ms": [0, 30],
            "step_ms": 5,
            "nest": rng.random() < 0.2,
            "seed": rng.randrange(1, 1 << 31),
        })
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
        elif what == "delay":
            f.ms = round(rng.uniform(20, min(300, ttl / 2)))
            f.for_ms = round(rng.uniform(100, 800))
        elif what == "stall":
            f.for_ms = round(rng.uniform(50, ttl * 1.2))
        else:
            f.which = rng.choice(["one", "all", "mid"])
        sched.faults.append(f)
    return sched
