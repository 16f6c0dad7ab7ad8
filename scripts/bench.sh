#!/usr/bin/env bash
# Benchmarks of whole commands (release build), each reported as a ratio to a floor measured
# in the same run on the same input: the budget files merely parsed with the kdl crate, the
# trace merely read with the csv crate (`target/release/floor`, from bench/). Absolute times
# vary between machines; the ratios are what the targets are set in (issue 15):
#
#   allot check, 10,100 projects (100 files)       <= 2x    the kdl parse of the same files
#   allot build, every target, 10,100 projects     <= 4x    the same floor
#   allot check, 50,500 projects                   <= 7.5x  allot check of 10,100
#   allot check, 10,100 projects, 100 grants       <= 4x    allot check of 10,100 without
#     (each starting on its own future day)                 (each start divided again)
#   allot grants of the same (200 boundaries)      <= 4x    allot check of the same
#                                                           (a division and comparison each)
#   allot replay audit, 1,000,000 jobs             <= 10x   the csv read of the same trace
#   allot replay simulate, 1,000,000 busy jobs     <= 60x   the csv read; <= 300 MiB
#   allot plan slurm, import slurm, fairshare      <= 15x   the same command on 10x fewer
#     of 10,100 accounts                                    accounts (linear, 1.5x slack)
#
# Inputs are generated with fixed seeds into the cache folder and kept: trees of 1,010, 10,100
# and 50,500 projects (100 sub-projects per top-level project, one file each, every target
# bound), traces of 100,000 and 1,000,000 jobs on examples/published-case, and a busy million
# (about 95% of jupiter's 1,024 GPUs) for the simulator; for the Slurm commands, the
# association file each tree emits (as a live tree's dump) and usage for all its users. With
# the project's shared reference data, the ITP trace is timed too. Each command runs three
# times and its best time counts (once when it takes over 30 s); a command over
# ALLOT_BENCH_TIMEOUT seconds (default 900) is stopped and reported as such. Micro-benchmarks
# of the hot functions: `cargo bench -p allot-bench`. Results and how to read them:
# docs/performance.md.
set -euo pipefail
# Times are read and written with a decimal point.
export LC_ALL=C
cd "$(dirname "$0")/.."
shared="${ALLOT_SHARED_DIR:-../shared}"
cache="${ALLOT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/allot}/bench"
timeout_s="${ALLOT_BENCH_TIMEOUT:-900}"
mkdir -p "$cache"
echo "==> building allot and the floor program (release; a few minutes the first time)"
cargo build --locked --release -p allot -p allot-bench
allot=./target/release/allot
floor=./target/release/floor
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# tree DIR FILES: FILES top-level projects of 100 sub-projects (3 users each), one file each,
# on one cluster bound to every target; fixed seed. Kept once written.
tree() {
    [ -s "$1/allot.kdl" ] && return
    echo "==> generating $1"
    python3 - "$@" <<'PY'
import os, random, sys
out, files = sys.argv[1], int(sys.argv[2])
random.seed(11)
os.makedirs(os.path.join(out, "teams"), exist_ok=True)
with open(os.path.join(out, "allot.kdl"), "w") as f:
    f.write('cluster big gpus=100000 gpu-type=h100 gpus-per-node=8 {\n'
            '    slurm cluster=big partition=gpu\n'
            '    kubernetes kueue kai volcano yunikorn flavor=h100\n'
            '    yarn capacity fair\n}\n'
            'policy window="7d"\n'
            'contract batch min-runtime="1h" resumable=#true default=#true\n'
            'contract debug min-runtime="0s" max-runtime="2h"\n')
    for i in range(files):
        f.write(f'include "teams/t{i}.kdl"\n')
for i in range(files):
    with open(os.path.join(out, "teams", f"t{i}.kdl"), "w") as f:
        f.write(f'project t{i} share={random.randint(1, 100)} {{\n    owners "@org/t{i}"\n')
        for j in range(100):
            f.write(f'    project p{i}x{j} share={random.randint(1, 1000)} {{\n'
                    f'        users u{i}x{j}a u{i}x{j}b\n        users u{i}x{j}c default=#true\n    }}\n')
        f.write('}\n')
PY
}

