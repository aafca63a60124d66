"""Inspection across runtimes: with a holder of one runtime and a waiter of
each other in line, `rlock status --json` and a Python client's inspect()
name each party's runtime and pid (and the Python thread), in line order."""

from __future__ import annotations

import re
from typing import Any, Dict, List

import pytest

import rlock
from rlock_test_support.waiting import eventually

from contenders import KINDS, MUTEX, READ, Contenders, permit_of

FACES = {"python": "python 3.", "node": "node ", "rust": "rust", "go": "go1.", "cli": "cli"}


def pid_of(contenders: Contenders, kind: str, name: str, lock: str = MUTEX) -> int:
    if kind == "cli":
        return int(contenders[kind].holding[(lock, name)].pid)  # type: ignore[union-attr]
    return int(contenders[kind].pid)  # type: ignore[union-attr]


def check(party: Dict[str, Any], kind: str, pid: int) -> None:
    client = party["client"]
    assert client is not None, f"{kind}: no registration"
    assert client["face"].startswith(FACES[kind]), (kind, client)
    assert client["pid"] == pid, (kind, client)
    assert client["version"] == rlock.__version__
    assert party["owner"].startswith(party["client_id"] + ":")
    if kind == "python":
        # Worker commands run on the main thread (a read-write lock's side
        # follows as /r or /w).
        assert re.search(r":MainThread(/[rw])?$", party["unit"]), party


@pytest.mark.parametrize("holder", KINDS)
def test_the_holder_and_each_waiter_are_named_by_runtime_and_pid(
    contenders: Contenders, server: Any, name: str, holder: str
) -> None:
    waiters: List[str] = [k for k in KINDS if k != holder]
    contenders[holder].start_acquire(name, ttl_ms=30_000, wait_ms=0)
    assert contenders[holder].acquired() is not None
    for i, w in enumerate(waiters, start=1):
        contenders[w].start_acquire(name, ttl_ms=30_000, wait_ms=20_000)
        # One at a time, so the line's order is the order started.
        assert eventually(lambda: contenders.status(name)["waiting"] == i, within=10), w
    pids = {k: pid_of(contenders, k, name) for k in KINDS}

    shown = contenders.status(name)
    with rlock.Client(server.url) as client:
        inspected = client.inspect(name)
    for seen in (shown, inspected):
        assert seen["held"] and seen["waiting"] == len(waiters)
        check(seen["holder"], holder, pids[holder])
        assert [p["owner"] for p in seen["waiters"]] == [p["owner"] for p in shown["waiters"]]
        for party, kind in zip(seen["waiters"], waiters):
            check(party, kind, pids[kind])

    # Each hands the lock on to the next in line.
    for current, following in zip([holder, *waiters], waiters):
        contenders[current].release(name)
        assert contenders[following].acquired(within=10) is not None
    contenders[waiters[-1]].release(name)


@pytest.mark.parametrize("lock", [READ, permit_of(8)])
def test_every_reader_and_permit_holder_is_named_by_runtime_and_pid(
    contenders: Contenders, name: str, lock: str
) -> None:
    for kind in KINDS:
        contenders[kind].start_acquire(name, lock=lock, ttl_ms=30_000, wait_ms=0)
        assert contenders[kind].acquired() is not None, kind
    pids = {pid_of(contenders, k, name, lock): k for k in KINDS}
    shown = contenders.status(name)
    shared = shown["rwlock"] if lock == READ else shown["semaphore"]
    assert shared is not None and len(shared["held_by"]) == len(KINDS)
    for party in shared["held_by"]:
        kind = pids[party["client"]["pid"]]
        check(party, kind, party["client"]["pid"])
        assert party["mode" if lock == READ else "permits"] == ("read" if lock == READ else 1)
    assert sorted(pids[p["client"]["pid"]] for p in shared["held_by"]) == sorted(KINDS)
    for kind in KINDS:
        contenders[kind].release(name, lock=lock)
