"""The checker itself: every promise it verifies fails on records that
break it, and holds on records that keep it (so a clean scenario means
something)."""

from __future__ import annotations

from typing import Any, Dict, List

from rlock_test_support.spans import MS

from cache_checker import check_cached
from cache_writes import EntryWrite
from checker import check
from storage import Write

WORKERS = {w: {"ttl_ms": 500, "timeout_ms": 1000} for w in ("a", "b", "c", "d")}


def ms(t: float) -> int:
    return int(t * MS)


def holding(
    w: str, tok: int, enter: float, last_step: float, exit: float, out: str = "released", since: float = -1,
    **kind: Any,
) -> List[Dict[str, Any]]:
    """Records of one holding (times in ms), waited for from `since`; of a
    mutex, or of the `kind` (and `permits`) given."""
    return [
        {"e": "wait", "w": w, "n": "x", "t": ms(since if since >= 0 else enter - 1), **kind},
        {"e": "enter", "w": w, "n": "x", "tok": tok, "t": ms(enter), **kind},
        {"e": "step", "w": w, "n": "x", "tok": tok, "t": ms(last_step), "ok": True},
        {"e": "exit", "w": w, "n": "x", "tok": tok, "t": ms(exit), "out": out},
    ]


def problems(records: List[Dict[str, Any]], events: List[Dict[str, Any]] = [], writes: List[Write] = []) -> List[str]:
    return check(records, WORKERS, events, writes).problems


def test_holdings_one_after_the_other_pass() -> None:
    assert problems(holding("a", 1, 0, 10, 11) + holding("b", 2, 12, 20, 21)) == []


def test_a_holder_entering_while_another_still_believes_fails() -> None:
    found = problems(holding("a", 1, 0, 30, 31) + holding("b", 2, 12, 40, 41))
    assert any("still believed" in p for p in found), found


def test_a_holder_told_lost_before_the_next_one_entered_is_allowed_and_counted() -> None:
    a = holding("a", 1, 0, 10, 31, out="lost")
    a.insert(3, {"e": "lost", "w": "a", "n": "x", "tok": 1, "t": ms(11)})
    report = check(a + holding("b", 2, 12, 40, 41), WORKERS, [])
    assert report.problems == []
    assert report.figures["overlaps after a reported loss"] == 1


def test_a_paused_holder_overlapping_is_counted_but_must_be_told() -> None:
    events = [{"e": "stop", "w": "a", "t": ms(5)}, {"e": "cont", "w": "a", "t": ms(600)}]
    records = holding("a", 1, 0, 601, 602) + holding("b", 2, 505, 520, 521)
    found = problems(records, events)
    assert any("never told" in p for p in found), found
    told = holding("a", 1, 0, 601, 603, out="lost")
    told.insert(3, {"e": "lost", "w": "a", "n": "x", "tok": 1, "t": ms(602)})
    report = check(told + holding("b", 2, 505, 520, 521), WORKERS, events)
    assert report.problems == [] and report.figures["overlaps with a paused holder"] == 1


def test_tokens_that_do_not_grow_in_entry_order_fail() -> None:
    found = problems(holding("a", 2, 0, 10, 11) + holding("b", 2, 12, 20, 21))
    assert any("token 2 <= 2" in p for p in found), found


def test_a_holding_taken_on_by_its_owner_after_an_unanswered_release_passes_and_is_counted() -> None:
    workers = {**WORKERS, "p": {"ttl_ms": 500, "timeout_ms": 1000, "lang": "py"}}
    unanswered = holding("p", 2, 0, 10, 11, out="error:release:ConnectionError:reset")
    report = check(unanswered + holding("p", 2, 12, 20, 21), workers, [])
    assert report.problems == [] and report.figures["holdings taken on after an unanswered release"] == 1

    def fails(records: List[Dict[str, Any]]) -> bool:
        return any("token 2 <= 2" in p for p in check(records, workers, []).problems)

    # Not by another worker, nor by one whose rounds are new owners, nor
    # after a release that succeeded, an error in the holding itself, the
    # end of the lease, or a clean release of its own in between.
    assert fails(unanswered + holding("b", 2, 12, 20, 21))
    assert fails(holding("a", 2, 0, 10, 11, out="error:release:x") + holding("a", 2, 12, 20, 21))
    assert fails(holding("p", 2, 0, 10, 11) + holding("p", 2, 12, 20, 21))
    assert fails(holding("p", 2, 0, 10, 11, out="error:OSError:x") + holding("p", 2, 12, 20, 21))
    assert fails(unanswered + holding("p", 2, 700, 710, 711))
    assert fails(unanswered + holding("p", 2, 12, 20, 21) + holding("p", 2, 22, 30, 31))


