"""A Redlock refuses a read-write lock and a semaphore, in every face: its
independent masters would each count a different set of holders. So the
schedules of those kinds run on one server and on a Cluster."""

from __future__ import annotations

from typing import Any, Dict, List

from driver import COMMANDS, Driver


def test_a_redlock_refuses_read_write_locks_and_semaphores(driver: Driver) -> None:
    rows, stuck = driver.refusals()
    assert stuck == []
    by_task: Dict[str, List[Dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["k"], []).append(r)
    assert sorted(by_task) == sorted(f"{lang}.{kind}" for lang in COMMANDS for kind in ("rw", "semaphore"))
    for k, records in by_task.items():
        # Node and Rust refuse making the lock, Python its first use.
        expected = ["wait", "waited"] if k.startswith("py.") else ["refused"]
        assert [r["e"] for r in records] == expected, records
        said = records[-1].get("what") or records[-1]["out"]
        assert "not Redlock" in said and ("ValueError" in said) == k.startswith("py."), said
