#!/usr/bin/env bash
# Benchmarks of whole commands, release build, with wall time and peak memory: the audit and
# the simulation of the ITP trace (its ten files as ten budgets on one pool,
# examples/itp-replay and examples/itp-simulate) and of generated million-job traces
# (examples/published-case's budgets). The generated traces are kept in the cache folder.
# Results and how to read them: docs/verifier.md.
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${ALLOT_SHARED_DIR:-../shared}"
cache="${ALLOT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/allot}/bench"
mkdir -p "$cache"
cargo build --locked --release --quiet
allot=./target/release/allot

# generate FILE MAX_GAP MIN_RUNTIME MAX_RUNTIME: a million jobs on jupiter under the published
# case's 15 budgets, submitted every 0 to MAX_GAP s, waiting up to 10 minutes, running
# MIN_RUNTIME to MAX_RUNTIME s on 1 to 8 GPUs; fixed seed. Kept once written.
generate() {
    [ -s "$1" ] && return
    python3 - "$@" <<'PY'
import random, sys
path, max_gap, min_runtime, max_runtime = sys.argv[1], *map(int, sys.argv[2:])
random.seed(7)
budgets = ["olmo/pretrain", "olmo/midtrain", "olmo/data", "olmo/eval/benchmarks", "olmo/eval/decontam",
           "tulu/sft", "tulu/rlvr", "tulu/reward-models", "molmo/molmo-pretrain", "molmo/molmo-video",
           "molmo/molmo-act", "safety/redteam", "safety/interpretability", "infra/ci", "infra/kernels"]
contracts = ["batch", "batch", "batch", "debug", "interactive"]
with open(path, "w") as out:
    out.write("id,project,user,cluster,gpus,submit,start,end,contract\n")
    t = 0
    for i in range(1_000_000):
        t += random.randint(0, max_gap)
        start = t + random.randint(0, 600)
        end = start + random.randint(min_runtime, max_runtime)
        out.write(f"{i},{random.choice(budgets)},,jupiter,{random.choice((1, 2, 4, 8))},{t},{start},{end},{random.choice(contracts)}\n")
PY
}
# For the audit: jobs of 1 to 8 hours every 2 s on average (far beyond jupiter's GPUs).
million="$cache/million.csv"
generate "$million" 4 3600 28800
# For the simulator: jobs of 1 to 25 minutes every 3 s on average, about 95% of jupiter's
# 1,024 GPUs.
busy="$cache/busy-million.csv"
generate "$busy" 6 60 1500

# Runs a command under GNU time; exit 1 (an expectation not met) is a result, not a failure.
measure() {
    local name="$1" status=0
    shift
    /usr/bin/time -f "$name: %e s wall, %U s user, %M KiB peak memory" "$@" >/dev/null 2>"$cache/time.txt" || status=$?
    if [ "$status" -gt 1 ]; then
        cat "$cache/time.txt"
        return "$status"
    fi
    tail -n 1 "$cache/time.txt"
}

if [ -d "$shared/traces/itp-2021" ]; then
    measure "ITP trace, 69,351 jobs" "$allot" replay audit examples/itp-replay --trace "$shared/traces/itp-2021" --format json
    for policy in budget priority; do
        measure "ITP trace simulated, $policy" "$allot" replay simulate examples/itp-simulate --trace "$shared/traces/itp-2021" --policy "$policy" --format json
    done
else
    echo "ITP trace: skipped (no $shared/traces/itp-2021; set ALLOT_SHARED_DIR)"
fi
measure "generated trace, 1,000,000 jobs" "$allot" replay audit examples/published-case --trace "$million" --format json
for policy in budget priority; do
    measure "generated busy trace, 1,000,000 jobs simulated, $policy" "$allot" replay simulate examples/published-case --trace "$busy" --policy "$policy" --format json
done
