"""A whole run, in order: the machine, the scenarios on one server, Redlock
on its own servers, then the targets, RESULTS.md, results.png and the raw
figures (bench/.out/results.json)."""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any, Dict, List

from .chart import chart
from .contenders import CONTENDED, IDLE, LANGS, PERMITS, redlock_faces_exist
from .log import log
from .machine import OthersLoad, machine, versions
from .paths import OUT, RESULTS_JSON, RESULTS_MD, RESULTS_PNG
from .processes import Worker, close_all, worker_pools
from .profile import Profile
from .prose import sentence
from .report import cached as cached_section
from .report import write_report
from .scenarios import cached as s10
from .scenarios import in_process_handoff as s7
from .scenarios import read_write as s9
from .scenarios import semaphore_handoff as s8
from .scenarios import uncontended_cycle as s1
from .scenarios.contended_handoff import contended_handoff
from .scenarios.handoffs import summarise_all
from .scenarios.idle_waiters import idle_waiters
from .scenarios.plain_round_trip import plain_round_trip
from .scenarios.redlock import redlock
from .scenarios.counting_cost import counting_cost
from .scenarios.runtime_hops import runtime_hops
from .scenarios.watchdog_scale import watchdog_scale
from .server import BenchServer
from .targets import Targets
from .targets import cached as cached_targets
from .targets import targets

Result = Dict[str, Any]


def run(p: Profile, skip_redlock: bool) -> None:
    os.makedirs(OUT, exist_ok=True)
    random.seed()
    started = time.monotonic()
    log("measuring the machine before the run")
    result: Result = {"quick": p.quick, "date": time.strftime("%Y-%m-%d %H:%M %Z"),
                      "machine": machine(), "versions": versions()}
    others = OthersLoad()
    server = BenchServer()
    try:
        pools = worker_pools(list(LANGS), [server.url], size=s8.WORKERS)
        try:
            measure_with_workers(result, server, pools, p)
        finally:
            close_all(pools)
        measure_alone(result, server, p)
    finally:
        server.stop()
    measure_redlock(result, p, skip_redlock)
    result["others_cores"] = others.cores()
    result["load_after"] = os.getloadavg()
    elapsed = time.monotonic() - started
    result["duration_s"] = elapsed
    result["targets"] = targets(result)
    write_outputs(result)
    log(f"done in {elapsed / 60:.1f} min: bench/RESULTS.md, bench/results.png")
    print_targets(result)


def measure_with_workers(result: Result, server: BenchServer, pools: Dict[str, List[Worker]],
                         p: Profile) -> None:
    """S1 (S8's uncontended cycle with it), S5, S2, S3, S7, S8 and S9, with the
    round trip of a plain command at the start, after S1 and at the end."""
    result["redis_benchmark"] = [plain_round_trip(server.port, p.round_trip_requests)]
    first = {lang: ws[0] for lang, ws in pools.items()}
    log("S1 + S5: uncontended cycles")
    result["s1"] = s1.uncontended_cycle(server, first, p.s1_rounds, p.s1_block)
    result["s1_summary"] = s1.summarise(result["s1"])
    result["s5"] = s1.face_overhead(result["s1"]["s5"])
    result["redis_benchmark"].append(plain_round_trip(server.port, p.round_trip_requests))
    log("S5: the core's cycle from a plain thread over several runtimes")
    result["hops"] = runtime_hops(server, p.hops_rounds, p.hops_cycles)
    result["counting_ns"] = counting_cost(p.hops_rounds)

    log("S2 + S3: contended handoff")
    # Fair mode: beside the targets, not one of them.
    fair = [(lang, "rlock-fair") for lang in LANGS]
    result["s2_rounds"], result["s2_seconds"] = p.s2_rounds, p.s2_seconds
    s2 = contended_handoff(pools, CONTENDED + fair, p.s2_rounds, p.s2_seconds)
    result["s2_summary"] = summarise_all(s2)
    result["s2_blocks"] = s2

    log("S7: handoff inside one process")
    result["s7_rounds"], result["s7_seconds"] = p.s7_rounds, p.s7_seconds
    result["s7_blocks"] = s7.in_process_handoff(first, p.s7_rounds, p.s7_seconds)
    result["s7_summary"] = s7.summarise(result["s7_blocks"])

    log(f"S8: semaphore of {PERMITS} permits, {s8.WORKERS} processes")
    result["s8_rounds"], result["s8_seconds"] = p.s8_rounds, p.s8_seconds
    result["s8_blocks"] = s8.semaphore_handoff(pools, p.s8_rounds, p.s8_seconds)
    result["s8_summary"] = s8.summarise(result["s8_blocks"])

    log(f"S9: read-write lock, {s9.READERS} readers and a writer, against one mutex")
    result["s9_rounds"], result["s9_seconds"] = p.s9_rounds, p.s9_seconds
    result["s9_blocks"] = s9.read_write(pools, p.s9_rounds, p.s9_seconds)
    result["s9_summary"] = s9.summarise(result["s9_blocks"])
    server.redis.flushall()
    result["redis_benchmark"].append(plain_round_trip(server.port, p.round_trip_requests))


