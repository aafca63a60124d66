# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
export CARGO_TERM_COLOR ?= never

.PHONY: test lint test-rust

## Every check CI runs: formatting, lints, and every test suite.
test: lint test-rust test-python test-node test-interop test-faults test-netfaults test-soak test-docs

lint:
	scripts/ensure-redis
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	scripts/check-module-cycles

test-rust:
	scripts/ensure-redis
	cargo test --workspace

.PHONY: test-python
## The Python package: built into .venv (made if missing), then its pytest suite.
test-python: python-package
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/python

.PHONY: python-package
## The Python package, built (debug) into .venv, which is made if missing, with the test tools.
python-package: .venv/.installed
	VIRTUAL_ENV=$(CURDIR)/.venv .venv/bin/maturin develop --quiet

.venv/.installed: python/requirements-dev.txt tests/support/python/pyproject.toml
	[ -x .venv/bin/python ] || python3 -m venv .venv
	.venv/bin/python -m pip install --quiet --disable-pip-version-check -r python/requirements-dev.txt
	.venv/bin/python -m pip install --quiet --disable-pip-version-check -e tests/support/python
	touch $@

.PHONY: test-node
## The Node package: `npm install` builds the addon (its prepare script), then its node --test suite.
test-node: node-package
	scripts/ensure-redis
	npm test

.PHONY: node-package
node-package:
	npm install --no-audit --no-fund

.PHONY: test-interop
## One lock across runtimes: Python, Node, Rust and the CLI contend on one redis-server.
test-interop: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/interop

.PHONY: test-docs
## The documentation: every link of README.md, CONTRIBUTING.md and docs/ into the repository leads to a file
## and heading, and every sample runs as pasted against a redis-server and prints what the page shows.
test-docs: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/docs

.PHONY: test-faults
## Faults (SIGKILL, SIGSTOP, Redis restarts, CLIENT KILL, SCRIPT FLUSH, a slow, stalled and cut wire,
## a GIL hog, 100 000 cycles) under Python, Node and CLI workers; ends with `N passed, N failed`.
test-faults: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/faults

.PHONY: test-netfaults
## Randomized network faults (replies lost after Redis applied them, slow replies, stalls, resets) on
## one server, fair mode, a Cluster and a Redlock: 200 seeded schedules; RLOCK_NETFAULTS_SEED=N replays one.
test-netfaults: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/netfaults -p no:cacheprovider

.PHONY: test-soak
## The memory soak, short (about 45 s): resident memory flat after warm-up, connections and
## threads back to their baseline once the client is closed (`make soak-memory`: the long run).
test-soak: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/soak

.PHONY: rust-programs
## The `rlock` binary and the Rust workers of the interop, network-fault and soak tests (debug builds).
rust-programs:
	cargo build -p rlock-cli -p rlock-core --bins --examples

.PHONY: demo
## The cache-breakdown demo: requests from Python threads, Node promises and `rlock exec`
## on one cold cache entry; exactly one rebuild. Uses REDIS_URL when set, else a throwaway server.
demo: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python demo/run.py

.PHONY: bench
## The benchmark against the other lock libraries (not part of `test`): writes bench/RESULTS.md.
bench:
	bench/run

.PHONY: soak soak-network soak-memory
## Long runs (not part of `test`): thousands of network-fault schedules and a million-acquisition
## memory soak; each prints its figures and fails on any violation.
soak: soak-network soak-memory

soak-network: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python tests/netfaults/soak.py $(or $(SCHEDULES),3000)

## Every loop of tests/soak long: over a million acquisitions from Python threads and asyncio
## tasks, Node promises and Rust tasks (contended, fair, in line, cancelled, uncontended), about
## 12 minutes; prints acquisitions, RSS at each checkpoint, connections and threads before/after.
soak-memory: python-package node-package rust-programs
	scripts/ensure-redis
	SOAK_LONG=1 .venv/bin/python -m pytest tests/soak
