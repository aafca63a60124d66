"""The holdings and waits a run's records tell. Every worker of every face
and suite writes one JSON line per event, stamped with CLOCK_MONOTONIC
nanoseconds (comparable across the processes of one machine), naming its
owner (`k`, or `w` for a worker process that is one owner) and the lock's
name (`n`, where a run has several):

  wait    asks for the lock             waited  gave up (out: timeout | error:...)
  enter   holds it (tok: its token)     step    still believed it held it: stamped
  lost    first saw it was told the             *before* asking whether it was told
          lease ended                           the lease ended, and the answer was no
  rel     about to let go               exit    let go (out: released | lost | notowned | error:...)
  nested  a nested acquire or release, or an extension, returned (re: it took the lock again)
  note    something a nested call answered besides success
  refused making the lock failed (what: the error)
  cycle   a whole take and release in one line (t0 asked, t1 held, t2 let go, t done)

Which lock: a record's `kind` (`mutex`, the `read` or `write` side of a
read-write lock, a permit of a `semaphore` of `permits`), or the owner's
settings' `kind` (`mutex`, `rw`, `semaphore` with `permits` and `take`) with
the record's `side`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

Lock = Tuple[str, str]  # (family, name): a name's mutex, read-write lock and semaphore are three locks


class OfLock:
    """Which lock a holding or a wait is of: its name, its family (mutex |
    rw | semaphore) and its side (read | write)."""

    name: str
    family: str
    side: str

    @property
    def lock(self) -> Lock:
        return self.family, self.name

    @property
    def kind(self) -> str:
        """mutex | read | write | semaphore"""
        return self.side if self.family == "rw" else self.family


@dataclass
class Holding(OfLock):
    owner: str
    name: str
    token: Optional[int]
    enter: int
    ttl_ms: float
    family: str = "mutex"  # mutex | rw | semaphore
    side: str = "write"  # read | write (a mutex's and a semaphore's holdings write)
    take: int = 1  # the permits it holds
    permits: int = 1  # its semaphore's size
    asked: int = 0  # when its wait began: the request that set its lease left after this
    since: int = 0  # when the lock may have been taken, at the earliest (busy from then)
    renewed: int = 0  # the latest moment a request of its own may have reset its lease
    auto_renew: bool = True
    # Its owner's last wait or release before it ended in an error: Redis may
    # have applied that acquisition, which this one then re-entered, token and all.
    after_error: bool = False
    beliefs: List[int] = field(default_factory=list)
    re_entries: List[int] = field(default_factory=list)  # nested acquires that took it again
    lost: Optional[int] = None  # when the holder was told (first seen)
    rel: Optional[int] = None
    exit: Optional[int] = None
    out: Optional[str] = None
    killed: Optional[int] = None  # its process was killed while it held

    @property
    def alone(self) -> bool:
        """Whether it holds alone: a mutex holder or a writer."""
        return self.kind in ("mutex", "write")

    @property
    def inside(self) -> bool:
        """Whether it ever believed it held the lock (one step at least): a
        holding told lost before its first step never entered."""
        return bool(self.beliefs)

    @property
    def believed_from(self) -> int:
        return self.beliefs[0] if self.beliefs else self.enter

    @property
    def believed_until(self) -> int:
        return self.beliefs[-1] if self.beliefs else self.enter

    @property
    def told(self) -> bool:
        return self.lost is not None or self.out in ("lost", "notowned")

    @property
    def let_go(self) -> Optional[int]:
        """When it began to let go (None: never)."""
        return self.rel if self.rel is not None else self.exit

    def resumes(self, earlier: "Holding") -> bool:
        """Whether it is `earlier` resumed by the same owner after its release
        went unanswered (README, Guarantees: the watchdog), not a new holding."""
        return (earlier.owner == self.owner and earlier.token == self.token and earlier.out is not None
                and earlier.out.startswith("error"))

    def __str__(self) -> str:
        kind = "" if self.family == "mutex" or not self.name else f"({self.kind})"
        at = f"@{self.name}" if self.name else ""
        return f"{self.owner}{kind}#{self.token}{at}"


@dataclass
class Waiting(OfLock):
    owner: str
    name: str
    start: int
    ttl_ms: float
    timeout_ms: Optional[float]
    end: Optional[int] = None
    out: Optional[str] = None  # acquired | timeout | error:... | killed
    family: str = "mutex"
    side: str = "write"
    take: int = 1
    permits: int = 1


@dataclass
class History:
    holdings: List[Holding] = field(default_factory=list)
    waits: List[Waiting] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # what nested calls answered besides success
    refused: List[str] = field(default_factory=list)  # owners that could not make their lock
    # What each owner had not finished when its records stop (its process killed).
    holding: Dict[str, Holding] = field(default_factory=dict)
    waiting: Dict[str, Waiting] = field(default_factory=dict)


def which(r: Dict[str, Any], terms: Dict[str, Any]) -> Dict[str, Any]:
    """The lock a record names, as Holding and Waiting fields."""
    kind = r.get("kind")
    if kind is None:
        family = terms.get("kind", "mutex")
        return {"family": family, "side": r.get("side", "write"), "take": terms.get("take", 1),
                "permits": terms.get("permits", 1)}
    return {"family": "rw" if kind in ("read", "write") else kind, "side": "read" if kind == "read" else "write",
            "take": 1, "permits": r.get("permits", 1)}


def build(records: Iterable[Dict[str, Any]], settings: Callable[[str], Dict[str, Any]]) -> History:
    """The history the records tell, in each owner's own order. `settings`
    gives an owner's terms: `ttl_ms`, `timeout_ms`, `auto_renew`, the lock's
    `kind`, `permits` and `take`, and `rounds` (a list: each wait's own
    `ttl_ms` and `timeout_ms`, in order)."""
    h = History()
    errored: Dict[str, bool] = {}
    waited: Dict[str, int] = {}
    for r in records:
        k, e = r.get("k", r.get("w")), r["e"]
        task = settings(k)
        name = r.get("n", "")
        if e == "wait":
            # `rounds`, when a list (not a count of rounds), gives each wait its terms.
            rounds = task.get("rounds")
            n = waited[k] = waited.get(k, -1) + 1
            terms = {**task, **rounds[n]} if isinstance(rounds, list) and n < len(rounds) else task
            h.waiting[k] = Waiting(k, name, r["t"], terms["ttl_ms"], terms.get("timeout_ms"), **which(r, task))
            h.waits.append(h.waiting[k])
        elif e == "waited" and "t0" in r:  # a cycle's wait that gave up: one line
            h.waits.append(Waiting(k, name, r["t0"], task["ttl_ms"], task.get("timeout_ms"), r["t"], r["out"]))
        elif e == "waited":
            w = h.waiting.pop(k)
            w.end, w.out = r["t"], r["out"]
            errored[k] = errored.get(k, False) or w.out.startswith("error")
        elif e == "enter":
            w = h.waiting.pop(k, None)
            if w is not None:
                w.end, w.out = r["t"], "acquired"
            # The lock, lease and start of the wait that took it.
            lock = which(r, task) if w is None else {
                "family": w.family, "side": w.side, "take": w.take, "permits": w.permits}
            asked = w.start if w is not None else r["t"]
            ttl_ms = w.ttl_ms if w is not None else task["ttl_ms"]
            h.holding[k] = Holding(k, name, r["tok"], r["t"], ttl_ms, asked=asked, since=r.get("since", r["t"]),
                                   renewed=r["t"], auto_renew=task.get("auto_renew", True),
                                   after_error=errored.get(k, False), **lock)
            h.holdings.append(h.holding[k])
        elif e == "step":
            h.holding[k].beliefs.append(r["t"])
        elif e == "nested":
            s = h.holding[k]
            s.renewed = max(s.renewed, r["t"])
            if r.get("re"):
                s.re_entries.append(r["t"])
        elif e == "lost":
            s = h.holding[k]
            s.lost = r["t"] if s.lost is None else min(s.lost, r["t"])
        elif e == "rel":
            h.holding[k].rel = r["t"]
        elif e == "exit":
            s = h.holding.pop(k)
            s.exit, s.out = r["t"], r["out"]
            errored[k] = s.out.startswith("error")
        elif e == "cycle":
            h.waits.append(Waiting(k, name, r["t0"], task["ttl_ms"], task.get("timeout_ms"), r["t1"], "acquired"))
            h.holdings.append(Holding(k, name, r["tok"], r["t1"], task["ttl_ms"], asked=r["t0"], since=r["t1"],
                                      renewed=r["t1"], beliefs=[r["t2"]], exit=r["t"], out=r["out"]))
        elif e == "note":
            h.notes.append(f"{k}: {r['what']}")
        elif e == "refused":
            h.refused.append(f"{k}: {r['what']}")
    return h
