"""S4: one Rust client holds many locks through a proxy that counts round
trips; the watchdog must renew them all in a few round trips per tick."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict, List, Tuple

from ..paths import RUST_BIN
from ..server import BenchServer

# Round trips closer together than this belong to one renewal tick.
TICK_GAP_NS = 200_000_000


def watchdog_scale(server: BenchServer, locks: int, ttl_ms: int, seconds: int) -> Dict[str, Any]:
    proxy = subprocess.Popen([RUST_BIN, "proxy", f"127.0.0.1:{server.port}"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None and proxy.stdin is not None
        port = int(proxy.stdout.readline())
        out = subprocess.run([RUST_BIN, "watchdog", f"redis://127.0.0.1:{port}", str(locks),
                              str(ttl_ms), str(seconds)],
                             capture_output=True, text=True, check=True, timeout=seconds + 120)
        res = json.loads(out.stdout)
        proxy.stdin.write("report\n")
        proxy.stdin.flush()
        trips = json.loads(proxy.stdout.readline())["trips"]
    finally:
        proxy.kill()
        proxy.wait()
        server.redis.flushall()
    t0, t1 = res["window"]
    inside = [(t, n) for t, n in trips if t0 <= t <= t1]
    # Renewal ticks: bursts of round trips separated by quiet time.
    ticks: List[List[Tuple[int, int]]] = []
    for t, n in inside:
        if ticks and t - ticks[-1][-1][0] < TICK_GAP_NS:
            ticks[-1].append((t, n))
        else:
            ticks.append([(t, n)])
    res.update({
        "ticks": len(ticks),
        "trips_per_tick": [len(tk) for tk in ticks],
        "commands_per_tick": [sum(n for _, n in tk) for tk in ticks],
        "cpu_pct": 100 * res["cpu_s"] / res["wall_s"],
    })
    return res
