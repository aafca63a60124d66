"""The memory soak: contended, fair, in-line, cancelled and uncontended lock
loops from every face, each in a worker process of its own, hold a steady
resident size once warmed up, and leave no connection or thread behind once
their client is closed and dropped.

`make test` runs a short selection (SOAK_LONG unset, about 45 s);
`make soak-memory` runs every loop long (SOAK_LONG=1: over a million
acquisitions in all, about 12 minutes) and prints the same figures.
"""

from __future__ import annotations

import os
import time
from typing import List, Tuple

import pytest

from rlock_test_support.servers import RedisServer
from rlock_test_support.waiting import eventually

import process
from figures import FIGURES, Figures
from loop import Worker

LONG = os.environ.get("SOAK_LONG", "") not in ("", "0")
CHECKPOINTS = 10 if LONG else 4
# Resident growth allowed after the warm-up, judged at a leak's pace: the
# median step between checkpoints (the lower one of an even count) times
# their number (a leak grows at every checkpoint; a one-off step, memory
# given back, or two steps still settling in move no such median). The leak this soak was written for grew 85 bytes per contended
# acquisition: 1 MB over the 12 000 measured of the short Python loop, 17 MB
# over the long one. Once warmed up, the loops here stay within 0.2 MB (short)
# and 0.6 MB (long).
BOUND_KB = int(os.environ.get("SOAK_BOUND_KB", "1024" if LONG else "512"))
# Node's using(): every call makes a handle whose loss is watched (a
# threadsafe function each), and V8's heap grows to about 40 MB (5.5 MB with
# acquire/release) before it levels off; from then the resident size swings
# by 1.5 MB with the collector's timing. 85 bytes an acquisition would still
# be 8 MB here.
BOUND_KB_USING = 3072
# The whole growth after warm-up, its one-off steps included (or 4 bounds):
# 3.4 MB seen once from V8 on a loaded machine, its JavaScript heap in use
# flat.
CEILING_KB = 6144
# The Node worker's JavaScript heap in use after a full collection, judged
# the same way (a step of 0.35 MB seen once in the using() loop, flat before
# and after): steady to some tens of kilobytes in a leak-free loop; an object
# kept per acquisition (a promise, a handle, a span) would add megabytes.
BOUND_JS_HEAP_KB = 256
# Live allocations (counted by the Rust worker) allowed to grow over the
# same span: tasks in flight at a checkpoint and bounded caches (a waiter
# channel remembers its last 64 grants), not per-acquisition state (the leak
# above left 4.5 allocations per acquisition).
BOUND_ALLOCATIONS = 1000
# How long a closed client's connections and threads may take to go.
SETTLE_WITHIN = 15.0
ABANDONING = ("threads-timeout", "asyncio-cancel", "abort", "cancel")

# (face, mode, warm-up operations, measured operations). Contended loops run
# 4 threads, tasks or promises of one client on one lock; the warm-up runs
# until allocator arenas and V8's heap stop growing (Node takes the longest:
# about 10 000 aborted waits, 60 000 using() calls, or 20 000 handoffs
# between handles, which now run at about 12 000 a second, before its
# resident size levels off).
SHORT: List[Tuple[str, str, int, int]] = [
    ("python", "threads", 3_000, 12_000),
    ("python", "asyncio-cancel", 1_000, 3_000),
    ("node", "handles", 30_000, 20_000),
    ("rust", "tasks-fair", 3_000, 12_000),
    ("rust", "cancel", 1_000, 3_000),
]
LONG_LOOPS: List[Tuple[str, str, int, int]] = [
    ("python", "threads", 10_000, 200_000),
    ("python", "threads-fair", 10_000, 100_000),
    ("python", "threads-line", 10_000, 50_000),
    ("python", "threads-alone", 10_000, 100_000),
    ("python", "threads-timeout", 5_000, 20_000),
    ("python", "asyncio", 5_000, 40_000),
    ("python", "asyncio-fair", 5_000, 20_000),
    ("python", "asyncio-cancel", 5_000, 20_000),
    ("node", "one-handle", 20_000, 300_000),
    ("node", "handles", 10_000, 40_000),
    ("node", "handles-fair", 10_000, 40_000),
    ("node", "using", 60_000, 100_000),
    ("node", "abort", 15_000, 20_000),
    ("rust", "tasks", 10_000, 150_000),
    ("rust", "tasks-fair", 10_000, 100_000),
    ("rust", "uncontended", 10_000, 200_000),
    ("rust", "cancel", 5_000, 20_000),
]
LOOPS = LONG_LOOPS if LONG else SHORT


