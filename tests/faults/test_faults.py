"""Fault scenarios: each injects one kind of fault while Python, Node and CLI
workers contend for locks, then the checker (checker.py) verifies exclusion,
fencing, honest loss reporting and waiting bounds from what everyone recorded.
Each scenario also asserts the promise specific to its fault, and leaves its
figures for the suite's summary."""

from __future__ import annotations

import time
import os
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest

from rlock_test_support.keys import lock_key
from rlock_test_support.proxy import FaultProxy
from rlock_test_support.spans import MS

from conftest import record
from harness import Scenario, Worker, now

LANGS = ["py", "node", "cli"]


def others(lang: str) -> List[str]:
    return [x for x in LANGS if x != lang]


def assert_clean(sc: Scenario, label: str, extra: Dict[str, Any], **limits: Any) -> None:
    report = sc.check(**limits)
    record(label, {**report.figures, **extra})
    assert not report.problems, "\n".join(report.problems)


def assert_no_errors(sc: Scenario) -> None:
    errors = [r for r in sc.records() if str(r.get("out", "")).startswith("error")]
    assert not errors, errors[:5]


def repeatedly(every: float, for_s: float, fault: Callable[[int], Any]) -> int:
    """Injects `fault(i)` every `every` seconds for `for_s` seconds; returns how many times."""
    times = 0
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        time.sleep(every)
        fault(times)
        times += 1
    return times


def holder_and_waiters(
    sc: Scenario, lang: str, label: str, ttl: int, name: str = "",
    waiting: Optional[Dict[str, Any]] = None, **holder: Any
) -> Tuple[str, Worker, Dict[str, Any], List[Worker]]:
    """A holder of runtime `lang` that holds a fresh lock for good, then one
    waiter of each other runtime queued behind it (each to hold it twice,
    `waiting` changing their config): the stage of a fault aimed at the
    holder. Returns the name (default: made of `label` and `lang`), the
    holder, its entry record and the waiters."""
    name = name or sc.lock_name(f"{label}-{lang}")
    victim = sc.worker(lang, names=[name], ttl_ms=ttl, hold_ms=[60_000, 60_000], rounds=1, **holder)
    sc.go(victim)
    entered = sc.wait_record(victim, lambda r: r["e"] == "enter", within=10)
    waiter = {"names": [name], "ttl_ms": ttl, "timeout_ms": 5000, "hold_ms": [20, 60], "rounds": 2, **(waiting or {})}
    waiters = [sc.worker(o, **waiter) for o in others(lang)]
    sc.go(*waiters)
    for w in waiters:
        sc.wait_record(w, lambda r: r["e"] == "wait", within=10)
    return name, victim, entered, waiters


def first_entry(sc: Scenario, waiters: List[Worker], within: float = 10) -> Dict[str, Any]:
    return min((sc.wait_record(w, lambda r: r["e"] == "enter", within=within) for w in waiters), key=lambda r: r["t"])


def sigkill_of_the_holder(
    sc: Scenario, label: str, ttl: int = 600, names: Sequence[str] = (), extra: Optional[Dict[str, Any]] = None, **limits: Any
) -> None:
    """A holder of each runtime in turn (on `names`, one per runtime, if
    given), SIGKILLed after one renewal; a waiter of another runtime must
    enter within lease + 200 ms of the kill. The figure "after the key
    expired" is measured from when the lock was due to be free by the PTTLs
    read just before the kill."""
    delays, after_expiry = [], []
    for i, lang in enumerate(LANGS):
        name, victim, _, waiters = holder_and_waiters(sc, lang, "killed", ttl, name=names[i] if names else "")
        # Kill at an arbitrary point of the renewal cycle, after one renewal.
        time.sleep(ttl / 1000 * 0.5)
        remaining = sc.lease_left(name)
        assert remaining > 0, f"the victim held the lock: {sc.pttls(name)}"
        sc.kill(victim)
        killed = sc.events[-1]["t"]
        first = first_entry(sc, waiters)["t"]
        delays.append((first - killed) / MS)
        after_expiry.append((first - killed) / MS - remaining)
        assert (first - killed) / MS <= ttl + 200, f"{lang} holder killed: lock free after {delays[-1]:.0f} ms"
    sc.finish(within=20)
    assert_clean(
        sc,
        label,
        {
            "lease ms": ttl,
            "next holder entered after the kill, ms": [round(d) for d in delays],
            "max entry after the key expired, ms": round(max(after_expiry), 1),
            **(extra or {}),
        },
        **limits,
    )


def test_sigkill_of_the_holder_frees_the_lock_within_its_lease(scenario: Scenario) -> None:
    """A holder killed outright (no release, no goodbye) keeps its lock no
    longer than its lease: a waiter of another runtime enters within lease +
    200 ms of the kill."""
    sigkill_of_the_holder(scenario, "SIGKILL of the holder (py, node, cli)")


