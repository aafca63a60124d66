"""`make soak-network`: thousands of network-fault schedules in one run.

    python tests/netfaults/soak.py [SCHEDULES] [FIRST_SEED] [SHARED] [NEMESIS]

Runs SCHEDULES mutex seeds from FIRST_SEED and, among them, SHARED (default a
fifth of SCHEDULES) read-write lock and semaphore seeds from
`schedule.SHARED_FIRST` + FIRST_SEED and NEMESIS (default a fiftieth) nemesis
seeds from `nemesis.NEMESIS_FIRST` + FIRST_SEED. Prints each violating schedule as it is
found (with its replay command), then the schedules run, the faults injected
by kind and the violations; exits 1 on any violation."""

from __future__ import annotations

import os
import sys
import time

from driver import Driver
from nemesis import NEMESIS_FIRST
from schedule import SHARED_FIRST


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    shared = int(sys.argv[3]) if len(sys.argv) > 3 else count // 5
    scripted = int(sys.argv[4]) if len(sys.argv) > 4 else count // 50
    # The shared kinds' and the nemesis' seeds spread evenly among the mutex's.
    seeds = [(i / count, first + i) for i in range(count)]
    seeds += [((j + 0.5) / shared, SHARED_FIRST + first + j) for j in range(shared)]
    seeds += [((j + 0.25) / scripted, NEMESIS_FIRST + first + j) for j in range(scripted)]
    driver = Driver(keep=os.environ.get("RLOCK_NETFAULTS_KEEP"))
    started = time.monotonic()
    try:
        for done, (_, seed) in enumerate(sorted(seeds), 1):
            outcome = driver.run(seed)
            if outcome.report.violations:
                print(outcome.explain(), flush=True)
            if done % 100 == 0:
                print(f"... {done} schedules, {time.monotonic() - started:.0f} s", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        driver.close()
    for line in driver.summary():
        print(line)
    return 1 if any(o.report.violations for o in driver.outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
