"""The libraries compared, by language, the names the report gives them, and
which of them each scenario drives.

A contender is a (language, name) pair; each worker (bench/worker.py,
bench/worker.js, `rlock-bench worker`, bench/go/worker) knows how to drive the
names of its language. `floor` is the bare two-command cycle of the language's plain
client, the yardstick of S1; `rlock` is this project's mutex, `rlock-fair`
the same in fair mode. A name `kind:library` is another kind of lock:
`sem:` one permit of a semaphore of PERMITS, `read:` and `write:` the sides
of a read-write lock; `cached:` is no lock but a cache's read (S10, driven
by bench/cached_worker.py, bench/cached_worker.js, `rlock-bench
cached-worker` and bench/go/cachedworker); `mix/cached:rlock` is one key read
by Python, Node and Go processes at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import List, Optional, Tuple

from .paths import NODE_FACE

Contender = Tuple[str, str]

LANGS = {"py": "Python", "js": "Node", "rs": "Rust", "go": "Go"}
PY_PEERS = ["redispy-0.1", "redispy-0.001", "python-redis-lock", "pottery"]
JS_PEERS = ["redlock", "redis-semaphore"]
GO_PEERS = ["redsync", "redislock"]
# The semaphore's size in every scenario that takes one.
PERMITS = 4
LABELS = {
    ("py", "floor"): "redis-py bare cycle (floor)",
    ("py", "rlock"): "redis-rlock (Python)",
    ("py", "redispy-0.1"): "redis-py Lock, sleep=0.1",
    ("py", "redispy-0.001"): "redis-py Lock, sleep=0.001",
    ("py", "python-redis-lock"): "python-redis-lock",
    ("py", "pottery"): "pottery Redlock",
    ("js", "floor"): "ioredis bare cycle (floor)",
    ("js", "rlock"): "redis-rlock (Node)",
    ("js", "redlock"): "node-redlock",
    ("js", "redis-semaphore"): "redis-semaphore Mutex",
    ("js", "rlock-replay"): "ioredis sending redis-rlock's two commands (bound)",
    ("rs", "floor"): "redis-rs bare cycle (floor)",
    ("rs", "rlock"): "redis-rlock (Rust)",
    ("go", "floor"): "go-redis bare cycle (floor)",
    ("go", "rlock"): "redis-rlock (Go)",
    ("go", "redsync"): "redsync (go-redsync v4, default 32 tries 50–250 ms apart)",
    ("go", "redislock"): "bsm/redislock, LinearBackoff(100 ms)",
    ("go", "rlock-fair"): "redis-rlock (Go), fair mode",
    ("go", "sem:rlock"): "redis-rlock semaphore (Go)",
    ("go", "write:rlock"): "redis-rlock read-write lock (Go), readers and writers behind a writer",
    ("go", "cached:rlock"): "redis-rlock cached (Go)",
    ("go", "cached:rlock-stale"): "redis-rlock cached (Go), stale window",
    ("mix", "cached:rlock"): "redis-rlock cached, Python, Node and Go processes on one key",
    ("py", "rlock-fair"): "redis-rlock (Python), fair mode",
    ("js", "rlock-fair"): "redis-rlock (Node), fair mode",
    ("rs", "rlock-fair"): "redis-rlock (Rust), fair mode",
    ("py", "sem:rlock"): "redis-rlock semaphore (Python)",
    ("py", "sem:py-redis-semaphore"): "py-redis-semaphore Semaphore",
    ("js", "sem:rlock"): "redis-rlock semaphore (Node)",
    ("js", "sem:redis-semaphore"): "redis-semaphore Semaphore",
    ("rs", "sem:rlock"): "redis-rlock semaphore (Rust)",
    ("py", "write:rlock"): "redis-rlock read-write lock (Python), readers and writers behind a writer",
    ("js", "write:rlock"): "redis-rlock read-write lock (Node), readers and writers behind a writer",
    ("rs", "write:rlock"): "redis-rlock read-write lock (Rust), readers and writers behind a writer",
    ("py", "cached:rlock"): "redis-rlock cached (Python)",
    ("py", "cached:rlock-stale"): "redis-rlock cached (Python), stale window",
    ("js", "cached:rlock"): "redis-rlock cached (Node)",
    ("js", "cached:rlock-stale"): "redis-rlock cached (Node), stale window",
    ("rs", "cached:rlock"): "redis-rlock cached (Rust)",
    ("rs", "cached:rlock-stale"): "redis-rlock cached (Rust), stale window",
    ("py", "cached:dogpile"): "dogpile.cache, redis backend, distributed lock",
    ("py", "cached:dogpile-async"): "dogpile.cache, redis backend, distributed lock, async creation",
    ("py", "cached:cashews-lock"): "cashews @cache(lock=True)",
    ("py", "cached:cashews-early"): "cashews @cache.early",
    ("js", "cached:bentocache"): "bentocache, Redis (L2) only",
    ("js", "cached:bentocache-grace"): "bentocache, Redis (L2) only, grace period",
}

# S8: the semaphores, each face's and the peers'.
SEMAPHORES: List[Contender] = [("py", "sem:rlock"), ("py", "sem:py-redis-semaphore"),
                               ("js", "sem:rlock"), ("js", "sem:redis-semaphore"),
                               ("rs", "sem:rlock"), ("go", "sem:rlock")]

# S1: every language's floor and lock first, then its peers.
UNCONTENDED: List[Contender] = (
    [("py", "floor"), ("py", "rlock")] + [("py", p) for p in PY_PEERS]
    + [("js", "floor"), ("js", "rlock")] + [("js", p) for p in JS_PEERS]
    # The same server work as redis-rlock's cycle at ioredis's client cost: the
    # bound of what any client can make of this lock's two scripts.
    + [("js", "rlock-replay")]
    + [("rs", "floor"), ("rs", "rlock")]
    + [("go", "floor"), ("go", "rlock")] + [("go", p) for p in GO_PEERS]
    # S8's uncontended cycle, in the same rounds.
    + SEMAPHORES
)

# S2 (fair mode joins it from every face) and the idle waiters.
CONTENDED: List[Contender] = (
    [("py", "rlock")] + [("py", p) for p in PY_PEERS] + [("js", "rlock")]
    + [("js", p) for p in JS_PEERS] + [("rs", "rlock")]
    + [("go", "rlock")] + [("go", p) for p in GO_PEERS]
)

# The idle waiters: those of S2 and S8, and each face's read-write lock
# held by a writer while readers and writers wait (READ_WRITE_WAITERS in turn).
IDLE: List[Contender] = CONTENDED + SEMAPHORES + [(lang, "write:rlock") for lang in LANGS]
READ_WRITE_WAITERS = ["read:rlock", "write:rlock"]

# S6: the contenders that take several servers.
REDLOCK: List[Contender] = [("py", "rlock"), ("py", "pottery"), ("js", "rlock"), ("js", "redlock"),
                            ("js", "redis-semaphore"), ("rs", "rlock")]

# S10: each face's cache without and with a stale window, then the peers,
# the way each serves an expired value (or none) beside its plain way.
CACHED: List[Contender] = (
    [(lang, f"cached:{name}") for lang in LANGS for name in ("rlock", "rlock-stale")]
    + [("py", f"cached:{name}") for name in ("dogpile", "dogpile-async", "cashews-lock",
                                             "cashews-early")]
    + [("js", f"cached:{name}") for name in ("bentocache", "bentocache-grace")]
)
# S10 across faces: these languages' processes read one key at once.
MIXED = ("mix", "cached:rlock")
MIXED_LANGS = ["py", "js", "go"]

# S7: the two modes of this lock.
IN_ONE_PROCESS = ["rlock", "rlock-fair"]


def label_of(key: str) -> str:
    """The label of a contender by its results key, `lang/name`."""
    lang, name = key.split("/")
    return LABELS[(lang, name)]


def key_of(item: Contender) -> str:
    return "/".join(item)


def kind_of(key: str) -> str:
    """`sem`, `read`, `write` or `mutex`: the kind of lock of a results key `lang/name`."""
    name = key.split("/")[1]
    return name.split(":")[0] if ":" in name else "mutex"


def redlock_faces_exist() -> Optional[str]:
    """None when every face takes several URLs; otherwise why not."""
    py = subprocess.run([sys.executable, "-c", "import rlock; rlock.Client(['redis://127.0.0.1:1', 'redis://127.0.0.1:2', 'redis://127.0.0.1:3'])"],
                        capture_output=True, text=True)
    if py.returncode != 0:
        return "the Python face does not take several URLs yet (`rlock.Client([url1, url2, url3])`: " + \
            (py.stderr.strip().splitlines() or ["error"])[-1] + ")"
    js = subprocess.run(["node", "-e", f"const {{Client}} = require({json.dumps(NODE_FACE)}); "
                         "Client.connect(['redis://127.0.0.1:1','redis://127.0.0.1:2','redis://127.0.0.1:3'])"
                         ".then(() => process.exit(0), (e) => { console.error(String(e)); "
                         "process.exit(e && e.code === 'ERR_LOCK_CONNECTION' ? 0 : 1) })"],
                        capture_output=True, text=True)
    if js.returncode != 0:
        return "the Node face does not take several URLs yet (`Client.connect([url1, url2, url3])`: " + \
            (js.stderr.strip().splitlines() or ["error"])[-1] + ")"
    return None
