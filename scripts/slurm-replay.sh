#!/usr/bin/env bash
# The long real-Slurm replay whose figures docs/verifier.md records ("Against a real Slurm"):
# tests/slurm_replay.rs with 200 jobs (about 17 minutes) through the test suite's Slurm and
# through the simulator, its figures printed. CI runs the same test with its default, a
# shorter trace. Needs root and apt: scripts/slurm.sh installs and starts Slurm, and stops it
# after.
#
#   ALLOT_REPLAY_JOBS      [200] jobs in the trace
#   ALLOT_REPLAY_RECORD    a file to keep the real runs in (see tests/slurm_replay.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${ALLOT_REPLAY_JOBS:-200}"
case "$jobs" in '' | *[!0-9]*) echo "ALLOT_REPLAY_JOBS must be a number of jobs, not '$jobs'" >&2; exit 2 ;; esac
echo "==> building the replay test"
cargo test --locked --no-run --test integration
echo "==> replaying $jobs jobs through a real Slurm and the simulator (200 jobs take about 17 minutes)"
ALLOT_REQUIRE_SLURM=1 ALLOT_REPLAY_JOBS="$jobs" cargo test --locked --test integration slurm_replay:: -- --nocapture
