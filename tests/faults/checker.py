"""Verifies a fault scenario after the fact, from what every worker recorded
(see worker.py), what the suite did (kills, pauses, restarts) and what the
fenced storage accepted. All stamps are CLOCK_MONOTONIC nanoseconds.

A holder *believes* it holds the lock at each `step` stamp: the stamp is taken
before the holder asks whether it was told the lease ended, and the answer was
no. Each `wait` and `enter` record names the lock's kind: a mutex (the
default), the `read` or `write` side of a read-write lock, or one permit of a
`semaphore` of `permits` permits. A name's mutex, read-write lock and
semaphore are three locks. The promises checked, per lock:

1. Exclusion: no holder enters while others still believing they hold the
   lock leave it no room: beside a mutex holder or a writer nobody, beside a
   reader no writer, beside N-1 permit holders no other. Allowed, and counted:
   the earlier holder was told "lost" before the later one entered (it no
   longer believes); the earlier holder was paused (SIGSTOP) when the later
   one entered (it cannot know; fencing must stop it); the server lost its
   data (a restart without persistence: not guaranteed).
2. Fencing: a mutex holder's or a writer's token is above every token of
   the lock entered before it and below every one entered after it (within
   one server lifetime); readers' and permit holders' tokens are unique; and
   the storage accepted no write from a holder after a newer holder had
   entered. Only mutex holders and writers write; readers and permit holders
   only step. A Redlock promises no token order (each master counts on its
   own): with `fencing=False` tokens out of order are only counted.
3. Honest loss: a holder whose lease ended while it still ran (someone else
   entered where there was no room for both, the data was lost, or it was
   paused for longer than its lease) was told so; one told so also got "lost"
   when it let go.
4. Waiting: a wait that timed out ended by its deadline (not early, not more
   than `late_ms` after), and no waiter waited through a stretch of more than
   its lease (+ 5% jitter) + `free_ms` while the lock had room for it: a
   release message wakes waiters at once, and a waiter that missed it retries
   when the lease it last saw would end. A writer has room when nobody holds,
   a reader when no writer holds or waits (writers go first), a permit holder
   when fewer than N permits are held. Stretches over `free_ms` are counted
   as slow handoffs. A killed holder keeps its share at most its lease after
   death; a paused one at most its lease after the pause.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from rlock_test_support.report import Report
from rlock_test_support.spans import MS, longest_free, merge

from kinds import ALONE

# The lock each kind takes a share of: a name's mutex, read-write lock and
# semaphore are three locks.
FAMILY = {"mutex": "mutex", "read": "read-write lock", "write": "read-write lock", "semaphore": "semaphore"}
# A renewal sent just before a pause may reach Redis a little after it: a
# paused holder's lease ends at most this long after the pause plus the lease.
RENEWAL_IN_FLIGHT_MS = 100

Lock = Tuple[str, str]  # (family, name)


@dataclass
class Section:
    worker: str
    name: str
    token: Optional[int]
    enter: int
    ttl_ms: float
    steps: List[int] = field(default_factory=list)
    since: int = 0  # when the lock may have been taken, at the earliest (busy from then)
    lost: Optional[int] = None  # when the holder was told (first seen)
    exit: Optional[int] = None  # after letting go
    out: Optional[str] = None
    killed: Optional[int] = None
    kind: str = "mutex"
    permits: int = 1  # a semaphore's size

    @property
    def lock(self) -> Lock:
        return FAMILY[self.kind], self.name

    @property
    def believed_until(self) -> int:
        return self.steps[-1] if self.steps else self.enter

    @property
    def told(self) -> bool:
        return self.lost is not None or self.out == "lost"

    def __str__(self) -> str:
        kind = "" if self.kind == "mutex" else f"({self.kind})"
        return f"{self.worker}{kind}#{self.token}@{self.name}"


@dataclass
class Wait:
    worker: str
    name: str
    start: int
    ttl_ms: float
    end: Optional[int] = None
    out: Optional[str] = None  # acquired | timeout | error:... | killed
    timeout_ms: Optional[float] = None
    kind: str = "mutex"
    permits: int = 1

    @property
    def lock(self) -> Lock:
        return FAMILY[self.kind], self.name


def crowds(b: Section, others: Sequence[Section]) -> bool:
    """Whether `b` could not hold the lock while all of `others` held it."""
    if b.kind == "semaphore":
        return len(others) + 1 > b.permits
    if b.kind == "read":
        return any(a.kind == "write" for a in others)
    return bool(others)


def build(
    records: Iterable[Dict[str, Any]], workers: Dict[str, Dict[str, Any]], events: Sequence[Dict[str, Any]]
) -> Tuple[List[Section], List[Wait]]:
    """Sections and waits from the records, in each worker's own order."""
    sections: List[Section] = []
    waits: List[Wait] = []
    open_section: Dict[str, Section] = {}
    open_wait: Dict[str, Wait] = {}
    for r in records:
        w, e = r["w"], r["e"]
        cfg = workers[w]
        kind = {"kind": r.get("kind", "mutex"), "permits": r.get("permits", 1)}
        if e == "wait":
            open_wait[w] = Wait(w, r["n"], r["t"], cfg["ttl_ms"], timeout_ms=cfg.get("timeout_ms"), **kind)
            waits.append(open_wait[w])
        elif e == "enter":
            wait = open_wait.pop(w, None)
            if wait is not None:
                wait.end, wait.out = r["t"], "acquired"
            open_section[w] = Section(w, r["n"], r["tok"], r["t"], cfg["ttl_ms"], since=r.get("since", r["t"]), **kind)
            sections.append(open_section[w])
        elif e == "step":
            open_section[w].steps.append(r["t"])
        elif e == "lost":
            s = open_section[w]
            s.lost = r["t"] if s.lost is None else min(s.lost, r["t"])
        elif e == "exit":
            s = open_section.pop(w)
            s.exit, s.out = r["t"], r["out"]
        elif e == "waited" and "t0" in r:  # cycles mode: one line per wait
            waits.append(Wait(w, r["n"], r["t0"], cfg["ttl_ms"], r["t"], r["out"], cfg.get("timeout_ms")))
        elif e == "waited":
            wait = open_wait.pop(w)
            wait.end, wait.out = r["t"], r["out"]
        elif e == "cycle":
            waits.append(Wait(w, r["n"], r["t0"], cfg["ttl_ms"], r["t1"], "acquired", cfg.get("timeout_ms")))
            sections.append(
                Section(w, r["n"], r["tok"], r["t1"], cfg["ttl_ms"], [r["t2"]], r["t1"], exit=r["t"], out=r["out"])
            )
    kills = {ev["w"]: ev["t"] for ev in events if ev["e"] == "kill"}
    for w, s in open_section.items():
        s.killed = kills.get(w)
    for w, wait in open_wait.items():
        if w in kills:
            wait.end, wait.out = kills[w], "killed"
    return sections, waits


