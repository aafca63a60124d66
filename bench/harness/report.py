"""RESULTS.md: a run's figures in the tables and text of RESULTS.in.md."""

from __future__ import annotations

import statistics
from typing import Any, Dict, List

from .contenders import IN_ONE_PROCESS, LANGS, PERMITS, kind_of, label_of
from .misses import why_missed
from .prose import section, sentence
from .scenarios import cached as s10
from .scenarios import read_write as s9
from .scenarios import semaphore_handoff as s8
from .scenarios.in_process_handoff import HANDLES, row_key
from .stats import spread
from .targets import per_read, worker_spread

med = statistics.median


def fmt_us(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def check(t: Dict[str, Any]) -> str:
    if "not a target" in t["scenario"]:
        return t.get("shown", "bound")
    return "met" if t["ok"] else "**missed**"


def ok(passed: bool) -> str:
    return "ok" if passed else "FAILED"


def write_report(r: Dict[str, Any], path: str) -> None:
    parts = [header(r), why_missed(r), uncontended(r), binding_overhead(r), contended(r),
             fairness_cost(r), in_one_process(r), semaphore(r), read_write(r), cached(r), idle_waiters(r),
             watchdog(r), redlock(r), section("method")]
    lines: List[str] = []
    for part in parts:
        if part:
            lines += part + [""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def header(r: Dict[str, Any]) -> List[str]:
    m = r["machine"]
    return section(
        "header",
        date=r["date"], minutes=f"{r['duration_s'] / 60:.1f}",
        quick=" " + sentence("quick") if r["quick"] else "",
        rewritten=" " + sentence("rewritten", date=r["rewritten"]) if r.get("rewritten") else "",
        cpu=m["cpu"], cores=str(m["cores"]), memory_gib=str(m["memory_gib"]), kernel=m["kernel"],
        busy_before=f"{100 * m['busy_before']:.0f}", load_before=f"{m['load_before'][0]:.2f}",
        top="; ".join(f"`{t}`" for t in m["top_before"][:3]),
        others_cores=f"{r['others_cores']:.2f}", load_after=f"{r['load_after'][0]:.2f}",
        versions=[f"| {k} | {v} |" for k, v in r["versions"].items()],
        targets=[f"| {t['scenario']} | {t['target']} | {t['figure']} | {check(t)} |"
                 for t in r["targets"]],
    )


def cycle_rows(r: Dict[str, Any], kind: str) -> List[str]:
    """S1's table rows of one kind of lock (`mutex`: the floors too)."""
    s1, s1s = r["s1"], r["s1_summary"]
    rows = []
    for key in [k for k in s1["items"] if kind_of(k) == kind]:
        s, c = s1s[key], s1["counts"][key]
        sent = ", ".join(f"{k} {v:g}" for k, v in sorted(c["sent"].items()))
        rows.append(
            f"| {label_of(key)} | {c['sent_per_cycle']:g} ({sent}) | "
            f"{sum(c['commandstats_per_cycle'].values()):g} | {c['server_us_per_cycle']:.1f} | "
            f"{med(s['rate']):.0f} | "
            f"{fmt_us(s['p50'])} | {fmt_us(s['p99'])} | {spread(s['ratio_to_floor'])} |")
    return rows


def uncontended(r: Dict[str, Any]) -> List[str]:
    s1 = r["s1"]
    rows = cycle_rows(r, "mutex")
    round_trips = []
    for test in r["redis_benchmark"][0]:
        runs = [b[test] for b in r["redis_benchmark"]]
        round_trips.append(
            f"| {test} | {spread([x['rps'] for x in runs], '{:.0f}')} | "
            f"{spread([x['p50_latency_ms'] for x in runs], '{:.3f}')} | "
            f"{spread([x['p99_latency_ms'] for x in runs], '{:.3f}')} |")
    return section("s1", rounds=str(s1["rounds"]), block=str(s1["block"]),
                   cycles=str(s1["rounds"] * s1["block"]), rows=rows, round_trips=round_trips)


def binding_overhead(r: Dict[str, Any]) -> List[str]:
    counting = r.get("counting_ns")
    rust_p50 = r["s1_summary"]["rs/rlock"]["p50"]
    return section(
        "s5",
        faces=[f"| {LANGS[lang]} | {spread(r['s5'][lang], '{:.1f}')} |" for lang in ("py", "js", "go")],
        runtimes=[f"| {h['way']} | {spread(h['rounds'], '{:.0f}')} |" for h in r.get("hops", [])],
        counting=(f"{spread(counting, '{:.0f}')} ns per cycle, {100 * med(counting) / 1000 / rust_p50:.3f} % of "
                  f"the Rust cycle's p50 in S1 ({fmt_us(rust_p50)} µs)") if counting else "not measured",
    )


def contended(r: Dict[str, Any]) -> List[str]:
    rows = []
    for key, s in r["s2_summary"].items():
        rows.append(
            f"| {label_of(key)} | {spread(s['acq_per_s'], '{:.0f}')} | "
            f"{spread(s['cross_per_s'], '{:.0f}')} | {s['gap_p50']:.2f} | {s['gap_p99']:.2f} | "
            f"{100 * med(s['same_share']):.0f} % | {worker_spread(s)} | "
            f"{s['longest_wait_ms']:.0f} | "
            f"{'ok' if s['counter_ok'] else 'LOST UPDATES'} ({s['counter']} = {s['acquisitions_total']}) "
            f"| {s['overlaps']} |")
    return section("s2", rounds=str(r["s2_rounds"]), seconds=f"{r['s2_seconds']:g}",
                   total=f"{r['s2_rounds'] * r['s2_seconds']:g}", rows=rows)


def fairness_cost(r: Dict[str, Any]) -> List[str]:
    s2s = r["s2_summary"]
    fair = [k for k in s2s if k.endswith("/rlock-fair")]
    if not fair:
        return []

    def over_default(k: str, figure: str) -> str:
        return f"{med(s2s[k][figure]) / med(s2s[k.replace('-fair', '')][figure]):.2f}"

    faces = [sentence("fair-cost-face", face=LANGS[k.split("/")[0]],
                      acquisitions=over_default(k, "acq_per_s"),
                      handoffs=over_default(k, "cross_per_s")) for k in fair]
    return section("fair-cost", faces="; ".join(faces))


def in_one_process(r: Dict[str, Any]) -> List[str]:
    s7s = r.get("s7_summary")
    if not s7s:
        return []
    rows = []
    for c in IN_ONE_PROCESS:
        for n in HANDLES:
            row = [s7s.get(row_key(lang, c, n)) for lang in LANGS]
            if any(x is None for x in row):
                continue
            py, js = row[0], row[1]
            rows.append(
                f"| {'fair' if c.endswith('-fair') else 'default'} | {n} | "
                + " / ".join(f"{x['gap_p50']:.3f}" for x in row) + " | "
                + " / ".join(f"{x['gap_p99']:.2f}" for x in row) + " | "
                f"{js['gap_p50'] / py['gap_p50']:.2f}× | "
                + " / ".join(f"{med(x['acq_per_s']):.0f}" for x in row) + " | "
                + " / ".join(f"{x['wait_p50']:.2f}" for x in row) + " | "
                f"{ok(all(x['counter_ok'] and not x['overlaps'] for x in row))} |")
    rounds = r["s7_rounds"]
    return section("s7", blocks=f"{rounds} block{'s' if rounds != 1 else ''}",
                   seconds=f"{r['s7_seconds']:g}", rows=rows)


def semaphore(r: Dict[str, Any]) -> List[str]:
    s8s = r.get("s8_summary")
    if not s8s:
        return []
    rows = [f"| {label_of(k)} | {spread(s['acq_per_s'], '{:.0f}')} | {spread(s['cross_per_s'], '{:.0f}')} | "
            f"{100 * med(s['same_share']):.0f} % | {s['wait_p50_ms']:.2f} | "
            f"{s['longest_wait_ms']:.0f} | {spread(s['worker_spread'])} | {spread(s['in_use'])} | "
            f"{s['most_inside']} | {s['errors']} |" for k, s in s8s.items()]
    rounds = r["s8_rounds"]
    return section("s8", permits=str(PERMITS), workers=str(s8.WORKERS), hold=str(s8.HOLD_MS),
                   waiting=str(s8.WORKERS - PERMITS),
                   cycles=cycle_rows(r, "sem"), blocks=f"{rounds} block{'s' if rounds != 1 else ''}",
                   seconds=f"{r['s8_seconds']:g}", rows=rows)


def read_write(r: Dict[str, Any]) -> List[str]:
    s9s = r.get("s9_summary")
    if not s9s:
        return []
    rows = []
    for lang in LANGS:
        for mode, name in (("rw", "read-write lock"), ("mutex", "one mutex")):
            s = s9s[s9.row_key(lang, mode)]
            rows.append(
                f"| {LANGS[lang]} | {name} | {spread(s['reader_acq_per_s'], '{:.0f}')} | "
                f"{s['reader_wait_p50_ms']:.2f} / {s['reader_longest_wait_ms']:.0f} | "
                f"{spread(s['writer_acq_per_s'], '{:.0f}')} | "
                f"{s['writer_wait_p50_ms']:.2f} / {s['writer_longest_wait_ms']:.0f} | "
                f"{s['read_hold_p50_ms']:.2f} | {ok(not s['breaches'])} |")
    rounds = r["s9_rounds"]
    return section("s9", readers=str(s9.READERS), read_hold=str(s9.READ_HOLD_MS),
                   write_hold=str(s9.WRITE_HOLD_MS), write_pause=str(s9.WRITE_PAUSE_MS),
                   blocks=f"{rounds} block{'s' if rounds != 1 else ''}",
                   seconds=f"{r['s9_seconds']:g}", rows=rows)


def cached(r: Dict[str, Any]) -> List[str]:
    s10s = r.get("s10")
    if not s10s:
        return []
    expiry, commands = [], []
    for k, b in s10s.items():
        e, c, cold = b["expiry"], b["commands"], b["cold"]
        calls = e["calls_per_expiry"]
        expiry.append(
            f"| {label_of(k)} | {e['loader_calls'] / max(e['expiries'], 1):.2f} ({e['expiries']}) | "
            f"{max(calls, default=0)} | {waited(e)} | "
            f"{e['p50_ms']:.2f} / {e['p99_ms']:.1f} / {e['max_ms']:.0f} | "
            f"{e['between_p50_ms']:.2f} / {e['between_p99_ms']:.1f} / {e['between_max_ms']:.0f} | "
            f"{e['p99_ms'] / e['between_p99_ms']:.2f}× | {e['errors']} |")
        commands.append(
            f"| {label_of(k)} | {c['sent_per_read']:g} ({per_read(c)}) | {c['server_calls_per_read']:g} | "
            f"{cold['loader_calls']:,} | {cold['seconds']:.1f} | {cold['errors']} |")
    reads_per_s = [b["expiry"]["reads_per_s"] for b in s10s.values()]
    return section(
        "s10", processes=str(s10.PROCESSES), readers=str(s10.READERS), loader=str(s10.LOADER_MS),
        pace=str(s10.PACE_MS), pace_max=str(2 * s10.PACE_MS),
        rate=f"{s10.PROCESSES * s10.READERS * 1000 / s10.PACE_MS:,.0f}",
        achieved=f"{min(reads_per_s):,.0f}–{max(reads_per_s):,.0f}",
        ttl=f"{s10.TTL_S:g}", half_ttl=f"{s10.TTL_S / 2:g}", stale=f"{s10.STALE_S:g}",
        expiry_s=f"{r['s10_expiry_seconds']:g}", warm=f"{s10.WARM_S:g}",
        hit_reads=str(s10.HIT_READS), keys=f"{s10.COLD_KEYS:,}",
        expiry=expiry, commands=commands)


def waited(e: Dict[str, Any]) -> str:
    """Reads that waited for a loader, and for how long at most."""
    if not e["waited"]:
        return f"0 of {e['reads']}"
    return f"{e['waited']} of {e['reads']} (up to {e['longest_wait_ms']:.1f} ms)"


def idle_waiters(r: Dict[str, Any]) -> List[str]:
    rows = []
    for key, s in r["idle"].items():
        busiest = sorted(s["commands"].items(), key=lambda kv: -kv[1])[:4]
        which = ", ".join(f"{k} {v}" for k, v in busiest)
        rows.append(f"| {label_of(key)} | {s['per_s']:.1f} | {which or '-'} |")
    return section("idle", waiters=str(r["idle_waiters"]), window=f"{r['idle_window']:g}",
                   settle=f"{r['idle_settle']:g}", rows=rows)


def watchdog(r: Dict[str, Any]) -> List[str]:
    s4 = r["s4"]
    return section(
        "s4", locks=str(s4["locks"]), lease=f"{s4['ttl_ms'] / 1000:g}", wall_s=f"{s4['wall_s']:.0f}",
        not_acquired=str(s4["not_acquired"]), lost_during=str(s4["lost_during"]),
        lost_at_end=str(s4["lost_at_end"]), release_failed=str(s4["release_failed"]),
        ticks=str(s4["ticks"]),
        trips_median=f"{med(s4['trips_per_tick'] or [0]):g}",
        trips_max=str(max(s4["trips_per_tick"] or [0])),
        renewals_median=f"{med(s4['commands_per_tick'] or [0]):g}",
        cpu_s=f"{s4['cpu_s']:.2f}", cpu_pct=f"{s4['cpu_pct']:.1f}",
    )


def redlock(r: Dict[str, Any]) -> List[str]:
    if not r.get("s6") and not r.get("s6_note"):
        return []
    lines = section("s6", note=r["s6_note"])
    for n, s6 in (r.get("s6") or {}).items():
        lines += [""] + section("s6-size", servers=n, rows=[redlock_row(s6, k) for k in s6["items"]])
    return lines


def redlock_row(s6: Dict[str, Any], key: str) -> str:
    a, b, c = s6["s1_summary"][key], s6["s2_summary"].get(key), s6["counts"][key]
    s2cols = (f"{spread(b['acq_per_s'], '{:.0f}')} | {spread(b['cross_per_s'], '{:.0f}')} | "
              f"{b['gap_p50']:.2f} / {b['gap_p99']:.2f} | {b['longest_wait_ms']:.0f} | "
              f"{ok(b['counter_ok'] and not b['overlaps'])}") if b else "- | - | - | - | -"
    return (f"| {label_of(key)} | {c['sent_per_cycle']:g} | {fmt_us(a['p50'])} | "
            f"{med(a['rate']):.0f} | {spread(a['ratio_to_rlock'])} | {s2cols} |")
