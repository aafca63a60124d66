"""How much a run measures: every count and duration of the full run and of
the short smoke run (`--quick`), side by side."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    quick: bool
    # redis-benchmark requests, at each of its three points of the run
    round_trip_requests: int
    # S1 + S5: interleaved rounds, cycles per contender block
    s1_rounds: int
    s1_block: int
    # S5: `rlock-bench hops` rounds and cycles per block
    hops_rounds: int
    hops_cycles: int
    # S2 + S3: rounds and the length of each block
    s2_rounds: int
    s2_seconds: float
    # S7: rounds and the length of each block
    s7_rounds: int
    s7_seconds: float
    # S8 (semaphore, contended) and S9 (read-write lock): rounds and the length of each block
    s8_rounds: int
    s8_seconds: float
    s9_rounds: int
    s9_seconds: float
    # S10 (cached): how long the hot key is read across its expiries
    s10_expiry_seconds: float
    # Idle waiters: how long commands are counted
    idle_window: float
    # S4: how long the locks are held
    s4_seconds: int
    # S6, per number of servers: S1 rounds and block, S2 rounds and block length
    s6_rounds: int
    s6_block: int
    s6_s2_rounds: int
    s6_s2_seconds: float
    # The same in both runs.
    idle_waiters: int = 100
    idle_settle: float = 2.0
    s4_locks: int = 10000
    s4_ttl_ms: int = 3000
    s6_sizes: tuple = (3, 5)


FULL = Profile(
    quick=False,
    round_trip_requests=20000,
    s1_rounds=50, s1_block=100,
    hops_rounds=10, hops_cycles=300,
    s2_rounds=5, s2_seconds=2.0,
    s7_rounds=3, s7_seconds=1.0,
    s8_rounds=5, s8_seconds=2.0,
    s9_rounds=5, s9_seconds=2.0,
    s10_expiry_seconds=12.0,
    idle_window=5.0,
    s4_seconds=60,
    s6_rounds=10, s6_block=100, s6_s2_rounds=2, s6_s2_seconds=2.0,
)

QUICK = Profile(
    quick=True,
    round_trip_requests=5000,
    s1_rounds=4, s1_block=50,
    hops_rounds=4, hops_cycles=100,
    s2_rounds=1, s2_seconds=1.0,
    s7_rounds=1, s7_seconds=0.5,
    s8_rounds=1, s8_seconds=1.0,
    s9_rounds=1, s9_seconds=1.0,
    s10_expiry_seconds=5.0,
    idle_window=2.0,
    s4_seconds=10,
    s6_rounds=3, s6_block=50, s6_s2_rounds=1, s6_s2_seconds=1.0,
)
