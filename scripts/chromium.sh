#!/usr/bin/env bash
# A headless Chromium for allot's tests, from Debian's `chromium` package: to render the
# HTML report the way a browser does and look at the pixels.
#
#   scripts/chromium.sh ensure
#       make Chromium available and print its binary's path on stdout. Uses a `chromium`
#       already on PATH (or $ALLOT_CHROMIUM); otherwise, as root with apt, installs the package
#       (`apt-get update` only when apt knows no candidate or the install fails without it).
#   scripts/chromium.sh screenshot PAGE.html OUT.png [WIDTH HEIGHT]
#       render PAGE (a local file) headless into OUT.png, WIDTH x HEIGHT pixels (default
#       1280 x 2400), with a fresh profile in a temporary folder that is removed afterwards.
#       Chromium gets its own session; every process left with that profile (renderers,
#       crashpad) is ended by PID, so nothing keeps running.
#
# The flags matter on this machine: the network is closed, and without
# --disable-background-networking, --disable-component-update, --disable-sync and
# --disable-quic Chromium keeps trying connections that are refused (and may hang on them).
#
# Exit status: 0 ok; 1 error (Chromium failed or wrote no PNG: its output is shown); 2 usage;
# 3 unavailable: no Chromium and it cannot be installed (not root, no apt-get, apt failed),
# with a loud "!!!" message.
#
# Environment: ALLOT_CHROMIUM   a Chromium binary to use instead of looking for one
#              ALLOT_CHROMIUM_TIMEOUT [90] seconds a screenshot may take
set -euo pipefail
set +m # no job control: a background job is not a group leader, so setsid does not fork

TIMEOUT="${ALLOT_CHROMIUM_TIMEOUT:-90}"
CHROMIUM_PID="" # the running screenshot's session, for the exit trap

log() { echo "chromium: $*" >&2; }
usage() {
    log "usage: $0 ensure | screenshot PAGE.html OUT.png [WIDTH HEIGHT]"
    exit 2
}
unavailable() {
    {
        echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
        echo '!!! HEADLESS CHROMIUM IS UNAVAILABLE ON THIS MACHINE'
        local line
        for line in "$@"; do echo "!!! $line"; done
        echo '!!! (no page was rendered in a real browser)'
        echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
    } >&2
    exit 3
}
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }'; }

# The Chromium binary, if there is one.
find_chromium() {
    if [ -n "${ALLOT_CHROMIUM:-}" ]; then
        [ -x "$ALLOT_CHROMIUM" ] && { echo "$ALLOT_CHROMIUM"; return 0; }
        return 1
    fi
    command -v chromium || command -v chromium-browser
}

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
}

ensure() {
    local binary
    if binary=$(find_chromium); then
        echo "$binary"
        return 0
    fi
    [ -z "${ALLOT_CHROMIUM:-}" ] || unavailable "ALLOT_CHROMIUM=$ALLOT_CHROMIUM is not an executable"
    [ "$(id -u)" = 0 ] || unavailable "chromium is not installed, and installing it needs root"
    command -v apt-get >/dev/null || unavailable "chromium is not installed, and there is no apt-get"
    local started=$EPOCHREALTIME apt_log
    apt_log=$(mktemp -t allot-chromium-apt.XXXXXX)
    log "installing chromium (apt log: $apt_log)"
    # apt-get update only when needed: no candidate known, or the known version is gone.
    # (no "| grep -q": with pipefail, apt-cache's SIGPIPE would count as a failure)
    if [[ ! "$(apt-cache policy chromium 2>/dev/null || true)" =~ Candidate:\ [0-9] ]] ||
        ! apt_install >>"$apt_log" 2>&1; then
        log "apt-get update"
        apt-get update -q >>"$apt_log" 2>&1 ||
            { tail -n 20 "$apt_log" >&2; unavailable "apt-get update failed (see $apt_log)"; }
        apt_install >>"$apt_log" 2>&1 ||
            { tail -n 20 "$apt_log" >&2; unavailable "apt-get install chromium failed (see $apt_log)"; }
    fi
    binary=$(find_chromium) || unavailable "chromium is still not on PATH after apt-get install"
    log "installed $("$binary" --version 2>/dev/null || echo chromium) in $(since "$started")"
    rm -f "$apt_log"
    echo "$binary"
}

# PIDs of the processes whose command line mentions $1 (the run's profile folder).
pids_using() {
    local dir cmdline
    for dir in /proc/[0-9]*; do
        cmdline=$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null) || continue
        [[ "$cmdline" == *"$1"* ]] && echo "${dir#/proc/}"
    done
    return 0
}

# Ends the processes of the run with profile $1 (and session $2), by PID; waits for them.
end_processes() {
    local profile=$1 session=$2 pid tries
    kill -TERM -- "-$session" 2>/dev/null || true
    for tries in 1 2 3 4 5 6 7 8 9 10; do
        local left
        left=$(pids_using "$profile")
        [ -z "$left" ] && return 0
        for pid in $left; do
            # (SIGKILL from the fourth round on: a renderer stuck on I/O ignores TERM)
            if [ "$tries" -lt 4 ]; then kill -TERM "$pid" 2>/dev/null || true; else kill -KILL "$pid" 2>/dev/null || true; fi
        done
        sleep 0.2
    done
    log "error: processes still running: $(pids_using "$profile" | tr '\n' ' ')"
    return 1
}

screenshot() {
    [ $# = 2 ] || [ $# = 4 ] || usage
    local page=$1 out=$2 width=${3:-1280} height=${4:-2400}
    [[ "$width" =~ ^[1-9][0-9]*$ && "$height" =~ ^[1-9][0-9]*$ ]] || usage
    [ -f "$page" ] || { log "error: no page $page"; exit 1; }
    local binary
    binary=$(find_chromium) || unavailable "chromium is not installed (run: $0 ensure)"
    page=$(realpath "$page")
    out=$(realpath -m "$out")
    rm -f "$out"
    # One temporary folder for the run: the profile and Chromium's output.
    local work
    work=$(mktemp -d -t allot-chromium.XXXXXX)
    local profile="$work/profile" output="$work/chromium.log"
    # Removed whatever happens; the processes first, since they write into it.
    # shellcheck disable=SC2064 # the folder is fixed now; the PID is read at exit
    trap "[ -n \"\${CHROMIUM_PID}\" ] && end_processes '$profile' \"\${CHROMIUM_PID}\"; rm -rf '$work'" EXIT
    local started=$EPOCHREALTIME status=0
    setsid timeout --kill-after=5 "$TIMEOUT" "$binary" \
        --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-default-apps --disable-extensions --disable-dev-shm-usage --mute-audio \
        --hide-scrollbars --force-device-scale-factor=1 \
        --user-data-dir="$profile" --screenshot="$out" --window-size="$width,$height" \
        "file://$page" >"$output" 2>&1 </dev/null &
    CHROMIUM_PID=$!
    wait "$CHROMIUM_PID" || status=$?
    end_processes "$profile" "$CHROMIUM_PID"
    CHROMIUM_PID=""
    if [ "$status" != 0 ] || [ ! -s "$out" ]; then
        log "error: chromium exited with $status$([ -s "$out" ] || echo ' and wrote no PNG'); its output:"
        tail -n 30 "$output" >&2 || true
        exit 1
    fi
    log "screenshot ${width}x${height} of $page in $(since "$started")"
}

case "${1:-}" in
ensure) [ $# = 1 ] || usage; ensure ;;
screenshot) shift; screenshot "$@" ;;
*) usage ;;
esac
