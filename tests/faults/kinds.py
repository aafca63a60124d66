"""The kinds of lock a fault worker takes, as its records name them: a
mutex (the default), the `read` or `write` side of the read-write lock of a
name, or one permit of its `semaphore` of `permits` permits. Stdlib only:
the CLI worker and its recorder import it too."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Tuple

if TYPE_CHECKING:  # the recorder starts in milliseconds: no module it does not use
    import random

# The kinds whose holders hold alone: only they write to the fenced storage,
# since the writes of holders sharing a lock could not be fenced against
# each other.
ALONE = ("mutex", "write")


def choose(rng: random.Random, cfg: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """A round's name (from `names`) and kind (`kind`, or one of a list of
    them), the kind as records carry it: nothing for a mutex, else `kind`
    and a semaphore's `permits`."""
    name = rng.choice(cfg["names"])
    kinds = cfg.get("kind", "mutex")
    kind = rng.choice(kinds) if isinstance(kinds, list) else kinds
    if kind == "mutex":
        return name, {}
    return name, {"kind": kind, **({"permits": cfg["permits"]} if kind == "semaphore" else {})}


def writes(kind: Dict[str, Any]) -> bool:
    return kind.get("kind", "mutex") in ALONE
