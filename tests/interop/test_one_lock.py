"""One lock across runtimes: a name locked from Python, Node, Rust or the
`rlock` CLI is the same lock on the wire, so they exclude each other, share
one fencing counter, keep re-entry to the owner that nested, and wake each
other's waiters with the release message."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from rlock_test_support.waiting import eventually

from contenders import KINDS, LONG_LIVED, Contender, Contenders


def can_enter(c: Contender, name: str) -> bool:
    """One attempt; released again at once when it succeeds."""
    c.start_acquire(name, wait_ms=0)
    fence = c.acquired()
    if fence is not None:
        c.release(name)
    return fence is not None


def test_a_counter_incremented_under_the_lock_by_every_runtime_is_exact(
    contenders: Contenders, name: str
) -> None:
    key = f"counter:{uuid.uuid4().hex}"
    plan = {"python": (20, 3), "node": (20, 3), "rust": (20, 3), "go": (20, 3), "cli": (10, 2)}
    for kind, (n, parallel) in plan.items():
        contenders[kind].count(name, key, n, parallel)
    seen = [s for kind in plan for s in contenders[kind].counted(within=120)]

    total = sum(n * parallel for n, parallel in plan.values())
    assert int(contenders.server.redis.get(key)) == total
    # Every holding read a different value: the values are the order in which
    # the holdings happened, and the tokens grow strictly in that order.
    assert sorted(v for v, _ in seen) == list(range(total))
    tokens = [fence for _, fence in sorted(seen)]
    assert all(a < b for a, b in zip(tokens, tokens[1:])), tokens
    # The counter of the name's slot issued the last token: no other name
    # was taken since.
    assert contenders.status(name)["fence_counter"] == tokens[-1]


def test_fencing_tokens_grow_with_every_acquisition_whichever_runtime_takes_it(
    contenders: Contenders, name: str
) -> None:
    tokens = []
    for kind in KINDS * 3:
        c = contenders[kind]
        c.start_acquire(name)
        fence = c.acquired()
        assert fence is not None
        c.release(name)
        tokens.append(fence)
    assert all(a < b for a, b in zip(tokens, tokens[1:])), tokens


@pytest.mark.parametrize("holder", KINDS)
def test_a_lock_held_by_one_runtime_keeps_every_other_runtime_out(
    contenders: Contenders, name: str, holder: str
) -> None:
    others = [k for k in KINDS if k != holder]
    h = contenders[holder]
    h.start_acquire(name)
    fence = h.acquired()
    state = contenders.status(name)
    assert state["held"] is True and state["fence"] == fence

    for kind in others:
        # The CLI's side of this is `rlock exec --no-wait` exiting 75 without
        # running its command.
        assert not can_enter(contenders[kind], name), f"{kind} got in while {holder} held the lock"

    h.release(name)
    for kind in others:
        assert can_enter(contenders[kind], name), f"{kind} kept out after {holder} released"


@pytest.mark.parametrize("owner", LONG_LIVED)
def test_reentry_belongs_to_the_owner_that_nested(
    contenders: Contenders, name: str, owner: str
) -> None:
    """Python's owner is the thread, Node's and Rust's the lock handle: two
    acquisitions need two releases before any other runtime gets in."""
    others = [k for k in KINDS if k != owner]
    o = contenders[owner]
    o.start_acquire(name)
    first = o.acquired()
    o.start_acquire(name)
    assert o.acquired() == first, "re-entry keeps the fencing token"
    assert contenders.status(name)["count"] == 2

    o.release(name)
    assert contenders.status(name)["count"] == 1
    for kind in others:
        assert not can_enter(contenders[kind], name), f"{kind} got in after one of two releases"

    o.release(name)
    for kind in others:
        assert can_enter(contenders[kind], name), f"{kind} kept out after the last release"


@pytest.mark.parametrize("holder,waiter", list(itertools.permutations(KINDS, 2)))
def test_a_release_by_one_runtime_wakes_a_waiter_of_another(
    contenders: Contenders, name: str, holder: str, waiter: str
) -> None:
    h, w = contenders[holder], contenders[waiter]
    # A 30 s lease: a waiter that missed the release message would sleep on
    # towards it (or its own 10 s wait) instead of waking at once.
    h.start_acquire(name, ttl_ms=30_000)
    held = h.acquired()
    w.start_acquire(name, wait_ms=10_000)
    assert eventually(lambda: contenders.subscribers(name) >= 1, within=10), \
        f"the {waiter} waiter never listened for the release"
    assert w.waiting(), f"{waiter} acquired while {holder} held the lock"

    released = time.monotonic()
    h.release(name)
    got = w.acquired(within=10)
    woke_after = time.monotonic() - released

    assert got is not None and held is not None and got > held
    assert woke_after < 2.0, f"{waiter} woke {woke_after:.1f} s after {holder} released"
    w.release(name)
