#!/usr/bin/env bash
# The long comparison of the `kueue` policy with the Kueue oracle (docs/verifier.md, "The
# Kueue oracle", records its figures): each setup's trace replayed by `allot replay simulate
# --policy kueue` and by the oracle (scripts/kueue-oracle.sh) RUNS times (Kueue breaks some
# ties by Go's map order, so its runs may differ among themselves), compared job by job
# (`kueue-oracle compare`) and audited (`allot replay audit` of each schedule). Prints a
# Markdown table: jobs admitted at the same first instant and with every run the same
# (policy against the first oracle run; the oracle's spread: its first run against the
# others, the worst), preemptions, instants cut short for preempting in circles, and
# delivered overall and for the worst budget under each.
#
#   scripts/kueue-oracle-compare.sh [SETUP...]     (default: every setup below)
#
# Setups: generated-fair, generated-classical, flat-fair, limits-fair (2,000 generated jobs
# each, one node holding every GPU, so that placement on nodes, which Kueue does not make,
# decides nothing), itp (the ITP trace on a one-node copy of examples/itp-debug; needs the
# shared reference material; long). RUNS (default 3) sets the oracle's runs, JOBS (default
# 2000) the generated traces' jobs, ITP_JOBS (default: all) how many of ITP's first jobs
# are replayed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${ALLOT_SHARED_DIR:-$root/../shared}"
runs="${RUNS:-3}"
jobs="${JOBS:-2000}"
itp_jobs="${ITP_JOBS:-}"
case "$itp_jobs" in '' | *[!0-9]*) [ -z "$itp_jobs" ] || { echo "ITP_JOBS: expected a number of jobs" >&2; exit 2; } ;; esac
cd "$root"
echo "==> building allot (release)" >&2
cargo build --locked --release -q -p allot
allot="$root/target/release/allot"
oracle="$(scripts/kueue-oracle-build.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# generated DIR BUDGETS [flat]: a budget folder and a trace of JOBS jobs from a fixed seed
# (with `flat`, a/x and a/y are the top-level budgets ax and ay).
generated() {
    mkdir -p "$1"
    printf '%s' "$2" >"$1/allot.kdl"
    python3 - "$1/trace.csv" "$jobs" "${3:-}" <<'PY'
import sys
jobs, flat = int(sys.argv[2]), sys.argv[3] == "flat"
seed, M = 0x0ac1e000, 2**64
def nxt(n):
    global seed
    seed = (seed * 6364136223846793005 + 1442695040888963407) % M
    return (seed >> 33) % n
rows, submit = [], 0
for i in range(jobs):
    submit += nxt(600)
    project = ["a/x", "a/y", "b", "c", "d", "b"][nxt(6)]
    gpus = [1, 1, 2, 4, 4, 8, 16][nxt(7)]
    work = 300 + nxt(3 * 3600)
    contract = ["", "", "", "quick"][nxt(4)]
    if flat:
        project = project.replace("/", "")
    rows.append(f"j{i},{project},u{nxt(4)},{gpus},{submit},{work},{contract}")
open(sys.argv[1], "w").write("id,project,user,gpus,submit,duration,contract\n" + "\n".join(rows) + "\n")
PY
}

contracts='policy window="1d"
contract batch min-runtime="1h" resumable=#true default=#true
contract quick min-runtime="10m"
'
cluster='cluster c gpus=64 gpu-type=h100 gpus-per-node=64 {
    kubernetes kueue
}
'
classical="$work/classical.yaml"
printf 'apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n' >"$classical"

# setup NAME: prints "DIR TRACE [replay options...]" for the setup.
setup() {
    case "$1" in
    generated-fair | generated-classical)
        generated "$work/$1" "$cluster$contracts"'project a share=2 {
    project x share=1
    project y share=1
}
project b share=1
project c share=1
project d share=1
'
        if [ "$1" = generated-classical ]; then echo "$work/$1 $work/$1/trace.csv --kueue-config $classical"; else echo "$work/$1 $work/$1/trace.csv"; fi ;;
    flat-fair)
        # The same jobs without the inner Cohort: every budget a ClusterQueue of Cohort root.
        generated "$work/$1" "$cluster$contracts"'project ax share=1
