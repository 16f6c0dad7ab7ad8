#!/usr/bin/env bash
# The action's install step: build allot from the action's own source (default), or fetch a
# released binary and check it against its published SHA-256 before use. Puts `allot` on
# the job's PATH.
set -euo pipefail
bin="$RUNNER_TEMP/allot/bin"
mkdir -p "$bin"
if [ -z "${ALLOT_VERSION:-}" ]; then
    cargo install --locked --quiet --path "$GITHUB_ACTION_PATH" --root "$RUNNER_TEMP/allot"
else
    case "$ALLOT_VERSION" in
        *[!0-9A-Za-z.+-]*) echo "::error title=allot::version '$ALLOT_VERSION' is not a version" && exit 1 ;;
    esac
    archive="allot-$ALLOT_VERSION-x86_64-unknown-linux-gnu.tar.gz"
    url="https://github.com/$ALLOT_REPOSITORY/releases/download/v$ALLOT_VERSION"
    work="$(mktemp -d)"
    curl --fail --silent --show-error --location --output "$work/$archive" "$url/$archive"
    curl --fail --silent --show-error --location --output "$work/$archive.sha256" "$url/$archive.sha256"
    (cd "$work" && sha256sum --check --strict "$archive.sha256")
    tar -xzf "$work/$archive" -C "$bin" allot
fi
echo "$bin" >>"$GITHUB_PATH"
"$bin/allot" --version
