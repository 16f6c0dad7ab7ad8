#!/usr/bin/env bash
# Builds allot and runs it on a shipped example: check the budgets, show the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-examples/published-case}"
cargo build --locked --release --quiet
./target/release/allot check "$example"
./target/release/allot tree "$example"
