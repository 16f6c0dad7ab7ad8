#!/usr/bin/env bash
# The action's comment step: one sticky pull request comment, found again by its hidden
# marker and updated in place rather than added anew.
set -euo pipefail
case "$PR_NUMBER" in
    '' | *[!0-9]*) echo "::error title=allot::not a pull request number: '$PR_NUMBER'" && exit 1 ;;
esac
marker='<!-- allot-report -->'
existing="$(gh api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" \
    --jq ".[] | select(.body | contains(\"$marker\")) | .id" | head -n 1)"
if [ -n "$existing" ]; then
    gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$existing" -F "body=@$REPORT" >/dev/null
    echo "updated comment $existing"
else
    gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" -F "body=@$REPORT" >/dev/null
    echo "created a comment"
fi
