"""The benchmark harness: `python -m harness` from bench/ (bench/run installs
the peers and builds the release artefacts first).

Starts its own redis-server(s) on free loopback ports, drives persistent
worker processes in Python, Node and Rust over JSON lines, and writes
bench/RESULTS.md, bench/results.png and bench/.out/results.json.

The machine is shared and noisy, so no single absolute time is the result:
contenders and their floor run in small blocks, interleaved in a shuffled
order in every round, each ratio is taken per round (contender and floor of
the same round, in the same process) and reported as a median with its
spread over the rounds.
"""
