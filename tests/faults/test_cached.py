"""Fault scenarios of `cached`: the worker rebuilding a cache entry (Python,
Node and the CLI in turn) is SIGKILLed in its loader, or frozen (SIGSTOP)
there past the rebuild lock's lease and then let go on, while readers of
every face wait for that rebuild. The cache checker (cache_checker.py)
verifies, from what the readers recorded and every write of the entry as
Redis ran it (cache_writes.py, through MONITOR), that each waiter got a
value from that rebuild or a later one, or a clear error, within its
timeout, and that no write under an older token landed after one under a
newer token. Each scenario also asserts the promise of its fault, and that
no rebuild lock is left behind."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from rlock_test_support.keys import CacheKeys
from rlock_test_support.spans import MS
from rlock_test_support.waiting import wait_until

from cache_checker import check_cached
from cache_writes import EntryWrites
from conftest import record
from harness import Scenario, Worker, now

LANGS = ["py", "node", "cli"]
# A reader of every face: Python (sync and asyncio), Node, the CLI.
FACES: List[Tuple[str, Dict[str, Any]]] = [("py", {}), ("py", {"flavour": "async"}), ("node", {}), ("cli", {})]
LOCK_TTL_MS = 1000
# A waiter's load, once it takes over (the rebuilder's lasts until the suite
# lets it end, so the fault lands in it).
LOAD_MS = 200
# Waiters wait for a rebuild this long; a late one gives up well within the
# rebuild lock's lease.
TIMEOUT_MS, SHORT_TIMEOUT_MS = 5000, 300
# Past a reader's timeout, the time a read may take to end: the CLI's
# includes starting rlock (a debug build: 0.3 s on a busy 2-core machine).
MARGIN_MS = 1000


@pytest.fixture
def writes(scenario: Scenario) -> Iterator[EntryWrites]:
    w = EntryWrites(scenario.server.port)
    yield w
    w.close()


def reading(**cfg: Any) -> Dict[str, Any]:
    """A reader's config: `cfg` over the scenario's defaults."""
    return {"ttl_ms": 60_000, "lock_ttl_ms": LOCK_TTL_MS, "load_ms": LOAD_MS, "timeout_ms": TIMEOUT_MS, **cfg}


def ended(sc: Scenario, w: Worker, within: float) -> Dict[str, Any]:
    return sc.wait_record(w, lambda r: r["e"] in ("got", "failed"), within=within)


def rebuilder_faulted(sc: Scenario, writes: EntryWrites, fault: str) -> None:
    """For each runtime in turn: a rebuilder of a cold entry, readers of
    every face waiting for its rebuild, then `fault` aimed at it while its
    loader runs, and a late reader that comes just after."""
    takeovers, frozen, timeouts = [], [], 0
    for i, lang in enumerate(LANGS):
        key = sc.lock_name(f"cached-{fault}-{lang}")
        keys = CacheKeys(key)
        loaded_file = os.path.join(sc.dir, f"{key}.loaded")
        victim = sc.reader(lang, key, **reading(load_ms=0, until_file=loaded_file, timeout_ms=None))
        waiters = [sc.reader(face, key, **reading(**flavour)) for face, flavour in FACES]
        late = sc.reader(LANGS[(i + 1) % len(LANGS)], key, **reading(timeout_ms=SHORT_TIMEOUT_MS))
        # All started now (each says ready once connected): the waiters'
        # start-up overlaps the rebuilder's.
        sc.go(victim)
        loading = sc.wait_record(victim, lambda r: r["e"] == "load", within=10)
        sc.go(*waiters)
        wait_until(lambda: int(sc.server.redis.pubsub_numsub(keys.news)[0][1]) == len(waiters), 10,
                   "every waiter waiting for the rebuild")
        if fault == "SIGKILL":
            sc.kill(victim)
        else:
            sc.freeze(victim)
        faulted = sc.events[-1]["t"]
        # What is left of the lease nobody renews now: the rebuild lock
        # frees itself that long after a moment between `before` and `after`.
        before = now()
        lease_left = int(sc.server.redis.pttl(keys.rebuild))
        after = now()
        assert lease_left > 0, f"{lang}: the fault landed after the rebuild ended"
        sc.go(late)
        if fault == "SIGSTOP":
            # Frozen until the rebuild that took over has stored its value:
            # past its lease, and its write comes after a newer one.
            wait_until(lambda: sc.server.redis.exists(keys.entry), LOCK_TTL_MS / 1000 + 10, "a newer value stored")
            sc.thaw(victim)
            frozen.append(round((sc.events[-1]["t"] - faulted) / MS))
            open(loaded_file, "w").close()

        for w in waiters:
            ended(sc, w, within=TIMEOUT_MS / 1000 + 5)
        late_end = ended(sc, late, within=10)
        late_read = sc.wait_record(late, lambda r: r["e"] == "read", within=1)
        loads = sorted((r for w in waiters for r in sc.records(w) if r["e"] == "load"), key=lambda r: r["t"])
        assert loads, "no waiter took the rebuild over"
        took_over = loads[0]
        takeovers.append(round((took_over["t"] - faulted) / MS))
        # Waiters look again when the rebuilder's lease ends, not later.
        assert took_over["t"] <= after + (lease_left + 300) * MS, f"{lang}: taken over {takeovers[-1]} ms after"
        assert took_over["tok"] > loading["tok"]
        # A reader whose deadline passed while the rebuild lock still had
        # its frozen or dead holder could only time out.
        if late_read["t"] + SHORT_TIMEOUT_MS * MS < before + lease_left * MS:
            assert late_end.get("out") == "timeout", f"{lang}: the late reader got {late_end}"
            timeouts += 1

        if fault == "SIGSTOP":
            own = ended(sc, victim, within=10)
            # Its caller still gets the value its loader made.
            assert own["e"] == "got" and own["val"] == f"{victim.id}:{loading['tok']}", own
        writes.settle()
        stored = int(sc.server.redis.hget(keys.entry, "fence"))
        assert stored == took_over["tok"], f"{lang}: the entry holds token {stored}"
        assert not any(w.landed and w.token == loading["tok"] for w in writes.of(key))

    sc.finish(within=20)
    writes.settle()
    left = [k for k in (CacheKeys(sc.lock_name(f"cached-{fault}-{lang}")).rebuild for lang in LANGS)
            if sc.server.redis.exists(k)]
    assert not left, f"rebuild locks left held: {left}"
    report = check_cached(sc.records(), {wid: w.cfg for wid, w in sc.workers.items()}, sc.events, writes.log,
                          margin_ms=MARGIN_MS)
    keep(sc, writes)
    record(f"cached: the rebuilder {'SIGKILLed' if fault == 'SIGKILL' else 'frozen past its lease'} (py, node, cli)", {
        **report.figures,
        "lock ttl ms": LOCK_TTL_MS,
        "taken over after the fault, ms": takeovers,
        "late readers timed out": timeouts,
        **({"frozen ms": frozen} if frozen else {}),
    })
    assert not report.problems, "\n".join(report.problems)


def keep(sc: Scenario, writes: EntryWrites) -> None:
    """The suite's actions and the entries' writes beside the records."""
    with open(os.path.join(sc.dir, "events.json"), "w") as f:
        json.dump(sc.events, f)
    with open(os.path.join(sc.dir, "writes.json"), "w") as f:
        json.dump([asdict(w) for w in writes.log], f)


def test_cached_rebuilder_sigkilled_in_its_loader_leaves_waiters_a_later_rebuild(
    scenario: Scenario, writes: EntryWrites
) -> None:
    """A rebuilder killed outright leaves its rebuild lock to expire: the
    waiters take over once its lease ends (one of them loads, under a newer
    token), get that value or time out clearly, and nothing under the dead
    rebuilder's token is ever stored."""
    rebuilder_faulted(scenario, writes, "SIGKILL")


def test_cached_rebuilder_frozen_past_its_lease_never_overwrites_the_rebuild_that_took_over(
    scenario: Scenario, writes: EntryWrites
) -> None:
    """A rebuilder frozen past its lease cannot know it lost the rebuild
    lock: the waiters take over and store a newer value, and when it runs
    again its write under the older token is refused (its own caller still
    gets the value it loaded)."""
    rebuilder_faulted(scenario, writes, "SIGSTOP")