# trace FILE JOBS MAX_GAP MIN_RUNTIME MAX_RUNTIME: JOBS jobs on jupiter under the published
# case's 15 budgets, submitted every 0 to MAX_GAP s, waiting up to 10 minutes, running
# MIN_RUNTIME to MAX_RUNTIME s on 1 to 8 GPUs; fixed seed. Kept once written.
trace() {
    [ -s "$1" ] && return
    echo "==> generating $1"
    python3 - "$@" <<'PY'
import random, sys
path, jobs, max_gap, min_runtime, max_runtime = sys.argv[1], *map(int, sys.argv[2:])
random.seed(7)
budgets = ["olmo/pretrain", "olmo/midtrain", "olmo/data", "olmo/eval/benchmarks", "olmo/eval/decontam",
           "tulu/sft", "tulu/rlvr", "tulu/reward-models", "molmo/molmo-pretrain", "molmo/molmo-video",
           "molmo/molmo-act", "safety/redteam", "safety/interpretability", "infra/ci", "infra/kernels"]
contracts = ["batch", "batch", "batch", "debug", "interactive"]
with open(path, "w") as out:
    out.write("id,project,user,cluster,gpus,submit,start,end,contract\n")
    t = 0
    for i in range(jobs):
        t += random.randint(0, max_gap)
        start = t + random.randint(0, 600)
        end = start + random.randint(min_runtime, max_runtime)
        out.write(f"{i},{random.choice(budgets)},,jupiter,{random.choice((1, 2, 4, 8))},{t},{start},{end},{random.choice(contracts)}\n")
PY
}

for size in 1k:10 10k:100 50k:500; do
    tree "$cache/tree-${size%%:*}" "${size##*:}"
done
# The 10,100 projects with a grant in each team's first sub-project, each from its own day
# of 2099 for half a day: 100 starts for the grants' check to divide the tree again at.
if [ ! -s "$cache/tree-10k-grants/allot.kdl" ]; then
    echo "==> generating $cache/tree-10k-grants"
    rm -rf "$cache/tree-10k-grants"
    cp -r "$cache/tree-10k" "$cache/tree-10k-grants"
    python3 - "$cache/tree-10k-grants" <<'PY'
import datetime, glob, os, re, sys
for path in glob.glob(os.path.join(sys.argv[1], "teams", "t*.kdl")):
    team = int(re.search(r"t(\d+)\.kdl$", path).group(1))
    day = datetime.date(2099, 1, 1) + datetime.timedelta(days=team)
    with open(path) as f:
        text = f.read()
    grant = f'        grant share="+1%" from="{day}" until="{day}T12:00:00Z" reason="bench"\n'
    text = text.replace("default=#true\n", "default=#true\n" + grant, 1)
    with open(path, "w") as f:
        f.write(text)
PY
fi
# For the audit: jobs of 1 to 8 hours every 2 s on average (far beyond jupiter's GPUs).
trace "$cache/million.csv" 1000000 4 3600 28800
trace "$cache/hundred-thousand.csv" 100000 4 3600 28800
# For the simulator: jobs of 1 to 25 minutes every 3 s on average, about 95% of jupiter's
# 1,024 GPUs.
trace "$cache/busy-million.csv" 1000000 6 60 1500

# measure NAME COMMAND...: the best wall time (s, to the millisecond: the floors take a tenth
# of a second) and the peak memory (MiB) of COMMAND, in $best and $peak, printed with NAME.
# Exit 1 (an expectation not met, problems found) is a result; a run over the timeout leaves
# $best empty.
measure() {
    local name="$1" status started seconds kib
    shift
    best="" peak=""
    for _ in 1 2 3; do
        status=0
        started="$EPOCHREALTIME"
        timeout "$timeout_s" /usr/bin/time -f "%M" -o "$scratch/time" "$@" >/dev/null 2>"$scratch/err" || status=$?
        seconds="$(awk "BEGIN { printf \"%.3f\", $EPOCHREALTIME - $started }")"
        if [ "$status" -eq 124 ]; then
            echo "$name: stopped after ${timeout_s} s"
            return
        elif [ "$status" -gt 1 ]; then
            echo "$name: failed (exit $status)" >&2
            cat "$scratch/err" >&2
            exit 1
        fi
        kib="$(tail -n 1 "$scratch/time")"
        if [ -z "$best" ] || awk "BEGIN { exit !($seconds < $best) }"; then best="$seconds"; fi
        peak="$(( kib / 1024 ))"
        if awk "BEGIN { exit !($seconds > 30) }"; then break; fi
    done
    printf '%-62s %8.3f s %6d MiB\n' "$name" "$best" "$peak"
}

