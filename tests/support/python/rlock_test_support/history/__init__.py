"""One lock history, as the fault suites read it back: what every worker
recorded (`records`: holdings and waits, one vocabulary for every face and
suite), what one lock admits at once (`room`) and when a waiter had room
(`waits`). Each suite's checker judges that history against its own faults:
processes killed, paused and data wiped (tests/faults/checker.py), or
requests and replies lost, delayed and cut on the wire
(tests/netfaults/netchecker.py)."""
