#!/usr/bin/env bash
# Builds the Kueue oracle (tests/kueue-oracle) when its sources changed since the last build,
# and prints the binary's path. The binary is kept in ${XDG_CACHE_HOME:-~/.cache}/allot/kueue-oracle
# under a hash of the sources, go.mod and go.sum; Go's module and build caches keep the rest.
# The first build downloads Kueue and its dependencies from the Go module proxy (a few
# minutes); later ones take seconds.
set -euo pipefail
cd "$(dirname "$0")/../tests/kueue-oracle"
if ! command -v go >/dev/null; then
    echo "kueue-oracle: Go is missing: install Go $(sed -n 's/^go //p' go.mod) or later to build the Kueue oracle" >&2
    exit 1
fi
cache="${ALLOT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/allot}/kueue-oracle"
hash="$( (go version; cat go.mod go.sum ./*.go) | sha256sum | cut -c1-16)"
binary="$cache/kueue-oracle-$hash"
if [ ! -x "$binary" ]; then
    mkdir -p "$cache"
    echo "==> building the Kueue oracle (the first time, Kueue and its dependencies are downloaded: a few minutes)" >&2
    start=$SECONDS
    go build -mod=readonly -trimpath -o "$binary.tmp" .
    mv "$binary.tmp" "$binary"
    # Older builds go (only this script's own files).
    find "$cache" -maxdepth 1 -name 'kueue-oracle-*' ! -name "kueue-oracle-$hash" -type f -delete
    echo "==> built in $((SECONDS - start)) s" >&2
fi
echo "$binary"
