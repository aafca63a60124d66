# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
export CARGO_TERM_COLOR ?= never

.PHONY: test lint test-rust

## Every check CI runs: formatting, lints, one version, every test suite, and the release artefacts installed.
test: lint test-rust test-python test-node test-go test-matrix test-interop test-faults test-netfaults test-soak test-docs test-dist

## What make test checks first: make check, and one version across the artefacts.
lint: check
	scripts/ensure-redis
	scripts/check-version

# Every crate's source folder: none may have modules that depend on each other in a cycle.
CRATE_SOURCES := core/src python/src node/src cli/src ffi/src bench/src tests/support/rust/src

.PHONY: check test-quick
## The loop to run many times a day: formatting, clippy, and no module cycle in any crate.
check:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	for src in $(CRATE_SOURCES); do scripts/check-module-cycles $$src || exit 1; done
	test -z "$$(gofmt -l go bench/go)" || { gofmt -l go bench/go; exit 1; }
	cd go && go vet ./...

# The core's suites that take seconds, not tens of seconds (the Cluster, Sentinel, inspection,
# lifetime, property and security suites are test-rust's).
QUICK_RUST_SUITES := $(filter-out cluster sentinel inspection lifetime properties security,\
	$(basename $(notdir $(wildcard core/tests/*.rs))))
# The debug addon and its loader, built by napi beside the release ones of node-package, not over them.
DEBUG_NAPI := target/debug/napi
DEBUG_ADDON := $(DEBUG_NAPI)/rlock.linux-x64-gnu.node

QUICK_RUST_TESTS := --workspace --lib $(addprefix --test ,$(QUICK_RUST_SUITES))

## The core's quick suites and the Python and Node face suites against debug builds (the Node one
## through NAPI_RS_NATIVE_LIBRARY_PATH, leaving the release addon of make test alone). Built first,
## then the three run side by side: they wait on Redis more than on the CPU, and each starts its
## own servers on free ports.
test-quick: python-package node-dev-tools go-lib
	scripts/ensure-redis
	node_modules/.bin/napi build --platform --manifest-path node/Cargo.toml --output-dir $(DEBUG_NAPI) \
		--js native.js --no-dts-header --dts native.d.ts
	test -e node/native.js || cp $(DEBUG_NAPI)/native.js node/native.js
	cargo test $(QUICK_RUST_TESTS) --no-run --quiet
	$(MAKE) --no-print-directory -j3 --output-sync=target quick-rust quick-python quick-node quick-go

.PHONY: quick-rust quick-python quick-node quick-go
quick-rust:
	cargo test $(QUICK_RUST_TESTS) --quiet
quick-python:
	.venv/bin/python -m pytest tests/python -q
quick-node:
	NAPI_RS_NATIVE_LIBRARY_PATH=$(CURDIR)/$(DEBUG_ADDON) node --test tests/node/
quick-go:
	cd go && go test -count=1 ./...

.PHONY: go-lib test-go
# The core's C ABI as the static library the Go module links (go/lib/linux_amd64/librlock.a), a
# debug build here; its header, ffi/include/rlock.h, is checked against the crate by cargo test.
go-lib:
	cargo build -p rlock-ffi
	mkdir -p go/lib/linux_amd64
	cp target/debug/librlock.a go/lib/linux_amd64/librlock.a

## The Go face's tests (go/), against the debug build of the core's C ABI: plain, under the race
## detector, and with cgo's pointer rules checked on every store (GOEXPERIMENT=cgocheck2).
test-go: go-lib
	scripts/ensure-redis
	cd go && go vet ./... && go test -count=1 ./... && go test -count=1 -race ./... \
		&& GOEXPERIMENT=cgocheck2 go test -count=1 ./...

test-rust:
	scripts/ensure-redis
	cargo test --workspace

.PHONY: test-busy
## Every suite of `make test` but the docs and the artefacts, with each core kept busy by a CPU-bound
## loop the whole time (scripts/busy): what a newcomer's machine that is building something else does
## to the tests. Not part of `test`; a suite that passes only on an idle machine fails here.
test-busy: python-package node-package rust-programs
	scripts/ensure-redis
	cargo build --workspace --tests
	scripts/busy $(MAKE) --no-print-directory test-rust test-python test-node test-interop test-faults test-netfaults test-soak

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
## The Node package: the dev tools and the release addon (node-package), then its node --test suite.
test-node: node-package
	scripts/ensure-redis
	npm test

MATRIX := redis-6.2 redis-8.2 valkey-8.1
MATRIX_TARGETS := $(addprefix test-matrix-,$(MATRIX))
.PHONY: test-matrix $(MATRIX_TARGETS)
## The Rust, Python and Node suites again on each server users run besides the Redis 7.0 of the other
## targets: Redis 6.2.14, Redis 8.2.3 and Valkey 8.1.8, fetched once into .servers/ (scripts/ensure-servers),
## about 16 minutes on 2 cores (5 to 5½ a server); one alone: `make test-matrix-redis-6.2`, `-redis-8.2`, `-valkey-8.1`.
test-matrix: $(MATRIX_TARGETS)

# Every integration suite of the workspace (core/tests, cli/tests; the unit and doc tests reach no
# server), built as test-rust builds them: --workspace unifies the dependencies' features over every
# member, where `-p rlock-core` alone would build tokio, redis, rustls and the rest again.
MATRIX_RUST_SUITES := $(sort $(basename $(notdir $(wildcard core/tests/*.rs cli/tests/*.rs))))

# Left out on every server of the matrix (they run on Debian's 7.0 in test-rust, test-python and
# test-node): the tests that need a TLS server, the wheels' binaries being built without TLS.
MATRIX_SKIP_RUST := a_server_certificate_from_an_unknown_ca_is_refused_with_a_connection_error \
	rediss_with_the_servers_ca_trusted_takes_waits_and_renews_locks \
	certificate_checks_cannot_be_turned_off_through_the_url \
	plain_redis_on_a_tls_port_fails_fast_with_a_connection_error \
	tls_ca_trusts_a_private_ca_and_without_it_exits_69
MATRIX_SKIP_PYTHON := tests/python/test_from_redis.py::test_tls_and_its_ca_are_read_from_the_redis_client \
	tests/python/test_validation.py::test_tls_ca_trusts_a_private_ca_given_as_a_path_or_as_bytes
# Names the Node tests left out start with. Node 20's runner has no skip pattern: it runs the tests
# whose name, or an ancestor's, matches; `[^</]` keeps the names of the run ("<root>") and of each
# file (its path) from matching.
MATRIX_SKIP_NODE := tlsCa trusts|ioredis. tls options
MATRIX_SKIP_RUST_SUITES :=

# Left out on Redis 6.2 besides: Redis Cluster (the whole of core/tests/cluster.rs and every test
# named for a Cluster). The lock's Cluster mode announces releases by sharded pub/sub, which came with
# 7.0: a client refuses a 6.2 Cluster at connect (core/tests/server_versions.rs checks that here).
test-matrix-redis-6.2: MATRIX_SKIP_RUST_SUITES += cluster
test-matrix-redis-6.2: MATRIX_SKIP_RUST += a_dropped_cluster_client_that_waited_in_line_leaves_nothing \
	any_acceptable_name_takes_shows_and_releases_its_lock_in_one_cluster_slot \
	cluster_exec_and_status_work_against_a_three_master_cluster
test-matrix-redis-6.2: MATRIX_SKIP_PYTHON += tests/python/test_deployments.py::test_a_cluster_client_locks_names_on_every_master \
	tests/python/test_deployments.py::test_a_cluster_client_shares_read_write_locks_and_semaphores \
	tests/python/test_deployments.py::test_a_cluster_waiter_is_woken_by_the_sharded_release_message \
	tests/python/test_from_redis.py::test_a_redis_cluster_client_makes_a_cluster_client
test-matrix-redis-6.2: MATRIX_SKIP_NODE := $(MATRIX_SKIP_NODE)|a Cluster |a Redis.Cluster instance
# And a script's failed read other than WRONGTYPE (an ACL without HMGET): on 6.2 the error the
# scripts raise loses the server's reason, a difference docs/deployments.md describes.
test-matrix-redis-6.2: MATRIX_SKIP_RUST += a_failure_other_than_a_wrong_type_is_an_error_not_someone_elses_lock

$(MATRIX_TARGETS): export RLOCK_REDIS_SERVER = $(CURDIR)/.servers/$*/redis-server
$(MATRIX_TARGETS): test-matrix-%: python-package node-package
	scripts/ensure-redis
	scripts/ensure-servers
	cargo test --workspace $(addprefix --test ,$(filter-out $(MATRIX_SKIP_RUST_SUITES),$(MATRIX_RUST_SUITES))) \
		-- $(addprefix --skip ,$(MATRIX_SKIP_RUST))
	.venv/bin/python -m pytest tests/python $(addprefix --deselect ,$(MATRIX_SKIP_PYTHON))
	node --test --test-name-pattern='^(?!$(MATRIX_SKIP_NODE))[^</]' tests/node/

NODE_ADDON := node/rlock.linux-x64-gnu.node
# What the addon and its loader are built from (package.json too: the loader checks the platform
# package's version). make, not cargo, decides whether they are stale: maturin's zig and plain
# cargo builds share the target folder with other linkers, after which cargo rebuilds every crate.
NODE_ADDON_SOURCES := package.json Cargo.toml Cargo.lock node/Cargo.toml node/build.rs core/Cargo.toml \
	README.md core/rust.md $(shell find node/src core/src core/lua -type f)

.PHONY: node-package node-dev-tools
## The Node package in the clone: the dev tools, then the release addon and its loader node/native.js.
node-package: node-dev-tools $(NODE_ADDON)

## `npm install` builds nothing: neither here nor in a user's install of the npm packages.
node-dev-tools:
	npm install --no-audit --no-fund

# zig links the addon against glibc 2.17, as napi-rs's published addons are, so that the platform
# package `make dist-node` packs from it loads on older distributions too.
$(NODE_ADDON): $(NODE_ADDON_SOURCES) | node-dev-tools .venv/.cargo-zigbuild
	PATH=$(CURDIR)/.venv/bin:$$PATH npm run build -- --cross-compile --target x86_64-unknown-linux-gnu.2.17
	touch $@

# napi's --cross-compile builds through `cargo zigbuild`, which runs zig from .venv's ziglang.
.venv/.cargo-zigbuild: .venv/.zig
	.venv/bin/python -m pip install --quiet --disable-pip-version-check 'cargo-zigbuild==0.24.1'
	touch $@

.PHONY: test-interop
## One lock across runtimes: Python, Node, Rust, Go and the CLI contend on one redis-server.
test-interop: python-package node-package rust-programs go-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/interop

.PHONY: test-docs
## The documentation: every link of README.md, CONTRIBUTING.md, core/rust.md and docs/ into the repository is
## relative and leads to a file and heading of the checkout (none names the project's home), and every sample
## runs as pasted against a redis-server and prints what the page shows.
test-docs: python-package node-package rust-programs go-lib
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
## one server, fair mode, a Cluster and a Redlock: 200 seeded mutex schedules and 40 of read-write locks and semaphores;
## and 12 of the nemesis (a leaving of the line lost, Redlock masters restarted empty, a Cluster slot moved, a master
## failed over: each kind twice); RLOCK_NETFAULTS_SEED=N replays one.
test-netfaults: python-package node-package rust-programs go-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/netfaults -p no:cacheprovider

.PHONY: test-soak
## The memory soak, short (about 45 s): resident memory flat after warm-up, connections and
## threads back to their baseline once the client is closed (`make soak-memory`: the long run).
test-soak: python-package node-package rust-programs
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/soak

.PHONY: dist dist-python dist-cli dist-go test-dist
## The release artefacts this machine builds (x86_64 Linux) into dist/: the Python wheel and sdist,
## the npm packages, the rlock tarball. Other platforms come from the release workflow.
dist: dist-python dist-cli dist-node dist-go

## The abi3 wheel (CPython >= 3.9) linked through zig against glibc 2.17, so that maturin's
## manylinux check passes for manylinux2014, and the sdist.
dist-python: .venv/.installed .venv/.zig
	rm -f dist/redis_rlock-*
	PATH=$(CURDIR)/.venv/bin:$$PATH .venv/bin/maturin build --release --zig --compatibility manylinux2014 --out dist
	.venv/bin/maturin sdist --out dist

# maturin runs zig from the ziglang package of the python first on the PATH.
.venv/.zig: .venv/.installed
	.venv/bin/python -m pip install --quiet --disable-pip-version-check 'ziglang==0.17.1'
	touch $@

.PHONY: dist-node
## The npm packages as dist/*.tgz: redis-rlock (JS, types, the loader; no native code, no build step)
## and redis-rlock-linux-x64-gnu (the addon node-package built, rebuilt only if a source is newer).
dist-node: node-package
	scripts/pack-node

## The Go module as a Go module proxy serves it, under dist/goproxy (scripts/pack-go): go/'s sources,
## the core's header and its release static library for linux/amd64, built through zig against
## glibc 2.17 like the other artefacts (its C parts too), debug sections stripped.
GO_LIB := target/x86_64-unknown-linux-gnu/release/librlock.a
dist-go: .venv/.cargo-zigbuild
	PATH=$(CURDIR)/.venv/bin:$$PATH cargo zigbuild --release -p rlock-ffi --target x86_64-unknown-linux-gnu.2.17
	strip --strip-debug -o target/librlock-linux_amd64.a $(GO_LIB)
	scripts/pack-go linux_amd64=target/librlock-linux_amd64.a

## rlock as dist/rlock-VERSION-TARGET.tar.gz (the binary, the licenses, the README) and its .sha256.
dist-cli:
	cargo build --release -p rlock-cli
	scripts/pack-cli $$(rustc -vV | sed -n 's/^host: //p') target/release/rlock

## What dist/ holds, installed as a user would on a PATH without cargo or rustc, each then taking a
## lock: the wheel into a fresh virtualenv, the npm tarballs into a fresh folder, rlock from its tarball.
test-dist: dist .venv/.installed
	scripts/ensure-redis
	.venv/bin/python -m pytest tests/dist

.PHONY: rust-programs
## The `rlock` binary and the Rust workers of the interop, network-fault and soak tests (debug builds).
rust-programs:
	cargo build -p rlock-cli -p rlock-core --bins --examples

.PHONY: go-programs
# The Go workers of the interop and network-fault suites, beside the Rust ones.
go-programs: go-lib
	cd go && go build -o ../target/debug/go_interop_worker ./internal/interopworker \
		&& go build -o ../target/debug/go_netfaults_worker ./internal/netfaultsworker

.PHONY: demo
## The cache demo: `cached` from Python threads, Node promises and `rlock cached` on one entry: cold, 105
## requests at once, one load; then expiring under steady reads, served stale while one refresh runs.
## Uses REDIS_URL when set, else a throwaway server.
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