def check(
    records: Iterable[Dict[str, Any]],
    workers: Dict[str, Dict[str, Any]],
    events: Sequence[Dict[str, Any]],
    writes: Sequence[Any] = (),
    free_ms: float = 200,
    late_ms: float = 200,
    fencing: bool = True,
) -> Report:
    report = Report()
    sections, waits = build(records, workers, events)
    stops: Dict[str, List[int]] = defaultdict(list)
    pauses: Dict[str, List[Tuple[int, int]]] = defaultdict(list)  # (stop, cont)
    for ev in events:
        if ev["e"] == "stop":
            stops[ev["w"]].append(ev["t"])
        elif ev["e"] == "cont":
            pauses[ev["w"]].append((stops[ev["w"]][-1], ev["t"]))
    wipes = sorted(ev["t"] for ev in events if ev["e"] == "wipe")
    blind = [(ev["t0"], ev["t1"]) for ev in events if ev["e"] == "blind"]

    by_lock: Dict[Lock, List[Section]] = defaultdict(list)
    for s in sections:
        by_lock[s.lock].append(s)
    for s in sections:
        report.count("sections")
        if s.told:
            report.count("losses reported")
        if s.out is None and s.killed is None:
            report.fail(f"{s} never let go (no exit recorded)")
        elif s.out is not None and s.out.startswith("error"):
            report.count("errors reported")
        if s.lost is not None and s.out not in (None, "lost"):
            report.fail(f"{s} was told lost but letting go reported {s.out!r}")

    def paused(s: Section, at: int) -> bool:
        return any(s.enter <= t <= at for t in stops[s.worker])

    def wiped(lo: int, hi: int) -> bool:
        i = bisect.bisect_right(wipes, lo)
        return i < len(wipes) and wipes[i] <= hi

    ended_while_running: Set[int] = set()
    for (_, name), group in by_lock.items():
        group.sort(key=lambda s: s.enter)
        ended_while_running |= check_room(group, name, paused, wiped, report)
        # Told before the next holder entered: allowed, counted.
        for a, b in zip(group, group[1:]):
            if crowds(b, [a]) and a.lost is not None and a.lost <= b.enter and (a.exit is None or b.enter < a.exit):
                report.count("overlaps after a reported loss")
            if wiped(a.enter, a.believed_until):
                ended_while_running.add(id(a))
        check_tokens(group, workers, wiped, fencing, report)

    # 3. A lease that ended while its holder ran was reported to it.
    for s in sections:
        lease = s.ttl_ms * MS + RENEWAL_IN_FLIGHT_MS * MS
        end = s.exit if s.exit is not None else s.killed
        if any(s.enter <= t0 and (end is None or t0 < end) and t1 - t0 > lease for t0, t1 in pauses[s.worker]):
            ended_while_running.add(id(s))
        if id(s) in ended_while_running and s.killed is None and not s.told:
            report.fail(f"{s}'s lease ended while it ran, and it was never told (let go with {s.out!r})")

    check_writes(writes, by_lock, wiped, report)
    check_waits(waits, by_lock, stops, wipes, blind, free_ms, late_ms, report)
    report.figures.setdefault("violations", 0)
    return report


