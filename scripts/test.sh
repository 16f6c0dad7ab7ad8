#!/usr/bin/env bash
# Runs every test: unit, property, snapshot and end-to-end tests of the command line,
# after checking that the code is formatted.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo test --workspace --locked --no-fail-fast "$@"
