#!/bin/sh
# Makes the trace of examples/itp-debug from the ITP trace's folder (its ten files
# cluster01.csv .. cluster10.csv, `job_id,submission_time,duration,num_gpu`): allot's CSV on
# standard output, in submit order, each job billed to the budget named like its file, under
# `debug` when it asks for 1 GPU and at most 15 minutes (900 s), else under `batch`.
#
#   sh examples/itp-debug/make-trace.sh FOLDER > itp-debug.csv
set -eu
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: sh make-trace.sh ITP_FOLDER > itp-debug.csv" >&2
    exit 2
fi
set -- "$1"/cluster*.csv
[ -f "$1" ] || { echo "make-trace.sh: no cluster*.csv in the folder" >&2; exit 1; }
# The rows go to a file of our own first: a pipe into sort would hide a bad file's error.
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for file in "$@"; do
    budget=$(basename "$file" .csv)
    tail -n +2 "$file" | awk -F, -v budget="$budget" -v file="$file" '
        NF != 4 { printf "%s: line %d: not job_id,submission_time,duration,num_gpu\n", file, NR + 1 > "/dev/stderr"; exit 1 }
        {
            contract = ($4 == 1 && $3 <= 900) ? "debug" : "batch"
            printf "%s,%s,,,%s,%s,%s,%s\n", $1, budget, $4, $2, $3, contract
        }' >> "$rows"
done
echo "id,project,user,cluster,gpus,submit,duration,contract"
sort -s -t, -k6,6n "$rows"
