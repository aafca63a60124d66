"""Verifies a fault scenario after the fact, from what every worker recorded
(see worker.py), what the suite did (kills, pauses, restarts) and what the
fenced storage accepted. All stamps are CLOCK_MONOTONIC nanoseconds.

A holder *believes* it holds the lock at each `step` stamp: the stamp is taken
before the holder asks whether it was told the lease ended, and the answer was
no. The promises checked, per lock name:

1. Exclusion: no holder enters while another still believes it holds the lock.
   Allowed, and counted: the earlier holder was told "lost" before the later
   one entered (it no longer believes); the earlier holder was paused (SIGSTOP)
   when the later one entered (it cannot know; fencing must stop it); the
   server lost its data (a restart without persistence: not guaranteed).
2. Fencing: tokens strictly increase in the order holders entered (within one
   server lifetime), and the storage accepted no write from a holder after a
   newer holder had entered. A Redlock promises no token order (each master
   counts on its own): with `fencing=False` tokens out of order are only
   counted.
3. Honest loss: a holder whose lease ended while it still ran (someone else
   entered, or the data was lost) was told so; one told so also got "lost"
   when it let go.
4. Waiting: a wait that timed out ended by its deadline (not early, not more
   than `late_ms` after), and no waiter waited through a stretch of more than
   its lease (+ 5% jitter) + `free_ms` while the lock was free: a release
   message wakes waiters at once, and a waiter that missed it retries when the
   lease it last saw would end. Stretches over `free_ms` are counted as slow
   handoffs. A killed holder keeps its lock at most its lease after death; a
   paused one at most its lease after the pause.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from rlock_test_support.report import Report
from rlock_test_support.spans import MS, longest_free, merge


@dataclass
class Section:
    worker: str
    name: str
    token: Optional[int]
    enter: int
    ttl_ms: float
    steps: List[int] = field(default_factory=list)
    since: int = 0  # when the lock may have been taken, at the earliest (busy from then)
    lost: Optional[int] = None  # when the holder was told (first seen)
    exit: Optional[int] = None  # after letting go
    out: Optional[str] = None
    killed: Optional[int] = None

    @property
    def believed_until(self) -> int:
        return self.steps[-1] if self.steps else self.enter

    @property
    def told(self) -> bool:
        return self.lost is not None or self.out == "lost"

    def __str__(self) -> str:
        return f"{self.worker}#{self.token}@{self.name}"


@dataclass
class Wait:
    worker: str
    name: str
    start: int
    ttl_ms: float
    end: Optional[int] = None
    out: Optional[str] = None  # acquired | timeout | error:... | killed
    timeout_ms: Optional[float] = None


def build(
    records: Iterable[Dict[str, Any]], workers: Dict[str, Dict[str, Any]], events: Sequence[Dict[str, Any]]
) -> Tuple[List[Section], List[Wait]]:
    """Sections and waits from the records, in each worker's own order."""
    sections: List[Section] = []
    waits: List[Wait] = []
    open_section: Dict[str, Section] = {}
    open_wait: Dict[str, Wait] = {}
    for r in records:
        w, e = r["w"], r["e"]
        cfg = workers[w]
        if e == "wait":
            open_wait[w] = Wait(w, r["n"], r["t"], cfg["ttl_ms"], timeout_ms=cfg.get("timeout_ms"))
            waits.append(open_wait[w])
        elif e == "enter":
            wait = open_wait.pop(w, None)
            if wait is not None:
                wait.end, wait.out = r["t"], "acquired"
            open_section[w] = Section(w, r["n"], r["tok"], r["t"], cfg["ttl_ms"], since=r.get("since", r["t"]))
            sections.append(open_section[w])
        elif e == "step":
            open_section[w].steps.append(r["t"])
        elif e == "lost":
            s = open_section[w]
            s.lost = r["t"] if s.lost is None else min(s.lost, r["t"])
        elif e == "exit":
            s = open_section.pop(w)
            s.exit, s.out = r["t"], r["out"]
        elif e == "waited" and "t0" in r:  # cycles mode: one line per wait
            waits.append(Wait(w, r["n"], r["t0"], cfg["ttl_ms"], r["t"], r["out"], cfg.get("timeout_ms")))
        elif e == "waited":
            wait = open_wait.pop(w)
            wait.end, wait.out = r["t"], r["out"]
        elif e == "cycle":
            waits.append(Wait(w, r["n"], r["t0"], cfg["ttl_ms"], r["t1"], "acquired", cfg.get("timeout_ms")))
            sections.append(
                Section(w, r["n"], r["tok"], r["t1"], cfg["ttl_ms"], [r["t2"]], r["t1"], exit=r["t"], out=r["out"])
            )
    kills = {ev["w"]: ev["t"] for ev in events if ev["e"] == "kill"}
    for w, s in open_section.items():
        s.killed = kills.get(w)
    for w, wait in open_wait.items():
        if w in kills:
            wait.end, wait.out = kills[w], "killed"
    return sections, waits