@pytest.mark.parametrize("face,mode,warm_up,operations", LOOPS,
                         ids=[f"{f}-{m}" for f, m, _, _ in LOOPS])
def test_a_loop_holds_its_memory_and_leaves_nothing_behind(
        server: RedisServer, face: str, mode: str, warm_up: int, operations: int) -> None:
    figures = Figures(loop=f"{face} {mode}")
    worker = Worker(face, mode, warm_up, operations, CHECKPOINTS, server.url)
    try:
        assert worker.next() == "baseline"
        # A client was made, used, closed and dropped: whatever the process
        # keeps from then on (a runtime, its threads) is the baseline. Its
        # connections close in the background: wait for them.
        eventually(lambda: process.connections(worker.pid, server.port) == 0,
                   within=SETTLE_WITHIN, every=0.05)
        figures.threads_before = process.threads(worker.pid)
        figures.connections_before = process.connections(worker.pid, server.port)
        started = time.monotonic()
        worker.go()
        for _ in range(CHECKPOINTS + 1):
            words = worker.next().split()
            assert words[0] == "at", words
            figures.ops, figures.acquired, figures.timeouts = map(int, words[1:4])
            for word in words[4:]:
                if word.startswith("js="):
                    figures.js_heap_kb.append(int(word[3:]))
                else:
                    figures.live_allocations.append(int(word))
            figures.rss_kb.append(process.rss_kb(worker.pid))
            figures.threads.append(process.threads(worker.pid))
            figures.connections_during = max(figures.connections_during,
                                             process.connections(worker.pid, server.port))
            worker.go()
        figures.seconds = time.monotonic() - started
        closed = worker.next().split()
        assert closed[0] == "closed", closed
        figures.tasks_after = int(closed[1]) if len(closed) > 1 else None
        gone = eventually(
            lambda: process.connections(worker.pid, server.port) == 0
            and process.threads(worker.pid) <= figures.threads_before,
            within=SETTLE_WITHIN, every=0.05)
        figures.connections_after = process.connections(worker.pid, server.port)
        figures.threads_after = process.threads(worker.pid)
        worker.go()
        worker.finish()
    finally:
        worker.kill()
        FIGURES.append(figures)

    assert figures.connections_before == 0, "a closed, dropped client kept its connections"
    assert figures.connections_during > 0, "the loop never connected: nothing was measured"
    assert figures.acquired > 0
    if mode in ABANDONING:
        assert figures.timeouts > figures.ops // 10, "too few waits were abandoned to test that path"
    bound = BOUND_KB_USING if mode == "using" else BOUND_KB
    # A leak grows at every checkpoint; settling does not. One interval may
    # hold a step (V8 resizing its heap, seen at 0.9 MB once Node's handoffs
    # ran at 12 000 a second, and 3.4 MB on a loaded machine while the
    # JavaScript heap in use stayed put): the pace counts against the bound,
    # the whole against a ceiling no leak-free loop came near.
    ceiling = max(CEILING_KB, 4 * bound)
    assert figures.steady_growth_kb <= bound and figures.growth_kb <= ceiling, (
        f"resident memory grew {figures.growth_kb} kB after warm-up ({figures.steady_growth_kb} kB "
        f"at its median pace) over {figures.ops} operations (bound {bound} kB, "
        f"ceiling {ceiling} kB): {figures.rss_kb}")
    if figures.js_heap_kb:
        assert figures.steady_js_heap_growth_kb <= BOUND_JS_HEAP_KB, (
            f"the JavaScript heap in use grew by {figures.steady_js_heap_growth_kb} kB at "
            f"its median pace: {figures.js_heap_kb}")
    if figures.live_allocations:
        growth = figures.live_allocations[-1] - figures.live_allocations[0]
        assert growth <= BOUND_ALLOCATIONS, (
            f"live allocations grew by {growth}: {figures.live_allocations}")
    assert figures.tasks_after in (None, 0), (
        f"{figures.tasks_after} tasks still run after the client was closed and dropped")
    assert gone, (
        f"{SETTLE_WITHIN} s after the client was closed and dropped: "
        f"{figures.connections_after} connections (0 before), "
        f"{figures.threads_after} threads ({figures.threads_before} before)")