def test_sigstop_past_the_lease_then_sigcont_is_fenced_and_told_lost(scenario: Scenario) -> None:
    """A holder frozen past its lease cannot know it lost the lock while
    frozen: a waiter enters with a larger token, the storage refuses the old
    holder's writes, and the old holder is told "lost" as soon as it runs."""
    sc = scenario
    ttl, frozen = 500, 1.2
    told_after = []
    for lang in LANGS:
        _, victim, entered, waiters = holder_and_waiters(sc, lang, "paused", ttl, step_ms=2)
        sc.pause(victim, frozen)
        resumed = sc.events[-1]["t"]
        lost = sc.wait_record(victim, lambda r: r["e"] == "lost", within=5)
        told_after.append((lost["t"] - resumed) / MS)
        assert told_after[-1] < 250, f"{lang} holder told lost {told_after[-1]:.0f} ms after SIGCONT"
        newer = [r for w in waiters for r in sc.records(w) if r["e"] == "enter" and r["t"] < resumed]
        assert newer and all(r["tok"] > entered["tok"] for r in newer), "a newer holder entered while it was frozen"
    sc.finish(within=20)
    assert_clean(
        sc,
        "SIGSTOP past the lease, then SIGCONT (py, node, cli)",
        {"lease ms": ttl, "frozen ms": int(frozen * 1000), "told lost after SIGCONT, ms": [round(t) for t in told_after]},
    )


def contend(sc: Scenario, names: List[str], for_ms: float, langs: List[str] = LANGS + ["py-async"], **cfg: Any) -> None:
    """Starts one worker per runtime taking the `names` round after round for
    `for_ms` (then finishing their round), and lets them go. A short gap
    between rounds gives the other runtimes their turns."""
    for lang in langs:
        flavour = {"flavour": "async"} if lang == "py-async" else {}
        sc.worker(lang.removesuffix("-async"), names=names, for_ms=for_ms, **{"gap_ms": [5, 30], **flavour, **cfg})
    sc.go()


def next_entry(sc: Scenario, since: int, within: float = 10) -> Dict[str, Any]:
    """The first entry of any worker after `since`, waiting for it."""
    while True:
        entries = [r for r in sc.records() if r["e"] == "enter" and r["t"] > since]
        if entries:
            return min(entries, key=lambda r: r["t"])
        assert now() - since < within * 1e9, f"nobody entered within {within} s"
        time.sleep(0.002)


def restart_after_an_entry(sc: Scenario, down_for: float, wipes: bool) -> int:
    """Restarts Redis (SIGKILL, as a crash) just after some worker entered, so
    the fault lands mid-hold with a waiter queued. Holdings last longer than
    the outage: their releases come after Redis is back (a release while Redis
    is down is not part of these scenarios)."""
    next_entry(sc, now())
    start = now()
    sc.server.restart(down_for=down_for)
    if wipes:
        sc.events.append({"e": "wipe", "t": start})
    # Nobody can take a lock while Redis is down, nor until clients reconnect.
    sc.events.append({"e": "blind", "t0": start, "t1": now() + 500 * MS})
    return start


@pytest.mark.redis_args("--appendonly", "yes", "--appendfsync", "always")
def test_redis_restarted_mid_hold_with_persistence_keeps_every_promise(scenario: Scenario) -> None:
    """Redis crashes (SIGKILL) and comes back with its data (AOF, fsync
    always) while a lock is held and waited for: no worker crashes or hangs,
    every wait ends with an outcome, and nothing overlaps."""
    sc = scenario
    contend(sc, [sc.lock_name("restart")], for_ms=3500, ttl_ms=1500, hold_ms=[700, 1000], timeout_ms=5000)
    for _ in range(2):
        time.sleep(0.5)
        restart_after_an_entry(sc, down_for=0.3, wipes=False)
    sc.finish(within=30)
    assert_clean(sc, "redis-server restarted mid-hold, with persistence", {"restarts": 2, "down ms": 300})


def test_redis_restarted_mid_hold_without_persistence_tells_the_holder(scenario: Scenario) -> None:
    """Redis crashes and comes back empty: the lock and its fence counter are
    gone, so a waiter may enter while the old holder still runs (documented,
    not guaranteed). The old holder must be told "lost" by its next renewal,
    and nobody crashes or hangs."""
    sc = scenario
    ttl = 900
    contend(sc, [sc.lock_name("wiped")], for_ms=3000, ttl_ms=ttl, hold_ms=[700, 1000], timeout_ms=5000)
    told = []
    for _ in range(2):
        time.sleep(0.5)
        wipe = restart_after_an_entry(sc, down_for=0.1, wipes=True)
        holder = max((r for r in sc.records() if r["e"] == "enter" and r["t"] < wipe), key=lambda r: r["t"])
        lost = sc.wait_record(sc.workers[holder["w"]], lambda r: r["e"] == "lost" and r["t"] > wipe, within=5)
        told.append((lost["t"] - wipe) / MS)
        # By its next renewal (every ttl/3), give or take the outage itself.
        assert told[-1] < ttl / 3 + 600, f"{holder['w']} told {told[-1]:.0f} ms after the restart"
    sc.finish(within=30)
    assert_clean(
        sc,
        "redis-server restarted mid-hold, without persistence",
        {"restarts": 2, "lease ms": ttl, "holder told lost after the restart, ms": [round(t) for t in told]},
    )


def test_client_kill_of_the_librarys_connections(scenario: Scenario) -> None:
    """CLIENT KILL drops every client connection (commands and pub/sub) again
    and again: operations retry, waiters are not stranded, nothing overlaps."""
    sc = scenario
    name = sc.lock_name("client-kill")
    contend(sc, [name], for_ms=2500, ttl_ms=1000, hold_ms=[30, 200], timeout_ms=4000)
    def kill(i: int) -> None:
        kind = ["normal", "pubsub"][i % 2]
        sc.event("client-kill", kind=kind, dropped=sc.server.redis.client_kill_filter(_type=kind, skipme=True))

    kills = repeatedly(0.15, 2.0, kill)
    sc.finish(within=30)
    dropped = sum(e["dropped"] for e in sc.events if e["e"] == "client-kill")
    assert dropped > 0
    assert_clean(sc, "CLIENT KILL of the library's connections", {"CLIENT KILLs": kills, "connections dropped": dropped})


