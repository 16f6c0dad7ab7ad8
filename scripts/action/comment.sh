#!/usr/bin/env bash
# The action's comment step: one sticky pull request comment, found again by its hidden
# marker and its author (the account the token writes as), and updated in place rather
# than added anew. A comment someone else wrote with the marker in it is never touched.
set -euo pipefail
case "$PR_NUMBER" in
    '' | *[!0-9]*) echo "::error title=allot::not a pull request number: '$PR_NUMBER'" && exit 1 ;;
esac
# The token's own login; the workflow's GITHUB_TOKEN cannot read it, and writes as
# github-actions[bot]. COMMENT_AUTHOR overrides both (a GitHub App's "name[bot]").
author="${COMMENT_AUTHOR:-}"
if [ -z "$author" ]; then
    author="$(gh api user --jq .login 2>/dev/null || true)"
fi
[ -n "$author" ] || author='github-actions[bot]'
case "$author" in
    *[!A-Za-z0-9\[\]-]*) echo "::error title=allot::not a GitHub login: '$author'" && exit 1 ;;
esac
marker='<!-- allot-report -->'
existing="$(gh api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" \
    --jq ".[] | select(.user.login == \"$author\" and (.body | contains(\"$marker\"))) | .id" | head -n 1)"
if [ -n "$existing" ]; then
    gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$existing" -F "body=@$REPORT" >/dev/null
    echo "updated comment $existing"
else
    gh api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" -F "body=@$REPORT" >/dev/null
    echo "created a comment"
fi
