"""When a waiter had room, and the promises of a wait every suite keeps: it
ends; a timed-out wait ends by its deadline; and it never waits through a
stretch, longer than its suite's bound, when the lock had room for it."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from rlock_test_support.report import Report
from rlock_test_support.spans import MS, longest_free, merge

from .records import Holding, Waiting
from .room import over

# A wait that gives up earlier than its deadline by more than this is early.
EARLY_MS = 20
ROOM = {"mutex": "", "read": " to readers", "write": " to writers", "semaphore": " to a permit holder"}


def no_room(w: Waiting, held: Sequence[Tuple[int, int, Holding]], waits: Sequence[Waiting]) -> List[Tuple[int, int]]:
    """When `w` had no room, merged, given the spans its lock was held
    (`held`: from, until, by which holding) and every wait: a mutex's or a
    writer's waiter while anyone held; a reader while a writer held or waited
    (writers go first); a permit waiter while the permits held and those asked
    by the waiters before it in the line (served in order) left too few."""
    others = [v for v in waits if v is not w and v.lock == w.lock]
    never = max([hi for _, hi, _ in held] + [v.end or 0 for v in others] + [w.end or 0]) + 1

    def until(v: Waiting) -> int:
        return v.end if v.end is not None else never

    if w.kind == "read":
        return merge([(lo, hi) for lo, hi, s in held if s.side == "write"]
                     + [(v.start, until(v)) for v in others if v.side == "write"])
    if w.kind == "semaphore":
        load = [(lo, hi, s.take) for lo, hi, s in held]
        load += [(v.start, until(v), v.take) for v in others if v.start < w.start]
        return over(load, w.permits - w.take)
    return merge([(lo, hi) for lo, hi, _ in held])


def ended(w: Waiting, report: Report, tag: str = "") -> bool:
    """Counts the wait; whether it ended (a wait that never did fails)."""
    report.count("waits")
    if w.end is None:
        report.fail(f"{tag}{w.owner}'s wait for {w.name!r} never ended" if w.name else f"{tag}{w.owner}'s wait never ended")
        return False
    if w.out is not None and w.out.startswith("error"):
        report.count("waits ended by an error")
    return True


def judge_timeout(w: Waiting, late_ms: float, report: Report, tag: str = "") -> None:
    """A wait that timed out had a timeout, and ended no earlier than its
    deadline and at most `late_ms` after it."""
    if w.out != "timeout" or w.end is None:
        return
    report.count("timeouts")
    on = f" on {w.name!r}" if w.name else ""
    if w.timeout_ms is None:
        report.fail(f"{tag}{w.owner} timed out{on} with no timeout set")
        return
    waited_ms = (w.end - w.start) / MS
    report.peak("max timeout overshoot ms", waited_ms - w.timeout_ms)
    if waited_ms > w.timeout_ms + late_ms:
        report.fail(f"{tag}{w.owner} gave up{on} {waited_ms - w.timeout_ms:.0f} ms past its deadline")
    if waited_ms < w.timeout_ms - EARLY_MS:
        report.fail(f"{tag}{w.owner} gave up{on} after {waited_ms:.0f} ms of {w.timeout_ms} ms")


def free_stretch(w: Waiting, busy: List[Tuple[int, int]], report: Report) -> Optional[Tuple[int, int]]:
    """The longest stretch a wait that ended with the lock or its deadline
    saw the lock with room for it (None for other ends), its peak recorded."""
    if w.out not in ("acquired", "timeout") or w.end is None:
        return None
    lo, hi = longest_free(busy, w.start, w.end)
    report.peak("max free while waiting ms", (hi - lo) / MS)
    return lo, hi


def judge_free(w: Waiting, gap_ms: float, bound_ms: float, report: Report, tag: str = "", why: str = "") -> None:
    """A wait saw its lock with room for it no longer than `bound_ms` at a stretch."""
    margin = report.figures.get("closest wait to its bound ms")
    if margin is None or gap_ms - bound_ms > margin:
        report.figures["closest wait to its bound ms"] = round(gap_ms - bound_ms, 1)
    if gap_ms > bound_ms:
        on = f" for {w.name!r}" if w.name else ""
        report.fail(f"{tag}{w.owner} waited{on} through {gap_ms:.0f} ms while the lock was free{ROOM[w.kind]}"
                    f"{why}")
