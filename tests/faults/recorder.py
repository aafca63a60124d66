"""The command a CLI worker runs under `rlock exec`: a critical section that
records enter, steps and lost like worker.py's (writing to the fenced
storage only when the lock's kind holds alone). Its token is the
RLOCK_FENCING_TOKEN rlock exports; rlock tells it the lease was lost with
SIGTERM, which it records and obeys at once. With `until_file` it holds until
that file exists."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from typing import Any

from kinds import writes

now = time.monotonic_ns
cfg = json.loads(os.environ["FAULTS_RECORDER"])
name = cfg["name"]
tok = int(os.environ["RLOCK_FENCING_TOKEN"])
out = open(cfg["records"], "a", buffering=1)
told_at = 0  # when SIGTERM arrived; recorded by the loop (a handler must not write)


def rec(**fields: Any) -> None:
    fields.update(w=cfg["id"], n=name, tok=tok)
    out.write(json.dumps(fields, separators=(",", ":")) + "\n")


def on_term(signum: int, frame: Any) -> None:
    global told_at
    told_at = told_at or now()


def forked_at() -> int:
    """When this process was forked, right after rlock acquired the lock (10 ms
    resolution, rounded down): the interpreter's start-up is not free time."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    since_boot = ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    return since_boot - (time.clock_gettime_ns(time.CLOCK_BOOTTIME) - now())


signal.signal(signal.SIGTERM, on_term)
start = now()
rec(e="enter", t=start, since=forked_at(), **cfg["lock"])
sock = socket.socket(socket.AF_UNIX)
sock.connect(cfg["storage"])
answers = sock.makefile("rb")
end = start + int(cfg["hold"] * 1_000_000)
while True:
    t = now()
    if told_at:
        rec(e="lost", t=told_at)
        break
    if writes(cfg["lock"]):
        sock.sendall(f"{name} {tok} {cfg['id']}\n".encode())
        rec(e="step", t=t, ok=answers.readline() == b"ok\n")
    else:
        rec(e="step", t=t)
    if os.path.exists(cfg["until_file"]) if cfg.get("until_file") else t >= end:
        break
    time.sleep(cfg.get("step_ms", 5) / 1000)
sys.exit(0)
