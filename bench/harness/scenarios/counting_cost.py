"""S5, what the client's counters cost a cycle."""

from __future__ import annotations

import json
import subprocess
from typing import List

from ..paths import RUST_BIN

CYCLES = 1_000_000


def counting_cost(rounds: int) -> List[float]:
    """`rlock-bench counting`: the records one uncontended acquisition and its
    release make in the client's counters (what `stats()` reads), ns per
    cycle, one figure per block of a million."""
    out = subprocess.run([RUST_BIN, "counting", str(rounds), str(CYCLES)],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return json.loads(out)["ns_per_cycle"]