def test_without_fencing_tokens_out_of_order_are_counted_but_overlaps_still_fail() -> None:
    report = check(holding("a", 2, 0, 10, 11) + holding("b", 1, 12, 20, 21), WORKERS, [], fencing=False)
    assert report.problems == [] and report.figures["tokens out of entry order (no fencing promised)"] == 1
    overlap = check(holding("a", 2, 0, 30, 31) + holding("b", 1, 12, 40, 41), WORKERS, [], fencing=False)
    assert any("still believed" in p for p in overlap.problems), overlap.problems


def test_a_stale_write_accepted_fails_and_a_refused_one_is_counted() -> None:
    records = holding("a", 1, 0, 10, 11) + holding("b", 2, 12, 20, 21)
    accepted = Write(ms(15), "x", 1, "a", True)
    assert any("newer holder" in p for p in problems(records, writes=[accepted]))
    report = check(records, WORKERS, [], [Write(ms(15), "x", 1, "a", False)])
    assert report.problems == [] and report.figures["stale writes refused"] == 1


def test_told_lost_but_released_cleanly_fails() -> None:
    a = holding("a", 1, 0, 10, 11)
    a.insert(3, {"e": "lost", "w": "a", "n": "x", "tok": 1, "t": ms(10.5)})
    assert any("told lost" in p for p in problems(a))


def test_a_wait_past_its_deadline_or_through_a_free_lock_fails() -> None:
    late = [
        {"e": "wait", "w": "c", "n": "x", "t": ms(0)},
        {"e": "waited", "w": "c", "n": "x", "t": ms(1300), "out": "timeout"},
    ]
    busy = holding("a", 1, 0, 1400, 1401)
    assert any("past its deadline" in p for p in problems(late + busy))
    early = [late[0], {**late[1], "t": ms(900)}]
    assert any("after 900 ms" in p for p in problems(early + busy))
    # The lock is free from 11 ms on; the waiter gives up at 1000 ms.
    stranded = [late[0], {**late[1], "t": ms(1000)}]
    assert any("while the lock was free" in p for p in problems(stranded + holding("a", 1, 0, 10, 11)))


def test_a_killed_holder_keeps_the_lock_for_at_most_its_lease() -> None:
    killed = holding("a", 1, 0, 10, 11)[:3]
    events = [{"e": "kill", "w": "a", "t": ms(20)}]
    in_time = holding("b", 2, 600, 610, 611, since=15)
    assert problems(killed + in_time, events) == []
    too_late = holding("b", 2, 20 + 500 + 500 * 1.05 + 200 + 10, 1800, 1801, since=15)
    assert any("while the lock was free" in p for p in problems(killed + too_late, events))


def test_a_holding_that_never_ends_fails() -> None:
    assert any("never let go" in p for p in problems(holding("a", 1, 0, 10, 11)[:3]))


# Read-write locks and semaphores: holders share by kind.

READ: Dict[str, Any] = {"kind": "read"}
WRITE: Dict[str, Any] = {"kind": "write"}
SEM2: Dict[str, Any] = {"kind": "semaphore", "permits": 2}


def test_readers_together_pass_and_a_writer_beside_anyone_fails() -> None:
    readers = holding("a", 1, 0, 30, 31, **READ) + holding("b", 2, 12, 40, 41, **READ)
    assert problems(readers) == []
    writer_in = problems(holding("a", 1, 0, 30, 31, **READ) + holding("b", 2, 12, 40, 41, **WRITE))
    assert any("b(write)#2@x entered while a(read)#1@x still believed" in p for p in writer_in), writer_in
    reader_in = problems(holding("a", 1, 0, 30, 31, **WRITE) + holding("b", 2, 12, 40, 41, **READ))
    assert any("b(read)#2@x entered while a(write)#1@x still believed" in p for p in reader_in), reader_in


def test_a_names_mutex_read_write_lock_and_semaphore_are_three_locks() -> None:
    records = holding("a", 1, 0, 30, 31) + holding("b", 2, 12, 40, 41, **WRITE)
    assert problems(records + holding("c", 3, 14, 45, 46, **SEM2)) == []


def test_more_permit_holders_than_permits_fails() -> None:
    two = holding("a", 1, 0, 30, 31, **SEM2) + holding("b", 2, 12, 40, 41, **SEM2)
    assert problems(two) == []
    found = problems(two + holding("c", 3, 20, 50, 51, **SEM2))
    assert any("c(semaphore)#3@x entered while a(semaphore)#1@x still believed" in p and "at most 2" in p for p in found), found


