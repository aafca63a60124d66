# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
export CARGO_TERM_COLOR ?= never

.PHONY: test lint test-rust

## Every check CI runs: formatting, lints, and every test suite.
test: lint test-rust

lint:
	scripts/ensure-redis
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

test-rust:
	scripts/ensure-redis
	cargo test --workspace
