"""Randomized network-fault schedules: each seed picks a mode (one server,
fair mode, Redis Cluster, Redlock over three servers), a kind of lock (a
mutex, a read-write lock with readers and writers, a semaphore with more
tasks than permits: not on the Redlock), a lease, Python, Node, Rust and Go
holders and waiters on one lock, and a timeline of wire faults (replies
dropped after Redis applied the request, or the script, slow replies, stalls,
resets, on command or pub/sub connections); the nemesis' seeds (nemesis.py)
add a waiter's leaving of the line lost on the way, Redlock masters that
forget the lock under a holder that re-enters, a Cluster slot moved and a
master failed over under waiters. The checker (netchecker.py) holds every run
to the lock's promises."""

from __future__ import annotations

import pytest

from driver import Driver


def test_the_lock_keeps_its_promises_under_network_faults(driver: Driver, seed: int) -> None:
    outcome = driver.run(seed)
    if outcome.report.violations:
        pytest.fail(outcome.explain(), pytrace=False)
