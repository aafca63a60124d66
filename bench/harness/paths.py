"""Where the benchmark's programs and outputs live."""

import os

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
RUST_BIN = os.path.join(ROOT, "target", "release", "rlock-bench")
# The release addon bench/run builds, loaded by the Node worker in place of node/.
NODE_FACE = os.path.join(BENCH, ".build", "node", "index.js")
# The Go workers bench/run builds (bench/go/), against the core's release build.
GO_BIN = os.path.join(BENCH, ".build", "bin")
OUT = os.path.join(BENCH, ".out")
RESULTS_JSON = os.path.join(OUT, "results.json")
RESULTS_MD = os.path.join(BENCH, "RESULTS.md")
RESULTS_PNG = os.path.join(BENCH, "results.png")
