"""The checker itself, on hand-made records: each promise fails on records that
break it and holds on records that keep it, for a mutex, a read-write lock and
a semaphore, and the waiting bound grows only by what the recorded faults
cost."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from rlock_test_support.spans import MS

from netchecker import SLACK_MS, Fault, check

TASKS = {k: {"ttl_ms": 500, "timeout_ms": 1000} for k in ("a", "b", "c")}
RW = {k: {**t, "kind": "rw"} for k, t in TASKS.items()}


def semaphore(permits: int, **takes: int) -> Dict[str, Dict[str, Any]]:
    """Tasks a, b and c on a semaphore of `permits`, each taking one permit
    but as `takes` says."""
    return {k: {**t, "kind": "semaphore", "permits": permits, "take": takes.get(k, 1)} for k, t in TASKS.items()}


def ms(t: float) -> int:
    return int(t * MS)


def holding(k: str, tok: int, enter: float, last: float, exit: float, out: str = "released",
            wait: Optional[float] = None, lost: Optional[float] = None,
            rel: Optional[float] = None, side: Optional[str] = None) -> List[Dict[str, Any]]:
    """Records of one holding (times in ms), waited for from `wait`, letting
    go from `rel` (default: just after its last belief), of a read-write
    lock's `side`."""
    rows = [
        {"e": "wait", "k": k, "t": ms(enter - 1 if wait is None else wait), **({"side": side} if side else {})},
        {"e": "enter", "k": k, "tok": tok, "t": ms(enter)},
        {"e": "step", "k": k, "tok": tok, "t": ms(enter)},
        {"e": "step", "k": k, "tok": tok, "t": ms(last)},
    ]
    if lost is not None:
        rows.append({"e": "lost", "k": k, "tok": tok, "t": ms(lost)})
    rows.append({"e": "rel", "k": k, "tok": tok, "t": ms(rel if rel is not None else max(last, lost or 0) + 0.1)})
    rows.append({"e": "exit", "k": k, "tok": tok, "t": ms(exit), "out": out})
    return rows


def problems(records: List[Dict[str, Any]], faults: List[Fault] = [], fencing: bool = True) -> List[str]:
    return check(records, TASKS, faults, fencing).problems


def test_holders_one_after_the_other_pass() -> None:
    assert problems(holding("a", 1, 0, 10, 11) + holding("b", 2, 12, 20, 21, wait=5)) == []


def test_a_holder_entering_while_another_still_believes_fails() -> None:
    found = problems(holding("a", 1, 0, 30, 31) + holding("b", 2, 12, 40, 41))
    assert any(p.startswith("[1]") and "still believed" in p for p in found), found


def test_a_holder_cut_short_and_never_told_fails() -> None:
    # b entered between a's last belief and a's letting go (a was slow to
    # start its release): a's lease ended while it ran.
    found = problems(holding("a", 1, 0, 10, 31, rel=30) + holding("b", 2, 12, 20, 21))
    assert any(p.startswith("[2]") and "never told" in p for p in found), found


def test_a_holder_cut_short_and_told_passes() -> None:
    told = holding("a", 1, 0, 10, 31, out="lost", lost=11, rel=30)
    assert problems(told + holding("b", 2, 12, 20, 21)) == []


def test_a_loss_reported_inside_the_lease_with_no_rival_fails() -> None:
    found = problems(holding("a", 1, 0, 100, 102, out="notowned"))
    assert any(p.startswith("[2]") and "told lost" in p for p in found), found
    # Counted from the start of the wait: a waiter handed the lock may time
    # its lease from its own last request.
    waited = holding("b", 1, 0, 280, 290) + holding("a", 2, 300, 450, 460, out="lost", wait=0)
    assert problems(waited) == []


def test_a_loss_reported_past_the_lease_or_under_a_stall_passes() -> None:
    assert problems(holding("a", 1, 0, 520, 521, out="lost")) == []
    stall = Fault(ms(50), "stall", "cmd", for_ms=300)
    assert problems(holding("a", 1, 0, 100, 102, out="lost"), [stall]) == []


