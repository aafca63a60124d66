"""What a block of lock handoffs shows, from the (asked, acquired, released)
timestamps of every acquisition: the rates, the gaps between one holder's
release and the next one's acquire, fairness between holders, and (S3)
whether two critical sections ever overlapped. Used by S2, S6 and S7."""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

from ..stats import pct


def analyse_block(per_worker: List[List[List[int]]], start: int, end: int, counter: int,
                  errors: int) -> Dict[str, Any]:
    """`per_worker`: each holder's [asked, acquired, released] records; `counter`:
    the shared non-atomic counter after the block."""
    recs = sorted(((w, *r) for w, rs in enumerate(per_worker) for r in rs), key=lambda r: r[2])
    # S3: ordered by acquisition, each critical section must end before the next begins.
    overlaps = sum(1 for a, b in zip(recs, recs[1:]) if b[2] < a[3])
    window = [r for r in recs if start <= r[2] <= end]
    secs = (end - start) / 1e9
    cross_gaps, same = [], 0
    for a, b in zip(window, window[1:]):
        if a[0] == b[0]:
            same += 1
        else:
            cross_gaps.append((b[2] - a[3]) / 1e6)  # release called -> next holder acquired, ms
    per_worker_count = Counter(r[0] for r in window)
    counts = [per_worker_count.get(w, 0) for w in range(len(per_worker))]
    waits = [(r[2] - r[1]) / 1e6 for r in recs if r[1] < end]
    pairs = max(len(window) - 1, 1)
    return {
        "acquisitions": len(window),
        "acq_per_s": len(window) / secs,
        "cross_per_s": len(cross_gaps) / secs,
        "cross_gaps_ms": cross_gaps,
        "same_share": same / pairs,
        "max_per_worker": max(counts),
        "min_per_worker": min(counts),
        "longest_wait_ms": max(waits) if waits else float("nan"),
        "wait_p50_ms": pct(waits, 50),
        "counter": counter,
        "total_acquisitions": len(recs),
        "overlaps": overlaps,
        "errors": errors,
    }


def summarise(blocks: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One contender's blocks, over all rounds."""
    gaps = [g for b in blocks for g in b["cross_gaps_ms"]]
    return {
        "acq_per_s": [b["acq_per_s"] for b in blocks],
        "cross_per_s": [b["cross_per_s"] for b in blocks],
        "gap_p50": pct(gaps, 50),
        "gap_p99": pct(gaps, 99),
        "gap_p50_rounds": [pct(b["cross_gaps_ms"], 50) for b in blocks],
        "gap_p99_rounds": [pct(b["cross_gaps_ms"], 99) for b in blocks],
        "same_share": [b["same_share"] for b in blocks],
        # Within a block, where every worker had the same time and machine:
        # across blocks the machine's speed changes, not the lock's fairness.
        "worker_spread": [b["max_per_worker"] / max(b["min_per_worker"], 1) for b in blocks],
        "max_per_worker": max(b["max_per_worker"] for b in blocks),
        "min_per_worker": min(b["min_per_worker"] for b in blocks),
        "longest_wait_ms": max(b["longest_wait_ms"] for b in blocks),
        "counter_ok": all(b["counter"] == b["total_acquisitions"] for b in blocks),
        "counter": sum(b["counter"] for b in blocks),
        "acquisitions_total": sum(b["total_acquisitions"] for b in blocks),
        "overlaps": sum(b["overlaps"] for b in blocks),
        "errors": sum(b["errors"] for b in blocks),
    }


def summarise_all(blocks: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
    return {k: summarise(v) for k, v in blocks.items()}
