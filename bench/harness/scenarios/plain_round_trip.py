"""redis-benchmark's round trip of one plain command: the floor under every
lock cycle, measured at three points of the run."""

from __future__ import annotations

import subprocess
from typing import Dict


def plain_round_trip(port: int, n: int) -> Dict[str, Dict[str, float]]:
    """One client, no pipelining: the round-trip floor of a plain command."""
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "1", "-n", str(n),
         "-t", "ping,set", "--csv"],
        capture_output=True, text=True, check=True,
    ).stdout
    rows = [l.replace('"', "").split(",") for l in out.strip().splitlines()]
    head, body = rows[0], rows[1:]
    return {r[0]: {h: float(v) for h, v in zip(head[1:], r[1:])} for r in body}
