#!/usr/bin/env bash
# Runs allot's coverage-guided fuzzers (cargo-fuzz, libFuzzer) for a given time each.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS defaults to 60; the targets default to all of them: kdl_front_end (the budget
# language from KDL to every emitter), trace_reader (the trace formats), slurm_dump (the
# `sacctmgr dump` parser, plan and import) and fmt_round_trip (`allot fmt`). Corpora grow
# in fuzz/corpus/TARGET, seeded from the examples; crashes land in fuzz/artifacts/TARGET,
# and the script exits 1 when any target found one (replay it with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-...`). Once fixed, a finding
# becomes a regression test: copy it into fuzz/regressions/TARGET/, which
# tests/fuzz_regressions.rs replays through the same checks (fuzz/oracles.rs). Needs the nightly
# toolchain (libFuzzer's sanitizer flags); installs cargo-fuzz when it is missing. Not part
# of the tests or of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2; exit 2; }
shift $(($# > 0 ? 1 : 0))
all=(kdl_front_end trace_reader slurm_dump fmt_round_trip)
targets=("${@:-${all[@]}}")

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "the fuzzers need a nightly toolchain: rustup toolchain install nightly" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "==> installing cargo-fuzz (about a minute)"
    cargo install cargo-fuzz --version 0.13.2 --locked
fi

seed_dir="$(mktemp -d)"
trap 'rm -rf "$seed_dir"' EXIT

# Seeds: every budget file of the examples, the Slurm flat files they build (the format
# `sacctmgr dump` writes), and a small trace in each format.
echo "==> building allot and the examples for the seeds"
cargo build --quiet --locked
mkdir -p "$seed_dir/kdl" "$seed_dir/dump" "$seed_dir/trace"
n=0
while IFS= read -r -d '' file; do
    n=$((n + 1))
    cp "$file" "$seed_dir/kdl/$n.kdl"
done < <(find examples -name '*.kdl' -print0)
for example in examples/*/; do
    ./target/debug/allot build "$example" --out "$seed_dir/build/$(basename "$example")" >/dev/null
done
find "$seed_dir/build" -path '*/slurm/*.cfg' -exec cp {} "$seed_dir/dump/" \;
# The first byte chooses the format: 0 csv, 1 jsonl, 2 sacct, 3 ITP.
printf '\x00id,project,user,cluster,gpus,submit,start,end,contract\n1,vision,ann,c,8,2021-03-04T10:00:00Z,2021-03-04T10:05:00Z,2021-03-04T12:00:00Z,batch\n2,nlp,bob,c,2,100,,,debug\n' > "$seed_dir/trace/csv"
printf '\x01{"id":"1","project":"vision","gpus":4,"submit":0,"start":60,"end":3600,"contract":"batch"}\n{"id":"2","project":"nlp","gpus":1,"submit":10,"duration":300}\n' > "$seed_dir/trace/jsonl"
printf '\x02JobID|Account|User|Cluster|Submit|Start|End|AllocTRES|QOS\n7|vision|ann|c|2021-03-04T10:00:00|2021-03-04T10:01:00|2021-03-04T11:00:00|cpu=8,gres/gpu=4|batch\n' > "$seed_dir/trace/sacct"
printf '\x03job_id,submission_time,duration,num_gpu\nj1,0,3600,8\nj2,60,120,1\n' > "$seed_dir/trace/itp"

seeds_of() {
    case "$1" in
        kdl_front_end | fmt_round_trip) echo "$seed_dir/kdl" ;;
        slurm_dump) echo "$seed_dir/dump" ;;
        trace_reader) echo "$seed_dir/trace" ;;
        *) echo "unknown fuzz target $1 (targets: ${all[*]})" >&2; exit 2 ;;
    esac
}

found=0
for target in "${targets[@]}"; do
    seeds="$(seeds_of "$target")"
    dict=()
    [[ "$target" == kdl_front_end || "$target" == fmt_round_trip ]] && dict=(-dict=kdl.dict)
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    echo "==> fuzzing $target for ${seconds}s"
    log="$seed_dir/$target.log"
    status=0
    # The corpus folder and the seeds; libFuzzer prints its progress to stderr.
    (cd fuzz && cargo +nightly fuzz run "$target" "corpus/$target" "$seeds" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=20 \
        -print_final_stats=1 "${dict[@]}") >"$log" 2>&1 || status=$?
    runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)"
    corpus="$(find "fuzz/corpus/$target" -type f | wc -l)"
    if [[ $status -eq 0 ]]; then
        echo "    $target: ${runs:-?} executions, corpus of $corpus inputs, no finding"
    else
        found=1
        echo "    $target: FINDING after ${runs:-?} executions (exit $status); the end of its log:"
        tail -n 40 "$log" | sed 's/^/    /'
        ls -1 "fuzz/artifacts/$target" | sed 's/^/    artifact: /'
    fi
done
exit "$found"
