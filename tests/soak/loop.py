"""One loop of the soak, run by a worker process of its own face.

The workers (worker.py, worker.js, core/examples/soak_worker.rs) speak one
protocol: they print `baseline`, then `at OPS ACQUIRED TIMEOUTS` at every
checkpoint (the Rust worker adds its live allocations), then `closed` (the
Rust worker adds its runtime's tasks left), and wait for a line on stdin after
each, so the test reads the process from outside while it stands still.
"""

from __future__ import annotations

import os
import sys
from typing import List

from rlock_test_support.processes import Child

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
RUST_WORKER = os.path.join(TARGET, "debug", "examples", "soak_worker")

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


class Worker(Child):
    """One worker process running one loop."""

    def __init__(self, face: str, mode: str, warm_up: int, operations: int, checkpoints: int,
                 url: str) -> None:
        super().__init__([*argv(face), mode, str(warm_up), str(operations), str(checkpoints)],
                         f"the {face} worker", env={"REDIS_URL": url})
        self.face = face

    def next(self) -> str:
        return self.line(LINE_WITHIN)

    def go(self) -> None:
        self.send("go")

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        assert rc == 0, f"the {self.face} worker exited {rc}: {self.stderr()}"
