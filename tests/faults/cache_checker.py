"""Verifies a fault scenario of `cached` after the fact, from what every
reader recorded (see cache_worker.py), what the suite did (kills, pauses)
and every write of the entries as Redis ran it (see cache_writes.py). All
stamps are CLOCK_MONOTONIC nanoseconds. The promises checked, per key:

1. Fenced writes: in the order Redis ran them, the tokens of the writes that
   landed never go down: no write under an older token lands after one under
   a newer token (the same token again is a write sent again after a lost
   reply). Every write that landed comes from a load under its token.
   Attempts that did not land are counted.
2. One load at a time: loads begin in token order, and one begins while
   another still runs only when that one's worker was killed or paused
   (SIGSTOP) before it began: it could not renew the rebuild lock's lease,
   which may have ended. Counted as takeovers.
3. Values from a rebuild: a value read names the load that made it (worker
   and token); unless the reader's own loader made it, a write of it landed;
   and its token is at least that of every load begun before the read
   began: a waiter gets the rebuild it waited for or a later one, never an
   older value.
4. A clear end in time: every read ends (unless its worker was killed) with
   a value or a clear error, the load it waited for failed
   (`loader-failed`) or `timeout`; one that waited (no value of its own
   loader) ends within its timeout plus `margin_ms`, and a timeout no
   earlier than the timeout itself.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from rlock_test_support.report import Report
from rlock_test_support.spans import MS

from cache_writes import EntryWrite

CLEAR = ("loader-failed", "timeout")


@dataclass
class Read:
    worker: str
    key: str
    start: int
    timeout_ms: Optional[float]
    end: Optional[int] = None
    out: Optional[str] = None  # got | loader-failed | timeout | error:...
    val: Optional[Tuple[str, int]] = None  # the loader's worker and token


@dataclass
class Load:
    worker: str
    key: str
    start: int
    token: int
    done: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.worker}'s load #{self.token} of {self.key!r}"


def build(records: Iterable[Dict[str, Any]], workers: Dict[str, Dict[str, Any]]) -> Tuple[List[Read], List[Load]]:
    """Reads and loads from the records, in each worker's own order."""
    reads: List[Read] = []
    loads: List[Load] = []
    open_read: Dict[str, Read] = {}
    open_load: Dict[str, Load] = {}
    for r in records:
        w, e = r["w"], r["e"]
        if e == "read":
            open_read[w] = Read(w, r["n"], r["t"], workers[w].get("timeout_ms"))
            reads.append(open_read[w])
        elif e == "load":
            open_load[w] = Load(w, r["n"], r["t"], r["tok"])
            loads.append(open_load[w])
        elif e == "loaded":
            open_load.pop(w).done = r["t"]
        elif e in ("got", "failed"):
            read = open_read.pop(w)
            read.end = r["t"]
            if e == "got":
                who, tok = r["val"].rsplit(":", 1)
                read.out, read.val = "got", (who, int(tok))
            else:
                read.out = r["out"]
    return reads, loads


def check_cached(
    records: Iterable[Dict[str, Any]],
    workers: Dict[str, Dict[str, Any]],
    events: Sequence[Dict[str, Any]],
    writes: Sequence[EntryWrite],
    margin_ms: float = 500,
) -> Report:
    report = Report()
    reads, loads = build(records, workers)
    kills = {ev["w"]: ev["t"] for ev in events if ev["e"] == "kill"}
    stops: Dict[str, List[int]] = defaultdict(list)
    for ev in events:
        if ev["e"] == "stop":
            stops[ev["w"]].append(ev["t"])
    by_key: Dict[str, List[Load]] = defaultdict(list)
    for load in loads:
        by_key[load.key].append(load)
    landed = {(w.key, w.token) for w in writes if w.landed}

    check_writes(writes, {(ld.key, ld.token) for ld in loads}, report)
    for group in by_key.values():
        check_loads(sorted(group, key=lambda ld: ld.start), kills, stops, report)
    for read in reads:
        check_read(read, by_key[read.key], landed, kills, margin_ms, report)
    report.figures.setdefault("violations", 0)
    return report


def check_writes(writes: Sequence[EntryWrite], loaded: Set[Tuple[str, int]], report: Report) -> None:
    """1. The tokens of landed writes never go down, per key."""
    top: Dict[str, int] = {}
    tried: Dict[Tuple[str, int], bool] = {}
    for w in writes:
        if not w.landed:
            tried.setdefault((w.key, w.token), False)
            continue
        tried[(w.key, w.token)] = True
        report.count("writes landed")
        if (w.key, w.token) not in loaded:
            report.fail(f"a write under token {w.token} landed in {w.key!r}, which no load had")
        if w.token < top.get(w.key, 0):
            report.fail(f"a write under token {w.token} landed in {w.key!r} after one under {top[w.key]}")
        top[w.key] = max(top.get(w.key, 0), w.token)
    report.count("writes refused", sum(1 for ok in tried.values() if not ok))


def check_loads(group: List[Load], kills: Dict[str, int], stops: Dict[str, List[int]], report: Report) -> None:
    """2. One load at a time, in token order, but for a takeover from a load
    whose worker was killed or paused before it."""
    for i, b in enumerate(group):
        report.count("loads")
        for a in group[:i]:
            if a.token >= b.token:
                report.fail(f"{b} began after {a}, with a token not above it")
            if a.done is not None and a.done <= b.start:
                continue
            if kills.get(a.worker, b.start + 1) <= b.start or any(a.start <= t <= b.start for t in stops[a.worker]):
                report.count("takeovers from a killed or frozen load")
            else:
                report.fail(f"{b} began while {a} still ran")


def check_read(
    read: Read, loads: List[Load], landed: Set[Tuple[str, int]], kills: Dict[str, int], margin_ms: float, report: Report
) -> None:
    """3. and 4.: what one read gave, and when."""
    report.count("reads")
    who = f"{read.worker}'s read of {read.key!r}"
    if read.end is None:
        if read.worker in kills:
            report.count("reads of killed workers")
        else:
            report.fail(f"{who} never ended")
        return
    waited_ms = (read.end - read.start) / MS
    own = read.val is not None and read.val[0] == read.worker
    if read.out == "got" and read.val is not None:
        report.count("values read")
        worker, token = read.val
        if not any(ld.worker == worker and ld.token == token for ld in loads):
            report.fail(f"{who} gave {worker}:{token}, which no load made")
        elif not own and (read.key, token) not in landed:
            report.fail(f"{who} gave {worker}'s value under token {token}, which was never stored")
        seen = max((ld.token for ld in loads if ld.start < read.start), default=0)
        if token < seen:
            report.fail(f"{who} gave a value under token {token}, older than the rebuild #{seen} it waited for")
    elif read.out in CLEAR:
        report.count(read.out)
    else:
        report.fail(f"{who} ended with an unclear error: {read.out}")
    if own:
        return  # its own loader's time is its caller's: no timeout bounds it
    report.peak("max wait ms", waited_ms)
    if read.timeout_ms is None:
        return
    report.peak("max past the timeout ms", waited_ms - read.timeout_ms)
    if waited_ms > read.timeout_ms + margin_ms:
        report.fail(f"{who} ended {waited_ms - read.timeout_ms:.0f} ms past its timeout of {read.timeout_ms} ms")
    if read.out == "timeout" and waited_ms < read.timeout_ms - 20:
        report.fail(f"{who} timed out after {waited_ms:.0f} ms of {read.timeout_ms} ms")
