#!/usr/bin/env bash
# The action's check step: every problem of the budget files as annotations on their lines.
set -euo pipefail
allot check "$BUDGETS" --diagnostics github
