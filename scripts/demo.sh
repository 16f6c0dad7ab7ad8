#!/usr/bin/env bash
# Builds allot and runs it on a shipped example: check the budgets, show the tree, and
# write every target's configuration to out/<example>/ (override with OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
example="${1:-examples/published-case}"
out="${OUT:-out/$(basename "$example")}"
cargo build --locked --release --quiet
./target/release/allot check "$example"
./target/release/allot tree "$example"
./target/release/allot build "$example" --out "$out"
