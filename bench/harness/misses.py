"""Why the misses: for each missed target, its known cause told with this
run's figures (the text is in RESULTS.in.md, sections `miss-*`)."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List

from .contenders import LANGS, PERMITS
from .prose import section, sentence
from .scenarios import cached as s10
from .scenarios.in_process_handoff import HANDLES, row_key
from .stats import pct

med = statistics.median
Run = Dict[str, Any]
Target = Dict[str, Any]


def why_missed(r: Run) -> List[str]:
    missed = [t for t in r["targets"] if not t["ok"] and "not a target" not in t["scenario"]]
    if not missed:
        return []
    bullets: List[str] = []
    if any(t["scenario"] in ("S1", "S5") and "Node" in t["target"] for t in missed):
        bullets.append(node_s1(r))
        if "js/rlock-replay" in r["s1_summary"]:
            bullets.append(node_s1_bound(r))
    if any(t["scenario"] == "S5" and "Python" in t["target"] for t in missed):
        bullets.append(python_s5(r))
    if any(t["scenario"] == "S2" and ("longest" in t["target"] or "handoffs" in t["target"])
           for t in missed):
        bullets.append(s2_default_mode(r, missed))
    if any(t["scenario"] == "S1" and "Go faster than bsm" in t["target"] for t in missed):
        bullets.append(go_s1(r))
    s7_missed = [t for t in missed if t["scenario"] == "S7" and "Node" in t["target"]]
    if s7_missed:
        bullets.append(in_one_process(r, s7_missed))
    s7_go = [t for t in missed if t["scenario"] == "S7" and "Go" in t["target"]]
    if s7_go:
        bullets.append(sentence("miss-s7-go", misses="; ".join(
            f"{t['target'].split(', ', 1)[1]}: {t['figure']}" for t in s7_go)))
    if any(t["scenario"] == "S8" and "redis-semaphore" in t["target"] for t in missed):
        bullets.append(semaphore(r))
    s10_missed = [t for t in missed if t["scenario"] == "S10"]
    if s10_missed:
        bullets.append(cached(r, s10_missed))
    fair_missed = [t for t in missed if t["scenario"] == "S2 fair"]
    if fair_missed:
        bullets.append(sentence("miss-fair", targets="; ".join(t["target"] for t in fair_missed)))
    return section("misses", bullets=bullets)


def node_s1(r: Run) -> str:
    s1s, counts = r["s1_summary"], r["s1"]["counts"]
    ioredis = med(s1s["js/floor"]["median_per_round"])
    rust = med([t["rs"] for t in r["s1"]["s5"]])
    hops = {h["way"]: med(h["rounds"]) for h in r.get("hops", [])}
    awake = hops.get("current-thread, caller drives, awake for replies (as the faces do)")
    bare = hops.get("redis-rs bare cycle (no core), the caller drives, awake for replies")
    from_one_thread = ""
    if awake and bare:
        from_one_thread = " " + sentence(
            "miss-node-s1-hops", awake=f"{awake:.0f}", bare=f"{bare:.0f}", added=f"{awake - bare:.0f}",
            bare_slow=sentence("miss-node-s1-bare-slow") if bare > 0.9 * ioredis else "")
    return sentence(
        "miss-node-s1",
        best_tenth=f"{pct(s1s['js/rlock']['ratio_to_floor'], 10):.2f}",
        rlock_server_us=f"{counts['rs/rlock']['server_us_per_cycle']:.0f}",
        floor_server_us=f"{counts['js/floor']['server_us_per_cycle']:.0f}",
        rust_ratio=f"{med(s1s['rs/rlock']['ratio_to_floor']):.2f}",
        rust_cycle=f"{rust:.0f}", rust_over_ioredis=f"{rust / ioredis:.2f}",
        ioredis_cycle=f"{ioredis:.0f}", hops=from_one_thread)


def node_s1_bound(r: Run) -> str:
    s1s = r["s1_summary"]
    replay = s1s["js/rlock-replay"]["ratio_to_floor"]
    js = s1s["js/rlock"]["ratio_to_floor"]
    sem = s1s["js/redis-semaphore"]["ratio_to_floor"]
    busy = med(replay) > max(0.9, med(sem))
    return sentence(
        "miss-node-s1-bound",
        replay=f"{med(replay):.2f}", replay_p10=f"{pct(replay, 10):.2f}",
        replay_p90=f"{pct(replay, 90):.2f}", needed=f"{med(replay) / 0.9:.2f}",
        face_over_replay=f"{med([a / b for a, b in zip(js, replay)]):.2f}",
        semaphore=f"{med(sem):.2f}",
        ending=sentence("miss-node-s1-bound-busy") if busy else ".")


def python_s5(r: Run) -> str:
    def floor(lang: str) -> List[float]:
        return r["s1_summary"][f"{lang}/floor"]["median_per_round"]

    return sentence(
        "miss-python-s5",
        above=f"{med(r['s5']['py']):.0f}", best_tenth=f"{pct(r['s5']['py'], 10):.0f}",
        py_p10=f"{pct(floor('py'), 10):.0f}", py_p90=f"{pct(floor('py'), 90):.0f}",
        rs_p10=f"{pct(floor('rs'), 10):.0f}", rs_p90=f"{pct(floor('rs'), 90):.0f}")


def s2_default_mode(r: Run, missed: List[Target]) -> str:
    s2s = r["s2_summary"]
    shares = ", ".join(f"{LANGS[k.split('/')[0]]} {100 * med(s2s[k]['same_share']):.0f} %"
                       for k in s2s if k.endswith("/rlock"))
    fair = ", ".join(f"{LANGS[k.split('/')[0]]} {s2s[k]['longest_wait_ms']:.0f} ms"
                     for k in s2s if k.endswith("/rlock-fair"))
    stalls = [longest_wait_block(r, t) for t in missed
              if t["scenario"] == "S2" and "longest" in t["target"]]
    return sentence(
        "miss-s2-default", shares=shares, fair_waits=fair,
        stalls=" " + sentence("miss-s2-stalls", stalls="; ".join(stalls)) if stalls else "")


def longest_wait_block(r: Run, missed: Target) -> str:
    """The block behind a missed longest-wait target, beside the others."""
    lang = next(k for k, v in LANGS.items() if f"({v})" in missed["target"])
    blocks = r["s2_blocks"][f"{lang}/rlock"]
    worst = max(blocks, key=lambda b: b["longest_wait_ms"])
    others = [b["longest_wait_ms"] for b in blocks if b is not worst]
    return sentence(
        "miss-s2-stall", face=LANGS[lang], longest=f"{worst['longest_wait_ms']:.0f}",
        round=str(worst["round"] + 1), longest_gap=f"{max(worst['cross_gaps_ms']):.0f}",
        p99=f"{r['s2_summary'][f'{lang}/rlock']['gap_p99']:.2f}",
        others=sentence("miss-s2-stall-others", low=f"{min(others):.0f}", high=f"{max(others):.0f}")
        if others else "")


def semaphore(r: Run) -> str:
    s8s = r["s8_summary"]
    peer = s8s["js/sem:redis-semaphore"]
    ours = {lang: s8s[f"{lang}/sem:rlock"] for lang in LANGS}
    hold = med([s["hold_p50_ms"] for s in ours.values()])
    bound = PERMITS / hold * 1000
    over_peer = bound / med(peer["acq_per_s"])
    return sentence(
        "miss-s8", permits=str(PERMITS), hold=f"{hold:.2f}", bound=f"{bound:.0f}",
        over_peer=f"{over_peer:.2f}", bound_note=sentence("miss-s8-bound") if over_peer < 2 else "",
        in_use=", ".join(f"{med(s['in_use']):.1f}" for s in ours.values()),
        peer_in_use=f"{med(peer['in_use']):.1f}",
        peer_same=f"{100 * med(peer['same_share']):.0f}", peer_longest=f"{peer['longest_wait_ms']:.0f}",
        peer_spread=f"{med(peer['worker_spread']):.2f}",
        longest=", ".join(f"{s['longest_wait_ms']:.0f}" for s in ours.values()),
        spread=", ".join(f"{med(s['worker_spread']):.2f}" for s in ours.values()))


def go_s1(r: Run) -> str:
    s1s, counts = r["s1_summary"], r["s1"]["counts"]
    ours, theirs = counts["go/rlock"], counts["go/redislock"]
    return sentence(
        "miss-go-s1", theirs_calls=f"{theirs['scripted_per_cycle'] + theirs['sent_per_cycle']:g}",
        theirs_us=f"{theirs['server_us_per_cycle']:.1f}",
        ours_calls=f"{ours['scripted_per_cycle'] + ours['sent_per_cycle']:g}",
        ours_us=f"{ours['server_us_per_cycle']:.1f}",
        over_floor=f"{med(s1s['go/rlock']['ratio_to_floor']):.2f}",
        rust_over_floor=f"{med(s1s['rs/rlock']['ratio_to_floor']):.2f}")


def in_one_process(r: Run, s7_missed: List[Target]) -> str:
    s7s = r.get("s7_summary", {})
    same_handle = ""
    for n in HANDLES:
        k = row_key("js", "rlock", n)
        if k in s7s and any(f"{n} handles" in t["target"] and "default" in t["target"]
                            for t in s7_missed):
            same_handle += " " + sentence(
                "miss-s7-same-handle", handles=str(n),
                node_share=f"{100 * med(s7s[k]['same_share']):.0f}",
                python_share=f"{100 * med(s7s[k.replace('js/', 'py/', 1)]['same_share']):.0f}")
    misses = "; ".join(f"{t['target'].split(', ', 1)[1]}: {t['figure']}" for t in s7_missed)
    return sentence("miss-s7", misses=misses, same_handle=same_handle)


def cached(r: Run, missed: List[Target]) -> str:
    """S10: each missed target of redis-rlock's cache, told with its row's figures."""
    told = []
    for t in missed:
        lang = next((k for k, face in LANGS.items() if f"({face}" in t["target"]), None)
        if lang is None:
            continue
        face = LANGS[lang]
        # Only the loader-call target names the row; the others are the stale window's.
        stale = "stale window" in t["target"] or "loader call per expiry" not in t["target"]
        name = f"{face}, stale window" if stale else face
        e = r["s10"][f"{lang}/cached:rlock{'-stale' if stale else ''}"]["expiry"]
        if "loader call per expiry" in t["target"]:
            gaps = ", ".join(f"{g:.0f}" for g in e.get("extra_call_gaps_ms", []))
            told.append(sentence("miss-s10-calls", face=name, calls=str(e["loader_calls"]),
                                 expiries=str(e["expiries"]), gaps=gaps or "?"))
        elif "waits for the loader" in t["target"]:
            # Pending a moment, not a loader's time: held up past a store.
            brief = e["longest_wait_ms"] < s10.LOADER_MS / 5
            told.append(sentence(
                "miss-s10-held-up" if brief else "miss-s10-waited", face=name,
                waited=str(e["waited"]), reads=str(e["reads"]),
                longest=f"{e['longest_wait_ms']:.1f}", loader=str(s10.LOADER_MS)))
        elif "p99" in t["target"]:
            told.append(sentence("miss-s10-p99", face=name, across=f"{e['p99_ms']:.1f}",
                                 between=f"{e['between_p99_ms']:.1f}",
                                 reads=str(e["reads_across"]), max=f"{e['max_ms']:.0f}"))
        else:
            told.append(f"{name}: {t['target']}, {t['figure']}")
    return sentence("miss-s10", misses="; ".join(told))
