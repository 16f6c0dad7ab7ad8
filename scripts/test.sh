#!/usr/bin/env bash
# Runs every test: unit, property, snapshot and end-to-end tests of the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked --no-fail-fast "$@"
