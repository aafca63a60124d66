"""Percentiles and the median-with-spread every table reports."""

from __future__ import annotations

import statistics
from typing import Sequence


def pct(values: Sequence[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """Median with its spread: p10–p90 over many rounds, min–max over few."""
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) >= 10:
        lo, hi = pct(values, 10), pct(values, 90)
    else:
        lo, hi = min(values), max(values)
    return f"{fmt.format(med)} ({fmt.format(lo)}–{fmt.format(hi)})"
