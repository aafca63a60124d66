"""Schedules of whole-deployment and waiting-line faults, each arranged around
a promise a bug once broke; seeds from `NEMESIS_FIRST` on take their kinds in
turn, so every run of a few of them meets each kind:

- `left_lease`: an owner gives up a short wait (ttl 500 ms, timeout 300 ms)
  and its leaving the line never reaches Redis (the proxy drops every
  dequeue request for a while, the client's retries too), then waits again
  with a long lease (5 s) while the holder holds; the holder lets go, the
  line hands the lock to that owner. Handed the earlier wait's lease, it
  would believe 5 s while Redis lets the key go after 500 ms, and the other
  waiter behind it enters beside it: promise 1.
- `left_head`: the same lost leaving, while another task of the same client
  (so the same client subscription, which keeps the entry looking alive)
  and a waiter of another client wait on; the holder crashes (it stops
  renewing and never lets go), and its lease runs out with the entry left
  behind first in line. A lock left free behind that entry keeps both
  waiters waiting: promise 3.
- `forget_majority`, `forget_minority` (Redlock): while one task holds on
  every master and is to re-enter (nest) later, two masters or one lose
  their data (a restart without persistence, or FLUSHALL); rivals wait from
  before and come after. Over a majority forgotten a rival may get in
  beside the holding; the holder must then be told it lost it, and its
  re-entry after the rival's entry must never count as one (promise 1 as
  the checker reads it under `forget` faults).
- `migrate`, `failover` (a Cluster with a replica per master): while a task
  holds with a long lease and waiters wait, the lock's slot moves to
  another master (`redis-cli --cluster reshard`'s steps), or its master's
  replica takes over (`CLUSTER FAILOVER`). The old node drops the slot's
  sharded subscriptions; a waiter deaf to the release that follows would
  sleep through most of a 5 s lease: promise 3.

Each keeps three clients apart (one per worker language): the holder's, the
waiters'. The owner waiting again is a Python or Rust task (`rounds`: a
Node lock's owner is its handle)."""

from __future__ import annotations

import random
from typing import Any, Dict, Optional

from schedule import LANGS, PlannedFault, Schedule

# The first nemesis seed: above the read-write lock's and semaphore's.
NEMESIS_FIRST = 2_000_000
KINDS = ("left_lease", "left_head", "forget_majority", "forget_minority", "migrate", "failover")
# Each owner waiting again (rounds) is one of these workers'.
ROUNDS_LANGS = ("py", "rust")
# How long every dequeue request is dropped: past the client's last retry of
# a leaving (core/src/lock/cancel.rs: 50 + 200 + 1000 + 5000 ms after the
# first try, which follows the 300 ms timeout of a wait begun at 100 ms, or
# a few hundred ms later on a client's first wait).
LEFT_FOR_MS = 8000


def make(seed: int) -> Schedule:
    rng = random.Random(seed)
    kind = KINDS[(seed - NEMESIS_FIRST) % len(KINDS)]
    # The lock's three clients: the holder's, the waiters', a third.
    if kind == "left_lease":
        waiting = rng.choice(ROUNDS_LANGS)
    else:
        waiting = rng.choice(LANGS)
    holding, third = rng.sample([lang for lang in LANGS if lang != waiting], 2)
    if kind.startswith("left_"):
        return _left(seed, kind, rng, holding, waiting, third)
    if kind.startswith("forget_"):
        return _forget(seed, kind, rng, holding, waiting, third)
    return _moved(seed, kind, rng, holding, waiting, third)


