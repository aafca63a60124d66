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
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from rlock_test_support.history.records import Holding, History, Lock, Waiting, build
from rlock_test_support.history.room import Room
from rlock_test_support.history.waits import ended, free_stretch, judge_free, judge_timeout, no_room
from rlock_test_support.report import Report
from rlock_test_support.spans import MS, merge

# A renewal sent just before a pause may reach Redis a little after it: a
# paused holder's lease ends at most this long after the pause plus the lease.
RENEWAL_IN_FLIGHT_MS = 100


def crowds(b: Holding, others: Sequence[Holding]) -> bool:
    """Whether `b` could not hold the lock while all of `others` held it."""
    return not Room(b.family, b.permits).fits([*others, b])


def history(
    records: Iterable[Dict[str, Any]], workers: Dict[str, Dict[str, Any]], events: Sequence[Dict[str, Any]]
) -> History:
    """The records' history, with what each killed worker held or waited for
    when it was killed."""
    h = build(records, lambda w: workers[w])
    kills = {ev["w"]: ev["t"] for ev in events if ev["e"] == "kill"}
    for w, s in h.holding.items():
        s.killed = kills.get(w)
    for w, wait in h.waiting.items():
        if w in kills:
            wait.end, wait.out = kills[w], "killed"
    return h


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
    h = history(records, workers, events)
    sections, waits = h.holdings, h.waits
    stops: Dict[str, List[int]] = defaultdict(list)
    pauses: Dict[str, List[Tuple[int, int]]] = defaultdict(list)  # (stop, cont)
    for ev in events:
        if ev["e"] == "stop":
            stops[ev["w"]].append(ev["t"])
        elif ev["e"] == "cont":
            pauses[ev["w"]].append((stops[ev["w"]][-1], ev["t"]))
    wipes = sorted(ev["t"] for ev in events if ev["e"] == "wipe")
    blind = [(ev["t0"], ev["t1"]) for ev in events if ev["e"] == "blind"]

    by_lock: Dict[Lock, List[Holding]] = defaultdict(list)
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

    def paused(s: Holding, at: int) -> bool:
        return any(s.enter <= t <= at for t in stops[s.owner])

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
        if any(s.enter <= t0 and (end is None or t0 < end) and t1 - t0 > lease for t0, t1 in pauses[s.owner]):
            ended_while_running.add(id(s))
        if id(s) in ended_while_running and s.killed is None and not s.told:
            report.fail(f"{s}'s lease ended while it ran, and it was never told (let go with {s.out!r})")

    check_writes(writes, by_lock, wiped, report)
    check_waits(waits, by_lock, stops, wipes, blind, free_ms, late_ms, report)
    report.figures.setdefault("violations", 0)
    return report


def check_room(
    group: List[Holding], name: str, paused: Callable[[Holding, int], bool], wiped: Callable[[int, int], bool],
    report: Report,
) -> Set[int]:
    """1. Exclusion, over one lock's holdings in entry order: sweeps them,
    keeping those still believing. Returns the ids of the holdings whose
    lease must have ended while they ran (someone entered where both had no
    room)."""
    ended: Set[int] = set()
    believing: List[Tuple[int, int, Holding]] = []
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
    group: List[Holding], workers: Dict[str, Dict[str, Any]], wiped: Callable[[int, int], bool], fencing: bool,
    report: Report,
) -> None:
    """2. A mutex holder's or writer's token is above every token entered
    before it, and a reader's above every writer's before it; readers' and
    permit holders' tokens are unique. Within one server lifetime: the
    tokens seen so far are forgotten at a data loss."""
    top: Optional[Tuple[int, Holding]] = None  # the largest token entered so far
    top_alone: Optional[Tuple[int, Holding]] = None  # the same among mutex holders and writers
    shared: Dict[int, Holding] = {}
    prev: Optional[Holding] = None
    last_of: Dict[str, Holding] = {}  # each worker's latest holding so far
    for b in group:
        if b.token is None:
            continue
        token = b.token
        if prev is not None and wiped(prev.enter, b.enter):
            if top is not None and top[0] >= token:
                report.count("tokens restarted after data loss")
            top, top_alone, shared = None, None, {}
        prev = b
        above = top if b.alone else top_alone
        if above is not None and not token > above[0]:
            if carried_on(last_of.get(b.owner), b, workers):
                report.count("holdings taken on after an unanswered release")
                if b.alone:
                    top_alone = (token, b)
                top = (token, b)
            elif not fencing:
                report.count("tokens out of entry order (no fencing promised)")
            else:
                report.fail(f"{b} entered after {above[1]} with token {token} <= {above[0]}")
        if not b.alone:
            twin = shared.get(token)
            if twin is not None:
                if not fencing:
                    report.count("tokens repeated (no fencing promised)")
                else:
                    report.fail(f"{b} got the token {token} {twin} got")
            shared[token] = b
        if top is None or token > top[0]:
            top = (token, b)
        if b.alone and (top_alone is None or token > top_alone[0]):
            top_alone = (token, b)
        last_of[b.owner] = b