ratios=()
# ratio NAME VALUE FLOOR TARGET: VALUE / FLOOR, against TARGET.
ratio() {
    if [ -z "$2" ]; then
        ratios+=("$(printf '%-62s %9s  target <= %5sx  OVER' "$1" "timeout" "$4")")
        return
    fi
    local r verdict
    r="$(awk "BEGIN { printf \"%.1f\", $2 / $3 }")"
    verdict="$(awk "BEGIN { print ($r <= $4) ? \"ok\" : \"OVER\" }")"
    ratios+=("$(printf '%-62s %8sx  target <= %5sx  %s' "$1" "$r" "$4" "$verdict")")
}

kdl_files() { echo "$1/allot.kdl" "$1"/teams/*.kdl; }

echo "==> budgets"
# shellcheck disable=SC2046 # one argument per file
measure "floor: kdl parse, 10,100 projects" "$floor" kdl $(kdl_files "$cache/tree-10k")
floor_kdl="$best"
measure "allot check, 1,010 projects" "$allot" check "$cache/tree-1k"
measure "allot check, 10,100 projects" "$allot" check "$cache/tree-10k"
check_10k="$best"
measure "allot build (every target), 10,100 projects" "$allot" build "$cache/tree-10k" --out "$scratch/out" --force
build_10k="$best"
measure "allot check, 50,500 projects" "$allot" check "$cache/tree-50k"
check_50k="$best"
measure "allot check, 10,100 projects, 100 grants" "$allot" check "$cache/tree-10k-grants"
check_grants="$best"
measure "allot grants, 10,100 projects, 100 grants" "$allot" grants "$cache/tree-10k-grants"
calendar_grants="$best"
ratio "allot check, 10,100 projects / kdl parse" "$check_10k" "$floor_kdl" 2
ratio "allot build, 10,100 projects / kdl parse" "$build_10k" "$floor_kdl" 4
if [ -n "$check_10k" ]; then
    ratio "allot check, 50,500 / 10,100 projects" "$check_50k" "$check_10k" 7.5
    ratio "allot check, 10,100 projects with 100 grants / without" "$check_grants" "$check_10k" 4
fi
if [ -n "$check_grants" ]; then
    ratio "allot grants / allot check, 10,100 projects, 100 grants" "$calendar_grants" "$check_grants" 4
fi

echo "==> Slurm: plan, import and fairshare of 1,010 and 10,100 accounts"
# The live tree is the tree's own emitted association file (a dump Slurm would give back);
# the usage is every user's, random with a fixed seed. Linear work grows 10x from one size
# to the next; the target leaves room for a 1.5x slack, as the check's does.
declare -A took
for size in 1k:10 10k:100; do
    name="${size%%:*}" files="${size##*:}"
    live="$cache/slurm-$name"
    # Written again each run: what this allot emits is what its plan must find unchanged.
    "$allot" build "$cache/tree-$name" --out "$live" --target slurm --force >/dev/null
    if [ ! -s "$live/usage.csv" ]; then
        python3 - "$live/usage.csv" "$files" <<'PY'
import random, sys
random.seed(5)
with open(sys.argv[1], "w") as out:
    out.write("account,user,raw_usage\n")
    for i in range(int(sys.argv[2])):
        for j in range(100):
            for user in "abc":
                out.write(f"p{i}x{j},u{i}x{j}{user},{random.randint(0, 10**9)}\n")
PY
    fi
    measure "allot plan slurm --live, $name accounts" "$allot" plan slurm "$cache/tree-$name" --live "$live/slurm/big.cfg"
    took[plan-$name]="$best"
    measure "allot import slurm, $name accounts" "$allot" import slurm --gpus 100000 "$live/slurm/big.cfg"
    took[import-$name]="$best"
    measure "allot fairshare (budget files), $name accounts" "$allot" fairshare "$cache/tree-$name" --usage "$live/usage.csv"
    took[fairshare-$name]="$best"
done
ratio "allot plan slurm, 10,100 / 1,010 accounts" "${took[plan-10k]}" "${took[plan-1k]}" 15
ratio "allot import slurm, 10,100 / 1,010 accounts" "${took[import-10k]}" "${took[import-1k]}" 15
ratio "allot fairshare, 10,100 / 1,010 accounts" "${took[fairshare-10k]}" "${took[fairshare-1k]}" 15

echo "==> traces"
measure "floor: csv read, 1,000,000 jobs" "$floor" csv "$cache/million.csv"
floor_csv="$best"
measure "allot replay audit, 100,000 jobs" "$allot" replay audit examples/published-case --trace "$cache/hundred-thousand.csv" --format json
measure "allot replay audit, 1,000,000 jobs" "$allot" replay audit examples/published-case --trace "$cache/million.csv" --format json
ratio "allot replay audit, 1,000,000 jobs / csv read" "$best" "$floor_csv" 10
measure "floor: csv read, 1,000,000 busy jobs" "$floor" csv "$cache/busy-million.csv"
floor_busy="$best"
# The kueue policy needs every cluster bound to Kueue: the published case with ceres (which
# the trace does not use) bound too.
kueue_case="$scratch/published-kueue"
cp -r examples/published-case "$kueue_case"
sed -i '/^cluster ceres/,/^}/ s/^    slurm$/    slurm\n    kubernetes kueue/' "$kueue_case/allot.kdl"
grep -qx '    kubernetes kueue' "$kueue_case/allot.kdl" || { echo "bench: could not bind ceres to Kueue in a copy of examples/published-case" >&2; exit 1; }
for policy in budget priority slurm kueue; do
    case_dir=examples/published-case
    [ "$policy" = kueue ] && case_dir="$kueue_case"
    measure "allot replay simulate --policy $policy, 1,000,000 busy jobs" "$allot" replay simulate "$case_dir" --trace "$cache/busy-million.csv" --policy "$policy" --format json
    ratio "allot replay simulate --policy $policy / csv read" "$best" "$floor_busy" 60
    ratios+=("$(printf '%-62s %6s MiB  target <= 300 MiB  %s' "  its peak memory" "$peak" "$( [ "${peak:-999999}" -le 300 ] && echo ok || echo OVER)")")
done
if [ -d "$shared/traces/itp-2021" ]; then
    measure "allot replay audit, ITP trace (69,351 jobs)" "$allot" replay audit examples/itp-replay --trace "$shared/traces/itp-2021" --format json
    for policy in budget priority slurm; do
        measure "allot replay simulate --policy $policy, ITP trace" "$allot" replay simulate examples/itp-simulate --trace "$shared/traces/itp-2021" --policy "$policy" --format json
    done
    # The same pool bound to Kueue (the copy docs/verifier.md's kueue figures come from).
    itp_kueue="$scratch/itp-kueue"
    mkdir -p "$itp_kueue"
    sed 's/^\(cluster pool .*\)$/\1 {\n    kubernetes kueue\n}/' examples/itp-simulate/allot.kdl > "$itp_kueue/allot.kdl"
    grep -qx '    kubernetes kueue' "$itp_kueue/allot.kdl" || { echo "bench: could not bind the ITP pool to Kueue" >&2; exit 1; }
    measure "allot replay simulate --policy kueue, ITP trace" "$allot" replay simulate "$itp_kueue" --trace "$shared/traces/itp-2021" --policy kueue --format json
else
    echo "ITP trace: skipped (no $shared/traces/itp-2021; set ALLOT_SHARED_DIR)"
fi

echo "==> ratios to the floors (this run)"
printf '%s\n' "${ratios[@]}"