def measure_alone(result: Result, server: BenchServer, p: Profile) -> None:
    """S10, the idle waiters and S4, each in processes of its own, once the workers are gone."""
    measure_cached(result, server, p)
    log("idle waiters")
    result["idle_waiters"], result["idle_settle"], result["idle_window"] = \
        p.idle_waiters, p.idle_settle, p.idle_window
    result["idle"] = {}
    for lang, contender in IDLE:
        result["idle"][f"{lang}/{contender}"] = idle_waiters(
            server, lang, contender, p.idle_waiters, p.idle_settle, p.idle_window)
    log("S4: watchdog scale")
    result["s4"] = watchdog_scale(server, p.s4_locks, p.s4_ttl_ms, p.s4_seconds)


def measure_cached(result: Result, server: BenchServer, p: Profile) -> None:
    log(f"S10: cached, {s10.PROCESSES} processes × {s10.READERS} readers on one hot key")
    result["s10_expiry_seconds"] = p.s10_expiry_seconds
    result["s10"] = s10.cached(server, p.s10_expiry_seconds)


def run_cached_only(p: Profile) -> None:
    """S10 alone on a server of its own, its section and targets printed (a
    check while working on it: RESULTS.md stays the last whole run's)."""
    os.makedirs(OUT, exist_ok=True)
    result: Result = {}
    server = BenchServer()
    try:
        measure_cached(result, server, p)
    finally:
        server.stop()
    with open(os.path.join(OUT, "cached.json"), "w") as f:
        json.dump(result, f)
    print("\n".join(cached_section(result)))
    t = Targets()
    cached_targets(t, result)
    result["targets"] = list(t)
    print_targets(result)


def measure_redlock(result: Result, p: Profile, skip: bool) -> None:
    if skip:
        result["s6_note"] = sentence("s6-skipped")
        return
    missing = redlock_faces_exist()
    if missing:
        result["s6_note"] = sentence("s6-not-run", reason=missing)
        log(f"S6 skipped: {missing}")
        return
    log("S6: Redlock over 3 and 5 servers")
    result["s6_note"] = sentence("s6-method")
    result["s6"] = redlock(list(p.s6_sizes), p.s6_rounds, p.s6_block, p.s6_s2_rounds,
                           p.s6_s2_seconds)


def write_outputs(result: Result) -> None:
    with open(RESULTS_JSON, "w") as f:
        json.dump(result, f)
    write_report(result, RESULTS_MD)
    chart(result, RESULTS_PNG)


def print_targets(result: Result) -> None:
    for t in result["targets"]:
        print(f"  {'ok  ' if t['ok'] else 'MISS'} {t['scenario']} {t['target']}: {t['figure']}")


def report_again() -> None:
    """The report of the last run, its summaries and targets worked out again
    from its raw figures (after a change to how they are summarised)."""
    with open(RESULTS_JSON) as f:
        result = json.load(f)
    result["s2_summary"] = summarise_all(result["s2_blocks"])
    if "s7_blocks" in result:
        result["s7_summary"] = s7.summarise(result["s7_blocks"])
    if "s8_blocks" in result:
        result["s8_summary"] = s8.summarise(result["s8_blocks"])
    if "s9_blocks" in result:
        result["s9_summary"] = s9.summarise(result["s9_blocks"])
    result["targets"] = targets(result)
    result["rewritten"] = time.strftime("%Y-%m-%d %H:%M %Z")
    write_outputs(result)
    print_targets(result)