def test_believing_past_an_unrenewed_lease_fails_even_with_no_rival() -> None:
    tasks = {"a": {"ttl_ms": 500, "timeout_ms": None, "auto_renew": False}}
    past = holding("a", 1, 0, 510, 511)
    found = check(past, tasks, []).problems
    assert any(p.startswith("[2]") and "after its unrenewed" in p for p in found), found
    assert check(holding("a", 1, 0, 490, 491), tasks, []).problems == []
    # A nested acquire or release resets the lease: it runs from the last one.
    reentered = past[:2] + [{"e": "nested", "k": "a", "tok": 1, "t": ms(20)}] + past[2:]
    assert check(reentered, tasks, []).problems == []
    long = holding("a", 1, 0, 700, 701)
    nested = long[:2] + [{"e": "nested", "k": "a", "tok": 1, "t": ms(t)} for t in (1, 300)] + long[2:]
    assert check(nested, tasks, []).problems == []
    nested[3]["t"] = ms(150)  # the nested release returned at 150: its lease ended at 650
    assert any("after its unrenewed" in p for p in check(nested, tasks, []).problems)
    # With auto-renew the lease has no end the records can tell.
    assert check(past, TASKS, []).problems == []


def test_tokens_that_do_not_grow_in_entry_order_fail_unless_no_fencing_is_promised() -> None:
    records = holding("a", 2, 0, 10, 11) + holding("b", 2, 12, 20, 21)
    assert any(p.startswith("[4]") and "token 2 <= 2" in p for p in problems(records))
    report = check(records, TASKS, [], fencing=False)
    assert report.problems == [] and report.figures["tokens out of entry order (Redlock: none promised)"] == 1


def test_the_same_owner_resuming_its_holding_after_an_unanswered_release_is_counted() -> None:
    records = holding("a", 4, 0, 10, 11, out="error:Connection:broken pipe") + holding("a", 4, 13, 20, 21, wait=12)
    report = check(records, TASKS, [], True)
    assert report.problems == [] and report.figures["holdings resumed after an unanswered release"] == 1
    other = holding("a", 4, 0, 10, 11, out="error:Connection:broken pipe") + holding("b", 4, 13, 20, 21, wait=12)
    assert any(p.startswith("[4]") for p in problems(other))


def test_a_waiter_left_waiting_while_the_lock_is_free_fails() -> None:
    # a lets go at 11; b waited from 5 and enters only at 400: free for 389 ms.
    records = holding("a", 1, 0, 10, 11) + holding("b", 2, 400, 410, 411, wait=5)
    found = problems(records)
    assert any(p.startswith("[3]") and "while the lock was free" in p for p in found), found
    assert problems(holding("a", 1, 0, 10, 11) + holding("b", 2, 11 + SLACK_MS - 5, 300, 301, wait=5)) == []


def test_the_waiting_bound_grows_by_what_the_faults_cost() -> None:
    records = holding("a", 1, 0, 10, 11) + holding("b", 2, 400, 410, 411, wait=5)
    # A 200 ms stall of the wire around the gap explains it...
    assert problems(records, [Fault(ms(20), "stall", "any", for_ms=200)]) == []
    # ...a 10 ms reply delay does not (4 x 10 ms)...
    assert problems(records, [Fault(ms(20), "delay", "cmd", for_ms=300, ms=10)]) != []
    # ...and a reset command connection costs a reconnection, not a lease: it
    # loses no release message.
    assert problems(records, [Fault(ms(20), "reset", "cmd")]) == []
    longer = holding("a", 1, 0, 10, 11) + holding("b", 2, 700, 710, 711, wait=5)
    assert problems(longer, [Fault(ms(20), "reset", "cmd")]) != []
    # A reset pub/sub connection may lose the release message: the waiter's
    # fallback is the lease it saw.
    assert problems(records, [Fault(ms(8), "reset", "pubsub")]) == []
    far = holding("a", 1, 0, 10, 11) + holding("b", 2, 1300, 1310, 1311, wait=5)
    assert problems(far, [Fault(ms(8), "reset", "pubsub")]) != []


def test_under_redlock_a_delay_over_the_node_timeout_costs_its_whole_length() -> None:
    records = holding("a", 1, 0, 10, 11) + holding("b", 2, 1200, 1210, 1211, wait=5)
    slow = Fault(ms(20), "delay", "cmd", for_ms=900, ms=200)
    assert check(records, TASKS, [slow], node_timeout_ms=200).problems == []
    assert check(records, TASKS, [slow]).problems != []


