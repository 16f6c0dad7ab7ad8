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
# cargo-nextest runs every test in a process of its own, two at a time, the real-Slurm
# suites one at a time beside the others (.config/nextest.toml). Built once from source
# when missing (a few minutes on 2 cores); ALLOT_NO_NEXTEST=1 keeps to cargo test.
if ! cargo nextest --version >/dev/null 2>&1 && [[ -z "${ALLOT_NO_NEXTEST:-}" ]]; then
    echo "==> installing cargo-nextest (built once from source, a few minutes)"
    cargo install --locked cargo-nextest || echo "==> cargo-nextest could not be installed: cargo test runs the tests"
fi
# The Kueue oracle (tests/kueue-oracle: Kueue's own scheduler, in Go) that tests/kueue_oracle.rs
# holds the kueue policy to: built here, once, with its progress shown (Go installed when
# missing; the first build downloads Kueue and its dependencies, a few minutes).
scripts/kueue-oracle-build.sh >/dev/null
(cd tests/kueue-oracle && unformatted="$(gofmt -l .)" && [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; })
(cd tests/kueue-oracle && go vet .)
cargo fmt --all --check
# Every link in the code's documentation resolves (contributors read it with the private
# items: a crate's own modules may be linked).
RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" \
    cargo doc --workspace --no-deps --document-private-items --locked --quiet
# The micro-benchmarks are not built by `cargo test`: check that they still compile.
cargo check --locked -p allot-bench --benches
# Without cargo-nextest, cargo test runs the command line's one test binary with two
# threads, the real-Slurm suites holding their Slurm one at a time (tests/common/slurm.rs).
# Arguments go to either.
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --locked --no-fail-fast "$@"
    # nextest does not run doctests.
    cargo test --workspace --locked --doc
else
    echo "==> cargo-nextest is missing: cargo test runs the tests"
    cargo test --workspace --locked --no-fail-fast "$@"
fi
