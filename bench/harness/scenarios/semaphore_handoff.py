"""S8 contended: 16 worker processes of one language, one client each, loop
acquire one permit of a semaphore of PERMITS / hold it HOLD_MS / release.
Four times as many workers as permits, each holding longer than a handoff
takes, keep every permit busy: a permit is wanted the moment it is freed,
and the rate of acquisitions is the rate of handoffs. The uncontended cycle
of S8 runs with S1."""

from __future__ import annotations

import random
import statistics
from typing import Any, Dict, List

from ..contenders import PERMITS, SEMAPHORES, Contender
from ..log import log
from ..processes import Worker
from ..stats import pct
from .blocks import loop_block
from .sections import most_inside, sections

WORKERS = 16
HOLD_MS = 1

Block = Dict[str, Any]


def semaphore_handoff(pools: Dict[str, List[Worker]], rounds: int,
                      seconds: float) -> Dict[str, List[Block]]:
    """Blocks of every semaphore, interleaved in a shuffled order per round."""
    out: Dict[str, List[Block]] = {"/".join(c): [] for c in SEMAPHORES}
    for r in range(rounds):
        order = SEMAPHORES[:]
        random.shuffle(order)
        for item in order:
            res = one_block(pools[item[0]][:WORKERS], item, r, seconds)
            res["round"] = r
            out["/".join(item)].append(res)
        log(f"S8: round {r + 1}/{rounds}")
    return out


def one_block(workers: List[Worker], item: Contender, r: int, seconds: float) -> Block:
    lang, contender = item
    tag = f"{lang}:{contender}:{r}"
    replies, start, end = loop_block(
        [(w, {"contender": contender, "key": f"s8:{tag}", "warm": f"warm:s8:{tag}:{i}",
              "permits": PERMITS, "hold_ms": HOLD_MS}) for i, w in enumerate(workers)], seconds)
    return analyse_block([r["rec"] for r in replies], start, end,
                         sum(r["errors"] for r in replies))


def analyse_block(per_worker: List[List[List[int]]], start: int, end: int, errors: int) -> Block:
    recs = [r for rs in per_worker for r in rs]
    counts = [sum(1 for r in rs if start <= r[1] <= end) for rs in per_worker]
    waits = [(r[1] - r[0]) / 1e6 for r in recs if r[0] < end]
    secs = (end - start) / 1e9
    others = to_other_workers(per_worker, start, end)
    return {
        "acq_per_s": sum(counts) / secs,
        "cross_per_s": others / secs,
        "same_share": 1 - others / max(sum(counts), 1),
        "longest_wait_ms": max(waits) if waits else float("nan"),
        "wait_p50_ms": pct(waits, 50),
        "worker_spread": max(counts) / max(min(counts), 1),
        "most_inside": most_inside(sections(recs, exclusive=False)),
        "in_use": time_inside(recs, start, end) / (end - start),
        "hold_p50_ms": pct([(r[2] - r[1]) / 1e6 for r in recs], 50),
        "errors": errors,
    }


def time_inside(recs: List[List[int]], start: int, end: int) -> int:
    """The critical sections' time within [start, end], added up: over the
    window's length, the permits in use on average (a lower bound: a holding
    begins before `acquire()` returns and ends after `release()` is called)."""
    return sum(max(0, min(r[2], end) - max(r[1], start)) for r in recs)


def to_other_workers(per_worker: List[List[List[int]]], start: int, end: int) -> int:
    """The acquisitions (in the window) by another worker than the one whose
    release was called last before: where a permit went on to another worker,
    not back to the one that just gave it up."""
    events = sorted([(r[2], 0, w) for w, rs in enumerate(per_worker) for r in rs]
                    + [(r[1], 1, w) for w, rs in enumerate(per_worker) for r in rs])
    last_releaser, count = None, 0
    for t, acquiring, w in events:
        if not acquiring:
            last_releaser = w
        elif start <= t <= end and last_releaser not in (None, w):
            count += 1
    return count


def summarise(blocks: Dict[str, List[Block]]) -> Dict[str, Any]:
    return {k: {
        "acq_per_s": [b["acq_per_s"] for b in bs],
        "cross_per_s": [b["cross_per_s"] for b in bs],
        "same_share": [b["same_share"] for b in bs],
        "longest_wait_ms": max(b["longest_wait_ms"] for b in bs),
        "wait_p50_ms": statistics.median(b["wait_p50_ms"] for b in bs),
        "worker_spread": [b["worker_spread"] for b in bs],
        "most_inside": max(b["most_inside"] for b in bs),
        "in_use": [b["in_use"] for b in bs],
        "hold_p50_ms": statistics.median(b["hold_p50_ms"] for b in bs),
        "errors": sum(b["errors"] for b in bs),
    } for k, bs in blocks.items()}
