"""One semaphore across runtimes: permits of a name, taken from Python, Node,
Rust or `rlock exec --semaphore N`, are counted as one semaphore on the wire.
Once N are held, a holder of any runtime waits and is woken by the release
of another; every runtime refuses a size other than the holders', naming
both."""

from __future__ import annotations

import re
import time
from typing import Any, Dict

import pytest

from rlock_test_support.waiting import eventually

from contenders import KINDS, Contenders, permit_of

# One permit fewer than faces: every face but one holds one.
PERMITS = len(KINDS) - 1
PERMIT = permit_of(PERMITS)
# Leases far longer than any wait here: a waiter that missed the release
# message would sleep towards one instead of waking at once.
LEASE_MS = 30_000


def semaphore(contenders: Contenders, name: str) -> Dict[str, Any]:
    """The semaphore as `rlock status --json` shows it."""
    state: Dict[str, Any] = contenders.status(name)["semaphore"]
    assert state is not None, "nobody holds or waits on the semaphore"
    # Who holds each permit: asserted in test_inspect.py.
    assert len(state.pop("held_by")) == state["holders"]
    return state


@pytest.mark.parametrize("waiter", KINDS)
def test_a_holder_past_the_permits_waits_and_a_release_by_another_runtime_wakes_it(
    contenders: Contenders, name: str, waiter: str
) -> None:
    holders = [k for k in KINDS if k != waiter]
    fences = {}
    for kind in holders:
        contenders[kind].start_acquire(name, lock=PERMIT, ttl_ms=LEASE_MS, wait_ms=0)
        fences[kind] = contenders[kind].acquired()
        assert fences[kind] is not None, f"{kind} found no permit free"
    assert semaphore(contenders, name) == {
        "permits": PERMITS, "used": PERMITS, "free": 0, "holders": PERMITS, "waiting": 0}

    w = contenders[waiter]
    w.start_acquire(name, lock=PERMIT, ttl_ms=LEASE_MS, wait_ms=10_000)
    assert eventually(lambda: semaphore(contenders, name)["waiting"] == 1, within=10), \
        f"the {waiter} waiter never stood in line"
    assert w.waiting(), f"{waiter} got one more than {PERMITS} permits"

    releaser = holders[0]
    released = time.monotonic()
    contenders[releaser].release(name, lock=PERMIT)
    got = w.acquired(within=10)
    woke_after = time.monotonic() - released

    assert got is not None
    assert woke_after < 2.0, f"{waiter} woke {woke_after:.1f} s after {releaser} released"
    assert got > max(f for f in fences.values() if f is not None)
    assert semaphore(contenders, name) == {
        "permits": PERMITS, "used": PERMITS, "free": 0, "holders": PERMITS, "waiting": 0}

    for kind in [*holders[1:], waiter]:
        contenders[kind].release(name, lock=PERMIT)
    assert contenders.status(name)["semaphore"] is None


@pytest.mark.parametrize("holder", KINDS)
def test_every_other_runtime_giving_another_size_is_refused_naming_both(
    contenders: Contenders, name: str, holder: str
) -> None:
    h = contenders[holder]
    h.start_acquire(name, lock=PERMIT, wait_ms=0)
    assert h.acquired() is not None

    for kind in KINDS:
        if kind == holder:
            continue
        c = contenders[kind]
        c.start_acquire(name, lock=permit_of(PERMITS + 1), wait_ms=10_000)
        answer = c.answer()
        assert answer.startswith("invalid "), f"{kind}: {answer}"
        assert {str(PERMITS), str(PERMITS + 1)} <= set(re.findall(r"\d+", answer)), \
            f"{kind} does not name both sizes: {answer}"

    assert semaphore(contenders, name) == {
        "permits": PERMITS, "used": 1, "free": PERMITS - 1, "holders": 1, "waiting": 0}
    h.release(name, lock=PERMIT)
