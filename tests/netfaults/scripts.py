"""Scripts as the wire carries them, so that a fault can pick the requests of
one: the core sends each as one body, its files each followed by a newline
(core/src/redis/scripts.rs), by the SHA-1 of that body (EVALSHA), or the
body itself once Redis does not know it (EVAL). A read-write lock's or a
semaphore's script is `common.lua`, then `mutex/queue.lua`, then
`many/lib.lua`, then the script (core/lua/); a mutex's leaving the line is
`mutex/dequeue.lua` alone."""

from __future__ import annotations

import hashlib
import os
from typing import Dict

LUA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "core", "lua")
# The scripts whose replies a schedule drops: taking, letting go, renewing
# and leaving the line (a wait given up).
SHARED = ("acquire", "release", "extend", "dequeue")


def _read(path: str) -> str:
    with open(os.path.join(LUA, path), encoding="utf-8") as f:
        return f.read()


def body(script: str) -> str:
    return "".join(_read(p) + "\n" for p in ("common.lua", "mutex/queue.lua", "many/lib.lua", f"many/{script}.lua"))


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# Each shared script's SHA by name, and the other way round.
SHAS: Dict[str, str] = {name: sha(body(name)) for name in SHARED}
NAMES: Dict[str, str] = {v: k for k, v in SHAS.items()}
# A mutex's waiter leaving the line (it gave up), whose requests a nemesis
# drops to leave its entry behind (nemesis.py).
MUTEX: Dict[str, str] = {"mutex dequeue": sha(_read("mutex/dequeue.lua") + "\n")}
# Every script a fault can pick, by name.
PICKABLE: Dict[str, str] = {**SHAS, **MUTEX}