def _left(seed: int, kind: str, rng: random.Random, holding: str, waiting: str, third: str) -> Schedule:
    # Both deployments with a line: one server, and fair mode on it.
    mode = ("single", "fair")[(seed - NEMESIS_FIRST) // len(KINDS) % 2]
    sched = Schedule(seed, mode, 1000, True, nemesis=kind)
    fair = mode == "fair"
    if kind == "left_lease":
        # The holder holds past the leaving owner's last retry and its new wait.
        sched.tasks = [
            _task("holder", holding, 1000, True, fair, None, LEFT_FOR_MS + 600, rng),
            {**_task("left", waiting, 500, True, fair, 300, 200, rng, start_ms=100), "acquisitions": 2,
             "rounds": [{"ttl_ms": 500, "timeout_ms": 300, "hold_ms": [200, 200]},
                        {"ttl_ms": 5000, "timeout_ms": None, "hold_ms": [1500, 1500]}]},
            _task("behind", waiting, 1000, True, fair, None, 200, rng, start_ms=300),
        ]
    else:
        # The holder crashes: it stops renewing, and never lets go; its lease
        # ends after the leaving owner gave up.
        sched.ttl_ms, sched.auto_renew = 1500, False
        sched.tasks = [
            {**_task("holder", holding, 1500, False, fair, None, 2200, rng), "crash": True},
            _task("left", waiting, 500, True, fair, 300, 100, rng, start_ms=100),
            _task("behind", waiting, 1000, True, fair, 6000, 200, rng, start_ms=200),
            _task("other", third, 1000, True, fair, 6000, 200, rng, start_ms=300),
        ]
    sched.faults.append(PlannedFault(0, "drop_request", "cmd", "all", for_ms=LEFT_FOR_MS,
                                     scripts=["mutex dequeue"]))
    return sched


def _forget(seed: int, kind: str, rng: random.Random, holding: str, waiting: str, third: str) -> Schedule:
    sched = Schedule(seed, "redlock", 3000, False, nemesis=kind)
    # First the holder's client takes the lock a few times: every master's
    # fence counter is then above what a master that forgot it counts to
    # again, so the token of a re-entry over a forgotten majority is the
    # holder's own (a new token would give it away).
    prior = {**_task("prior", holding, 1000, True, False, None, 0, rng), "acquisitions": 5}
    # Holding on every master, unrenewed (its next request to Redis is its
    # re-entry), re-entering well after the rivals came and went.
    holder = _task("holder", holding, 3000, False, False, None, 2000, rng, start_ms=150)
    holder.update(nest=True, nest_at_ms=1300)
    sched.tasks = [
        prior,
        holder,
        _task("early", waiting, 1000, True, False, 8000, 150, rng, start_ms=250),
        _task("late", third, 1000, True, False, 8000, 150, rng, start_ms=700),
    ]
    forgetting = rng.sample(range(3), 2 if kind == "forget_majority" else 1)
    # A restart (its connections broken too) and a FLUSHALL, in turn.
    how = ("restart", "flush")[(seed - NEMESIS_FIRST) // len(KINDS) % 2]
    for i in forgetting:
        sched.faults.append(PlannedFault(500, "forget", "any", i, ms=rng.choice([0, 100, 200]), which=how))
        # Around the re-entry, the masters that forgot answer 60 ms late: the
        # one that kept the holding answers first, and the re-entry is told
        # by it and one that granted the lock afresh.
        sched.faults.append(PlannedFault(1350, "delay", "cmd", i, ms=60, for_ms=300))
    return sched


def _moved(seed: int, kind: str, rng: random.Random, holding: str, waiting: str, third: str) -> Schedule:
    sched = Schedule(seed, "cluster", 5000, True, nemesis=kind)
    # A long lease: a waiter deaf to the release would sleep through most of it.
    sched.tasks = [
        _task("holder", holding, 5000, True, False, None, 1500, rng),
        _task("waiter", waiting, 5000, True, rng.random() < 0.5, None, 200, rng, start_ms=100),
        _task("other", third, 5000, True, rng.random() < 0.5, None, 200, rng, start_ms=150),
    ]
    sched.faults.append(PlannedFault(600, kind, "any", "home"))
    return sched


def _task(role: str, lang: str, ttl: int, auto_renew: bool, fair: bool, timeout: Optional[int], hold: int,
          rng: random.Random, start_ms: int = 0) -> Dict[str, Any]:
    return {
        "task": f"{lang}.{role}",
        "lang": lang,
        "ttl_ms": ttl,
        "auto_renew": auto_renew,
        "fair": fair,
        "timeout_ms": timeout,
        "acquisitions": 1,
        "hold_ms": [hold, hold],
        "gap_ms": [0, 0],
        "step_ms": 5,
        "nest": False,
        "seed": rng.randrange(1, 1 << 31),
        "start_ms": start_ms,
    }


# The kinds that change a Cluster's layout: they run on one of their own,
# with a replica per master (a failover needs one), so the other schedules'
# Cluster keeps its layout.
ON_REPLICAS = ("migrate", "failover")
