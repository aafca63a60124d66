"""Test support for the memory soak: a real redis-server (the Python suite's
helper), the worker processes of each face, and the figures table printed at
the end of the run.

The workers (worker.py, worker.js, core/examples/soak_worker.rs) speak one
protocol: they print `baseline`, then `at OPS ACQUIRED TIMEOUTS` at every
checkpoint (the Rust worker adds its live allocations), then `closed` (the
Rust worker adds its runtime's tasks left), and wait for a line on stdin after each, so the
driver reads the process from outside while it stands still.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RUST_WORKER = os.path.join(TARGET, "debug", "examples", "soak_worker")

_spec = importlib.util.spec_from_file_location(
    "python_suite_support", os.path.join(ROOT, "tests", "python", "conftest.py"))
assert _spec is not None and _spec.loader is not None
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)
RedisServer = support.RedisServer
eventually = support.eventually

# Every line from a worker has a deadline: a worker that hangs fails its loop.
LINE_WITHIN = float(os.environ.get("SOAK_LINE_WITHIN", "120"))


def argv(face: str) -> List[str]:
    if face == "python":
        return [sys.executable, "-u", os.path.join(HERE, "worker.py")]
    if face == "node":
        # --expose-gc: the worker drops its client and collects it, as a
        # long-lived program eventually would.
        return ["node", "--expose-gc", os.path.join(HERE, "worker.js")]
    if face == "rust":
        return [RUST_WORKER]
    raise ValueError(face)


class Worker:
    """One worker process running one loop."""

    def __init__(self, face: str, mode: str, warm_up: int, operations: int, checkpoints: int,
                 url: str) -> None:
        self.face = face
        self.proc = subprocess.Popen(
            [*argv(face), mode, str(warm_up), str(operations), str(checkpoints)],
            env={**os.environ, "REDIS_URL": url},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.pid = self.proc.pid
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next(self) -> str:
        try:
            line = self.lines.get(timeout=LINE_WITHIN)
        except queue.Empty:
            raise AssertionError(f"the {self.face} worker said nothing within {LINE_WITHIN} s") from None
        if line is None:
            self.proc.wait(timeout=10)
            assert self.proc.stderr is not None
            raise AssertionError(
                f"the {self.face} worker ended (exit {self.proc.returncode}): {self.proc.stderr.read()}")
        return line

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        assert self.proc.stderr is not None
        assert rc == 0, f"the {self.face} worker exited {rc}: {self.proc.stderr.read()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Figures:
    loop: str
    ops: int = 0
    acquired: int = 0
    timeouts: int = 0
    seconds: float = 0.0
    rss_kb: List[int] = field(default_factory=list)
    threads: List[int] = field(default_factory=list)
    connections_before: int = 0
    connections_during: int = 0
    connections_after: int = -1
    threads_before: int = 0
    threads_after: int = -1
    live_allocations: List[int] = field(default_factory=list)
    # Tasks of the runtime after close (the Rust worker's own runtime).
    tasks_after: Optional[int] = None

    @property
    def growth_kb(self) -> int:
        return self.rss_kb[-1] - self.rss_kb[0]

    def row(self) -> str:
        rss = " ".join(f"{kb / 1024:.1f}" for kb in self.rss_kb)
        line = (f"{self.loop:<26} {self.acquired:>9} acq {self.timeouts:>7} t/o "
                f"{self.seconds:6.1f} s  RSS MB {rss}  (+{self.growth_kb / 1024:.2f} MB "
                f"after warm-up)  conns {self.connections_before}/{self.connections_during}/"
                f"{self.connections_after}  threads {self.threads_before}/{max(self.threads)}/"
                f"{self.threads_after}")
        if self.live_allocations:
            line += "  live allocs " + " ".join(map(str, self.live_allocations))
        if self.tasks_after is not None:
            line += f"  tasks after {self.tasks_after}"
        return line


FIGURES: List[Figures] = []


def pytest_terminal_summary(terminalreporter: "pytest.TerminalReporter") -> None:
    if not FIGURES:
        return
    tr = terminalreporter
    tr.section("memory soak figures")
    tr.write_line("loop, acquisitions, waits that ended unsatisfied, time, RSS at the checkpoints "
                  "(the first after warm-up), connections to Redis before/during/after, "
                  "threads before/most/after")
    for f in FIGURES:
        tr.write_line(f.row())
    tr.write_line(f"total: {sum(f.acquired for f in FIGURES)} acquisitions, "
                  f"{sum(f.ops for f in FIGURES)} operations")


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()
