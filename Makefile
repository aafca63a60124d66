# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
export CARGO_TERM_COLOR ?= never

.PHONY: test lint test-rust

## Every check CI runs: formatting, lints, and every test suite.
test: lint test-rust test-node

lint:
	scripts/ensure-redis
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

test-rust:
	scripts/ensure-redis
	cargo test --workspace

.PHONY: test-node
## The Node package: `npm install` builds the addon (its prepare script), then its node --test suite.
test-node:
	scripts/ensure-redis
	npm install --no-audit --no-fund
	npm test
