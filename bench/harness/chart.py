"""results.png: S1's cycles and S2's handoffs of a run in four panels,
below them the semaphore (S8) and the read-write lock (S9) in four more,
and `cached` (S10) in four more below those."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List

from .contenders import LANGS, kind_of, label_of
from .scenarios import read_write as s9
from .scenarios import semaphore_handoff as s8

med = statistics.median


def chart(r: Dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    more = "s8_summary" in r and "s9_summary" in r
    rows = 1 + more + ("s10" in r)
    fig, grid = plt.subplots(rows, 4, figsize=(21, 6.5 * rows), squeeze=False,
                             gridspec_kw={"width_ratios": [1.2, 1, 1, 1]})
    axes = grid[0]
    uncontended_cycle(axes[0], r, "mutex", "S1 uncontended cycle (grey: bare floor)")
    s2s = r["s2_summary"]
    keys = list(s2s)
    colors = ["#d62728" if k.endswith("/rlock") else "#8c1a1a" if k.endswith("/rlock-fair")
              else "#1f77b4" for k in keys]
    handoffs(axes[1], s2s, keys, colors)
    handoff_gap(axes[2], s2s, keys)
    longest_wait(axes[3], s2s, keys, colors)
    if more:
        semaphore_and_read_write(grid[1], r)
    if "s10" in r:
        cached(grid[-1], r["s10"])
    fig.suptitle(f"redis-rlock benchmark, {r['date']} — {r['machine']['cores']} cores, shared machine "
                 f"(others used {r['others_cores']:.2f} cores on average)", fontsize=11)
    fig.tight_layout()
    # tight: the rightmost panels stay whole whatever the length of the labels on the left.
    fig.savefig(path, dpi=110, bbox_inches="tight")


def uncontended_cycle(ax: Any, r: Dict[str, Any], kind: str, title: str) -> None:
    s1s = r["s1_summary"]
    keys = [k for k in r["s1"]["items"] if kind_of(k) == kind]
    meds = [med(s1s[k]["median_per_round"]) for k in keys]
    colors = ["#888888" if k.endswith("/floor") else "#bbbbbb" if k.endswith("-replay")
              else "#d62728" if k.endswith("rlock") else "#1f77b4" for k in keys]
    ax.barh([label_of(k) for k in keys], meds, color=colors)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs per acquire + release (median of blocks, log)")
    ax.set_title(title)
    for i, k in enumerate(keys):
        if not k.endswith("/floor"):
            ax.text(meds[i], i, f" {med(s1s[k]['ratio_to_floor']):.2f}× floor",
                    va="center", fontsize=8)


def s2_axis(ax: Any, keys: List[str], names: bool = False, log: bool = True) -> None:
    """One row per contender, named on the first panel of a row only, on a log scale
    unless told otherwise."""
    y = list(range(len(keys)))
    ax.set_yticks(y)
    ax.set_yticklabels([label_of(k) for k in keys] if names else [])
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")


def handoffs(ax: Any, s2s: Dict[str, Any], keys: List[str], colors: List[str]) -> None:
    ax.barh(range(len(keys)), [med(s2s[k]["cross_per_s"]) for k in keys], color=colors)
    s2_axis(ax, keys, names=True)
    ax.set_xlabel("per second (median of blocks, log)")
    ax.set_title("S2: handoffs to another worker")


def handoff_gap(ax: Any, s2s: Dict[str, Any], keys: List[str]) -> None:
    y = range(len(keys))
    ax.barh([i - 0.2 for i in y], [s2s[k]["gap_p50"] for k in keys], height=0.4, label="p50",
            color="#2ca02c")
    ax.barh([i + 0.2 for i in y], [s2s[k]["gap_p99"] for k in keys], height=0.4, label="p99",
            color="#ff7f0e")
    s2_axis(ax, keys)
    ax.axvline(1, color="#2ca02c", ls=":", lw=1)
    ax.axvline(5, color="#ff7f0e", ls=":", lw=1)
    ax.set_xlabel("ms, release() to the next worker's acquire (log)")
    ax.set_title("S2: handoff gap (dotted: targets)")
    ax.legend(loc="lower right")


def longest_wait(ax: Any, s2s: Dict[str, Any], keys: List[str], colors: List[str]) -> None:
    ax.barh(range(len(keys)), [s2s[k]["longest_wait_ms"] for k in keys], color=colors)
    s2_axis(ax, keys)
    ax.axvline(50, color="black", ls=":", lw=1)
    ax.set_xlabel("ms (log; dotted: the 50 ms target)")
    ax.set_title("S2: longest single wait")


def semaphore_and_read_write(axes: Any, r: Dict[str, Any]) -> None:
    uncontended_cycle(axes[0], r, "sem", "S8 semaphore, uncontended cycle")
    s8s = r["s8_summary"]
    keys = list(s8s)
    colors = ["#d62728" if k.endswith("rlock") else "#1f77b4" for k in keys]
    axes[1].barh(range(len(keys)), [med(s8s[k]["acq_per_s"]) for k in keys], color=colors)
    s2_axis(axes[1], keys, names=True, log=False)
    axes[1].set_xlabel("per second (median of blocks)")
    axes[1].set_title(f"S8 semaphore, {s8.WORKERS} processes: handoffs")
    s9s = r["s9_summary"]
    faces = [LANGS[lang] for lang in LANGS]
    read_write_pairs(axes[2], faces, [[med(s9s[s9.row_key(lang, m)]["reader_acq_per_s"]) for lang in LANGS]
                                      for m in ("rw", "mutex")])
    axes[2].set_xlabel("reader acquisitions per second (median of blocks)")
    axes[2].set_title(f"S9: {s9.READERS} readers")
    read_write_pairs(axes[3], faces, [[s9s[s9.row_key(lang, m)]["writer_longest_wait_ms"] for lang in LANGS]
                                      for m in ("rw", "mutex")])
    axes[3].axvline(50, color="black", ls=":", lw=1)
    axes[3].set_xlabel("ms (dotted: the 50 ms target)")
    axes[3].set_title("S9: the writer's longest wait")


def read_write_pairs(ax: Any, faces: List[str], values: List[List[float]]) -> None:
    """One pair of bars per face: the read-write lock, then one mutex."""
    y = range(len(faces))
    ax.barh([i - 0.2 for i in y], values[0], height=0.4, label="read-write lock", color="#d62728")
    ax.barh([i + 0.2 for i in y], values[1], height=0.4, label="one mutex", color="#888888")
    ax.set_yticks(list(y))
    ax.set_yticklabels(faces)
    ax.invert_yaxis()
    ax.legend(loc="lower right")


def cached(axes: Any, s10s: Dict[str, Any]) -> None:
    keys = list(s10s)
    colors = ["#d62728" if "rlock" in k else "#1f77b4" for k in keys]
    y = range(len(keys))
    expiry = [s10s[k]["expiry"] for k in keys]
    axes[0].barh(y, [e["loader_calls"] / max(e["expiries"], 1) for e in expiry], color=colors)
    axes[0].plot([max(e["calls_per_expiry"], default=0) for e in expiry], list(y), "k|", ms=14,
                 label="most in one expiry")
    s2_axis(axes[0], keys, names=True, log=False)
    axes[0].axvline(1, color="black", ls=":", lw=1)
    axes[0].set_xlabel("loader calls per expiry (dotted: the target, 1)")
    axes[0].set_title("S10 cached: loader calls per expiry")
    axes[0].legend(loc="lower right")
    axes[1].barh(y, [100 * e["waited"] / max(e["reads"], 1) for e in expiry], color=colors)
    s2_axis(axes[1], keys, log=False)
    axes[1].set_xlabel("% of the reads across expiries")
    axes[1].set_title("S10: reads that waited for a loader")
    axes[2].barh([i - 0.2 for i in y], [e["p99_ms"] for e in expiry], height=0.4,
                 label="across an expiry", color="#ff7f0e")
    axes[2].barh([i + 0.2 for i in y], [e["between_p99_ms"] for e in expiry], height=0.4,
                 label="between expiries", color="#888888")
    s2_axis(axes[2], keys)
    axes[2].set_xlabel("ms (log)")
    axes[2].set_title("S10: reader p99")
    axes[2].legend(loc="lower right")
    cold = [s10s[k]["cold"] for k in keys]
    axes[3].barh(y, [c["loader_calls"] for c in cold], color=colors)
    s2_axis(axes[3], keys)
    axes[3].axvline(cold[0]["keys"], color="black", ls=":", lw=1)
    axes[3].set_xlabel(f"loader calls (log; dotted: {cold[0]['keys']:,}, one per key)")
    axes[3].set_title(f"S10: cold start, {cold[0]['keys']:,} keys × {cold[0]['processes']} processes")
