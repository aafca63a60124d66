"""S6: the Redlock contenders over several servers, each size with its own
servers: S1's uncontended cycle and S2's contended handoff, with fewer blocks."""

from __future__ import annotations

import random
import statistics
from typing import Any, Dict, List

from ..contenders import LANGS, REDLOCK, key_of
from ..log import log
from ..monitor import Monitor
from ..processes import Worker, close_all, worker_pools
from ..server import BenchServer
from ..stats import pct
from .contended_handoff import contended_handoff
from .handoffs import summarise_all


def redlock(sizes: List[int], rounds: int, block: int, s2_rounds: int,
            s2_seconds: float) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for n in sizes:
        servers = [BenchServer() for _ in range(n)]
        pools = worker_pools(list(LANGS), [s.url for s in servers])
        try:
            counts = command_counts(servers[0], pools)
            s1 = uncontended_summary(pools, rounds, block)
            log(f"S6: {n} servers, S1 done")
            s2 = contended_handoff(pools, REDLOCK, s2_rounds, s2_seconds, prefix=f"redlock{n}:")
            out[str(n)] = {"items": [key_of(i) for i in REDLOCK], "counts": counts,
                           "s1_summary": s1, "s2_summary": summarise_all(s2)}
        finally:
            close_all(pools)
            for s in servers:
                s.stop()
    return out


def s1_request(contender: str, lang: str, n: int) -> Dict[str, Any]:
    return {"op": "s1", "contender": contender, "key": f"s6:{lang}:{contender}", "n": n}


def command_counts(node: BenchServer, pools: Dict[str, List[Worker]]) -> Dict[str, Any]:
    counts = {}
    monitor = Monitor(node.port)
    for lang, c in REDLOCK:
        w = pools[lang][0]
        w.call(s1_request(c, lang, 20))
        # Each contender sends its requests to every node: what the first
        # node receives from clients is the commands per cycle per node.
        sent, _ = monitor.count(node, lambda: w.call(s1_request(c, lang, 100)))
        counts[f"{lang}/{c}"] = {"sent_per_cycle": sum(sent.values()) / 100,
                                 "sent": {k: v / 100 for k, v in sent.items()}}
    monitor.close()
    return counts


def uncontended_summary(pools: Dict[str, List[Worker]], rounds: int, block: int) -> Dict[str, Any]:
    """S1 in rounds of blocks in a shuffled order; each contender against
    redis-rlock in the same language and round."""
    blocks: Dict[str, List[Dict[str, Any]]] = {key_of(i): [] for i in REDLOCK}
    for r in range(rounds):
        order = REDLOCK[:]
        random.shuffle(order)
        for lang, c in order:
            reply = pools[lang][0].call(s1_request(c, lang, block))
            blocks[f"{lang}/{c}"].append({"round": r, "lat": reply["lat"], "wall": reply["wall"]})
    med = {k: [statistics.median(b["lat"]) / 1000 for b in v] for k, v in blocks.items()}
    summary = {}
    for k, v in blocks.items():
        lang = k.split("/")[0]
        pooled = [x / 1000 for b in v for x in b["lat"]]
        summary[k] = {"p50": pct(pooled, 50), "p99": pct(pooled, 99),
                      "rate": [len(b["lat"]) / (b["wall"] / 1e9) for b in v],
                      "ratio_to_rlock": [a / b for a, b in zip(med[k], med[f"{lang}/rlock"])]}
    return summary
