"""The scripts of a read-write lock or semaphore as the wire carries them: the
core sends each as one body, `queue.lua`, then `shared/lib.lua`, then the
script, each file followed by a newline, by the SHA-1 of that body (EVALSHA),
or the body itself once Redis does not know it (EVAL). A fault can then pick
the requests of one script."""

from __future__ import annotations

import hashlib
import os
from typing import Dict

LUA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lua")
# The scripts whose replies a schedule drops: taking, letting go, renewing
# and leaving the line (a wait given up).
SHARED = ("acquire", "release", "extend", "dequeue")


def _read(path: str) -> str:
    with open(os.path.join(LUA, path), encoding="utf-8") as f:
        return f.read()


def body(script: str) -> str:
    return "".join(_read(p) + "\n" for p in ("queue.lua", "shared/lib.lua", f"shared/{script}.lua"))


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# Each shared script's SHA by name, and the other way round.
SHAS: Dict[str, str] = {name: sha(body(name)) for name in SHARED}
NAMES: Dict[str, str] = {v: k for k, v in SHAS.items()}