def test_script_flush_mid_run_is_invisible(scenario: Scenario) -> None:
    """SCRIPT FLUSH every 50 ms while locks change hands: every script call
    that meets NOSCRIPT falls back, so no operation fails."""
    sc = scenario
    name = sc.lock_name("script-flush")
    contend(sc, [name], for_ms=2000, ttl_ms=1000, hold_ms=[5, 40], timeout_ms=4000)
    flushes = repeatedly(0.05, 2.0, lambda _: sc.server.redis.script_flush())
    sc.finish(within=30)
    assert_no_errors(sc)
    assert_clean(sc, "SCRIPT FLUSH every 50 ms", {"SCRIPT FLUSHes": flushes})


def test_latency_on_the_wire_keeps_every_promise(scenario: Scenario, proxy: FaultProxy) -> None:
    """Every worker talks to Redis through a wire that delays each chunk by
    15 ms each way (a 30 ms round trip, 100x loopback): nothing overlaps,
    nothing fails, handoffs stay prompt."""
    sc = scenario
    proxy.now(proxy.delay, "any", 15, None, True)
    contend(sc, [sc.lock_name("slow-wire")], for_ms=3000, ttl_ms=600, hold_ms=[20, 120], timeout_ms=4000, url=proxy.url)
    sc.finish(within=30)
    assert_no_errors(sc)
    assert_clean(sc, "15 ms each way on the wire", {"round trip ms": 30, "proxied connections": proxy.connections})


def test_a_stalled_wire_ends_the_lease_and_the_holder_is_told_first(scenario: Scenario, proxy: FaultProxy) -> None:
    """The holder's wire stalls (nothing moves either way) for three leases:
    its renewals cannot arrive, so its lease ends by its own clock and it is
    told "lost"; it must have stopped acting (its last step) before a waiter
    on a healthy wire entered. (When it heard is a figure: a CLI command hears
    by SIGTERM, a signal's delivery later than rlock knows.)"""
    sc = scenario
    ttl = 500
    margins = []
    for lang in LANGS:
        _, victim, _, waiters = holder_and_waiters(sc, lang, "stalled", ttl, step_ms=1, url=proxy.url)
        sc.event("stall")
        proxy.now(proxy.stall, "any")
        lost = sc.wait_record(victim, lambda r: r["e"] == "lost", within=5)
        entered = first_entry(sc, waiters, within=5)["t"]
        time.sleep(ttl * 3 / 1000 - (now() - sc.events[-1]["t"]) / 1e9)
        proxy.now(proxy.clear)
        sc.event("resume")
        margins.append((entered - lost["t"]) / MS)
        last_step = max(r["t"] for r in sc.records(victim) if r["e"] == "step")
        assert last_step < entered, f"{lang} holder acted {(last_step - entered) / MS:.1f} ms after a waiter entered"
    sc.finish(within=20)
    assert_clean(
        sc,
        "wire stalled for 3 leases under the holder (py, node, cli)",
        {"lease ms": ttl, "told lost before the next holder entered, ms (py, node, cli)": [round(m, 1) for m in margins]},
    )


def test_connections_cut_again_and_again(scenario: Scenario, proxy: FaultProxy) -> None:
    """Every connection (commands and pub/sub) is reset every 150 ms while
    locks change hands: operations retry on a fresh connection, waiters are
    not stranded, nothing overlaps."""
    sc = scenario
    contend(sc, [sc.lock_name("cut-wire")], for_ms=2500, ttl_ms=1000, hold_ms=[20, 200], timeout_ms=5000, url=proxy.url)
    reset: List[int] = []
    cuts = repeatedly(0.15, 2.2, lambda _: reset.append(proxy.now(proxy.reset, "any", "all")))
    sc.finish(within=30)
    assert sum(reset) > 0
    assert_clean(sc, "every connection reset every 150 ms", {"connections reset": sum(reset), "cuts": cuts})


def test_a_gil_hogging_thread_does_not_delay_renewals(scenario: Scenario) -> None:
    """While a Python holder's own thread keeps the GIL for six renewal
    periods, the watchdog (in Rust, needing no GIL) renews on time: the lease
    never drops below two thirds of its length and is never lost."""
    sc = scenario
    ttl = 300
    name = sc.lock_name("gil")
    hog = sc.worker("py", names=[name], ttl_ms=ttl, hold_ms=[2000, 2000], hog=True, rounds=1)
    sc.go(hog)
    sc.wait_record(hog, lambda r: r["e"] == "enter", within=10)
    waiters = [sc.worker(o, names=[name], ttl_ms=ttl, timeout_ms=5000, hold_ms=[10, 30], rounds=1) for o in others("py")]
    sc.go(*waiters)
    lowest, samples = ttl, 0
    while hog.proc.poll() is None and not any(r["e"] == "exit" for r in sc.records(hog)):
        left = sc.server.redis.pttl(lock_key(name))
        if left > 0:
            lowest, samples = min(lowest, left), samples + 1
        time.sleep(0.005)
    sc.finish(within=20)
    records = sc.records(hog)
    exit = next(r for r in records if r["e"] == "exit")
    assert exit["out"] == "released", exit
    enter, first_step = (next(r for r in records if r["e"] == e) for e in ("enter", "step"))
    assert first_step["t"] - enter["t"] > 1900 * MS, "the hog kept the holder's own thread out"
    assert samples > 100 and lowest > ttl * 2 / 3 - 50, f"lease fell to {lowest} ms of {ttl}"
    assert_clean(
        sc,
        "GIL held by a Python thread for 2 s while holding",
        {"lease ms": ttl, "lowest remaining lease seen ms": lowest, "PTTL samples": samples},
    )


