"""A CLI reader of a cache entry for the fault suite: the Rust core through
`rlock cached`. Same config, protocol and records as cache_worker.py; stdlib
only, so it starts in milliseconds (run with `python -S`).

Each read runs `rlock cached KEY -- python cache_cli_worker.py --load`:
this file again, as the loader, which records `load` (its token is the
RLOCK_FENCING_TOKEN rlock exports) and `loaded`, and prints "ID:TOK". This
loop records the read before and its end after, from rlock's exit status:
0 the value it printed, 70 loader-failed, 75 timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict

now = time.monotonic_ns
OUTCOMES = {70: "loader-failed", 75: "timeout"}


def recorder(cfg: Dict[str, Any]) -> Any:
    def rec(**fields: Any) -> None:
        fields.update(w=cfg["id"], n=cfg["key"])
        with open(cfg["records"], "a") as out:
            out.write(json.dumps(fields, separators=(",", ":")) + "\n")

    return rec


def load(cfg: Dict[str, Any]) -> None:
    rec = recorder(cfg)
    tok = int(os.environ["RLOCK_FENCING_TOKEN"])
    rec(e="load", t=now(), tok=tok, pid=os.getpid())
    time.sleep(cfg["load_ms"] / 1000)
    while cfg.get("until_file") and not os.path.exists(cfg["until_file"]):
        time.sleep(0.005)
    rec(e="loaded", t=now(), tok=tok)
    sys.stdout.write(f"{cfg['id']}:{tok}")


def main(cfg: Dict[str, Any]) -> None:
    rec = recorder(cfg)
    args = [cfg["rlock"], "cached", "--url", cfg["url"], "--ttl", str(cfg["ttl_ms"] / 1000),
            "--lock-ttl", str(cfg["lock_ttl_ms"] / 1000), "--early", "0"]
    if cfg.get("timeout_ms") is not None:
        args += ["--timeout", str(cfg["timeout_ms"] / 1000)]
    loader = [sys.executable, "-S", "-E", os.path.abspath(__file__), "--load", json.dumps(cfg)]
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    for _ in range(cfg.get("reads", 1)):
        rec(e="read", t=now())
        done = subprocess.run(args + [cfg["key"], "--"] + loader, capture_output=True)
        if done.returncode == 0:
            rec(e="got", t=now(), val=done.stdout.decode())
        else:
            said = done.stderr.decode().strip()[-200:]
            rec(e="failed", t=now(), out=OUTCOMES.get(done.returncode, f"error:exit {done.returncode}: {said}"))
    print("done", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--load":
        load(json.loads(sys.argv[2]))
    else:
        main(json.loads(sys.argv[1]))
