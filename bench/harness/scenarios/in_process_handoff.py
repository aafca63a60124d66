"""S7: handoff inside one process, between 2, 4 or 8 threads (Python),
promises (Node) or tasks (Rust) of one client, each with its own handle."""

from __future__ import annotations

import random
import statistics
from typing import Any, Dict, List

from ..contenders import IN_ONE_PROCESS, LANGS
from ..log import log
from ..processes import Worker, mono_ns
from .handoffs import analyse_block, summarise as summarise_handoffs

HANDLES = [2, 4, 8]


def row_key(lang: str, contender: str, handles: int) -> str:
    return f"{lang}/{contender}/{handles}"


def in_process_handoff(first: Dict[str, Worker], rounds: int,
                       seconds: float) -> Dict[str, List[Dict[str, Any]]]:
    """Blocks of `handles` threads (Python), promises (Node) or tasks (Rust) of
    one process and one client looping on one key, interleaved in a shuffled
    order per round."""
    items = [(lang, c, n) for lang in LANGS for c in IN_ONE_PROCESS for n in HANDLES]
    out: Dict[str, List[Dict[str, Any]]] = {row_key(*i): [] for i in items}
    for r in range(rounds):
        order = items[:]
        random.shuffle(order)
        for lang, contender, n in order:
            tag = f"{lang}:{contender}:{n}:{r}"
            start = mono_ns() + 300_000_000
            end = start + int(seconds * 1e9)
            reply = first[lang].call({"op": "s7", "contender": contender, "handles": n,
                                      "key": f"s7:{tag}", "warm": f"warm:s7:{tag}",
                                      "start": start, "end": end}, timeout=seconds + 60)
            res = analyse_block(reply["recs"], start, end, reply["counter"], 0)
            res["round"] = r
            out[row_key(lang, contender, n)].append(res)
        log(f"S7: round {r + 1}/{rounds}")
    return out


def summarise(blocks: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
    out = {}
    for key, bs in blocks.items():
        s = summarise_handoffs(bs)
        s["wait_p50"] = statistics.median(b["wait_p50_ms"] for b in bs)
        out[key] = s
    return out
