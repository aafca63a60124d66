"""Scripts as the wire carries them, so that a fault can pick the requests of
one: the core sends each by the SHA-1 of its body (EVALSHA), or the body
itself once Redis does not know it (EVAL). The SHAs are the core's own
(`rlock._native._script_sha`), never assembled here again."""

from __future__ import annotations

from typing import Dict

from rlock import _native

# The scripts whose replies a schedule drops: taking, letting go, renewing
# and leaving the line (a wait given up).
SHARED = ("acquire", "release", "extend", "dequeue")


def _sha(name: str) -> str:
    sha = _native._script_sha(name)
    assert sha is not None, f"the core sends no script named {name!r}"
    return str(sha)


# Each shared script's SHA by name, and the other way round.
SHAS: Dict[str, str] = {name: _sha(f"many {name}") for name in SHARED}
NAMES: Dict[str, str] = {v: k for k, v in SHAS.items()}
# A mutex's waiter leaving the line (it gave up), whose requests a nemesis
# drops to leave its entry behind (nemesis.py).
MUTEX: Dict[str, str] = {"mutex dequeue": _sha("mutex dequeue")}
# Every script a fault can pick, by name.
PICKABLE: Dict[str, str] = {**SHAS, **MUTEX}
