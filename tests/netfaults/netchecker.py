"""Judges one network-fault schedule after the fact, from what the workers
recorded (see worker.py) and the faults the driver injected, all on one clock
(CLOCK_MONOTONIC nanoseconds). One lock per schedule: a mutex, a read-write
lock or a semaphore, whose room (rlock_test_support.history.room) replaces "one holder" in
the promises below for the last two.

A holder *believes* it holds the lock at each `step` stamp (taken before it
asked whether it was told the lease ended, and the answer was no); it is
inside from its first belief to its last. An acquisition told lost before its
first step never entered (counted). The promises, for every schedule:

1. Exclusion: no holder enters while another still believes: every holder's
   [first belief, last belief] interval holds no other holder's first belief.
   Shared kinds: a holder enters only while those still believing and it fit
   in the lock: never a writer with anyone else inside, never more permits
   held than the semaphore has.
   Under Redlock, once masters forgot their data (a `forget` fault: restarted
   empty, or flushed) after a holding was asked for and before another entered,
   that holding may have stood on too few masters to keep the rival out
   (docs/deployments.md, Redlock): the entry beside it is counted, provided
   the holding was told it lost the lock, and provided it never re-entered
   (a nested acquire that took the lock again) after the rival's entry: a
   re-entry over masters a rival held meanwhile is a loss, not a re-entry.
2. Honest loss: a holder without auto-renew stops believing by the end of its
   lease in Redis (at the latest the lease after its entry or after its last
   nested acquire or release or extension returned: each resets the lease). A
   holder whose lease ended while it still ran (another holder entered before
   it began to let go) was told: a `lost` record, or letting go answered lost /
   not owned. Shared kinds: when a holder enters and, counting every holder
   that entered before and had not begun to let go, the lock holds more than
   it admits, enough of those were told to make room. The other way round, a
   holder whose whole holding, release included, fitted in its lease with no
   other entry before its release began (shared kinds: none the lock could
   admit only without it), was not told "lost": that report would be false
   (timed from the start of its wait, which is as early as its lease can
   start). Excused: a stall between the start of its wait and its exit
   (renewals starve, and a lease timed from a stalled request may be over on
   arrival), two broken command connections then (a request and its one
   retry may both fail), or a master forgetting its data then.
3. Waiting: no waiter waits through a stretch longer than `Bounds.free_ms` while
   the lock is free (held by nobody on the records' evidence):
   - `SLACK_MS` on a fault-free wire (a release message wakes a waiter at once,
     a handoff names it at once; the slack is scheduling on a loaded machine);
   - plus, for faults overlapping the stretch, what they cost a wake-up: a stall
     its length; a reply delay 4 x its delay (the release message or handoff,
     the attempt's reply, a resubscription's confirmation, one more attempt),
     and under Redlock, when it is over the node timeout, its whole length; a
     reset, cut request, dropped reply or dropped request `RECONNECT_MS` (a
     fresh connection and the retry); a master forgetting its data its time
     down + `RECONNECT_MS`; a slot moved or a master failed over (Cluster) its
     time + `RESUBSCRIBE_MS` + `RECONNECT_MS` (the node drops the slot's sharded
     subscriptions: the client subscribes again where the slot now lives, once
     it learnt the layout, and its waiters try again at once);
   - plus, once any fault could have lost a message on a pub/sub connection (a
     reset, cut request, dropped reply or request on pub/sub or any
     connection, a master restarted), the waiter's fallback:
     the lease it last saw, +5% jitter, +50 ms;
   - plus, for a wait of an owner whose previous wait gave up (or failed) while
     requests were being dropped, `CLEANUP_MS`: leaving the line, or giving
     back what an attempt in flight took, is tried again in the background,
     and the owner's next wait on the lock first waits for that
     (core/src/lock/cancel.rs).
   A lock counts as taken from a holder's `enter` until it let go (`exit` after
   a release), or until its lease may have ended when it did not let go cleanly:
   `LOST_SLACK` after it was told lost, the whole lease after an error.
   A timed-out wait ends no later than its deadline + the same bound.
   Shared kinds: "free" is free for that waiter: a writer, like a mutex's
   waiter, needs nobody inside; a reader needs no writer inside nor waiting
   (writers go first); a semaphore's waiter needs its permits free beside
   those held and those asked by the waiters who came before it (the line is
   served in order). A task that could not make its lock never waited: a
   violation.
4. Fencing: tokens strictly increase across holders in the order they entered (not under
   Redlock, which promises no token order: each master counts on its own). The
   same owner getting the same token again after its release went unanswered
   is that holding resumed, not a new one: counted. Shared kinds: every
   token is unique (but a holding resumed), a token issued before another's
   wait began is below it (but for an owner whose wait or release before
   ended in an error: Redis may have applied that acquisition, which it
   re-entered; counted), and writers' tokens grow in entry order against
   everyone's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from rlock_test_support.history.records import Holding, Waiting, build
from rlock_test_support.history.room import Room
from rlock_test_support.history.waits import ended, free_stretch, judge_free, judge_timeout, no_room
from rlock_test_support.report import Report
from rlock_test_support.spans import MS, longest_free, merge


SLACK_MS = 250
RECONNECT_MS = 250
# A subscription not confirmed within a second is sent again (docs/deployments.md, Cluster).
RESUBSCRIBE_MS = 1000
# The tries of a clean-up, one after the other (core/src/lock/cancel.rs:
# RETRY_PAUSES, 50 + 200 + 1000 + 5000 ms), each on a fresh connection: four
# for leaving the line, five for giving back what a dropped attempt took (it
# is tried at once, then after each pause).
CLEANUP_MS = 6250 + 5 * RECONNECT_MS
# What breaks a command connection: a request may fail, and be tried again.
BROKEN = ("reset", "drop_reply", "cut_request", "drop_request")
# A holder is told lost by its own clock before Redis lets the key go: at most
# lease x 1% + 2 ms before (README, Guarantees); plus polling the flag late.
LOST_SLACK_MS = 20


def held_until(s: Holding) -> int:
    """The latest the lock may have stayed taken by this holding."""
    end = s.exit if s.exit is not None else max([s.enter, *s.beliefs])
    if s.out == "released":
        return end
    if s.told:
        told = min(t for t in (s.lost, s.exit) if t is not None)
        return told + int((s.ttl_ms * 0.01 + LOST_SLACK_MS) * MS)
    return end + int(s.ttl_ms * MS)


@dataclass
class Fault:
    """One fault as injected: `at` (ns), what, on which kind of connection, for how long."""

    at: int
    # drop_reply | delay | stall | reset | cut_request | drop_request, on the
    # wire; forget | migrate | failover, to the servers (nemesis.py)
    what: str
    kind: str  # cmd | pubsub | any
    for_ms: float = 0.0
    ms: float = 0.0
    how: Optional[str] = None  # a forget's: restart | flush

    @property
    def until(self) -> int:
        return self.at + int(self.for_ms * MS)

    def cost_ms(self, node_timeout_ms: Optional[float] = None) -> float:
        if self.what == "stall":
            return self.for_ms
        if self.what == "delay":
            # Under Redlock a reply slower than the node timeout counts as no
            # reply: no attempt can succeed while the delay lasts.
            slow = node_timeout_ms is not None and self.ms >= node_timeout_ms
            return 4 * self.ms + (self.for_ms if slow else 0)
        if self.what == "forget":
            return self.for_ms + RECONNECT_MS
        if self.what in ("migrate", "failover"):
            return self.for_ms + RESUBSCRIBE_MS + RECONNECT_MS
        return RECONNECT_MS

    @property
    def may_lose_messages(self) -> bool:
        if self.what == "forget":
            return self.how != "flush"  # a restart drops its subscribers
        return self.what in BROKEN and self.kind in ("pubsub", "any")


def check(
    records: Iterable[Dict[str, Any]],
    tasks: Dict[str, Dict[str, Any]],
    faults: Sequence[Fault] = (),
    fencing: bool = True,
    node_timeout_ms: Optional[float] = None,
) -> Report:
    """`tasks`: each task's settings by task id (ttl_ms, timeout_ms as given
    to the worker, and the lock's kind, permits and take); `fencing`: whether
    tokens must grow (not under Redlock); `node_timeout_ms`: a Redlock's node
    timeout."""
    report = Report(shown=20)
    cap = Room.of(tasks)
    h = build(records, lambda k: tasks[k])
    sections, waits, notes, refused = h.holdings, h.waits, h.notes, h.refused
    # Promises 1, 2 and 4 are about holders that believed they held the lock,
    # in the order they began to (an acquisition told lost before its first
    # step never used the lock, nor its token).
    inside = sorted((s for s in sections if s.inside), key=lambda s: s.believed_from)
    for n in notes:
        report.count("nested calls that failed")
    for r in refused:
        report.fail(f"[3] {r} (making the lock failed: the task never waited)")
    for s in sections:
        report.count("holdings")
        if not s.inside:
            report.count("acquisitions already lost when they returned")
        if s.told:
            report.count("losses told")
        if s.out is None:
            report.fail(f"[1] {s} never let go (no exit recorded)")
        elif s.out.startswith("error"):
            report.count("release errors")

    # Masters that forgot their data (Redlock), when.
    forgotten = sorted(f.at for f in faults if f.what == "forget")

    # 1. Exclusion, and 2. honest loss.
    if cap.shared:
        _capacity(inside, cap, report)
    else:
        _exclusion(inside, forgotten, report)
    for a in inside:
        # Unrenewed, Redis lets the lease go by the lease after the last request
        # that set it; believing past that is believing past Redis' expiry.
        expiry = a.renewed + int(a.ttl_ms * MS)
        if not a.auto_renew and a.believed_until > expiry:
            report.fail(f"[2] {a} still believed it held the lock {(a.believed_until - expiry) / MS:.1f} ms "
                        f"after its unrenewed {a.ttl_ms:.0f} ms lease ended in Redis")

    for a in sections:
        rivals = [b for b in inside if b is not a and a.enter <= b.believed_from
                  and (a.let_go is None or b.believed_from < a.let_go) and _crowds(cap, a, b, inside)]
        if a.told and not rivals and a.exit is not None:
            # The lease is timed from before the request that set it, which may
            # have left any time during the wait.
            during = [f for f in faults if f.at <= a.exit and f.until >= a.asked]
            delayed = max((f.ms for f in during if f.what == "delay"), default=0)
            # A stall starves renewals; two broken connections can fail a request
            # and its one retry, leaving the outcome unknown: losses the core must
            # report. One broken connection is retried, and must not be.
            # A master that forgot its data may have taken the holding's majority.
            excused = any(f.what in ("stall", "forget") for f in during) or sum(
                f.what in BROKEN and f.kind != "pubsub" for f in during) >= 2
            # Counted from the start of its wait: a holder handed the lock through
            # the line cannot know when the handoff set its lease, and may count
            # it from its own last request.
            within = (a.exit - a.asked) / MS + delayed < a.ttl_ms * 0.99 - 2 - SLACK_MS / 5
            if within and not excused:
                report.fail(f"[2] {a} was told lost (let go with {a.out!r}) though its wait and holding, "
                            f"release included, lasted {(a.exit - a.asked) / MS:.0f} ms of a "
                            f"{a.ttl_ms:.0f} ms lease and nobody else entered")
            else:
                report.count("losses under faults")

    # 4. Fencing.
    if cap.shared:
        _unique_tokens(sections, inside, cap, report)
    else:
        _growing_tokens(inside, fencing, report)

    # 3. Waiting.
    held = [(s.enter, held_until(s), s) for s in sections]
    busy = merge([(lo, hi) for lo, hi, _ in held])
    lossy = sorted(f.at for f in faults if f.may_lose_messages)
    dropped = sorted(f.at for f in faults if f.what == "drop_request")
    previous: Dict[str, Waiting] = {}
    for w in waits:
        before, previous[w.owner] = previous.get(w.owner), w
        # Its owner's last wait gave up while requests were dropped: its
        # leaving may still be tried in the background, and this wait waits for it.
        cleanup = CLEANUP_MS if before is not None and before.out != "acquired" and before.end is not None and any(
            before.start <= t <= w.start + CLEANUP_MS * MS for t in dropped) else 0.0
        if not ended(w, report, "[3] "):
            continue
        late = SLACK_MS + cleanup + allowance(w, w.start, w.end, faults, lossy, node_timeout_ms)
        judge_timeout(w, late, report, "[3] ")
        stretch = free_stretch(w, no_room(w, held, waits) if cap.shared else busy, report)
        if stretch is None:
            continue
        lo, hi = stretch
        bound = SLACK_MS + cleanup + allowance(w, lo, hi, faults, lossy, node_timeout_ms)
        judge_free(w, (hi - lo) / MS, bound, report, "[3] ", f" (bound {bound:.0f} ms from the faults)")
    report.figures.setdefault("violations", 0)
    return report


def _exclusion(inside: List[Holding], forgotten: List[int], report: Report) -> None:
    """1. and 2. for a mutex: nobody enters while another believes (beside a
    holding whose masters forgot it, one told it lost the lock), and a
    holder someone entered before it let go was told."""
    starts = [s.believed_from for s in inside]
    for a in inside:
        i = bisect.bisect_right(starts, a.believed_from)
        later = inside[i:]
        for b in later:
            if b.believed_from > a.believed_until:
                break
            forgot = [t for t in forgotten if a.asked <= t <= b.believed_from]
            re_entered = [t for t in a.re_entries if t > b.believed_from]
            if forgot and a.told and not re_entered:
                report.count("entries beside a holding masters forgot, told lost")
                continue
            why = ""
            if forgot:
                why = (f"; masters forgot the lock {(b.believed_from - forgot[0]) / MS:.0f} ms before it entered, "
                       + (f"and {a} re-entered {(re_entered[0] - b.believed_from) / MS:.0f} ms after it did, "
                          f"counted as a re-entry" if re_entered else f"and {a} was never told"))
            report.fail(f"[1] {b} entered while {a} still believed it held the lock "
                        f"(until {(a.believed_until - b.believed_from) / MS:.1f} ms later{why})")
        cut_short = [b for b in later if a.let_go is None or b.believed_from < a.let_go]
        if cut_short and not a.told:
            b = cut_short[0]
            report.fail(f"[2] {b} entered {(b.believed_from - a.believed_until) / MS:.1f} ms after {a}'s last "
                        f"belief, before it let go, and {a} was never told (let go with {a.out!r})")


def _capacity(inside: List[Holding], cap: Room, report: Report) -> None:
    """1. and 2. for a read-write lock or a semaphore: each entry fits beside
    those still believing; beside every holder that had not begun to let go,
    it fits once those told lost are left out."""
    for b in inside:
        t = b.believed_from
        before = [s for s in inside if s is not b and s.believed_from <= t]
        believing = [s for s in before if s.believed_until >= t]
        if not cap.fits(believing + [b]):
            report.fail(f"[1] {b} ({_what(b, cap)}) entered while {_list(believing, cap)} still believed "
                        f"they held {cap}")
            continue
        holding = [s for s in before if s.let_go is None or t < s.let_go]
        untold = [s for s in holding if not s.told]
        if not cap.fits(untold + [b]):
            done = [s for s in untold if s.believed_until < t]
            report.fail(f"[2] {b} ({_what(b, cap)}) entered before {_list(done, cap)} let go, more than {cap} "
                        f"admits beside {_list(believing, cap) or 'nobody else'}, and none of them was told")


def _crowds(cap: Room, a: Holding, b: Holding, inside: List[Holding]) -> bool:
    """Whether `b` entering while `a` held (a's lease still running) is more than
    the lock admits, counting the others then holding and told nothing."""
    if not cap.shared:
        return True
    t = b.believed_from
    others = [s for s in inside if s is not a and s is not b and s.believed_from <= t
              and (s.let_go is None or t < s.let_go) and not s.told]
    return not cap.fits(others + [a, b])


def _growing_tokens(inside: List[Holding], fencing: bool, report: Report) -> None:
    for a, b in zip(inside, inside[1:]):
        if a.token is not None and b.token is not None and not b.token > a.token:
            if b.resumes(a):
                report.count("holdings resumed after an unanswered release")
            elif fencing:
                report.fail(f"[4] {b} entered after {a} with token {b.token} <= {a.token}")
            else:
                report.count("tokens out of entry order (Redlock: none promised)")


def _unique_tokens(sections: List[Holding], inside: List[Holding], cap: Room, report: Report) -> None:
    """4. for a read-write lock or a semaphore: holders share the lock, so
    their entry order need not be their tokens' order, but for writers."""
    by_token: Dict[int, Holding] = {}
    for s in sorted(sections, key=lambda s: s.enter):
        if s.token is None:
            continue
        first = by_token.setdefault(s.token, s)
        if first is s:
            continue
        if s.resumes(first):
            report.count("holdings resumed after an unanswered release")
        else:
            report.fail(f"[4] {s} got the token {first} got already")
    for a in sections:
        for b in sections:
            if a.token is None or b.token is None or a.token == b.token:
                continue
            if a.enter < b.asked and not b.token > a.token:
                if b.after_error:
                    report.count("holdings perhaps resumed after an unanswered request")
                    continue
                report.fail(f"[4] {b} began to wait after {a} entered, yet got token {b.token} < {a.token}")
    for i, a in enumerate(inside):
        for b in inside[i + 1:]:
            if "write" not in (a.side, b.side) or cap.family != "rw" or a.token is None or b.token is None:
                continue
            if not b.token > a.token and not b.resumes(a):
                report.fail(f"[4] {b} ({b.side}) entered after {a} ({a.side}) with token {b.token} <= {a.token}")


def _what(s: Holding, cap: Room) -> str:
    return f"{s.take} permit{'s' if s.take > 1 else ''}" if cap.family == "semaphore" else s.side


def _list(sections: Sequence[Holding], cap: Room) -> str:
    return ", ".join(f"{s} ({_what(s, cap)})" for s in sections)


def allowance(w: Waiting, lo: int, hi: int, faults: Sequence[Fault], lossy: List[int],
              node_timeout_ms: Optional[float] = None) -> float:
    """What the faults around [lo, hi] may add to a wake-up, in ms (see 3.)."""
    reach = int((w.ttl_ms * 1.05 + 50 + SLACK_MS) * MS)
    extra = sum(f.cost_ms(node_timeout_ms) for f in faults if f.at <= hi and f.until + reach >= lo)
    i = bisect.bisect_right(lossy, hi)
    if i and lossy[i - 1] >= w.start - reach:
        extra += w.ttl_ms * 1.05 + 50
    return extra

