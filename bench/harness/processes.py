"""The worker processes: one per language and role, persistent for the run,
each answering one JSON request per line with one JSON reply per line."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any, Dict, List

from .paths import BENCH, GO_BIN, NODE_FACE, RUST_BIN


def mono_ns() -> int:
    """CLOCK_MONOTONIC, the clock every worker stamps its events with, so
    events of processes in three languages order on one clock."""
    return time.monotonic_ns()


def command(lang: str, urls: List[str], program: str = "worker") -> List[str]:
    """`program`: the worker (bench/worker.py, bench/worker.js, `rlock-bench
    worker`, go_bench_worker) or another program of its kind (`cached_worker`:
    S10's)."""
    if lang == "py":
        return [sys.executable, os.path.join(BENCH, f"{program}.py"), *urls]
    if lang == "js":
        return ["node", os.path.join(BENCH, f"{program}.js"), *urls]
    if lang == "go":
        return [os.path.join(GO_BIN, f"go_bench_{program}"), *urls]
    return [RUST_BIN, program.replace("_", "-"), *urls]


class Worker:
    """A worker process speaking one JSON request / reply per line."""

    def __init__(self, lang: str, urls: List[str], program: str = "worker") -> None:
        self.lang = lang
        env = dict(os.environ, RLOCK_NODE=NODE_FACE, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(command(lang, urls, program), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, cwd=BENCH)

    def send(self, req: Dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()

    def recv(self, timeout: float = 120) -> Dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise RuntimeError(f"{self.lang} worker gave no answer within {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.lang} worker exited (code {self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.lang} worker: {reply['error']}")
        return reply

    def call(self, req: Dict[str, Any], timeout: float = 120) -> Dict[str, Any]:
        self.send(req)
        return self.recv(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send({"op": "exit"})
                self.proc.wait(5)
            except Exception:
                self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def worker_pools(langs: List[str], urls: List[str], size: int = 8) -> Dict[str, List[Worker]]:
    """`size` workers per language, all on the same servers."""
    return {lang: [Worker(lang, urls) for _ in range(size)] for lang in langs}


def close_all(pools: Dict[str, List[Worker]]) -> None:
    for workers in pools.values():
        for w in workers:
            w.close()