def check_room(
    group: List[Section], name: str, paused: Callable[[Section, int], bool], wiped: Callable[[int, int], bool],
    report: Report,
) -> Set[int]:
    """1. Exclusion, over one lock's holdings in entry order: sweeps them,
    keeping those still believing. Returns the ids of the holdings whose
    lease must have ended while they ran (someone entered where both had no
    room)."""
    ended: Set[int] = set()
    believing: List[Tuple[int, int, Section]] = []
    for i, b in enumerate(group):
        while believing and believing[0][0] <= b.enter:
            heapq.heappop(believing)
        live = [a for _, _, a in believing]
        excused = {id(a) for a in live if paused(a, b.enter) or wiped(a.enter, b.enter)}
        steady = [a for a in live if id(a) not in excused]
        for a in live:
            # `a` lost its lease when, even if every other excused holder
            # had lost theirs, `b` had no room beside it.
            if not crowds(b, [x for x in steady if x is not a] + [a]):
                continue
            ended.add(id(a))
            if id(a) not in excused:
                room = f" (at most {b.permits} permits, {len(steady)} others held)" if b.kind == "semaphore" else ""
                report.fail(
                    f"{b} entered while {a} still believed it held {name!r}{room} "
                    f"(until {(a.believed_until - b.enter) / MS:.1f} ms later)"
                )
            elif paused(a, b.enter):
                report.count("overlaps with a paused holder")
            else:
                report.count("overlaps after data loss")
        heapq.heappush(believing, (b.believed_until, i, b))
    return ended


