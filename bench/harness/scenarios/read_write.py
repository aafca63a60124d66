"""S9: a read-write lock under readers that hold it continuously. 8 reader
processes and 1 writer process of one language, one client each, loop on
one key: each reader acquires the read side, holds it READ_HOLD_MS and
releases; the writer acquires the write side, holds it WRITE_HOLD_MS,
releases and pauses WRITE_PAUSE_MS. The readers' sections overlap, so the
lock is rarely free: the writer gets in only because waiting writers go
first. The baseline: the same 9 processes, the same holds, all on one mutex."""

from __future__ import annotations

import random
import statistics
from typing import Any, Dict, List, Tuple

from ..contenders import LANGS
from ..log import log
from ..processes import Worker
from ..stats import pct
from .blocks import loop_block
from .sections import breaches, sections

READERS = 8
READ_HOLD_MS = 1
WRITE_HOLD_MS = 1
WRITE_PAUSE_MS = 5
# Per mode: the readers' contender and the writer's.
MODES = {"rw": ("read:rlock", "write:rlock"), "mutex": ("rlock", "rlock")}

Block = Dict[str, Any]


def row_key(lang: str, mode: str) -> str:
    return f"{lang}/{mode}"


def read_write(pools: Dict[str, List[Worker]], rounds: int, seconds: float) -> Dict[str, List[Block]]:
    """Blocks of every face in both modes, interleaved in a shuffled order per round."""
    items = [(lang, mode) for lang in LANGS for mode in MODES]
    out: Dict[str, List[Block]] = {row_key(*i): [] for i in items}
    for r in range(rounds):
        order = items[:]
        random.shuffle(order)
        for lang, mode in order:
            res = one_block(pools[lang][:READERS + 1], mode, f"{lang}:{mode}:{r}", seconds)
            res["round"] = r
            out[row_key(lang, mode)].append(res)
        log(f"S9: round {r + 1}/{rounds}")
    return out


def one_block(workers: List[Worker], mode: str, tag: str, seconds: float) -> Block:
    reader, writer = MODES[mode]
    roles = [{"contender": reader, "hold_ms": READ_HOLD_MS}] * READERS + [
        {"contender": writer, "hold_ms": WRITE_HOLD_MS, "pause_ms": WRITE_PAUSE_MS}]
    requests: List[Tuple[Worker, Dict[str, Any]]] = [
        (w, {**role, "key": f"s9:{tag}", "warm": f"warm:s9:{tag}:{i}"})
        for i, (w, role) in enumerate(zip(workers, roles))]
    replies, start, end = loop_block(requests, seconds)
    readers = [rec for r in replies[:READERS] for rec in r["rec"]]
    return analyse_block(readers, replies[READERS]["rec"], start, end, mode == "mutex",
                         sum(r["errors"] for r in replies))


def analyse_block(readers: List[List[int]], writes: List[List[int]], start: int, end: int,
                  readers_exclusive: bool, errors: int) -> Block:
    secs = (end - start) / 1e9

    def rate(recs: List[List[int]]) -> float:
        return sum(1 for r in recs if start <= r[1] <= end) / secs

    def waits(recs: List[List[int]]) -> List[float]:
        return [(r[1] - r[0]) / 1e6 for r in recs if r[0] < end]

    reader_waits, writer_waits = waits(readers), waits(writes)
    return {
        "reader_acq_per_s": rate(readers),
        "writer_acq_per_s": rate(writes),
        "reader_wait_p50_ms": pct(reader_waits, 50),
        "reader_longest_wait_ms": max(reader_waits, default=float("nan")),
        "writer_wait_p50_ms": pct(writer_waits, 50),
        "writer_longest_wait_ms": max(writer_waits, default=float("nan")),
        # What a reader's sleep inside took: the hold every mode and face got.
        "read_hold_p50_ms": pct([(r[2] - r[1]) / 1e6 for r in readers], 50),
        "breaches": breaches(sections(readers, readers_exclusive) + sections(writes, True)),
        "errors": errors,
    }


def summarise(blocks: Dict[str, List[Block]]) -> Dict[str, Any]:
    med = statistics.median
    return {k: {
        "reader_acq_per_s": [b["reader_acq_per_s"] for b in bs],
        "writer_acq_per_s": [b["writer_acq_per_s"] for b in bs],
        "reader_wait_p50_ms": med(b["reader_wait_p50_ms"] for b in bs),
        "reader_longest_wait_ms": max(b["reader_longest_wait_ms"] for b in bs),
        "writer_wait_p50_ms": med(b["writer_wait_p50_ms"] for b in bs),
        "writer_longest_wait_ms": max(b["writer_longest_wait_ms"] for b in bs),
        "read_hold_p50_ms": med(b["read_hold_p50_ms"] for b in bs),
        "breaches": sum(b["breaches"] for b in bs),
        "errors": sum(b["errors"] for b in bs),
    } for k, bs in blocks.items()}
