"""The machine a run measures on, how busy others keep it, and the versions
of every piece compared."""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import subprocess
import time
from typing import Any, Dict, Tuple

from .paths import BENCH, ROOT


def cpu_busy() -> Tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def own_cpu_seconds() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class OthersLoad:
    """The cores that processes outside the benchmark used from its creation
    on: the machine's busy time less the benchmark's own CPU time."""

    def __init__(self) -> None:
        self.busy0, self.total0 = cpu_busy()
        self.own0, self.t0 = own_cpu_seconds(), time.monotonic()

    def cores(self) -> float:
        busy1, total1 = cpu_busy()
        busy_cores = (busy1 - self.busy0) / (total1 - self.total0) * (os.cpu_count() or 1)
        own = (own_cpu_seconds() - self.own0) / (time.monotonic() - self.t0)
        return max(busy_cores - own, 0.0)


def machine() -> Dict[str, Any]:
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    b0, t0 = cpu_busy()
    time.sleep(2)
    b1, t1 = cpu_busy()
    top = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu", "--no-headers"],
                         capture_output=True, text=True).stdout.splitlines()[:5]
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20, 1),
        "kernel": platform.release(),
        "load_before": os.getloadavg(),
        "busy_before": (b1 - b0) / (t1 - t0),
        "top_before": [" ".join(l.split()) for l in top],
    }


def versions() -> Dict[str, str]:
    from importlib.metadata import version

    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except Exception:
            return "unknown"

    def npm(pkg: str) -> str:
        with open(os.path.join(BENCH, "node_modules", pkg, "package.json")) as f:
            return json.load(f)["version"]

    server = run("redis-server", "--version")
    m = re.search(r"v=(\S+)", server)
    rustc = run("rustc", "--version")
    return {
        "redis-server": m.group(1) if m else server,
        "python": platform.python_version(),
        "node": run("node", "--version").lstrip("v"),
        "rustc": rustc.split()[1] if rustc != "unknown" else "unknown",
        "redis-rlock": run("git", "-C", ROOT, "describe", "--always", "--dirty"),
        "redis-py": version("redis"),
        "python-redis-lock": version("python-redis-lock"),
        "pottery": version("pottery"),
        "py-redis-semaphore": version("py-redis-semaphore"),
        "dogpile.cache": version("dogpile.cache"),
        "cashews": version("cashews"),
        "ioredis": npm("ioredis"),
        "redlock (node-redlock)": npm("redlock"),
        "redis-semaphore": npm("redis-semaphore"),
        "go": run("go", "env", "GOVERSION").removeprefix("go"),
        **go_modules(),
        "bentocache": npm("bentocache"),
    }


def go_modules() -> Dict[str, str]:
    """The Go peers' versions, as bench/go/go.mod pins them."""
    names = {"github.com/go-redsync/redsync/v4": "redsync", "github.com/bsm/redislock": "bsm/redislock",
             "github.com/redis/go-redis/v9": "go-redis"}
    found: Dict[str, str] = {}
    with open(os.path.join(BENCH, "go", "go.mod")) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] in names:
                found[names[parts[0]]] = parts[1].lstrip("v")
    return found
