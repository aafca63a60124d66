"""results.png: S1's cycles and S2's handoffs of a run, in four panels."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List

from .contenders import label_of

med = statistics.median


def chart(r: Dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(21, 6.5), gridspec_kw={"width_ratios": [1.2, 1, 1, 1]})
    uncontended_cycle(axes[0], r)
    s2s = r["s2_summary"]
    keys = list(s2s)
    colors = ["#d62728" if k.endswith("/rlock") else "#8c1a1a" if k.endswith("/rlock-fair")
              else "#1f77b4" for k in keys]
    handoffs(axes[1], s2s, keys, colors)
    handoff_gap(axes[2], s2s, keys)
    longest_wait(axes[3], s2s, keys, colors)
    fig.suptitle(f"redis-rlock benchmark, {r['date']} — {r['machine']['cores']} cores, shared machine "
                 f"(others used {r['others_cores']:.2f} cores on average)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def uncontended_cycle(ax: Any, r: Dict[str, Any]) -> None:
    s1s = r["s1_summary"]
    keys = r["s1"]["items"]
    meds = [med(s1s[k]["median_per_round"]) for k in keys]
    colors = ["#888888" if k.endswith("/floor") else "#bbbbbb" if k.endswith("-replay")
              else "#d62728" if k.endswith("/rlock") else "#1f77b4" for k in keys]
    ax.barh([label_of(k) for k in keys], meds, color=colors)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("µs per acquire + release (median of blocks, log)")
    ax.set_title("S1 uncontended cycle (grey: bare floor)")
    for i, k in enumerate(keys):
        if not k.endswith("/floor"):
            ax.text(meds[i], i, f" {med(s1s[k]['ratio_to_floor']):.2f}× floor",
                    va="center", fontsize=8)


def s2_axis(ax: Any, keys: List[str], names: bool = False) -> None:
    """One row per S2 contender, named on the first panel only, on a log scale."""
    y = list(range(len(keys)))
    ax.set_yticks(y)
    ax.set_yticklabels([label_of(k) for k in keys] if names else [])
    ax.invert_yaxis()
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