def test_a_permit_paused_past_its_lease_may_be_taken_but_its_holder_must_be_told() -> None:
    events = [{"e": "stop", "w": "a", "t": ms(5)}, {"e": "cont", "w": "a", "t": ms(700)}]
    others = holding("b", 2, 3, 800, 801, **SEM2) + holding("c", 3, 600, 650, 651, **SEM2)
    found = problems(holding("a", 1, 0, 701, 702, **SEM2) + others, events)
    assert any("a(semaphore)#1@x's lease ended while it ran, and it was never told" in p for p in found), found
    told = holding("a", 1, 0, 701, 703, out="lost", **SEM2)
    told.insert(3, {"e": "lost", "w": "a", "n": "x", "tok": 1, "t": ms(702)})
    report = check(told + others, WORKERS, events)
    assert report.problems == [] and report.figures["overlaps with a paused holder"] == 1


def test_a_holder_paused_past_its_lease_must_be_told_even_if_nobody_entered() -> None:
    events = [{"e": "stop", "w": "a", "t": ms(5)}, {"e": "cont", "w": "a", "t": ms(700)}]
    found = problems(holding("a", 1, 0, 701, 702), events)
    assert any("a#1@x's lease ended while it ran, and it was never told" in p for p in found), found
    # Shorter than its lease, with others sharing the lock meanwhile: it may hold on untold.
    events = [{"e": "stop", "w": "a", "t": ms(5)}, {"e": "cont", "w": "a", "t": ms(300)}]
    records = holding("a", 1, 0, 400, 401, **SEM2) + holding("b", 2, 100, 200, 201, **SEM2)
    assert problems(records, events) == []


def test_writers_tokens_out_of_entry_order_fail_and_readers_tokens_must_be_unique() -> None:
    writers = problems(holding("a", 5, 0, 10, 11, **WRITE) + holding("b", 4, 12, 20, 21, **WRITE))
    assert any("token 4 <= 5" in p for p in writers), writers
    # A reader entering after a writer holds a later token; readers among themselves come in any order.
    below = problems(holding("a", 5, 0, 10, 11, **WRITE) + holding("b", 4, 12, 20, 21, **READ))
    assert any("token 4 <= 5" in p for p in below), below
    readers = holding("a", 3, 0, 30, 31, **READ) + holding("b", 2, 12, 40, 41, **READ)
    assert problems(readers) == []
    twins = problems(holding("a", 3, 0, 30, 31, **SEM2) + holding("b", 3, 12, 40, 41, **SEM2))
    assert any("got the token 3" in p for p in twins), twins


def test_only_writers_write_and_a_newer_writer_fences_the_older() -> None:
    records = holding("a", 1, 0, 10, 11, **WRITE) + holding("b", 2, 12, 20, 21, **WRITE)
    assert any("newer holder" in p for p in problems(records, writes=[Write(ms(15), "x", 1, "a", True)]))
    reader = holding("a", 1, 0, 10, 11, **READ)
    assert any("never held it to write" in p for p in problems(reader, writes=[Write(ms(5), "x", 1, "a", True)]))


def test_a_reader_waits_only_for_writers_and_a_permit_holder_only_for_a_full_semaphore() -> None:
    reader = [
        {"e": "wait", "w": "c", "n": "x", "t": ms(0), **READ},
        {"e": "waited", "w": "c", "n": "x", "t": ms(1000), "out": "timeout"},
    ]
    # Only readers held: the waiting reader had room all along.
    found = problems(reader + holding("a", 1, 0, 1400, 1401, **READ))
    assert any("while the lock was free to readers" in p for p in found), found
    # A writer waited in line (writers go first), then held.
    writer = holding("b", 2, 1100, 1200, 1201, since=0, **WRITE)
    assert problems(reader + holding("a", 1, 0, 1050, 1051, **READ) + writer) == []
    permit = [{**r, **SEM2} for r in reader]
    one_held = holding("a", 1, 0, 1400, 1401, **SEM2)
    found = problems(permit + one_held)
    assert any("while the lock was free to a permit holder" in p for p in found), found
    assert problems(permit + one_held + holding("b", 2, 0, 1400, 1401, **SEM2)) == []


# cached: readers of one entry "k", every write of it as Redis ran it.

CACHE_WORKERS = {w: {"timeout_ms": 1000, "lock_ttl_ms": 500} for w in ("a", "b", "c")}


def read(w: str, start: float, end: float = -1, val: str = "", out: str = "") -> List[Dict[str, Any]]:
    """A read of "k" from `start` to `end` (ms; never: -1), giving `val`
    ("W:TOK") or ending with `out`."""
    began = {"e": "read", "w": w, "n": "k", "t": ms(start)}
    if end < 0:
        return [began]
    ending = {"e": "got", "val": val} if val else {"e": "failed", "out": out}
    return [began, {**ending, "w": w, "n": "k", "t": ms(end)}]


