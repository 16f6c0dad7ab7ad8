#!/usr/bin/env bash
# Builds the Kueue oracle (tests/kueue-oracle) when its sources changed since the last build,
# and prints the binary's path. The binary is kept in ${XDG_CACHE_HOME:-~/.cache}/allot/kueue-oracle
# under a hash of the sources, go.mod and go.sum; Go's module and build caches keep the rest.
# The first build downloads Kueue and its dependencies from the Go module proxy (a few
# minutes); later ones take seconds.
set -euo pipefail
cd "$(dirname "$0")/../tests/kueue-oracle"
# Go: the machine's, else Debian's (installed when running as root with apt). A Go older
# than go.mod asks for fetches a newer toolchain through the Go module proxy.
if ! command -v go >/dev/null; then
    if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "==> installing Go (Debian's golang-go) to build the Kueue oracle" >&2
        apt-get install -y -q golang-go >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q golang-go >/dev/null; }
    else
        echo "kueue-oracle: Go is missing: install Go $(sed -n 's/^go //p' go.mod) or later to build the Kueue oracle" >&2
        exit 1
    fi
fi
wanted="$(sed -n 's/^go //p' go.mod)"
have="$(go env GOVERSION | sed 's/^go//')"
if [ "$(printf '%s\n%s\n' "$wanted" "$have" | sort -V | head -1)" != "$wanted" ]; then
    # The toolchain the Go module proxy serves for this (see README.md, "What the tests install").
    export GOTOOLCHAIN="${ALLOT_GOTOOLCHAIN:-go1.27.3}"
fi
cache="${ALLOT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/allot}/kueue-oracle"
hash="$( (go env GOVERSION; cat go.mod go.sum ./*.go) | sha256sum | cut -c1-16)"
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