def test_100_000_cycles_then_nothing_is_renewed(scenario: Scenario) -> None:
    """100 000 acquire/release cycles by Python, Node and CLI workers on 8
    shared names (some holdings last a renewal period, so releases race the
    watchdog). Then, with every client still open, no lock key is left and no
    script call reaches Redis for three renewal periods: the watchdog stops
    renewing with release."""
    sc = scenario
    ttl = 300
    names = [sc.lock_name(f"cycle-{i}") for i in range(8)]
    plan = {"py": [16_000, 16_000], "node": [34_000, 34_000]}  # about even in CPU time
    cyclers = [
        sc.worker(lang, names=names, ttl_ms=ttl, timeout_ms=10_000, cycles=n, slow_every=1000)
        for lang, counts in plan.items()
        for n in counts
    ]
    cli = sc.worker("cli", names=names, ttl_ms=ttl, timeout_ms=10_000, rounds=150, hold_ms=[0, 0], step_ms=1)
    started = time.monotonic()
    sc.go()
    for w in cyclers:
        w.expect("cycled", within=170)
    cli.proc.wait(60)  # the CLI worker ends on its own after its rounds
    elapsed = time.monotonic() - started
    r = sc.server.redis
    calls = lambda: sum(v["calls"] for k, v in r.info("commandstats").items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
    before = calls()
    keys = list(r.scan_iter(match="rlock:*", count=1000))
    # The clients' registrations (rlock:client:{ID}) are hashes too, renewed
    # only while their client holds or waits: no lock is among them.
    held = [k for k in keys if r.type(k) == "hash" and not k.startswith("rlock:client:{")]
    pttls = {k: r.pttl(k) for k in held}
    time.sleep(3 * ttl / 3000 + 0.1)  # three renewal periods: the window being measured
    renewals = calls() - before
    refreshed = [k for k in held if r.pttl(k) >= pttls[k]]
    for w in cyclers:
        w.send("exit")
    sc.finish(within=30)
    cycles = sum(1 for rec in sc.records() if rec["e"] == "cycle")
    assert cycles + 150 >= 100_000, cycles
    assert_no_errors(sc)
    assert not [rec for rec in sc.records() if rec.get("out") == "timeout"]
    assert held == [] and refreshed == [], (held, refreshed)
    assert renewals == 0, f"{renewals} script calls after every lock was released"
    assert_clean(
        sc,
        "100 000 acquire/release cycles",
        {
            "cycles": cycles + 150,
            "seconds": round(elapsed, 1),
            "lock keys left": len(held),
            "script calls in the 3 renewal periods after": renewals,
        },
    )


# Redlock: the same workers on a client made of three independent masters'
# URLs. Its fencing tokens are no global order (each master counts on its
# own, README "Deployments"), so the checker only counts tokens out of order.


def test_redlock_sigkill_of_the_holder_frees_the_lock_within_its_lease(redlock_scenario: Scenario) -> None:
    """On a Redlock over three masters, a holder killed outright keeps its
    lock no longer than its lease: a waiter of another runtime enters within
    lease + 200 ms of the kill (once a majority of the masters let the key
    expire)."""
    sigkill_of_the_holder(redlock_scenario, "Redlock (3 masters): SIGKILL of the holder (py, node, cli)", fencing=False)


def test_redlock_master_killed_and_restarted_empty_keeps_one_holder(redlock_scenario: Scenario) -> None:
    """While workers contend on a Redlock over three masters, one master is
    killed (SIGKILL), stays down longer than the lease (as the README asks of
    a master that rejoins without persistence) and comes back empty; then the
    same for another master. The two live masters are a majority: locks keep
    changing hands during each outage, the clients take the master back when
    it returns, no worker errs, crashes or hangs, and no two holders ever both
    believe they hold (one master forgetting cannot let a rival in, so no
    data loss is excused)."""
    sc = redlock_scenario
    ttl, down = 600, 1.0
    names = [sc.lock_name("master-down-a"), sc.lock_name("master-down-b")]
    contend(sc, names, for_ms=6000, ttl_ms=ttl, hold_ms=[30, 250], timeout_ms=5000)
    outages = []
    for victim in sc.servers[1:]:
        next_entry(sc, now())  # mid-hold, with waiters queued
        killed = now()
        sc.event("master-kill", port=victim.port)
        victim.restart(down_for=down)
        back = now()
        sc.event("master-back", port=victim.port)
        outages.append((killed, back))
        # The clients come back to it: a lock taken after its return is kept there too.
        deadline = time.monotonic() + 5
        while not any(victim.redis.type(lock_key(n)) == "hash" for n in names):
            assert time.monotonic() < deadline, f"no lock reached the restarted master {victim.port} within 5 s"
            time.sleep(0.005)
    sc.finish(within=30)
    entries = [r for r in sc.records() if r["e"] == "enter"]
    during = [sum(1 for r in entries if lo < r["t"] < hi) for lo, hi in outages]
    assert all(n > 0 for n in during), f"entries while a master was down: {during}"
    assert_no_errors(sc)
    assert_clean(
        sc,
        "Redlock (3 masters): a master SIGKILLed mid-hold, restarted empty after 1 s, twice",
        {"lease ms": ttl, "master down ms": int(down * 1000), "holdings entered while a master was down": during},
        fencing=False,
    )


# Redis Cluster: workers in cluster mode on three masters, on names spread
# over all of them.


def spread_names(sc: Scenario, label: str, per_master: int) -> List[str]:
    """`per_master` lock names for each master of the cluster (by their
    slots), so the workers contend on all of them."""
    assert sc.cluster is not None
    by_master: Dict[int, List[str]] = defaultdict(list)
    for i in range(1000):
        name = sc.lock_name(f"{label}-{i}")
        port = sc.cluster.master_of(lock_key(name)).port
        if len(by_master[port]) < per_master:
            by_master[port].append(name)
        if len(by_master) == len(sc.servers) and all(len(v) == per_master for v in by_master.values()):
            return [name for port in sorted(by_master) for name in by_master[port]]
    raise AssertionError(f"names did not spread over the masters: {dict(by_master)}")


def test_cluster_sigkill_of_the_holder_frees_the_lock_within_its_lease(cluster_scenario: Scenario) -> None:
    """In a Redis Cluster of three masters, a holder killed outright keeps
    its lock no longer than its lease, on whichever master its slot lives: a
    waiter of another runtime enters within lease + 200 ms of the kill."""
    sc = cluster_scenario
    names = spread_names(sc, "killed", per_master=1)
    sigkill_of_the_holder(
        sc,
        "Redis Cluster (3 masters): SIGKILL of the holder (py, node, cli), one name per master",
        names=names,
        extra={"masters": len({sc.cluster.master_of(lock_key(n)).port for n in names})},
    )


def test_cluster_client_kill_on_every_master(cluster_scenario: Scenario) -> None:
    """In a Redis Cluster of three masters, with names on every master,
    CLIENT KILL drops every client connection (commands, then sharded
    pub/sub) on every master again and again: operations retry, waiters are
    not stranded, nothing overlaps."""
    sc = cluster_scenario
    names = spread_names(sc, "client-kill", per_master=2)
    contend(sc, names, for_ms=2500, ttl_ms=1000, hold_ms=[30, 200], timeout_ms=4000)

    def kill(i: int) -> None:
        kind = ["normal", "pubsub"][i % 2]
        for node in sc.servers:
            dropped = node.redis.client_kill_filter(_type=kind, skipme=True)
            sc.event("client-kill", kind=kind, port=node.port, dropped=dropped)

    kills = repeatedly(0.15, 2.0, kill)
    sc.finish(within=30)
    dropped = {node.port: 0 for node in sc.servers}
    for e in sc.events:
        if e["e"] == "client-kill":
            dropped[e["port"]] += e["dropped"]
    assert all(dropped.values()), f"connections dropped per master: {dropped}"
    per_master: Dict[int, int] = defaultdict(int)
    for r in sc.records():
        if r["e"] == "enter":
            per_master[sc.cluster.master_of(lock_key(r["n"])).port] += 1
    assert len(per_master) == 3, f"holdings per master: {dict(per_master)}"
    assert_clean(
        sc,
        "Redis Cluster (3 masters): CLIENT KILL on every master every 150 ms",
        {
            "names": len(names),
            "CLIENT KILL rounds": kills,
            "connections dropped per master": sorted(dropped.values()),
            "holdings per master": sorted(per_master.values()),
        },
    )


# Fair mode on one server: waiters in line, each release handing the lock to
# the first live one.


def queue_key(name: str) -> str:
    return f"rlock:{{{name}}}:queue"


def join_line(sc: Scenario, w: Worker, name: str) -> None:
    """Lets fair waiter `w` go and waits until it is in line behind those
    already there, so the line's order is the order of these calls."""
    r = sc.server.redis
    ahead = r.llen(queue_key(name))
    sc.go(w)
    deadline = time.monotonic() + 10
    while r.llen(queue_key(name)) <= ahead:
        assert time.monotonic() < deadline, f"{w.id} did not join the line within 10 s: {w.stderr()}"
        time.sleep(0.002)


def fair_line(
    sc: Scenario, name: str, holder: Tuple[str, Dict[str, Any]], line: List[str], ttl: int
) -> Tuple[Worker, List[Worker]]:
    """A fair holder (lang, its config) that entered, then fair waiters of
    the runtimes `line`, one round each, in line in that order."""
    common = {"names": [name], "ttl_ms": ttl, "fair": True, "rounds": 1}
    h = sc.worker(holder[0], **common, **holder[1])
    waiters = [sc.worker(lang, **common, timeout_ms=10_000, hold_ms=[20, 60]) for lang in line]
    sc.go(h)
    sc.wait_record(h, lambda r: r["e"] == "enter", within=10)
    for w in waiters:
        join_line(sc, w, name)
    assert sc.server.redis.llen(queue_key(name)) == len(line)
    return h, waiters


def entries_in_order(sc: Scenario, waiters: List[Worker]) -> List[Dict[str, Any]]:
    entries = [sc.wait_record(w, lambda r: r["e"] == "enter", within=10) for w in waiters]
    order = [r["w"] for r in sorted(entries, key=lambda r: r["t"])]
    assert order == [w.id for w in waiters], f"entered in the order {order}, the line was {[w.id for w in waiters]}"
    return entries


def test_fair_sigkill_of_the_holder_hands_the_lock_to_the_head_of_the_line(scenario: Scenario) -> None:
    """Fair mode, a holder of each runtime in turn with three waiters of all
    runtimes in line behind it: killed outright, the holder keeps its lock no
    longer than its lease; the head of the line enters within lease + 200 ms
    of the kill, and the others follow in the order of the line."""
    sc = scenario
    ttl = 600
    delays, after_expiry = [], []
    for lang in LANGS:
        name = sc.lock_name(f"fair-killed-{lang}")
        holder, line = fair_line(sc, name, (lang, {"hold_ms": [60_000, 60_000]}), others(lang) + [lang], ttl)
        time.sleep(ttl / 1000 * 0.5)  # an arbitrary point of the renewal cycle
        remaining = sc.lease_left(name)
        assert remaining > 0, "the holder held the lock"
        sc.kill(holder)
        killed = sc.events[-1]["t"]
        head = entries_in_order(sc, line)[0]
        delays.append((head["t"] - killed) / MS)
        after_expiry.append(delays[-1] - remaining)
        assert delays[-1] <= ttl + 200, f"{lang} holder killed: the head of the line entered after {delays[-1]:.0f} ms"
    sc.finish(within=20)
    assert_clean(
        sc,
        "fair mode: SIGKILL of the holder (py, node, cli), 3 waiters in line",
        {
            "lease ms": ttl,
            "head of the line entered after the kill, ms": [round(d) for d in delays],
            "max entry after the key expired, ms": round(max(after_expiry), 1),
        },
    )


def test_fair_a_waiter_killed_in_the_line_does_not_block_it(scenario: Scenario) -> None:
    """Fair mode, three waiters in line behind a holder, the middle one (of
    each runtime in turn) SIGKILLed: its client's subscription is gone, so the
    release after the head's holding skips it and hands the lock to the last
    waiter at once, far sooner than the lease the dead waiter asked for."""
    sc = scenario
    ttl, bound = 2000, 300
    r = sc.server.redis
    handoffs: List[List[float]] = []
    for lang in LANGS:
        name = sc.lock_name(f"fair-line-{lang}")
        release = os.path.join(sc.dir, f"release-{lang}")
        a, b = others(lang)
        holder, (first, victim, last) = fair_line(sc, name, (a, {"until_file": release}), [b, lang, a], ttl)
        # Its client id is its owner id up to the first ':' (README "Wire protocol").
        client_id = r.lindex(queue_key(name), 1).split(":", 1)[0]
        channel = f"rlock:{{{name}}}:w:{client_id}"
        assert r.pubsub_numsub(channel)[0][1] == 1
        sc.kill(victim)
        deadline = time.monotonic() + 5
        while r.pubsub_numsub(channel)[0][1]:  # Redis saw the dead client's connection close
            assert time.monotonic() < deadline, "the killed waiter's subscription outlived it by 5 s"
            time.sleep(0.002)
        open(release, "w").close()
        entered = entries_in_order(sc, [first, last])
        sc.wait_record(first, lambda r: r["e"] == "exit", within=10)
        gaps = []
        for before, e in zip([holder, first], entered):
            last_step = max(r["t"] for r in sc.records(before) if r["e"] == "step")
            gaps.append((e["t"] - last_step) / MS)
        handoffs.append([round(g, 1) for g in gaps])
        assert gaps[1] < bound, f"{lang} waiter killed in line: the next one entered {gaps[1]:.0f} ms after the release"
        assert not [r for r in sc.records(victim) if r["e"] == "enter"]
    sc.finish(within=20)
    assert_clean(
        sc,
        "fair mode: the middle of 3 waiters in line SIGKILLed (py, node, cli)",
        {
            "lease ms": ttl,
            "last step before a release to the next entry, ms (to the head, past the dead one)": handoffs,
        },
    )


# Read-write locks and semaphores: holders share a lock by kind, each under
# its own lease; the checker allows readers together and N permit holders.


def shared_key(name: str, family: str) -> str:
    """The hash of the holdings of the read-write lock ("rwlock") or
    semaphore ("semaphore") of `name`."""
    return f"{lock_key(name)}:{family}"


def wait_in_line(sc: Scenario, key: str, waiters: int) -> None:
    """Waits until `waiters` stand in the line of the lock whose hash is `key`."""
    deadline = time.monotonic() + 10
    while sc.server.redis.llen(f"{key}:queue") < waiters:
        assert time.monotonic() < deadline, f"{waiters} waiters not in line within 10 s"
        time.sleep(0.002)


def first_holding(sc: Scenario, w: Worker) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The enter and exit records of `w`'s first holding, waiting for them."""
    enter = sc.wait_record(w, lambda r: r["e"] == "enter", within=10)
    return enter, sc.wait_record(w, lambda r: r["e"] == "exit" and r["t"] > enter["t"], within=10)


def test_rwlock_sigkill_of_the_writer_lets_the_waiting_readers_in_together(scenario: Scenario) -> None:
    """A writer of each runtime in turn, killed outright with a reader of
    each other runtime waiting: the writer keeps the lock no longer than its
    lease; both readers enter within lease + 200 ms of the kill, together
    (each before the other let go)."""
    sc = scenario
    ttl = 600
    delays = []
    for lang in LANGS:
        name, victim, _, readers = holder_and_waiters(
            sc, lang, "killed-writer", ttl, kind="write", waiting={"kind": "read", "hold_ms": [150, 200], "rounds": 1}
        )
        wait_in_line(sc, shared_key(name, "rwlock"), 2)
        time.sleep(ttl / 1000 * 0.5)  # an arbitrary point of the renewal cycle
        assert sc.server.redis.pttl(shared_key(name, "rwlock")) > 0, "the writer held the lock"
        sc.kill(victim)
        killed = sc.events[-1]["t"]
        holdings = [first_holding(sc, r) for r in readers]
        delays.append([round((enter["t"] - killed) / MS) for enter, _ in holdings])
        assert max(delays[-1]) <= ttl + 200, f"{lang} writer killed: readers entered after {delays[-1]} ms"
        assert max(e["t"] for e, _ in holdings) < min(x["t"] for _, x in holdings), "the readers did not share"
    sc.finish(within=20)
    assert_clean(
        sc,
        "read-write lock: SIGKILL of the writer (py, node, cli), 2 readers waiting",
        {"lease ms": ttl, "readers entered after the kill, ms": delays},
    )


def writer_then_reader(
    sc: Scenario, lang: str, label: str, ttl: int, **victim: Any
) -> Tuple[Worker, Dict[str, Any], Worker, Worker]:
    """A holder of runtime `lang` that holds a fresh read-write lock for good
    (its side in `victim`), then a writer of another runtime and a reader of
    the third waiting in line in that order (the reader waits even beside a
    reader: writers go first): the stage of a fault aimed at the holder.
    Returns the holder, its entry record, the writer and the reader."""
    writer_lang, reader_lang = others(lang)
    name = sc.lock_name(f"{label}-{lang}")
    key = shared_key(name, "rwlock")
    common = {"names": [name], "ttl_ms": ttl, "rounds": 1}
    holder = sc.worker(lang, **common, hold_ms=[60_000, 60_000], **victim)
    sc.go(holder)
    entered = sc.wait_record(holder, lambda r: r["e"] == "enter", within=10)
    writer = sc.worker(writer_lang, **common, kind="write", timeout_ms=5000, hold_ms=[50, 100])
    sc.go(writer)
    wait_in_line(sc, key, 1)
    reader = sc.worker(reader_lang, **common, kind="read", timeout_ms=5000, hold_ms=[20, 60])
    sc.go(reader)
    wait_in_line(sc, key, 2)
    return holder, entered, writer, reader


def test_rwlock_sigkill_of_a_reader_hands_the_lock_to_the_waiting_writer_first(scenario: Scenario) -> None:
    """A reader of each runtime in turn, killed outright while a writer of
    another runtime waits and, behind it, a reader of the third: the writer
    enters within lease + 200 ms of the kill, and the later reader after it."""
    sc = scenario
    ttl = 600
    delays = []
    for lang in LANGS:
        victim, _, writer, reader = writer_then_reader(sc, lang, "killed-reader", ttl, kind="read")
        time.sleep(ttl / 1000 * 0.5)  # an arbitrary point of the renewal cycle
        sc.kill(victim)
        killed = sc.events[-1]["t"]
        wrote = sc.wait_record(writer, lambda r: r["e"] == "enter", within=10)
        read = sc.wait_record(reader, lambda r: r["e"] == "enter", within=10)
        delays.append(round((wrote["t"] - killed) / MS))
        assert delays[-1] <= ttl + 200, f"{lang} reader killed: the writer entered after {delays[-1]} ms"
        assert wrote["t"] < read["t"], "the reader behind the writer entered first"
    sc.finish(within=20)
    assert_clean(
        sc,
        "read-write lock: SIGKILL of a reader (py, node, cli), a writer then a reader waiting",
        {"lease ms": ttl, "writer entered after the kill, ms": delays},
    )


@pytest.mark.parametrize("side", ["read", "write"])
def test_rwlock_sigstop_past_the_lease_then_sigcont_is_fenced_and_told_lost(scenario: Scenario, side: str) -> None:
    """A reader (or a writer) of each runtime in turn, frozen past its lease
    while a writer of another runtime waits and, behind it, a reader of the
    third: the writer enters while it is frozen, with a larger token (the
    storage refuses a frozen writer's writes from then on), and the frozen
    holder is told "lost" as soon as it runs."""
    sc = scenario
    ttl, frozen = 500, 1.2
    entered_after, told_after = [], []
    for lang in LANGS:
        victim, entered, writer, _ = writer_then_reader(sc, lang, f"paused-{side}", ttl, kind=side, step_ms=2)
        sc.pause(victim, frozen)
        stopped, resumed = sc.events[-2]["t"], sc.events[-1]["t"]
        lost = sc.wait_record(victim, lambda r: r["e"] == "lost", within=5)
        wrote = sc.wait_record(writer, lambda r: r["e"] == "enter", within=5)
        entered_after.append(round((wrote["t"] - stopped) / MS))
        told_after.append(round((lost["t"] - resumed) / MS))
        assert wrote["t"] < resumed and wrote["tok"] > entered["tok"], f"{lang} {side}: no newer writer while frozen"
        assert told_after[-1] < 250, f"{lang} {side} told lost {told_after[-1]} ms after SIGCONT"
    sc.finish(within=20)
    assert_clean(
        sc,
        f"read-write lock: SIGSTOP of a {side[:4]}er past its lease, then SIGCONT (py, node, cli)",
        {
            "lease ms": ttl,
            "frozen ms": int(frozen * 1000),
            "writer entered after SIGSTOP, ms": entered_after,
            "told lost after SIGCONT, ms": told_after,
        },
    )


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_semaphore_permit_of_a_killed_or_frozen_holder_comes_back_within_its_lease(
    scenario: Scenario, fault: str
) -> None:
    """A semaphore of 2 permits, held by a holder of each runtime in turn
    and one of another runtime, with one of the third waiting. The first is
    killed outright, or frozen (SIGSTOP) past its lease: its permit comes
    back within lease + 200 ms and the waiter enters (never more than 2
    holders believing, but for a frozen one); a frozen holder is told
    "lost" as soon as it runs again."""
    sc = scenario
    ttl, frozen = 500, 1.2
    entered_after, told_after = [], []
    for lang in LANGS:
        steady_lang, waiter_lang = others(lang)
        name = sc.lock_name(f"{fault}-permit-{lang}")
        release = os.path.join(sc.dir, f"release-{lang}")
        common = {"names": [name], "ttl_ms": ttl, "rounds": 1, "kind": "semaphore", "permits": 2}
        victim = sc.worker(lang, **common, hold_ms=[60_000, 60_000], step_ms=2)
        steady = sc.worker(steady_lang, **common, until_file=release)
        sc.go(victim, steady)
        for w in (victim, steady):
            sc.wait_record(w, lambda r: r["e"] == "enter", within=10)
        waiter = sc.worker(waiter_lang, **common, timeout_ms=5000, hold_ms=[20, 60])
        sc.go(waiter)
        wait_in_line(sc, shared_key(name, "semaphore"), 1)
        time.sleep(ttl / 1000 * 0.5)  # an arbitrary point of the renewal cycle
        if fault == "SIGKILL":
            sc.kill(victim)
        else:
            sc.pause(victim, frozen)
            lost = sc.wait_record(victim, lambda r: r["e"] == "lost", within=5)
            told_after.append(round((lost["t"] - sc.events[-1]["t"]) / MS))
            assert told_after[-1] < 250, f"{lang} holder told lost {told_after[-1]} ms after SIGCONT"
        struck = next(e["t"] for e in reversed(sc.events) if e["e"] in ("kill", "stop"))
        entered = sc.wait_record(waiter, lambda r: r["e"] == "enter", within=5)
        open(release, "w").close()
        entered_after.append(round((entered["t"] - struck) / MS))
        assert entered_after[-1] <= ttl + 200, f"{lang} holder {fault}: the waiter entered after {entered_after[-1]} ms"
    sc.finish(within=20)
    assert_clean(
        sc,
        f"semaphore (2 permits): {fault} of a permit holder (py, node, cli), one waiting",
        {
            "lease ms": ttl,
            **({"frozen ms": int(frozen * 1000)} if fault == "SIGSTOP" else {}),
            f"waiter entered after {fault}, ms": entered_after,
            **({"told lost after SIGCONT, ms": told_after} if told_after else {}),
        },
    )


def most_inside(records: List[Dict[str, Any]], kind: str) -> int:
    """The most holders of `kind` inside one lock at once, by their enter and
    exit records."""
    edges = []
    inside: Dict[str, Dict[str, Any]] = {}
    for r in records:
        if r["e"] == "enter" and r.get("kind") == kind:
            inside[r["w"]] = r
        elif r["e"] == "exit" and r["w"] in inside:
            enter = inside.pop(r["w"])
            edges += [(enter["t"], 1, enter["n"]), (r["t"], -1, enter["n"])]
    most: Dict[str, int] = defaultdict(int)
    level: Dict[str, int] = defaultdict(int)
    for _, step, name in sorted(edges):
        level[name] += step
        most[name] = max(most[name], level[name])
    return max(most.values(), default=0)


def test_readers_writers_and_permit_holders_of_every_runtime_through_client_kill(scenario: Scenario) -> None:
    """Python (sync and asyncio), Node and CLI workers take, round after
    round, the read side, the write side or one of 2 permits of two names
    while CLIENT KILL drops every client connection (commands and pub/sub)
    again and again: the shared scripts retry, waiters are not stranded,
    never a writer beside anyone, never more than 2 permit holders."""
    sc = scenario
    names = [sc.lock_name("shared-a"), sc.lock_name("shared-b")]
    kinds = ["read", "read", "write", "semaphore"]
    contend(sc, names, for_ms=2500, ttl_ms=1000, hold_ms=[30, 150], timeout_ms=4000, kind=kinds, permits=2)

    def kill(i: int) -> None:
        kind = ["normal", "pubsub"][i % 2]
        sc.event("client-kill", kind=kind, dropped=sc.server.redis.client_kill_filter(_type=kind, skipme=True))

    kills = repeatedly(0.15, 2.0, kill)
    sc.finish(within=30)
    records = sc.records()
    entered = {kind: sum(1 for r in records if r["e"] == "enter" and r.get("kind") == kind) for kind in set(kinds)}
    assert all(entered.values()), f"holdings by kind: {entered}"
    assert_clean(
        sc,
        "read-write locks and semaphores (2 permits) through CLIENT KILL every 150 ms",
        {
            "CLIENT KILLs": kills,
            "holdings by kind": dict(sorted(entered.items())),
            "most readers inside at once (by enter and exit)": most_inside(records, "read"),
            "most permit holders inside at once (by enter and exit)": most_inside(records, "semaphore"),
        },
    )