def got(w: str, end: float, val: str) -> Dict[str, Any]:
    return {"e": "got", "w": w, "n": "k", "t": ms(end), "val": val}


def load(w: str, tok: int, start: float, done: float = -1) -> List[Dict[str, Any]]:
    """A load of "k" under `tok` from `start` (ms), done at `done` (never: -1)."""
    began = {"e": "load", "w": w, "n": "k", "t": ms(start), "tok": tok, "pid": 1}
    return [began] + ([{"e": "loaded", "w": w, "n": "k", "t": ms(done), "tok": tok}] if done >= 0 else [])


def landed(*tokens: int) -> List[EntryWrite]:
    return [EntryWrite(0, "k", t, True) for t in tokens]


def cache_problems(
    records: List[Dict[str, Any]], writes: List[EntryWrite], events: List[Dict[str, Any]] = []
) -> List[str]:
    return check_cached(records, CACHE_WORKERS, events, writes).problems


# The history the fault scenarios make: a rebuilder killed in its loader, a
# waiter taking over once its lease ended, the others getting that value.
KILLED = [{"e": "kill", "w": "a", "t": ms(20)}]
TAKEN_OVER = (
    read("a", 0) + load("a", 1, 1)
    + read("b", 5) + load("b", 2, 520, 600) + [got("b", 700, "b:2")]
    + read("c", 6, 610, val="b:2")
)


def test_cached_a_takeover_from_a_killed_rebuilder_passes() -> None:
    report = check_cached(TAKEN_OVER, CACHE_WORKERS, KILLED, [EntryWrite(0, "k", 2, False)] + landed(2))
    assert report.problems == []
    assert report.figures["takeovers from a killed or frozen load"] == 1
    assert report.figures["reads of killed workers"] == 1


def test_cached_a_write_under_an_older_token_landing_after_a_newer_one_fails() -> None:
    frozen = [{"e": "stop", "w": "a", "t": ms(20)}, {"e": "cont", "w": "a", "t": ms(900)}]
    # The rebuilder, frozen in its loader, ends it once thawed.
    records = read("a", 0) + load("a", 1, 1, 901) + [got("a", 902, "a:1")] + TAKEN_OVER[2:]
    refused = [EntryWrite(0, "k", 2, False), *landed(2), EntryWrite(0, "k", 1, False)]
    report = check_cached(records, CACHE_WORKERS, frozen, refused)
    assert report.problems == [] and report.figures["writes refused"] == 1
    found = cache_problems(records, [*refused, *landed(1)], frozen)
    assert any("token 1 landed in 'k' after one under 2" in p for p in found), found


def test_cached_a_waiter_given_a_value_older_than_the_rebuild_it_waited_for_or_never_stored_fails() -> None:
    older = read("a", 0) + load("a", 1, 1, 20) + [got("a", 30, "a:1")] + load("b", 2, 40) + read("c", 50, 60, val="a:1")
    found = cache_problems(older, landed(1))
    assert any("token 1, older than the rebuild #2" in p for p in found), found
    unstored = cache_problems(TAKEN_OVER, [EntryWrite(0, "k", 2, False)], KILLED)
    assert any("c's read of 'k' gave b's value under token 2, which was never stored" in p for p in unstored), unstored
    made_up = cache_problems(read("c", 0, 10, val="b:7"), [])
    assert any("which no load made" in p for p in made_up), made_up


def test_cached_a_read_past_its_timeout_early_or_with_an_unclear_error_fails() -> None:
    late = cache_problems(read("c", 0, 1600, out="timeout"), [])
    assert any("600 ms past its timeout" in p for p in late), late
    early = cache_problems(read("c", 0, 900, out="timeout"), [])
    assert any("timed out after 900 ms" in p for p in early), early
    unclear = cache_problems(read("c", 0, 10, out="error:ConnectionError:refused"), [])
    assert any("unclear error" in p for p in unclear), unclear
    assert cache_problems(read("c", 0, 1000, out="timeout") + read("b", 0, 10, out="loader-failed"), []) == []


def test_cached_two_loads_at_once_fail_unless_the_first_rebuilder_was_killed_or_frozen() -> None:
    both = load("a", 1, 0, 50) + load("b", 2, 10, 60)
    found = cache_problems(both, [])
    assert any("b's load #2 of 'k' began while a's load #1 of 'k' still ran" in p for p in found), found
    assert cache_problems(both, [], [{"e": "kill", "w": "a", "t": ms(5)}]) == []
    assert cache_problems(both, [], [{"e": "stop", "w": "a", "t": ms(5)}]) == []
    backwards = cache_problems(load("a", 2, 0, 5) + load("b", 1, 10, 20), [])
    assert any("with a token not above it" in p for p in backwards), backwards