def check(
    records: Iterable[Dict[str, Any]],
    workers: Dict[str, Dict[str, Any]],
    events: Sequence[Dict[str, Any]],
    writes: Sequence[Any] = (),
    free_ms: float = 200,
    late_ms: float = 200,
    fencing: bool = True,
) -> Report:
    report = Report()
    sections, waits = build(records, workers, events)
    stops = defaultdict(list)
    for ev in events:
        if ev["e"] == "stop":
            stops[ev["w"]].append(ev["t"])
    wipes = sorted(ev["t"] for ev in events if ev["e"] == "wipe")
    blind = [(ev["t0"], ev["t1"]) for ev in events if ev["e"] == "blind"]

    by_name: Dict[str, List[Section]] = defaultdict(list)
    for s in sections:
        by_name[s.name].append(s)
    for s in sections:
        report.count("sections")
        if s.told:
            report.count("losses reported")
        if s.out is None and s.killed is None:
            report.fail(f"{s} never let go (no exit recorded)")
        elif s.out is not None and s.out.startswith("error"):
            report.count("errors reported")
        if s.lost is not None and s.out not in (None, "lost"):
            report.fail(f"{s} was told lost but letting go reported {s.out!r}")

    def paused(s: Section, at: int) -> bool:
        return any(s.enter <= t <= at for t in stops[s.worker])

    def wiped(lo: int, hi: int) -> bool:
        i = bisect.bisect_right(wipes, lo)
        return i < len(wipes) and wipes[i] <= hi

    ended_while_running = set()
    for name, group in by_name.items():
        group.sort(key=lambda s: s.enter)
        # 1. Exclusion: sweep holders by entry, keeping those still believing.
        believing: List[Tuple[int, int, Section]] = []
        for i, b in enumerate(group):
            while believing and believing[0][0] <= b.enter:
                heapq.heappop(believing)
            for _, _, a in believing:
                ended_while_running.add(id(a))
                if paused(a, b.enter):
                    report.count("overlaps with a paused holder")
                elif wiped(a.enter, b.enter):
                    report.count("overlaps after data loss")
                else:
                    report.fail(
                        f"{b} entered while {a} still believed it held {name!r} "
                        f"(until {(a.believed_until - b.enter) / MS:.1f} ms later)"
                    )
            heapq.heappush(believing, (b.believed_until, i, b))
        # Told before the next holder entered: allowed, counted.
        for a, b in zip(group, group[1:]):
            if a.lost is not None and a.lost <= b.enter and (a.exit is None or b.enter < a.exit):
                report.count("overlaps after a reported loss")
            if wiped(a.enter, a.believed_until):
                ended_while_running.add(id(a))
        # 2. Tokens grow in the order of entry, within one server lifetime.
        for a, b in zip(group, group[1:]):
            if a.token is not None and b.token is not None and not b.token > a.token:
                if wiped(a.enter, b.enter):
                    report.count("tokens restarted after data loss")
                elif not fencing:
                    report.count("tokens out of entry order (no fencing promised)")
                else:
                    report.fail(f"{b} entered after {a} with token {b.token} <= {a.token}")

    # 3. A lease that ended while its holder ran was reported to it.
    for s in sections:
        if id(s) in ended_while_running and s.killed is None and not s.told:
            report.fail(f"{s}'s lease ended while it ran, and it was never told (let go with {s.out!r})")

    check_writes(writes, by_name, wiped, report)
    check_waits(waits, by_name, stops, wipes, blind, free_ms, late_ms, report)
    report.figures.setdefault("violations", 0)
    return report