def test_a_lost_holder_keeps_the_lock_only_until_its_lease_may_have_ended() -> None:
    # a held past its 500 ms lease, unrenewed, and was told lost at 505: the
    # lock may stay taken a few ms more (lease x 1% + polling), not a lease.
    lost = holding("a", 1, 0, 500, 506, out="lost", lost=505)
    assert problems(lost + holding("b", 2, 540, 550, 551, wait=5)) == []
    found = problems(lost + holding("b", 2, 900, 910, 911, wait=5))
    assert any("while the lock was free" in p for p in found), found
    # After an error letting go, the outcome is unknown: the whole lease.
    errored = holding("a", 1, 0, 500, 506, out="error:Connection:reset")
    assert problems(errored + holding("b", 2, 900, 910, 911, wait=5)) == []


def test_a_timeout_past_its_deadline_fails() -> None:
    waited = [{"e": "wait", "k": "c", "t": ms(0)}, {"e": "waited", "k": "c", "t": ms(1000 + SLACK_MS + 50), "out": "timeout"}]
    busy = holding("a", 1, 0, 1400, 1401)
    assert any("past its deadline" in p for p in problems(busy + waited))
    on_time = [{"e": "wait", "k": "c", "t": ms(0)}, {"e": "waited", "k": "c", "t": ms(1010), "out": "timeout"}]
    assert problems(busy + on_time) == []


def test_an_acquisition_told_lost_before_its_first_step_never_entered() -> None:
    # b's acquisition came back already lost (its lease ran out on the way,
    # after a long wait): it never used the lock nor its older token.
    stale = [
        {"e": "wait", "k": "b", "t": ms(0)},
        {"e": "enter", "k": "b", "tok": 2, "t": ms(640)},
        {"e": "lost", "k": "b", "tok": 2, "t": ms(640.1)},
        {"e": "rel", "k": "b", "tok": 2, "t": ms(640.2)},
        {"e": "exit", "k": "b", "tok": 2, "t": ms(641), "out": "lost"},
    ]
    records = holding("c", 1, 0, 580, 590) + holding("a", 3, 600, 620, 630, wait=0) + stale
    report = check(records, TASKS, [], True)
    assert report.problems == [] and report.figures["acquisitions already lost when they returned"] == 1


def test_a_holding_never_let_go_fails() -> None:
    rows = holding("a", 1, 0, 10, 11)[:-2]
    assert any("never let go" in p for p in problems(rows))


def test_a_loss_after_a_stall_during_the_wait_is_excused() -> None:
    # The acquire request stalled on the wire before the entry: the lease is
    # timed from before it, so it may be over on arrival.
    stalled_wait = holding("a", 1, 300, 320, 322, out="lost", wait=0, lost=321)
    assert problems(stalled_wait, [Fault(ms(10), "stall", "cmd", for_ms=280)]) == []
    assert any("told lost" in p for p in problems(stalled_wait))


# The nemesis' faults (nemesis.py).


def nesting(rows: List[Dict[str, Any]], at: float, re: bool = True) -> List[Dict[str, Any]]:
    """`rows` of one holding with a nested acquire returning at `at` (ms),
    before it lets go: `re`, it took the lock again."""
    first = rows[0]["k"]
    i = next(i for i, r in enumerate(rows) if r["k"] == first and r["e"] == "rel")
    tok = rows[i]["tok"]
    return rows[:i] + [{"e": "nested", "k": first, "tok": tok, "t": ms(at), **({"re": True} if re else {})}] + rows[i:]


def test_an_entry_beside_a_holding_masters_forgot_needs_the_holder_told() -> None:
    forgot = [Fault(ms(20), "forget", "any", for_ms=5, how="restart")]
    # Masters forgot a's lock at 20; b got in at 50, while a still believed.
    told = holding("a", 1, 0, 200, 201, out="notowned") + holding("b", 1, 50, 60, 61, wait=30)
    report = check(told, TASKS, forgot, fencing=False)
    assert report.problems == [] and report.figures["entries beside a holding masters forgot, told lost"] == 1
    untold = holding("a", 1, 0, 200, 201) + holding("b", 1, 50, 60, 61, wait=30)
    found = check(untold, TASKS, forgot, fencing=False).problems
    assert any(p.startswith("[1]") and "never told" in p for p in found), found
    # Masters that forgot before a asked for it excuse nothing.
    late = holding("a", 1, 100, 300, 301, out="notowned", wait=90) + holding("b", 1, 150, 160, 161, wait=30)
    assert any(p.startswith("[1]") for p in check(late, TASKS, forgot, fencing=False).problems)