def carried_on(a: Optional[Holding], b: Holding, workers: Dict[str, Dict[str, Any]]) -> bool:
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
        a is not None and a.owner == b.owner and a.kind == b.kind and a.token == b.token
        and workers[a.owner].get("lang") == "py"
        and a.out is not None and a.out.startswith("error:release:") and a.exit is not None
        and b.enter <= a.exit + (a.ttl_ms + RENEWAL_IN_FLIGHT_MS) * MS
    )


def check_writes(
    writes: Sequence[Any], by_lock: Dict[Lock, List[Holding]], wiped: Any, report: Report
) -> None:
    """No write accepted from a holder once a newer holder had entered. The
    storage knows names only: a name's mutex and read-write lock writing to
    it are not meant to meet in one scenario."""
    writers = {lock: [s for s in group if s.alone] for lock, group in by_lock.items()}
    enters = {lock: [s.enter for s in group] for lock, group in writers.items()}
    owner = {(s.owner, s.name, s.token): s for group in writers.values() for s in group}
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
    waits: Sequence[Waiting],
    by_lock: Dict[Lock, List[Holding]],
    stops: Dict[str, List[int]],
    wipes: List[int],
    blind: List[Tuple[int, int]],
    free_ms: float,
    late_ms: float,
    report: Report,
) -> None:
    """4. Waiting: each wait ended, a timed-out one by its deadline, and none
    waited through more than its lease (+ 5% jitter) + `free_ms` while its
    lock had room for it (more than `free_ms`: a slow handoff, counted)."""
    held: Dict[Lock, List[Tuple[int, int, Holding]]] = {
        lock: [(min(s.since, s.enter), held_until(s, stops, wipes), s) for s in group] for lock, group in by_lock.items()
    }
    by_lock_waits: Dict[Lock, List[Waiting]] = defaultdict(list)
    for w in waits:
        by_lock_waits[w.lock].append(w)
    # The spans a mutex's or a writer's waiter had no room are every waiter's of that kind.
    alike: Dict[Tuple[Lock, str], List[Tuple[int, int]]] = {}
    for w in waits:
        if not ended(w, report):
            continue
        judge_timeout(w, late_ms, report)
        key = (w.lock, w.kind)
        busy = alike.get(key) if w.kind in ("mutex", "write") else None
        if busy is None:
            busy = merge(no_room(w, held.get(w.lock, []), by_lock_waits[w.lock]) + blind)
            if w.kind in ("mutex", "write"):
                alike[key] = busy
        stretch = free_stretch(w, busy, report)
        if stretch is None:
            continue
        gap = (stretch[1] - stretch[0]) / MS
        if gap > free_ms:
            report.count("slow handoffs")
        judge_free(w, gap, w.ttl_ms * 1.05 + free_ms, report)


def held_until(s: Holding, stops: Dict[str, List[int]], wipes: List[int]) -> int:
    """The latest the lock may have stayed taken by this holding."""
    lease = int(s.ttl_ms * MS)
    end = s.exit if s.exit is not None else (s.killed + lease if s.killed is not None else s.enter)
    for t in stops[s.owner]:
        if s.enter <= t <= end:
            end = min(end, t + lease)
    i = bisect.bisect_right(wipes, s.enter)
    if i < len(wipes) and wipes[i] < end:
        end = wipes[i]
    return end

