"""S2 and S3: 8 worker processes, one client each, loop acquire / increment a
shared non-atomic counter (a file in /dev/shm) / release on one key."""

from __future__ import annotations

import os
import random
from typing import Any, Dict, List

from ..contenders import Contender
from ..log import log
from ..processes import Worker
from .blocks import loop_block
from .handoffs import analyse_block

WORKERS = 8


def contended_handoff(pools: Dict[str, List[Worker]], contenders: List[Contender], rounds: int,
                      seconds: float, prefix: str = "") -> Dict[str, List[Dict[str, Any]]]:
    """Blocks of every contender, interleaved in a shuffled order per round,
    each on the first WORKERS workers of its language."""
    out: Dict[str, List[Dict[str, Any]]] = {"/".join(c): [] for c in contenders}
    for r in range(rounds):
        order = contenders[:]
        random.shuffle(order)
        for lang, contender in order:
            res = one_block(pools[lang][:WORKERS], contender, f"{prefix}{lang}:{contender}:{r}", seconds)
            res["round"] = r
            out[f"{lang}/{contender}"].append(res)
        log(f"S2{prefix and ' ' + prefix}: round {r + 1}/{rounds}")
    return out


def one_block(workers: List[Worker], contender: str, tag: str, seconds: float) -> Dict[str, Any]:
    counter = f"/dev/shm/rlock-bench-{os.getpid()}.counter"
    with open(counter, "wb") as f:
        f.write(bytes(8))
    replies, start, end = loop_block(
        [(w, {"contender": contender, "key": f"s2:{tag}", "warm": f"warm:{tag}:{i}",
              "counter": counter}) for i, w in enumerate(workers)], seconds)
    with open(counter, "rb") as f:
        count = int.from_bytes(f.read(8), "little")
    os.unlink(counter)
    return analyse_block([r["rec"] for r in replies], start, end, count,
                         sum(r["errors"] for r in replies))