def check_tokens(
    group: List[Section], workers: Dict[str, Dict[str, Any]], wiped: Callable[[int, int], bool], fencing: bool,
    report: Report,
) -> None:
    """2. A mutex holder's or writer's token is above every token entered
    before it, and a reader's above every writer's before it; readers' and
    permit holders' tokens are unique. Within one server lifetime: the
    tokens seen so far are forgotten at a data loss."""
    top: Optional[Tuple[int, Section]] = None  # the largest token entered so far
    top_alone: Optional[Tuple[int, Section]] = None  # the same among mutex holders and writers
    shared: Dict[int, Section] = {}
    prev: Optional[Section] = None
    last_of: Dict[str, Section] = {}  # each worker's latest holding so far
    for b in group:
        if b.token is None:
            continue
        token = b.token
        if prev is not None and wiped(prev.enter, b.enter):
            if top is not None and top[0] >= token:
                report.count("tokens restarted after data loss")
            top, top_alone, shared = None, None, {}
        prev = b
        above = top if b.kind in ALONE else top_alone
        if above is not None and not token > above[0]:
            if carried_on(last_of.get(b.worker), b, workers):
                report.count("holdings taken on after an unanswered release")
                if b.kind in ALONE:
                    top_alone = (token, b)
                top = (token, b)
            elif not fencing:
                report.count("tokens out of entry order (no fencing promised)")
            else:
                report.fail(f"{b} entered after {above[1]} with token {token} <= {above[0]}")
        if b.kind not in ALONE:
            twin = shared.get(token)
            if twin is not None:
                if not fencing:
                    report.count("tokens repeated (no fencing promised)")
                else:
                    report.fail(f"{b} got the token {token} {twin} got")
            shared[token] = b
        if top is None or token > top[0]:
            top = (token, b)
        if b.kind in ALONE and (top_alone is None or token > top_alone[0]):
            top_alone = (token, b)
        last_of[b.worker] = b


def carried_on(a: Optional[Section], b: Section, workers: Dict[str, Dict[str, Any]]) -> bool:
    """Whether `b` is the holding `a` (the previous one of its worker on this
    lock) taken on by its own owner: `a`'s release went unanswered (its
    holder got a connection error from it, recorded as `error:release:`), so
    the lock may have stayed in Redis, that owner's and unrenewed, until its
    lease ran out; the owner's next acquisition then finds it still its own
    and goes on with it, under the same token. Only a Python worker keeps
    one owner from round to round (its thread or task; Node's using() and
    each CLI round are new owners), and only within that lease of the exit.
    Nobody else entered in between: the token would have grown."""
    return (
        a is not None and a.worker == b.worker and a.kind == b.kind and a.token == b.token
        and workers[a.worker].get("lang") == "py"
        and a.out is not None and a.out.startswith("error:release:") and a.exit is not None
        and b.enter <= a.exit + (a.ttl_ms + RENEWAL_IN_FLIGHT_MS) * MS
    )


def check_writes(
    writes: Sequence[Any], by_lock: Dict[Lock, List[Section]], wiped: Any, report: Report
) -> None:
    """No write accepted from a holder once a newer holder had entered. The
    storage knows names only: a name's mutex and read-write lock writing to
    it are not meant to meet in one scenario."""
    writers = {lock: [s for s in group if s.kind in ALONE] for lock, group in by_lock.items()}
    enters = {lock: [s.enter for s in group] for lock, group in writers.items()}
    owner = {(s.worker, s.name, s.token): s for group in writers.values() for s in group}
    for w in writes:
        if not w.accepted:
            report.count("stale writes refused")
            continue
        s = owner.get((w.worker, w.name, w.token))
        if s is None:
            report.fail(f"storage accepted token {w.token} on {w.name!r} from {w.worker}, who never held it to write")
            continue
        later = enters[s.lock]
        i = bisect.bisect_right(later, s.enter)
        if i < len(later) and later[i] < w.t:
            if wiped(s.enter, w.t):
                report.count("stale writes accepted after data loss")
            else:
                report.fail(
                    f"storage accepted {s}'s write {(w.t - later[i]) / MS:.1f} ms after a newer holder entered"
                )


