"""S10: `cached`, one hot key read through a cache that keeps its entries
in Redis, by PROCESSES processes of one language with READERS concurrent
readers each, against other Redis caches that protect against stampedes.
The loader sleeps LOADER_MS and records its call in Redis (cached_worker.py,
cached_worker.js), so every call of every process is counted. Per contender,
on its own keys:

  hits     the value cached for longer than the block: HIT_READS reads one
           after another from one process, their commands counted with
           MONITOR (commands run inside scripts apart) and INFO commandstats
  expiry   the value cached for TTL_S (and STALE_S more where the contender
           has a stale window), read for several of its lifetimes: loader
           calls per expiry, and the readers' latency across each expiry
           against between expiries (plain hits, at the same moments)
  cold     COLD_KEYS distinct keys, none cached, each read once by every
           process at about the same time: loader calls (at best one per key)

Last, redis-rlock's cache once more with the PROCESSES processes shared out
among Python, Node and Go (MIXED): one loader call per expiry across faces.

Readers pause a random 0 to 2 × PACE_MS between reads, so the load is a
steady PROCESSES × READERS / PACE_MS reads per second whatever a read costs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..contenders import CACHED, MIXED, MIXED_LANGS, Contender, key_of
from ..log import log
from ..monitor import Monitor
from ..processes import Worker, close_all, mono_ns
from ..server import BenchServer
from ..stats import pct

PROCESSES = 8
READERS = 50
LOADER_MS = 50
TTL_S = 2.0
STALE_S = 1.0
PACE_MS = 200
COLD_KEYS = 1000
HIT_READS = 200
# A block of reads before each one measured, with the same contender and
# options (the workers keep what it opened: connections, threads).
WARM_S = 0.5
# A value cached for longer than any block: every read of it is a hit.
HIT_TTL_S = 3600.0
# A loader call starting less than this after the last one ended belongs to
# the same expiry: a reader acting on the value just replaced does so within
# its read's time, far less; the next expiry comes TTL_S after, less the
# jitter and any early refresh (XFetch: a few times the loader's time).
EXPIRY_GAP_NS = int(TTL_S / 2 * 1e9)
# Time for every worker to read its request before a block starts.
LEAD_NS = 800_000_000

Block = Dict[str, Any]


def cached(server: BenchServer, expiry_seconds: float) -> Dict[str, Block]:
    """Every contender of CACHED in turn, on PROCESSES workers of its language,
    then MIXED on PROCESSES workers of MIXED_LANGS in turn."""
    langs = sorted({lang for lang, _ in CACHED} | set(MIXED_LANGS))
    pools = {lang: [Worker(lang, [server.url], "cached_worker") for _ in range(PROCESSES)]
             for lang in langs}
    out: Dict[str, Block] = {}
    try:
        for item in CACHED:
            out[key_of(item)] = one_contender(server, pools[item[0]], item, expiry_seconds)
            server.redis.flushall()
            log(f"S10: {key_of(item)} done")
        mixed = [pools[MIXED_LANGS[i % len(MIXED_LANGS)]][i // len(MIXED_LANGS)]
                 for i in range(PROCESSES)]
        out[key_of(MIXED)] = one_contender(server, mixed, MIXED, expiry_seconds)
        log(f"S10: {key_of(MIXED)} done")
    finally:
        close_all(pools)
    return out


def one_contender(server: BenchServer, workers: List[Worker], item: Contender,
                  expiry_seconds: float) -> Block:
    lang, name = item
    tag = f"s10:{lang}:{name}"

    def request(part: str, ttl: float) -> Dict[str, Any]:
        return {"contender": name, "loader_ms": LOADER_MS, "ttl": ttl, "stale": STALE_S,
                "key": f"{tag}:{part}", "loads": f"{tag}:{part}:loads"}

    hit = request("hit", HIT_TTL_S)
    workers[0].call({**hit, "op": "seq", "n": 1}, timeout=60)  # the value, cached
    block: Block = {"commands": commands_per_hit(server, workers[0], hit)}

    hot = request("hot", TTL_S)
    workers[0].call({**hot, "op": "seq", "n": 1}, timeout=60)  # the first value, before the block
    read_block(workers, hot, WARM_S)  # every reader's connections open
    recs, start, end, errors = read_block(workers, hot, expiry_seconds)
    loads = [ld for ld in loader_calls(server, hot["loads"]) if ld[0] >= start]
    block["expiry"] = {**across_expiries(recs, loads), "errors": errors,
                       "seconds": (end - start) / 1e9,
                       "reads_per_s": len(recs) / ((end - start) / 1e9)}

    cold = {**request("cold", HIT_TTL_S), "prefix": f"{tag}:cold"}
    block["cold"] = cold_start(server, workers, cold)
    return block


def read_block(workers: List[Worker], req: Dict[str, Any],
               seconds: float) -> Tuple[List[List[int]], int, int, int]:
    """Every worker's readers on one key from one instant to another:
    (records `[began, ended, value's t1]`, start, end, errors)."""
    start = mono_ns() + LEAD_NS
    end = start + int(seconds * 1e9)
    for w in workers:
        w.send({**req, "op": "read", "readers": READERS, "pace_ms": PACE_MS, "start": start,
                "end": end})
    replies = [w.recv(timeout=seconds + 60) for w in workers]
    return ([rec for r in replies for rec in r["rec"]], start, end,
            sum(r["errors"] for r in replies))


def commands_per_hit(server: BenchServer, worker: Worker, req: Dict[str, Any]) -> Dict[str, Any]:
    """What one process sends for a hit (MONITOR: commands run inside scripts
    apart) and what Redis counts (INFO commandstats: scripts' calls included)."""
    worker.call({**req, "op": "seq", "n": 20})  # connections open, scripts loaded
    monitor = Monitor(server.port)
    try:
        before = server.calls()
        sent, scripted = monitor.count(server, lambda: worker.call({**req, "op": "seq",
                                                                     "n": HIT_READS}))
        after = server.calls()
    finally:
        monitor.close()
    # The counting's own commands (markers, INFO) are not the reads'.
    ours = ("echo", "info", "monitor")
    calls = sum(v - before.get(k, 0) for k, v in after.items() if k not in ours)
    return {"reads": HIT_READS, "sent": dict(sent), "scripted": dict(scripted),
            "sent_per_read": sum(sent.values()) / HIT_READS,
            "server_calls_per_read": calls / HIT_READS}


def loader_calls(server: BenchServer, key: str) -> List[Tuple[int, int]]:
    """Every recorded loader call, `(t0, t1)`, in order of start."""
    calls = [s.split() for s in server.redis.lrange(key, 0, -1)]
    return sorted((int(c[0]), int(c[1])) for c in calls)


def expiries(loads: List[Tuple[int, int]]) -> List[List[Tuple[int, int]]]:
    """The loader calls grouped by the expiry that set them off."""
    groups: List[List[Tuple[int, int]]] = []
    for ld in loads:
        if groups and ld[0] - max(t1 for _, t1 in groups[-1]) < EXPIRY_GAP_NS:
            groups[-1].append(ld)
        else:
            groups.append([ld])
    return groups


def across_expiries(recs: List[List[int]], loads: List[Tuple[int, int]]) -> Dict[str, Any]:
    """Loader calls per expiry, and the reads begun while an expiry's loaders
    ran (from a loader's time before the first started to a loader's time
    after the last ended) against those begun between expiries (plain hits
    under the same load at the same moments): their latency, and how many
    got a value made after they began, that is waited for a loader."""
    groups = expiries(loads)
    margin = LOADER_MS * 1_000_000
    windows = [(g[0][0] - margin, max(t1 for _, t1 in g) + margin) for g in groups]
    across: List[float] = []
    between: List[float] = []
    for r in recs:
        inside = any(a <= r[0] <= b for a, b in windows)
        (across if inside else between).append((r[1] - r[0]) / 1e6)
    # How long each read that waited was pending while the loader of its
    # value still ran: a loader's time for a reader that waited it out, a
    # moment for one that began as a loader ended and was held up past the
    # store (by the machine, not by the cache).
    waited = [(min(r[1], r[2]) - r[0]) / 1e6 for r in recs if r[0] < r[2]]
    return {
        "reads": len(recs), "expiries": len(groups), "loader_calls": len(loads),
        "calls_per_expiry": [len(g) for g in groups],
        # Each call after an expiry's first: from the previous call's end to
        # its start, ms (negative: the two ran at once).
        "extra_call_gaps_ms": [(g[i][0] - g[i - 1][1]) / 1e6 for g in groups for i in range(1, len(g))],
        "reads_across": len(across), "p50_ms": pct(across, 50), "p99_ms": pct(across, 99),
        "max_ms": max(across, default=float("nan")),
        "reads_between": len(between), "between_p50_ms": pct(between, 50),
        "between_p99_ms": pct(between, 99), "between_max_ms": max(between, default=float("nan")),
        "waited": len(waited), "longest_wait_ms": max(waited, default=0.0),
    }


def cold_start(server: BenchServer, workers: List[Worker], req: Dict[str, Any]) -> Dict[str, Any]:
    start = mono_ns() + LEAD_NS
    for w in workers:
        w.send({**req, "op": "cold", "keys": COLD_KEYS, "readers": READERS, "start": start})
    replies = [w.recv(timeout=300) for w in workers]
    return {"keys": COLD_KEYS, "processes": len(workers),
            "loader_calls": server.redis.llen(req["loads"]),
            "seconds": (max(r["ended"] for r in replies) - start) / 1e9,
            "errors": sum(r["errors"] for r in replies)}