def check_writes(
    writes: Sequence[Any], by_name: Dict[str, List[Section]], wiped: Any, report: Report
) -> None:
    """No write accepted from a holder once a newer holder had entered."""
    enters = {name: [s.enter for s in group] for name, group in by_name.items()}
    owner = {(s.worker, s.name, s.token): s for group in by_name.values() for s in group}
    for w in writes:
        if not w.accepted:
            report.count("stale writes refused")
            continue
        s = owner.get((w.worker, w.name, w.token))
        if s is None:
            report.fail(f"storage accepted token {w.token} on {w.name!r} from {w.worker}, who never held it")
            continue
        later = enters[w.name]
        i = bisect.bisect_right(later, s.enter)
        if i < len(later) and later[i] < w.t:
            if wiped(s.enter, w.t):
                report.count("stale writes accepted after data loss")
            else:
                report.fail(
                    f"storage accepted {s}'s write {(w.t - later[i]) / MS:.1f} ms after a newer holder entered"
                )


def check_waits(
    waits: Sequence[Wait],
    by_name: Dict[str, List[Section]],
    stops: Dict[str, List[int]],
    wipes: List[int],
    blind: List[Tuple[int, int]],
    free_ms: float,
    late_ms: float,
    report: Report,
) -> None:
    busy: Dict[str, List[Tuple[int, int]]] = {}
    for name, group in by_name.items():
        spans = [(min(s.since, s.enter), held_until(s, stops, wipes)) for s in group]
        busy[name] = merge(spans + blind)
    for w in waits:
        report.count("waits")
        if w.end is None:
            report.fail(f"{w.worker}'s wait for {w.name!r} never ended")
            continue
        waited_ms = (w.end - w.start) / MS
        if w.out == "timeout":
            report.count("timeouts")
            if w.timeout_ms is None:
                report.fail(f"{w.worker} timed out on {w.name!r} with no timeout set")
            else:
                report.peak("max timeout overshoot ms", waited_ms - w.timeout_ms)
                if waited_ms > w.timeout_ms + late_ms:
                    report.fail(f"{w.worker} gave up on {w.name!r} {waited_ms - w.timeout_ms:.0f} ms past its deadline")
                if waited_ms < w.timeout_ms - 20:
                    report.fail(f"{w.worker} gave up on {w.name!r} after {waited_ms:.0f} ms of {w.timeout_ms} ms")
        elif w.out is not None and w.out.startswith("error"):
            report.count("waits ended by an error")
        if w.out in ("acquired", "timeout"):
            lo, hi = longest_free(busy.get(w.name, []), w.start, w.end)
            gap = (hi - lo) / MS
            report.peak("max free while waiting ms", gap)
            if gap > free_ms:
                report.count("slow handoffs")
            if gap > w.ttl_ms * 1.05 + free_ms:
                report.fail(f"{w.worker} waited for {w.name!r} through {gap:.0f} ms while it was free")


def held_until(s: Section, stops: Dict[str, List[int]], wipes: List[int]) -> int:
    """The latest the lock may have stayed taken by this holding."""
    lease = int(s.ttl_ms * MS)
    end = s.exit if s.exit is not None else (s.killed + lease if s.killed is not None else s.enter)
    for t in stops[s.worker]:
        if s.enter <= t <= end:
            end = min(end, t + lease)
    i = bisect.bisect_right(wipes, s.enter)
    if i < len(wipes) and wipes[i] < end:
        end = wipes[i]
    return end

