"""S5, where a sync binding's time goes."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict, List

from ..paths import RUST_BIN
from ..server import BenchServer


def runtime_hops(server: BenchServer, rounds: int, cycles: int) -> List[Dict[str, Any]]:
    """Where a sync binding's time goes: `rlock-bench hops` runs the core's cycle
    from a plain thread over differently built runtimes, interleaved."""
    out = subprocess.run([RUST_BIN, "hops", server.url, str(rounds), str(cycles)],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()]
