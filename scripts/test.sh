#!/usr/bin/env bash
# Runs every test: unit, property, snapshot and end-to-end tests of the command line,
# after checking that the code is formatted.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Action's tests run its shell scripts against a fake `gh` that applies `--jq` filters
# with jq (as GitHub's runners have it).
if ! command -v jq >/dev/null; then
    if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "==> installing jq (the Action's tests need it)"
        apt-get install -y -q jq >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q jq >/dev/null; }
    else
        echo "jq is missing: install it (apt-get install jq) to run the Action's tests" >&2
        exit 1
    fi
fi
# The Slurm target's tests run the job_submit.lua allot writes in Lua 5.1, the Lua that
# Debian's Slurm 22.05 embeds.
if ! command -v lua5.1 >/dev/null; then
    if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "==> installing lua5.1 (the Slurm target's job_submit.lua tests need it)"
        apt-get install -y -q lua5.1 >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q lua5.1 >/dev/null; }
    else
        echo "lua5.1 is missing: install it (apt-get install lua5.1) to run the job_submit.lua tests" >&2
        exit 1
    fi
fi
cargo fmt --all --check
# The micro-benchmarks are not built by `cargo test`: check that they still compile.
cargo check --locked -p allot-bench --benches
# cargo-nextest runs the suites side by side (.config/nextest.toml: the real-Slurm ones one
# at a time beside the others), which saves the minutes the other suites would add after
# them; without it, cargo test runs them one after another. Arguments go to either.
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast "$@"
    # nextest does not run doctests.
    cargo test --workspace --locked --doc
else
    echo "==> cargo-nextest is missing: cargo test runs the suites one after another (a few minutes longer)"
    cargo test --workspace --locked --no-fail-fast "$@"
fi
