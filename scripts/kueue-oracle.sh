#!/usr/bin/env bash
# The Kueue oracle: a trace replayed through Kueue's own scheduling code (tests/kueue-oracle,
# Kueue as its go.mod pins it), its schedule written in the columns of `allot replay
# simulate --schedule`, so that the two can be held side by side.
#
#   scripts/kueue-oracle.sh PATH --trace FILE --schedule OUT.csv
#       [--kueue-objects [CLUSTER=]DIR]... [--kueue-config FILE] [other replay options]
#
# The arguments are `allot replay simulate`'s: the budgets at PATH, the trace, and Kueue's
# objects and Configuration (without --kueue-objects, those `allot build PATH` writes).
# allot finds each job's ClusterQueue and priority as its kueue policy does (`--kueue-workloads`);
# the oracle schedules them. Options other than --schedule go to `allot replay simulate` as
# they are (--trace-format, --skip-bad-rows, ...). docs/verifier.md ("The Kueue oracle") says
# what the oracle runs of Kueue and what it plays itself.
#
# Needs Go (1.25 or later; go.mod says which). The oracle is built on first use into
# ${XDG_CACHE_HOME:-~/.cache}/allot/kueue-oracle (the first build downloads Kueue and its
# dependencies from the Go module proxy: a few minutes), and again when its sources change.
# ALLOT names the allot binary to run (default: target/release/allot, built when missing).
set -euo pipefail
# Paths in the arguments are the caller's: the script stays in the caller's folder.
root="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
    sed -n '4,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 1 ] || usage
budgets="$1"
shift
schedule=""
objects=()
config=""
passed=()
while [ $# -gt 0 ]; do
    case "$1" in
    --schedule) schedule="${2:?--schedule needs a file}"; shift 2 ;;
    --schedule=*) schedule="${1#*=}"; shift ;;
    --kueue-objects) objects+=("${2:?--kueue-objects needs a folder}"); shift 2 ;;
    --kueue-objects=*) objects+=("${1#*=}"); shift ;;
    --kueue-config) config="${2:?--kueue-config needs a file}"; shift 2 ;;
    --kueue-config=*) config="${1#*=}"; shift ;;
    --policy | --policy=* | --against | --against=* | --kueue-workloads | --kueue-workloads=*)
        echo "kueue-oracle.sh: $1 is not taken here (the oracle replays the kueue policy's workloads of PATH)" >&2
        exit 2 ;;
    -h | --help) usage ;;
    *) passed+=("$1"); shift ;;
    esac
done
[ -n "$schedule" ] || { echo "kueue-oracle.sh: --schedule OUT.csv is required" >&2; exit 2; }

oracle="$("$root/scripts/kueue-oracle-build.sh")"

allot="${ALLOT:-$root/target/release/allot}"
if [ ! -x "$allot" ]; then
    echo "==> building allot (release; a few minutes the first time)" >&2
    (cd "$root" && cargo build --locked --release -p allot >&2)
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# Each cluster's objects: the folders given, else those allot writes.
oracle_args=()
replay_args=()
if [ ${#objects[@]} -gt 0 ]; then
    for given in "${objects[@]}"; do
        replay_args+=(--kueue-objects "$given")
        case "$given" in
        *=*) oracle_args+=(--objects "$given") ;;
        *)
            # Without CLUSTER=, the budgets' only cluster.
            cluster="$("$allot" export "$budgets" | python3 -c 'import json,sys; c=json.load(sys.stdin)["clusters"]; print(c[0]["name"] if len(c)==1 else "")')"
            [ -n "$cluster" ] || { echo "kueue-oracle.sh: --kueue-objects $given: name its cluster (CLUSTER=DIR)" >&2; exit 2; }
            oracle_args+=(--objects "$cluster=$given") ;;
        esac
    done
else
    "$allot" build "$budgets" --out "$scratch/build" --target kueue >/dev/null
    for dir in "$scratch/build/kueue"/*/; do
        cluster="$(basename "$dir")"
        oracle_args+=(--objects "$cluster=$dir")
        [ -n "$config" ] || [ ! -f "$dir/kueue-configuration.yaml" ] || config_built="$dir/kueue-configuration.yaml"
    done
fi
if [ -n "$config" ]; then
    replay_args+=(--kueue-config "$config")
    oracle_args+=(--config "$config")
elif [ -n "${config_built:-}" ]; then
    oracle_args+=(--config "$config_built")
fi

echo "==> the kueue policy's workloads" >&2
"$allot" replay simulate "$budgets" --policy kueue "${replay_args[@]}" "${passed[@]}" \
    --kueue-workloads "$scratch/workloads.jsonl" --format json >/dev/null
echo "==> replaying them through Kueue's scheduler" >&2
"$oracle" "${oracle_args[@]}" --workloads "$scratch/workloads.jsonl" --schedule "$schedule"
echo "schedule: $schedule" >&2
