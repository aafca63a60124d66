"""One read-write lock across runtimes: the read and write sides of a name,
taken from Python, Node, Rust or `rlock exec --shared` / `--exclusive`, are
one lock on the wire. Readers of every face share it; a writer of any of them
waits for the last reader of the others, and is woken by that reader's
release; once it waits, new readers of every runtime wait behind it; every
acquisition takes a fresh token from the one counter."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import pytest

from rlock_test_support.waiting import eventually

from contenders import KINDS, LONG_LIVED, READ, WRITE, Contenders

# Leases far longer than any wait here: a waiter that missed a release
# message would sleep towards one instead of waking at once.
LEASE_MS = 30_000
WOKEN_WITHIN = 2.0


def rwlock(contenders: Contenders, name: str) -> Dict[str, Any]:
    """The read-write lock as `rlock status --json` shows it."""
    state: Dict[str, Any] = contenders.status(name)["rwlock"]
    if state is None:
        return {"readers": 0, "writer": False, "waiting": 0}
    # Who holds each side: asserted in test_inspect.py.
    assert len(state.pop("held_by")) == state["readers"] + state["writer"]
    return state


def in_line(contenders: Contenders, name: str, waiting: int) -> None:
    assert eventually(lambda: rwlock(contenders, name)["waiting"] == waiting, within=10), \
        f"never {waiting} waiting: {rwlock(contenders, name)}"


def after(kinds: List[str], kind: str) -> List[str]:
    """The other runtimes, in turn after `kind`."""
    i = kinds.index(kind)
    return kinds[i + 1:] + kinds[:i]


def test_readers_of_every_runtime_share_the_lock_and_a_writer_of_each_waits_for_the_last(
    contenders: Contenders, name: str
) -> None:
    tokens: List[int] = []
    reading: Dict[str, int] = {}

    def got(kind: str, within: float = 20) -> int:
        fence = contenders[kind].acquired(within)
        assert fence is not None, f"{kind} never got in"
        tokens.append(fence)
        return fence

    for kind in KINDS:
        contenders[kind].start_acquire(name, lock=READ, ttl_ms=LEASE_MS)
        reading[kind] = got(kind)
    assert rwlock(contenders, name) == {"readers": len(KINDS), "writer": False, "waiting": 0}

    writes = []
    for writer in KINDS:
        *middle, last = after(KINDS, writer)
        w = contenders[writer]
        # A worker answers one command at a time: its own read goes first.
        w.release(name, lock=READ)
        del reading[writer]
        w.start_acquire(name, lock=WRITE, ttl_ms=LEASE_MS)
        in_line(contenders, name, 1)
        assert w.waiting(), f"the {writer} writer got in beside readers"

        # Readers would share the lock with the ones inside, but a writer waits.
        for waiting, kind in enumerate(middle, start=2):
            c = contenders[kind]
            c.release(name, lock=READ)
            del reading[kind]
            c.start_acquire(name, lock=READ, ttl_ms=LEASE_MS)
            in_line(contenders, name, waiting)
            assert c.waiting(), f"a {kind} reader passed the waiting {writer} writer"
            assert w.waiting(), f"the {writer} writer got in beside a {last} reader"
        assert rwlock(contenders, name) == {"readers": 1, "writer": False, "waiting": len(middle) + 1}

        released = time.monotonic()
        contenders[last].release(name, lock=READ)
        wrote = got(writer, within=10)
        woke_after = time.monotonic() - released
        assert woke_after < WOKEN_WITHIN, \
            f"the {writer} writer woke {woke_after:.1f} s after the last ({last}) reader left"
        assert wrote > reading.pop(last), "a writer's token follows the readers it waited for"
        writes.append(wrote)

        contenders[last].start_acquire(name, lock=READ, ttl_ms=LEASE_MS)
        in_line(contenders, name, len(middle) + 1)
        assert rwlock(contenders, name) == {"readers": 0, "writer": True, "waiting": len(middle) + 1}

        released = time.monotonic()
        w.release(name, lock=WRITE)
        for kind in (*middle, last):
            reading[kind] = got(kind, within=10)
            assert reading[kind] > wrote, f"the {kind} reader's token precedes the writer's"
        woke_after = time.monotonic() - released
        assert woke_after < WOKEN_WITHIN, f"readers woke {woke_after:.1f} s after the {writer} writer left"

        w.start_acquire(name, lock=READ, ttl_ms=LEASE_MS)
        reading[writer] = got(writer)
        assert rwlock(contenders, name) == {"readers": len(KINDS), "writer": False, "waiting": 0}

    assert len(set(tokens)) == len(tokens), f"a token given twice: {tokens}"
    assert all(a < b for a, b in zip(writes, writes[1:])), writes
    for kind in KINDS:
        contenders[kind].release(name, lock=READ)
    assert contenders.status(name)["rwlock"] is None


@pytest.mark.parametrize("owner", LONG_LIVED)
def test_a_reader_asking_to_write_is_refused_at_once(
    contenders: Contenders, name: str, owner: str
) -> None:
    """Two readers waiting to turn writer would wait on each other for ever:
    each long-lived runtime refuses the upgrade instead of waiting, and
    leaves the lock as it was."""
    other = after(KINDS, owner)[0]
    o, r = contenders[owner], contenders[other]
    o.start_acquire(name, lock=READ)
    mine = o.acquired()
    r.start_acquire(name, lock=READ)
    theirs = r.acquired()
    assert mine is not None and theirs is not None

    asked = time.monotonic()
    o.start_acquire(name, lock=WRITE, wait_ms=10_000)
    assert o.answer() == "upgrade"
    assert time.monotonic() - asked < WOKEN_WITHIN, f"{owner} waited before refusing the upgrade"
    assert rwlock(contenders, name) == {"readers": 2, "writer": False, "waiting": 0}

    o.release(name, lock=READ)
    r.release(name, lock=READ)
    o.start_acquire(name, lock=WRITE, wait_ms=0)
    wrote = o.acquired()
    assert wrote is not None and wrote > max(mine, theirs), "once it reads no more, it writes"
    o.release(name, lock=WRITE)
