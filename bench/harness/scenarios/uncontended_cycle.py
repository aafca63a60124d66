"""S1 and S5: acquire + release by one client with nobody else on the key
(S8's semaphores too: one permit of PERMITS).

Each contender's block alternates, in chunks of 10 cycles, with the floor of
its own language in the same process: the ratio of the two is taken block by
block, so load that comes and goes cancels out. The four faces of
redis-rlock also run back to back in every round (S5).
"""

from __future__ import annotations

import random
import statistics
from typing import Any, Dict, List, Tuple

from ..contenders import PERMITS, UNCONTENDED, Contender, key_of
from ..log import log
from ..monitor import Monitor
from ..processes import Worker
from ..server import BenchServer
from ..stats import pct

FACES: List[Contender] = [("rs", "rlock"), ("py", "rlock"), ("js", "rlock"), ("go", "rlock")]


def run_block(first: Dict[str, Worker], item: Contender, n: int, **pairing: Any) -> Dict[str, Any]:
    lang, contender = item
    return first[lang].call({"op": "s1", "contender": contender, "key": f"s1:{lang}:{contender}",
                             "n": n, "permits": PERMITS, **pairing})


def uncontended_cycle(server: BenchServer, first: Dict[str, Worker], rounds: int,
                      block: int) -> Dict[str, Any]:
    """`first`: one worker per language."""
    counts = command_counts(server, first)
    log("S1: commands per cycle counted; interleaved rounds start")
    blocks, s5 = interleaved_rounds(first, rounds, block)
    return {"items": [key_of(i) for i in UNCONTENDED], "counts": counts, "blocks": blocks,
            "block": block, "rounds": rounds, "s5": s5}


def command_counts(server: BenchServer, first: Dict[str, Worker]) -> Dict[str, Any]:
    """Per contender and cycle: the commands the client sends, those its scripts
    run, and the server time they cost."""
    # Server time per cycle first, without MONITOR (which Redis feeds from
    # inside each script call): what the commands a client sends cost Redis.
    spent_per_cycle: Dict[Contender, Dict[str, int]] = {}
    for item in UNCONTENDED:
        run_block(first, item, 50)  # connect, load scripts, warm caches
        spent = server.usec()
        run_block(first, item, 100)
        spent_per_cycle[item] = {k: v - spent.get(k, 0) for k, v in server.usec().items()}
    # MONITOR echoes every command (those scripts run too) to its client: it is
    # open while commands are counted, never while cycles are timed.
    counts: Dict[str, Any] = {}
    monitor = Monitor(server.port)
    for item in UNCONTENDED:
        before = server.calls()
        sent, scripted = monitor.count(server, lambda: run_block(first, item, 100))
        after = server.calls()
        server_calls = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        server_calls = {k: v for k, v in server_calls.items() if v and k not in ("echo", "info")}
        counts[key_of(item)] = {
            # A script's time includes the calls it makes.
            "server_us_per_cycle": sum(spent_per_cycle[item].get(k, 0) for k in sent) / 100,
            "sent": {k: v / 100 for k, v in sent.items()},
            "sent_per_cycle": sum(sent.values()) / 100,
            "scripted_per_cycle": sum(scripted.values()) / 100,
            "commandstats_per_cycle": {k: v / 100 for k, v in server_calls.items()},
        }
    monitor.close()
    return counts


def interleaved_rounds(first: Dict[str, Worker], rounds: int,
                       block: int) -> Tuple[Dict[str, List[Dict[str, Any]]], List[Dict[str, float]]]:
    """(blocks per contender, S5's per-round medians of the three faces)."""
    data: Dict[str, List[Dict[str, Any]]] = {key_of(i): [] for i in UNCONTENDED}
    contenders = [i for i in UNCONTENDED if i[1] != "floor"]
    s5: List[Dict[str, float]] = []
    for r in range(rounds):
        order = contenders[:]
        random.shuffle(order)
        for item in order:
            reply = run_block(first, item, block, pair="floor", chunk=10)
            data[f"{item[0]}/floor"].append({"round": r, "lat": reply["pair_lat"],
                                             "wall": reply["pair_wall"]})
            data[key_of(item)].append({"round": r, "lat": reply["lat"], "wall": reply["wall"],
                                       "floor": statistics.median(reply["pair_lat"])})
        trio = FACES[:]
        random.shuffle(trio)
        s5.append({lang: statistics.median(run_block(first, (lang, c), block)["lat"]) / 1000
                   for lang, c in trio})
        if (r + 1) % 10 == 0:
            log(f"S1: round {r + 1}/{rounds}")
    return data, s5


def summarise(res: Dict[str, Any]) -> Dict[str, Any]:
    blocks = res["blocks"]
    med = {k: [statistics.median(b["lat"]) / 1000 for b in v] for k, v in blocks.items()}
    summary: Dict[str, Any] = {}
    for key, per_round in med.items():
        pooled = [x / 1000 for b in blocks[key] for x in b["lat"]]
        summary[key] = {
            "cycles": len(pooled),
            "rate": [len(b["lat"]) / (b["wall"] / 1e9) for b in blocks[key]],
            "p50": pct(pooled, 50),
            "p99": pct(pooled, 99),
            "median_per_round": per_round,
            # Each block over the floor block just before it (floors: 1).
            "ratio_to_floor": [statistics.median(b["lat"]) / b.get("floor", statistics.median(b["lat"]))
                               for b in blocks[key]],
        }
    return summary


def face_overhead(s5: List[Dict[str, float]]) -> Dict[str, List[float]]:
    """S5: per round, the Python, Node and Go faces' median cycle minus Rust's."""
    return {lang: [t[lang] - t["rs"] for t in s5] for lang in ("py", "js", "go")}
