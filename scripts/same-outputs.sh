#!/usr/bin/env bash
# Checks that two builds of allot print the same bytes: `allot build` (files and stdout),
# `export`, `tree`, `check`, `owners`, `schema`, `diff` in every format (a share and a
# cluster changed in a scratch git repository per example), `fairshare`, and `replay audit`
# and `replay simulate` (JSON, Markdown, text) on the ITP trace and on a generated trace.
# For refactorings that must not change behaviour:
#
#   git worktree add ../allot-base main && (cd ../allot-base && cargo build)
#   cargo build && scripts/same-outputs.sh ../allot-base/target/debug/allot target/debug/allot
#
# Exits 0 when every output is the same, 1 (and shows the differences) otherwise. The ITP
# trace comes from ALLOT_SHARED_DIR (default ../shared); without it those runs are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 OLD_ALLOT NEW_ALLOT" >&2; exit 2; }
old="$(realpath "$1")"
new="$(realpath "$2")"
repo="$PWD"
itp="${ALLOT_SHARED_DIR:-$repo/../shared}/traces/itp-2021"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# The inputs: per example a git repository whose second commit changes a share and a
# cluster's size; a generated CSV trace on the published case; a usage file.
for example in examples/*/; do
    name="$(basename "$example")"
    git="$scratch/repos/$name"
    mkdir -p "$git"
    cp -r "$example". "$git"
    git -C "$git" init -q
    git -C "$git" add -A
    git -C "$git" -c user.name=allot -c user.email=allot@example.invalid -c commit.gpgsign=false commit -qm base
    python3 - "$git" <<'PY'
import pathlib, re, sys
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.kdl")):
    text = path.read_text()
    text = re.sub(r'share="(\d+)%"', lambda m: 'share="%d%%"' % max(0, int(m.group(1)) - 1), text, count=1)
    text = re.sub(r"share=(\d+)\b(?!%)", lambda m: "share=%d" % (int(m.group(1)) + 2), text, count=1)
    text = re.sub(r"gpus=(\d+)0 ", lambda m: "gpus=%s8 " % m.group(1), text, count=1)
    path.write_text(text)
PY
    git -C "$git" add -A
    git -C "$git" -c user.name=allot -c user.email=allot@example.invalid -c commit.gpgsign=false commit -qm head
done
python3 - "$scratch/trace.csv" <<'PY'
import random, sys
random.seed(7)
projects = ["olmo/pretrain", "olmo/midtrain", "tulu", "molmo", "safety", "infra", ""]
contracts = ["debug", "interactive", "batch", ""]
with open(sys.argv[1], "w") as f:
    f.write("id,project,user,cluster,gpus,submit,start,end,contract\n")
    t = 0
    for i in range(3000):
        t += random.randint(0, 600)
        start = t + random.choice([0, 0, 30, 600, 7200])
        f.write(f"{i},{random.choice(projects)},,jupiter,{random.choice([1, 2, 4, 8, 16, 64])},"
                f"{t},{start},{start + random.randint(60, 86400)},{random.choice(contracts)}\n")
PY
printf 'account,user,raw_usage\nolmo,,100\npretrain,alice,50\ntulu,,10\n' > "$scratch/usage.csv"

# Runs one binary over every input; each output file ends with the exit status.
capture() {
    local bin="$1" out="$2"
    mkdir -p "$out"
    run() { # run NAME DIR ARGS...
        local file="$out/$1" dir="$2"
        shift 2
        (cd "$dir" && "$bin" "$@" >"$file" 2>&1; echo "status $?" >>"$file") || true
    }
    for example in examples/*/; do
        name="$(basename "$example")"
        run "build-$name" "$out" build "$repo/$example" --out "built-$name"
        run "export-$name" "$repo" export "$example"
        run "tree-$name" "$repo" tree "$example"
        run "check-$name" "$repo" check "$example"
        run "owners-$name" "$repo" owners "$example"
        for format in human markdown json github; do
            run "diff-$name-$format" "$scratch/repos/$name" diff . --against HEAD~1 --head HEAD --native --format "$format"
        done
    done
    run schema "$repo" schema
    run fairshare "$repo" fairshare examples/published-case --usage "$scratch/usage.csv"
    for format in json markdown human; do
        run "audit-generated.$format" "$repo" replay audit examples/published-case --trace "$scratch/trace.csv" --format "$format"
        for policy in slurm budget priority; do
            run "simulate-generated-$policy.$format" "$repo" replay simulate examples/published-case --trace "$scratch/trace.csv" --policy "$policy" --format "$format"
        done
        if [ -d "$itp" ]; then
            run "audit-itp.$format" "$repo" replay audit examples/itp-replay --trace "$itp" --format "$format"
            for policy in slurm budget priority; do
                run "simulate-itp-$policy.$format" "$repo" replay simulate examples/itp-simulate --trace "$itp" --policy "$policy" --format "$format"
            done
            run "diff-replay.$format" "$scratch/repos/itp-simulate" diff . --against HEAD~1 --head HEAD --replay "$itp" --format "$format"
        fi
    done
}

[ -d "$itp" ] || echo "no ITP trace at $itp: its runs are skipped" >&2
echo "running $old" >&2
capture "$old" "$scratch/old"
echo "running $new" >&2
capture "$new" "$scratch/new"
if diff -r "$scratch/old" "$scratch/new"; then
    echo "same outputs: $(find "$scratch/old" -type f | wc -l) files" >&2
else
    exit 1
fi
