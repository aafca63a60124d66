"""Test support for redis-rlock, shared by every Python suite, the demo and
the benchmark: the one place that starts redis-server (`servers`), waiting on
a condition with a deadline (`waiting`), child processes read one line at a
time with a deadline (`processes`), and the pieces the fault suites share
(`background`, `wire`, `report`, `spans`)."""