def check_waits(
    waits: Sequence[Wait],
    by_lock: Dict[Lock, List[Section]],
    stops: Dict[str, List[int]],
    wipes: List[int],
    blind: List[Tuple[int, int]],
    free_ms: float,
    late_ms: float,
    report: Report,
) -> None:
    held: Dict[Lock, List[Tuple[int, int, Section]]] = {
        lock: [(min(s.since, s.enter), held_until(s, stops, wipes), s) for s in group] for lock, group in by_lock.items()
    }
    writers_waiting: Dict[Lock, List[Tuple[int, int]]] = defaultdict(list)
    for w in waits:
        if w.kind == "write" and w.end is not None:
            writers_waiting[w.lock].append((w.start, w.end))
    no_room: Dict[Tuple[Lock, str, int], List[Tuple[int, int]]] = {}

    def busy(w: Wait) -> List[Tuple[int, int]]:
        """When `w` had no room: a writer or a mutex waiter while anyone
        held; a reader while a writer held or waited; a permit waiter while
        every permit was held."""
        key = (w.lock, w.kind, w.permits)
        if key not in no_room:
            spans = held.get(w.lock, [])
            if w.kind == "read":
                taken = [(lo, hi) for lo, hi, s in spans if s.kind == "write"] + writers_waiting[w.lock]
            elif w.kind == "semaphore":
                taken = crowded([(lo, hi) for lo, hi, _ in spans], w.permits)
            else:
                taken = [(lo, hi) for lo, hi, _ in spans]
            no_room[key] = merge(taken + blind)
        return no_room[key]

    for w in waits:
        report.count("waits")
        if w.end is None:
            report.fail(f"{w.worker}'s wait for {w.name!r} never ended")
            continue
        waited_ms = (w.end - w.start) / MS
        if w.out == "timeout":
            report.count("timeouts")
            if w.timeout_ms is None:
                report.fail(f"{w.worker} timed out on {w.name!r} with no timeout set")
            else:
                report.peak("max timeout overshoot ms", waited_ms - w.timeout_ms)
                if waited_ms > w.timeout_ms + late_ms:
                    report.fail(f"{w.worker} gave up on {w.name!r} {waited_ms - w.timeout_ms:.0f} ms past its deadline")
                if waited_ms < w.timeout_ms - 20:
                    report.fail(f"{w.worker} gave up on {w.name!r} after {waited_ms:.0f} ms of {w.timeout_ms} ms")
        elif w.out is not None and w.out.startswith("error"):
            report.count("waits ended by an error")
        if w.out in ("acquired", "timeout"):
            lo, hi = longest_free(busy(w), w.start, w.end)
            gap = (hi - lo) / MS
            report.peak("max free while waiting ms", gap)
            if gap > free_ms:
                report.count("slow handoffs")
            if gap > w.ttl_ms * 1.05 + free_ms:
                room = {"mutex": "", "read": " to readers", "write": " to writers", "semaphore": " to a permit holder"}
                report.fail(f"{w.worker} waited for {w.name!r} through {gap:.0f} ms while it was free{room[w.kind]}")


def crowded(spans: List[Tuple[int, int]], level: int) -> List[Tuple[int, int]]:
    """The stretches when at least `level` of `spans` overlap."""
    edges = sorted([(lo, 1) for lo, _ in spans] + [(hi, -1) for _, hi in spans])
    out: List[Tuple[int, int]] = []
    depth, since = 0, 0
    for t, step in edges:
        if step < 0 and depth == level:
            out.append((since, t))
        depth += step
        if step > 0 and depth == level:
            since = t
    return out


def held_until(s: Section, stops: Dict[str, List[int]], wipes: List[int]) -> int:
    """The latest the lock may have stayed taken by this holding."""
    lease = int(s.ttl_ms * MS)
    end = s.exit if s.exit is not None else (s.killed + lease if s.killed is not None else s.enter)
    for t in stops[s.worker]:
        if s.enter <= t <= end:
            end = min(end, t + lease)
    i = bisect.bisect_right(wipes, s.enter)
    if i < len(wipes) and wipes[i] < end:
        end = wipes[i]
    return end