project ay share=1
project b share=1
project c share=1
project d share=1
' flat
        echo "$work/$1 $work/$1/trace.csv" ;;
    limits-fair)
        generated "$work/$1" "$cluster$contracts"'project a share=2 max-gpus=24 {
    project x share=1
    project y share=1 max-gpus=12
}
project b share=1 max-gpus=24
project c share=1
project d share=1 max-gpus=16
'
        echo "$work/$1 $work/$1/trace.csv" ;;
    itp)
        [ -d "$shared/traces/itp-2021" ] || { echo "itp: no shared ITP trace at $shared/traces/itp-2021" >&2; return 1; }
        mkdir -p "$work/itp"
        cp examples/itp-debug/*.kdl "$work/itp/"
        sed -i 's/gpus-per-node=8/gpus-per-node=768/' "$work/itp/"*.kdl
        sh examples/itp-debug/make-trace.sh "$shared/traces/itp-2021" >"$work/itp/all.csv"
        # The trace is in submission order: its first jobs are a prefix.
        if [ -n "$itp_jobs" ]; then
            head -n "$((itp_jobs + 1))" "$work/itp/all.csv" >"$work/itp/trace.csv"
        else
            mv "$work/itp/all.csv" "$work/itp/trace.csv"
        fi
        echo "$work/itp $work/itp/trace.csv" ;;
    *) echo "unknown setup $1" >&2; return 1 ;;
    esac
}

# figures SCHEDULE DIR: "delivered overall|worst budget" from allot's audit of a schedule.
figures() {
    "$allot" replay audit "$2" --trace "$1" --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
ratio = lambda b: b["delivered_ratio"]
leaves = [b for b in d["budgets"] if ratio(b) is not None
          and not any(o["project"].startswith(b["project"] + "/") for o in d["budgets"])]
worst = min(leaves, key=ratio)
print("%.1f%% | %s %.1f%%" % (100 * d["totals"]["delivered_ratio"], worst["project"], 100 * ratio(worst)))'
}

setups=("$@")
[ ${#setups[@]} -gt 0 ] || setups=(generated-fair generated-classical flat-fair limits-fair itp)
echo "| setup | jobs | same first admission | same runs | oracle's spread (same runs) | preemptions policy / oracle | instants cut short policy / oracle | delivered: policy | worst budget: policy | delivered: oracle | worst budget: oracle |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for name in "${setups[@]}"; do
    read -r dir trace options < <(setup "$name")
    # shellcheck disable=SC2086 # the options are words
    set -- $options
    echo "==> $name: the kueue policy" >&2
    policy_json="$work/$name-policy.json"
    "$allot" replay simulate "$dir" --trace "$trace" --policy kueue "$@" \
        --schedule "$work/$name-policy.csv" --format json >"$policy_json"
    oracle_runs=()
    for i in $(seq 1 "$runs"); do
        echo "==> $name: the oracle, run $i of $runs" >&2
        ALLOT="$allot" scripts/kueue-oracle.sh "$dir" --trace "$trace" "$@" \
            --schedule "$work/$name-oracle-$i.csv" 2>"$work/$name-oracle-$i.log" || { cat "$work/$name-oracle-$i.log" >&2; exit 1; }
        oracle_runs+=("$work/$name-oracle-$i.csv")
    done
    against="$("$oracle" compare "$work/$name-policy.csv" "${oracle_runs[0]}")"
    spread="[]"
    if [ "$runs" -gt 1 ]; then spread="$("$oracle" compare "${oracle_runs[@]}")"; fi
    # Each cluster's closing line (the progress lines every 10 s end the same way).
    cut="$(sed -n 's/^kueue-oracle: cluster .*, \([0-9]*\) instants cut short$/\1/p' "$work/$name-oracle-1.log" | paste -sd+ | bc)"
    policy_cut="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["stalled_instants"])' "$policy_json")"
    row="$(python3 - "$against" "$spread" <<'PY'
import json, sys
a = json.loads(sys.argv[1])[0]
spread = json.loads(sys.argv[2])
pct = lambda n, d: "%.1f%%" % (100 * n / d)
worst = min((s["same_runs"] / s["jobs"] for s in spread), default=None)
print("%d | %s | %s | %s | %d / %d" % (
    a["jobs"], pct(a["same_first_start"], a["jobs"]), pct(a["same_runs"], a["jobs"]),
    "-" if worst is None else "%.1f%%" % (100 * worst), a["preemptions"][0], a["preemptions"][1]))
PY
)"
    echo "| $name | $row | $policy_cut / $cut | $(figures "$work/$name-policy.csv" "$dir") | $(figures "${oracle_runs[0]}" "$dir") |"
done
