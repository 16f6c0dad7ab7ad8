#!/usr/bin/env bash
# The action's report step: the changes against the base revision, as Markdown in the job
# summary and in a file; sets the outputs has-changes and summary-file.
set -euo pipefail
base="${BASE:-${PR_BASE:-}}"
if [ -z "$base" ]; then
    echo "::error title=allot::no base revision: set the action's base input (outside pull requests)"
    exit 1
fi
report="$RUNNER_TEMP/allot-report.md"
options=()
[ -n "${NATIVE:-}" ] && options+=(--native)
[ -n "${REPLAY_TRACE:-}" ] && options+=(--replay "$REPLAY_TRACE")
status=0
allot diff "$BUDGETS" --against "$base" --format markdown --detailed-exitcode "${options[@]}" >"$report" || status=$?
case "$status" in
    0) changed=false ;;
    2) changed=true ;;
    *) exit "$status" ;;
esac
# A hidden marker, so that the comment step finds its own comment again.
printf '\n<!-- allot-report -->\n' >>"$report"
cat "$report" >>"$GITHUB_STEP_SUMMARY"
{
    echo "has-changes=$changed"
    echo "summary-file=$report"
} >>"$GITHUB_OUTPUT"