def test_a_re_entry_after_a_rival_entered_beside_a_forgotten_holding_fails() -> None:
    forgot = [Fault(ms(20), "forget", "any", for_ms=5, how="restart")]
    a = holding("a", 1, 0, 200, 201, out="notowned")
    b = holding("b", 1, 50, 60, 61, wait=30)
    # a re-entered at 100, after b's entry at 50: counted as a re-entry.
    found = check(nesting(a, 100) + b, TASKS, forgot, fencing=False).problems
    assert any(p.startswith("[1]") and "re-entered" in p for p in found), found
    # One that was refused (a loss) or came before b's entry is no re-entry over it.
    assert check(nesting(a, 100, re=False) + b, TASKS, forgot, fencing=False).problems == []
    assert check(nesting(a, 40) + b, TASKS, forgot, fencing=False).problems == []


def test_a_loss_told_while_masters_forgot_the_lock_is_excused() -> None:
    early = holding("a", 1, 0, 100, 102, out="notowned")
    assert any("told lost" in p for p in problems(early))
    assert check(early, TASKS, [Fault(ms(50), "forget", "any", how="flush")], fencing=False).problems == []


def test_a_wait_again_after_giving_up_while_leaving_was_dropped_may_wait_out_its_clean_up() -> None:
    # c gave up at 300; its leaving's requests were dropped, and the client
    # tries again in the background: its next wait first waits for that.
    tasks = {**TASKS, "c": {"ttl_ms": 500, "rounds": [{"ttl_ms": 500, "timeout_ms": 300},
                                                    {"ttl_ms": 5000, "timeout_ms": None}]}}
    gave_up = [{"e": "wait", "k": "c", "t": ms(0)}, {"e": "waited", "k": "c", "t": ms(300), "out": "timeout"}]
    rows = holding("a", 1, 0, 250, 251) + gave_up + holding("c", 2, 6000, 6100, 6101, wait=300)
    dropped = [Fault(ms(300), "drop_request", "cmd")]
    assert check(rows, tasks, dropped).problems == []
    # Nothing dropped: nothing to wait out.
    assert any("while the lock was free" in p for p in check(rows, tasks, []).problems)
    # Another task's wait gets no such allowance.
    other = holding("a", 1, 0, 250, 251) + gave_up + holding("b", 2, 6000, 6100, 6101, wait=300)
    assert any(p.startswith("[3] b") for p in check(other, tasks, dropped).problems)
    # The round's lease is the one its holding is held to.
    assert check(rows, tasks, dropped).figures["holdings"] == 2


def test_a_waiter_deaf_after_a_slot_moved_fails() -> None:
    # The slot moved (or its master failed over) at 100, in 20 ms; a's release
    # at 300 reached b only with the lease it had seen, 3 s later.
    for what in ("migrate", "failover"):
        moved = [Fault(ms(100), what, "any", for_ms=20)]
        deaf = holding("a", 1, 0, 299, 300) + holding("b", 2, 3300, 3310, 3311, wait=50)
        found = check(deaf, TASKS, moved).problems
        assert any(p.startswith("[3] b") for p in found), found
        # Subscribing again where the slot now lives takes a second at most.
        heard = holding("a", 1, 0, 299, 300) + holding("b", 2, 1300, 1310, 1311, wait=50)
        assert check(heard, TASKS, moved).problems == []


# Read-write locks and semaphores.


def reading(k: str, tok: int, enter: float, last: float, exit: float, **kw: Any) -> List[Dict[str, Any]]:
    return holding(k, tok, enter, last, exit, side="read", **kw)


def writing(k: str, tok: int, enter: float, last: float, exit: float, **kw: Any) -> List[Dict[str, Any]]:
    return holding(k, tok, enter, last, exit, side="write", **kw)


