# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
export CARGO_TERM_COLOR ?= never

.PHONY: test lint test-rust

## Every check CI runs: formatting, lints, and every test suite.
test: lint test-rust test-python test-node

lint:
	scripts/ensure-redis
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings

test-rust:
	scripts/ensure-redis
	cargo test --workspace

.PHONY: test-python
## The Python package: built into .venv (made if missing), then its pytest suite.
test-python: .venv/.installed
	scripts/ensure-redis
	VIRTUAL_ENV=$(CURDIR)/.venv .venv/bin/maturin develop --quiet
	.venv/bin/python -m pytest tests/python

.venv/.installed: python/requirements-dev.txt
	[ -x .venv/bin/python ] || python3 -m venv .venv
	.venv/bin/python -m pip install --quiet --disable-pip-version-check -r python/requirements-dev.txt
	touch $@

.PHONY: test-node
## The Node package: `npm install` builds the addon (its prepare script), then its node --test suite.
test-node:
	scripts/ensure-redis
	npm install --no-audit --no-fund
	npm test
