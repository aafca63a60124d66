"""A block: worker processes loop acquire / hold / release on one key (the
`s2` request of every worker) from one instant, once all have the request,
to another; each answers with one `[wanted, acquired, releasing, released]`
record per acquisition. S2, the semaphore and the read-write lock run theirs
this way."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..processes import Worker, mono_ns

# Time for every worker to read its request before the block starts.
LEAD_NS = 800_000_000

Request = Dict[str, Any]


def loop_block(requests: List[Tuple[Worker, Request]],
               seconds: float) -> Tuple[List[Dict[str, Any]], int, int]:
    """(every worker's reply, start, end): each worker loops as its request says."""
    start = mono_ns() + LEAD_NS
    end = start + int(seconds * 1e9)
    for w, req in requests:
        w.send({"op": "s2", **req, "start": start, "end": end})
    return [w.recv(timeout=seconds + 60) for w, _ in requests], start, end