def test_readers_together_pass_and_a_writer_with_anyone_else_inside_fails() -> None:
    assert check(reading("a", 1, 0, 30, 31) + reading("b", 2, 10, 40, 41), RW).problems == []
    for records in (reading("a", 1, 0, 30, 31) + writing("b", 2, 10, 40, 41),
                    writing("a", 1, 0, 30, 31) + reading("b", 2, 10, 40, 41),
                    writing("a", 1, 0, 30, 31) + writing("b", 2, 10, 40, 41)):
        found = check(records, RW).problems
        assert any(p.startswith("[1]") and "still believed" in p for p in found), found
    # One after the other, a writer is alone.
    assert check(reading("a", 1, 0, 10, 11) + writing("b", 2, 12, 20, 21, wait=5), RW).problems == []


def test_more_permits_held_than_the_semaphore_has_fails() -> None:
    three = holding("a", 1, 0, 30, 31) + holding("b", 2, 5, 40, 41) + holding("c", 3, 10, 50, 51)
    assert check(three, semaphore(3)).problems == []
    found = check(three, semaphore(2)).problems
    assert any(p.startswith("[1]") and "c#3 (1 permit) entered while a#1 (1 permit), b#2 (1 permit)" in p
               for p in found), found
    # Permits, not holders, are counted.
    found = check(holding("a", 1, 0, 30, 31) + holding("b", 2, 5, 40, 41), semaphore(2, b=2)).problems
    assert any(p.startswith("[1]") and "b#2 (2 permits)" in p for p in found), found


def test_a_shared_holder_crowded_out_before_it_let_go_and_never_told_fails() -> None:
    # a stopped believing at 10 but let go only at 30; b and c entered in
    # between: a semaphore of 2 cannot have held a's permit too.
    slow = holding("a", 1, 0, 10, 31, rel=30)
    found = check(slow + holding("b", 2, 12, 20, 21) + holding("c", 3, 13, 20, 22), semaphore(2)).problems
    assert any(p.startswith("[2]") and "before a#1 (1 permit) let go" in p and "none of them was told" in p
               for p in found), found
    # Told, it passes; so does an entry that fitted beside it.
    told = holding("a", 1, 0, 10, 31, rel=30, out="lost", lost=11)
    assert check(told + holding("b", 2, 12, 20, 21) + holding("c", 3, 13, 20, 22), semaphore(2)).problems == []
    assert check(slow + holding("b", 2, 12, 20, 21), semaphore(2)).problems == []
    # A writer entering before a reader let go: the reader's lease had ended.
    found = check(reading("a", 1, 0, 10, 31, rel=30) + writing("b", 2, 12, 20, 21), RW).problems
    assert any(p.startswith("[2]") and "before a#1 (read) let go" in p for p in found), found
    assert check(reading("a", 1, 0, 10, 31, rel=30) + reading("b", 2, 12, 20, 21), RW).problems == []


def test_a_shared_loss_reported_when_entries_fitted_beside_it_fails() -> None:
    # b entered beside a, as a semaphore of 2 admits: a's lease need not have ended.
    records = holding("a", 1, 0, 100, 102, out="lost") + holding("b", 2, 10, 50, 51)
    found = check(records, semaphore(2)).problems
    assert any(p.startswith("[2]") and "a#1 was told lost" in p for p in found), found
    # b and c both entering before a let go: a's lease had ended, a true report.
    crowded = (holding("a", 1, 0, 10, 31, out="lost", lost=11, rel=30) + holding("b", 2, 12, 50, 51)
               + holding("c", 3, 13, 50, 52))
    report = check(crowded, semaphore(2))
    assert report.problems == [] and report.figures["losses told"] == 1


def test_a_semaphore_waiter_left_waiting_with_its_permits_free_fails() -> None:
    # a holds one permit of two from 0 to 600; b waits from 5 and enters at 602.
    records = holding("a", 1, 0, 600, 601) + holding("b", 3, 602, 610, 611, wait=5)
    found = check(records, semaphore(2)).problems
    assert any(p.startswith("[3]") and "free to a permit holder" in p for p in found), found
    # Both permits taken meanwhile (c), or b asking both: not free for b.
    busy = records + holding("c", 2, 1, 599, 599.5)
    assert check(busy, semaphore(2)).problems == []
    assert check(records, semaphore(2, b=2)).problems == []


