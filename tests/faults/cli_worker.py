"""A CLI worker of the fault suite: the Rust core through the `rlock` binary.

Each round runs `rlock exec NAME -- python recorder.py`; the recorder is the
critical section (it records enter, steps and lost, see recorder.py), and this
loop records the wait before and the outcome after, from rlock's exit status:
0 released, 70 lost (the recorder got SIGTERM), 75 timed out, 69 Redis
unreachable. Same config and protocol as worker.py; stdlib only, so it and the
recorder start in milliseconds (run with `python -S`). A list `url` becomes
repeated `--url` (a Redlock, or with `cluster: true` a Cluster's seeds, and
`--cluster`); `fair: true` is `--fair`; the kinds "read", "write" and
"semaphore" are `--shared`, `--exclusive` and `--semaphore N`."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from typing import Any, Dict, List

from kinds import choose

HERE = os.path.dirname(os.path.abspath(__file__))
now = time.monotonic_ns
cfg: Dict[str, Any] = json.loads(sys.argv[1])
rng = random.Random(cfg.get("seed"))
OUTCOMES = {0: "released", 70: "lost"}


def rec(**fields: Any) -> None:
    fields["w"] = cfg["id"]
    with open(cfg["records"], "a") as out:
        out.write(json.dumps(fields, separators=(",", ":")) + "\n")


def entered(name: str, since: int) -> bool:
    """Whether the recorder of this round recorded its enter."""
    with open(cfg["records"]) as f:
        return any(
            r.get("e") == "enter" and r["n"] == name and r["t"] >= since
            for r in map(json.loads, f)
        )


def deployment() -> List[str]:
    """The servers and the lock's mode, as rlock's flags."""
    urls = cfg["url"] if isinstance(cfg["url"], list) else [cfg["url"]]
    flags = [arg for url in urls for arg in ("--url", url)]
    if cfg.get("cluster"):
        flags.append("--cluster")
    if cfg.get("fair"):
        flags.append("--fair")
    return flags


def kind_flags(kind: Dict[str, Any]) -> List[str]:
    """The lock of the round's kind, as rlock's flags."""
    k = kind.get("kind", "mutex")
    if k == "semaphore":
        return ["--semaphore", str(kind["permits"])]
    return {"read": ["--shared"], "write": ["--exclusive"]}.get(k, [])


def main() -> None:
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    n = 0
    until = now() + int(cfg.get("for_ms", 1e9) * 1_000_000)
    while n < cfg.get("rounds", 1 << 60) and now() < until:
        n += 1
        name, kind = choose(rng, cfg)
        hold = rng.uniform(*cfg.get("hold_ms", [0, 0]))
        args = [cfg["rlock"], "exec", *deployment(), *kind_flags(kind)]
        args += ["--ttl", str(cfg["ttl_ms"] / 1000), "--grace", "1"]
        if cfg.get("timeout_ms") is not None:
            args += ["--timeout", str(cfg["timeout_ms"] / 1000)]
        recorder = [sys.executable, "-S", "-E", os.path.join(HERE, "recorder.py")]
        env = {
            **os.environ,
            "FAULTS_RECORDER": json.dumps({**cfg, "name": name, "hold": hold, "lock": kind}),
        }
        start = now()
        rec(e="wait", n=name, t=start, **kind)
        code = subprocess.run(args + [name, "--"] + recorder, env=env, stderr=subprocess.PIPE).returncode
        t = now()
        if entered(name, start):
            rec(e="exit", n=name, t=t, out=OUTCOMES.get(code, f"error:exit {code}"))
        else:
            rec(e="waited", n=name, t=t, out="timeout" if code == 75 else f"error:exit {code}")
        lo, hi = cfg.get("gap_ms", [0, 0])
        if hi:
            time.sleep(rng.uniform(lo, hi) / 1000)
    print("done", flush=True)


if __name__ == "__main__":
    main()