def test_a_semaphore_waiter_behind_a_larger_request_is_not_stranded() -> None:
    # c asked both permits at 2, before b asked one at 5: the line serves c
    # first, once a lets go at 601.
    records = (holding("a", 1, 0, 600, 601) + holding("c", 2, 602, 700, 701, wait=2)
               + holding("b", 3, 702, 710, 711, wait=5))
    assert check(records, semaphore(2, c=2)).problems == []
    # Asked after b, c stands behind it: b was stranded while one permit was free.
    late = (holding("a", 1, 0, 600, 601) + holding("c", 2, 602, 700, 701, wait=8)
            + holding("b", 3, 702, 710, 711, wait=5))
    assert any("b waited" in p and "free to a permit holder" in p for p in check(late, semaphore(2, c=2)).problems)


def test_a_reader_waits_behind_a_waiting_writer_but_not_behind_readers() -> None:
    # a reads from 0 to 600; b asks to read at 5 and enters at 400: stranded.
    records = reading("a", 1, 0, 600, 601) + reading("b", 2, 400, 410, 411, wait=5)
    found = check(records, RW).problems
    assert any(p.startswith("[3]") and "b waited" in p for p in found), found
    # A writer waiting from 3 to a's end goes first: b waits behind it.
    writer = writing("c", 3, 602, 650, 651, wait=3)
    behind = reading("a", 1, 0, 600, 601) + writer + reading("b", 4, 652, 660, 661, wait=5)
    assert check(behind, RW).problems == []
    # A writer waiting while a reader holds is not stranded either.
    assert check(reading("a", 1, 0, 600, 601) + writing("b", 2, 602, 610, 611, wait=5), RW).problems == []


def test_shared_tokens_are_unique_and_grow_with_time_and_writers_with_entry_order() -> None:
    # Readers side by side may enter out of their tokens' order...
    assert check(reading("a", 2, 0, 30, 31) + reading("b", 1, 5, 40, 41, wait=0), RW).problems == []
    # ...but never share a token.
    found = check(reading("a", 2, 0, 30, 31) + reading("b", 2, 5, 40, 41, wait=0), RW).problems
    assert any(p.startswith("[4]") and "got the token a#2 got already" in p for p in found), found
    # A token issued before another's wait began is smaller.
    found = check(holding("a", 5, 0, 10, 11) + holding("b", 4, 20, 30, 31, wait=12), semaphore(2)).problems
    assert any(p.startswith("[4]") and "b#4 began to wait after a#5 entered" in p for p in found), found
    # Writers against everyone, in entry order.
    found = check(reading("a", 2, 0, 30, 31) + writing("b", 1, 32, 40, 41, wait=0), RW).problems
    assert any(p.startswith("[4]") and "b#1 (write) entered after a#2 (read)" in p for p in found), found


def test_a_shared_holding_resumed_after_an_unanswered_request_keeps_its_token() -> None:
    # a's release went unanswered; it takes the semaphore again: the same holding.
    records = holding("a", 4, 0, 10, 11, out="error:Connection:broken pipe") + holding("a", 4, 13, 20, 21, wait=12)
    report = check(records, semaphore(2))
    assert report.problems == [] and report.figures["holdings resumed after an unanswered release"] == 1
    # a's first wait ended in an error after Redis applied it (token 3): b
    # entered beside it with 5, and a's next acquisition re-entered it.
    errored = [{"e": "wait", "k": "a", "t": ms(0)}, {"e": "waited", "k": "a", "t": ms(5), "out": "error:Connection:reset"}]
    records = errored + holding("b", 5, 6, 40, 41, wait=5.5) + holding("a", 3, 12, 30, 31, wait=10)
    report = check(records, semaphore(2))
    assert report.problems == [] and report.figures["holdings perhaps resumed after an unanswered request"] == 1
    assert check(records[2:], semaphore(2)).problems != []


def test_a_task_that_could_not_make_its_lock_fails() -> None:
    refused = [{"e": "refused", "k": "a", "t": ms(0), "what": "error:ValueError:not Redlock"}]
    found = check(refused, RW).problems
    assert any(p.startswith("[3]") and "never waited" in p for p in found), found
