#!/usr/bin/env bash
# A real Slurm on 127.0.0.1 for allot's tests: slurmctld + slurmd + slurmdbd with MariaDB
# accounting and munge, from the Debian packages (Debian 12: Slurm 22.05). One node, named
# after `hostname -s`, with 8 CPUs and 8 fake GPUs (driverless character devices), a partition
# `gpu` whose billing is CPU=1.0,GRES/gpu=4.0, multifactor priority with Fair Tree (PriorityFlags
# empty, PriorityWeightFairshare=100000, every other weight 0, PriorityCalcPeriod=1 minute), no
# usage decay by default (PriorityDecayHalfLife=0: RawUsage is exactly billing x seconds),
# AccountingStorageEnforce=associations,limits,qos, AccountingStorageTRES=gres/gpu and QOS
# preemption (PreemptType=preempt/qos, PreemptMode=REQUEUE). Needs root; no systemd is needed.
#
#   scripts/slurm.sh start         install the packages if missing (apt-get update only when
#                                  needed; postinst scripts start nothing), write the
#                                  configuration, start munged, MariaDB, slurmdbd, slurmctld and
#                                  slurmd with a CLEAN accounting state (database dropped,
#                                  StateSaveLocation emptied), wait until the cluster is registered
#                                  in the accounting database, `sacctmgr show tres` lists gres/gpu
#                                  and the node is idle, write "$STATE/env", print timings.
#                                  Daemons of this script that still run are stopped first.
#   scripts/slurm.sh stop          stop exactly the daemons this script started (by PID, after
#                                  checking /proc/PID/cmdline), cancelling any jobs first; wait
#                                  until they have exited. Nothing recorded: a no-op.
#   scripts/slurm.sh status        say which recorded daemons run (and the node's state)
#   scripts/slurm.sh restart-ctld  restart slurmctld only (its state is kept) and wait until it
#                                  answers: its priority thread then recomputes Fair Tree's
#                                  LevelFS/FairShare at once instead of at the next calc period.
#
# Exit status: 0 ok; 1 error (a daemon did not come up: the last lines of its log are shown, and
# the daemons started so far are stopped); 2 usage (unknown command, bad environment value);
# 3 unavailable: not root, or the packages are missing and cannot be installed (no apt-get, apt
# failed), with a loud "!!!" message. `status` exits 0 when every recorded daemon runs, 1 otherwise.
#
# Environment (defaults in brackets):
#   ALLOT_SLURM_STATE     [/var/lib/allot-slurm] state folder: pids/ (one file per daemon: "PID
#                         BINARY"), log/ (daemon logs), ctld/ (StateSaveLocation), spool/,
#                         fakegpu/, env. Tests source "$ALLOT_SLURM_STATE/env". The logs stay
#                         after stop (NAME.log: the daemon's log file; NAME.out: its stderr).
#   ALLOT_SLURM_CLUSTER   [allot] the Slurm cluster name (lower case)
#   ALLOT_SLURM_HALFLIFE  [0] PriorityDecayHalfLife (0 = no decay; e.g. 00:05:00)
#   ALLOT_SLURM_CPUS      [8] CPUs advertised by the node (SlurmdParameters=config_overrides)
#   ALLOT_SLURM_GPUS      [8] fake GPUs of the node
#   ALLOT_SLURM_TIMEOUT   [60] seconds to wait for each daemon
#   ALLOT_SLURM_BILLING   [CPU=1.0,GRES/gpu=4.0] the partition's TRESBillingWeights
#   ALLOT_SLURM_CONF_EXTRA  [none] a file of scheduling settings (Key=Value lines; blank lines
#                         and # comments skipped) that replace this script's: Priority* (but
#                         PriorityType), SchedulerParameters, AuthInfo, KillWait; any other key
#                         is refused (exit 2). For replays of allot's emitted configuration.
#
# "$STATE/env" (KEY='value' lines, sourceable): SLURM_CLUSTER, SLURM_CONF, ALLOT_SLURM_PARTITION,
# ALLOT_SLURM_NODE, ALLOT_SLURM_CPUS, ALLOT_SLURM_GPUS, ALLOT_SLURM_BILLING, ALLOT_SLURM_HALFLIFE,
# ALLOT_SLURM_CALC_PERIOD_MIN, ALLOT_SLURM_VERSION, ALLOT_SLURM_STATE, ALLOT_SLURM_LOGS,
# ALLOT_SLURM_SCRIPT.
#
# Files outside the state folder: /etc/slurm/{slurm.conf,gres.conf,slurmdbd.conf} (the Debian
# default location, so that plain sinfo/sacctmgr/sshare work; an /etc/slurm/slurm.conf not written
# by this script is never overwritten), the MariaDB database allot_slurm_acct_db and user
# allot_slurm (dropped / re-created at each start), /run/munge, /run/mysqld. munged and MariaDB
# are reused, not started (and so not stopped), when they already answer.
#
# Notes for tests: use `sacctmgr -i` (without -i it asks for confirmation); submit as a Unix user
# with `runuser -u USER -- sbatch --chdir=/tmp -o /dev/null ...` (an output file the user cannot
# write makes the job fail); LevelFS/FairShare are recomputed every PriorityCalcPeriod (1 min) or
# at once by `restart-ctld`. slurmdbd listens on 0.0.0.0:6819 (Slurm has no switch for it);
# slurmctld (6817) and slurmd (6818) on 127.0.0.1; MariaDB on its socket only.
set -euo pipefail
set +m # no job control: a background daemon is never a process group leader, so setsid never forks

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
STATE="${ALLOT_SLURM_STATE:-/var/lib/allot-slurm}"
CLUSTER="${ALLOT_SLURM_CLUSTER:-allot}"
HALFLIFE="${ALLOT_SLURM_HALFLIFE:-0}"
NCPU="${ALLOT_SLURM_CPUS:-8}"
NGPU="${ALLOT_SLURM_GPUS:-8}"
TIMEOUT="${ALLOT_SLURM_TIMEOUT:-60}"

PARTITION=gpu
BILLING="${ALLOT_SLURM_BILLING:-CPU=1.0,GRES/gpu=4.0}"
EXTRA="${ALLOT_SLURM_CONF_EXTRA:-}"
ETC=/etc/slurm
DB=allot_slurm_acct_db
DBUSER=allot_slurm
MARKER="# Written by allot scripts/slurm.sh"
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
# Start order (stop: slurmd + slurmctld, then slurmdbd, then MariaDB + munged).
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)
LOGS="$STATE/log"
STOPPED=() # PIDs of the daemons stopped by this run
PIDS="$STATE/pids"
NODE="$(hostname -s)"

log() { echo "slurm: $*" >&2; }
die() {
    log "error: $1"
    exit "${2:-1}"
}
loud() {
    {
        echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
        echo '!!! A REAL SLURM IS UNAVAILABLE ON THIS MACHINE'
        local line
        for line in "$@"; do echo "!!! $line"; done
        echo '!!! (nothing was checked against a real slurmctld/slurmdbd)'
        echo '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
    } >&2
}
unavailable() {
    loud "$@"
    exit 3
}

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }'; }

binary_of() { echo "/usr/sbin/$1"; } # daemon name -> absolute path of its binary

# Is the daemon recorded under NAME still running as its binary? Prints its PID if so.
recorded_pid() {
    local pid bin
    read -r pid bin <"$PIDS/$1" 2>/dev/null || return 1
    [ -n "$pid" ] && [ -n "$bin" ] && kill -0 "$pid" 2>/dev/null || return 1
    local argv0=""
    IFS= read -r -d '' argv0 <"/proc/$pid/cmdline" 2>/dev/null || true
    [ "$argv0" = "$bin" ] || return 1
    echo "$pid"
}

# PIDs of processes whose command name is NAME (to spot Slurm daemons not started by us).
pids_named() {
    local d
    for d in /proc/[0-9]*; do
        [ "$(cat "$d/comm" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
    done
    return 0
}

show_log() {
    local f
    for f in "$LOGS/$1.log" "$LOGS/$1.out"; do
        [ -s "$f" ] && { log "--- last lines of $f"; tail -n 20 "$f" >&2; }
    done
    return 0
}

# Start failed: show the daemon's log, stop everything started, exit 1.
start_failed() {
    log "error: $1"
    [ -n "${2:-}" ] && show_log "$2"
    do_stop >/dev/null 2>&1 || true
    exit 1
}

# launch NAME [ARGS...]: run the daemon's binary in the foreground of its own session (so that
# it outlives this script and no terminal signal reaches it), record its PID.
launch() {
    local name=$1 bin
    bin=$(binary_of "$name")
    shift
    setsid "$@" </dev/null >>"$LOGS/$name.out" 2>&1 9>&- &
    local pid=$!
    echo "$pid $bin" >"$PIDS/$name"
    # Wait for the exec (setsid/setpriv in between) so that the record is checkable at once.
    local i
    for i in $(seq 1 50); do
        recorded_pid "$name" >/dev/null && return 0
        running "$pid" || start_failed "$name exited at once" "$name"
        sleep 0.05
    done
    start_failed "process $pid is not $bin" "$name"
}

# wait_until NAME WHAT CMD...: poll CMD until it succeeds; fail if daemon NAME exits or on timeout.
wait_until() {
    local name=$1 what=$2
    shift 2
    local deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        if [ -n "$name" ] && [ -e "$PIDS/$name" ] && ! recorded_pid "$name" >/dev/null; then
            start_failed "$name exited while waiting for $what" "$name"
        fi
        [ "$SECONDS" -lt "$deadline" ] || start_failed "timed out after $TIMEOUT s waiting for $what" "$name"
        sleep 0.2
    done
}

# Is PID a live process (not a zombie)?
running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# stop_group NAME...: SIGTERM the recorded daemons NAME... together, wait until they have exited
# (SIGKILL after 15 s), forget them.
stop_group() {
    local name pid t names=() pids=() i
    t=$(now)
    for name in "$@"; do
        [ -e "$PIDS/$name" ] || continue
        if pid=$(recorded_pid "$name"); then
            kill -TERM "$pid" 2>/dev/null || true
            names+=("$name")
            pids+=("$pid")
        else
            log "$name: the recorded process is gone ($(cat "$PIDS/$name"))"
            rm -f "$PIDS/$name"
        fi
    done
    local deadline=$((SECONDS + 15)) left=1
    while [ "$left" = 1 ]; do
        left=0
        for pid in "${pids[@]}"; do running "$pid" && left=1; done
        [ "$left" = 1 ] || break
        if [ "$SECONDS" -ge "$deadline" ]; then
            for i in "${!pids[@]}"; do
                running "${pids[$i]}" || continue
                log "${names[$i]} (pid ${pids[$i]}) ignored SIGTERM for 15 s: SIGKILL"
                kill -KILL "${pids[$i]}" 2>/dev/null || true
            done
            deadline=$((SECONDS + 3600))
        fi
        sleep 0.1
    done
    for i in "${!names[@]}"; do
        log "stopped ${names[$i]} (pid ${pids[$i]}) in $(since "$t")"
        STOPPED+=("${pids[$i]}")
        rm -f "$PIDS/${names[$i]}"
    done
}

have_records() {
    local n
    for n in "${DAEMONS[@]}"; do [ -e "$PIDS/$n" ] && return 0; done
    return 1
}

do_stop() {
    if ! have_records; then
        echo "slurm: nothing to stop (no daemons recorded in $PIDS)"
        return 0
    fi
    [ "$(id -u)" = 0 ] || die "stop needs root (the daemons were started by root)"
    local t0
    t0=$(now)
    # Jobs first: their slurmstepd processes would outlive slurmd.
    if recorded_pid slurmctld >/dev/null && recorded_pid slurmd >/dev/null &&
        [ -n "$(squeue -h -o %i 2>/dev/null)" ]; then
        log "cancelling the remaining jobs"
        local jobs
        mapfile -t jobs < <(squeue -h -o %i 2>/dev/null)
        scancel --full --quiet "${jobs[@]}" 2>/dev/null || true
        local deadline=$((SECONDS + 20))
        while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ "$SECONDS" -lt "$deadline" ]; do
            sleep 0.5
        done
    fi
    # slurmdbd after slurmctld (which sends it its last records), munged last of the Slurm side.
    stop_group slurmd slurmctld
    stop_group slurmdbd
    stop_group mariadbd munged
    # An exited daemon stays a zombie until PID 1 reaps it (this machine's init does so every
    # second or two); wait a little so that ps shows nothing left.
    local deadline=$((SECONDS + 5)) pid z
    while :; do
        z=""
        for pid in "${STOPPED[@]}"; do [ -e "/proc/$pid" ] && z="$z $pid"; done
        { [ -n "$z" ] && [ "$SECONDS" -lt "$deadline" ]; } || break
        sleep 0.1
    done
    [ -z "$z" ] || log "exited, not yet reaped by PID 1 (zombies):$z"
    local left
    left=$(pids_named slurmstepd | tr '\n' ' ')
    [ -z "$left" ] || log "warning: slurmstepd processes are left (pids $left): jobs outlived slurmd"
    echo "slurm: stopped in $(since "$t0")"
}

do_status() {
    local n pid all=0 any=0
    for n in "${DAEMONS[@]}"; do
        [ -e "$PIDS/$n" ] || continue
        any=1
        if pid=$(recorded_pid "$n"); then
            echo "$n: running (pid $pid)"
        else
            echo "$n: NOT running (recorded: $(cat "$PIDS/$n"))"
            all=1
        fi
    done
    if [ "$any" = 0 ]; then
        echo "slurm: not running (no daemons recorded in $PIDS)"
        return 1
    fi
    if recorded_pid slurmctld >/dev/null; then
        echo "node $NODE: $(sinfo -h -n "$NODE" -o '%T %G' 2>/dev/null || echo unknown)"
    fi
    return "$all"
}

# ---------------------------------------------------------------------------------------------
# start

packages_missing() {
    local p
    for p in "${PACKAGES[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || echo "$p"
    done
    return 0
}

# Debian maintainer scripts start services through invoke-rc.d, which asks policy-rc.d: exit 101
# there means "do not start". Put one in place if there is none or the present one allows.
POLICY=/usr/sbin/policy-rc.d
POLICY_SAVED=""
deny_service_starts() {
    local rc=0
    if [ -x "$POLICY" ]; then
        "$POLICY" slurmctld start >/dev/null 2>&1 || rc=$?
        [ "$rc" = 101 ] && return 0
        POLICY_SAVED="$POLICY.allot-saved"
        mv "$POLICY" "$POLICY_SAVED"
    fi
    printf '#!/bin/sh\n# allot scripts/slurm.sh: start no service while installing\nexit 101\n' >"$POLICY"
    chmod 755 "$POLICY"
    trap restore_policy EXIT
}
restore_policy() {
    if grep -q 'allot scripts/slurm.sh' "$POLICY" 2>/dev/null; then rm -f "$POLICY"; fi
    if [ -n "$POLICY_SAVED" ] && [ -e "$POLICY_SAVED" ]; then mv "$POLICY_SAVED" "$POLICY"; fi
    POLICY_SAVED=""
    trap - EXIT
}

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${PACKAGES[@]}"
}

install_packages() {
    local missing
    missing=$(packages_missing | tr '\n' ' ')
    if [ -z "$missing" ]; then
        log "packages already installed"
        return 0
    fi
    command -v apt-get >/dev/null ||
        unavailable "the packages $missing are missing and there is no apt-get to install them"
    log "installing $missing(and their dependencies)"
    deny_service_starts
    local apt_log="$LOGS/apt.log" candidates=1 p
    : >"$apt_log"
    for p in "${PACKAGES[@]}"; do
        # (no "| grep -q" here: with pipefail, apt-cache's SIGPIPE would fail the test)
        [[ "$(apt-cache policy "$p" 2>/dev/null || true)" =~ Candidate:\ [0-9] ]] || candidates=0
    done
    # apt-get update only when needed: no candidate known, or the known versions are gone.
    if [ "$candidates" = 0 ] || ! apt_install >>"$apt_log" 2>&1; then
        log "apt-get update"
        apt-get update -q >>"$apt_log" 2>&1 || { tail -n 20 "$apt_log" >&2; unavailable "apt-get update failed (see $apt_log)"; }
        apt_install >>"$apt_log" 2>&1 || { tail -n 20 "$apt_log" >&2; unavailable "apt-get install ${PACKAGES[*]} failed (see $apt_log)"; }
    fi
    restore_policy
    missing=$(packages_missing | tr '\n' ' ')
    [ -z "$missing" ] || unavailable "still not installed after apt-get install: $missing"
}

write_config() {
    local dbpass=$1 last=$((NGPU - 1)) files
    mkdir -p "$ETC"

    # Fake GPUs: gres/gpu needs File= entries that are character devices (File-less lines are
    # dropped, regular files rejected); Slurm only stat()s them. Major 240 is for local use.
    rm -rf "$STATE/fakegpu"
    install -d -m 0755 "$STATE/fakegpu"
    local i
    for ((i = 0; i < NGPU; i++)); do mknod -m 0666 "$STATE/fakegpu/gpu$i" c 240 "$i"; done
    if [ "$NGPU" = 1 ]; then files="$STATE/fakegpu/gpu0"; else files="$STATE/fakegpu/gpu[0-$last]"; fi

    cat >"$ETC/gres.conf" <<EOF
$MARKER
AutoDetect=off
NodeName=$NODE Name=gpu File=$files
EOF

    cat >"$ETC/slurm.conf" <<EOF
$MARKER (start of $(date -Is)); it is rewritten at each start.
ClusterName=$CLUSTER
# The name must be \`hostname -s\`; the address pins the controller to loopback.
SlurmctldHost=$NODE(127.0.0.1)
# slurmctld (6817) and slurmd (6818) listen on the node address 127.0.0.1, not on 0.0.0.0.
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
# Advertise the CPUs below whatever the hardware has.
SlurmdParameters=config_overrides
GresTypes=gpu
# Accounting through slurmdbd; a job needs a valid association; limits and QOS are enforced.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu
# QOS preemption (allot's QOS use it).
PreemptType=preempt/qos
PreemptMode=REQUEUE
# Multifactor priority; PriorityFlags left empty means Fair Tree. Only fair-share counts.
PriorityType=priority/multifactor
PriorityDecayHalfLife=$HALFLIFE
PriorityCalcPeriod=1
PriorityUsageResetPeriod=NONE
PriorityWeightFairshare=100000
PriorityWeightAge=0
PriorityWeightAssoc=0
PriorityWeightJobSize=0
PriorityWeightPartition=0
PriorityWeightQOS=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$NCPU Boards=1 SocketsPerBoard=1 CoresPerSocket=$NCPU ThreadsPerCore=1 RealMemory=4000 Gres=gpu:$NGPU State=UNKNOWN
# Usage (RawUsage) is billing x seconds: a CPU costs 1, a GPU 4.
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP TRESBillingWeights="$BILLING"
EOF
    # The extra settings replace this script's lines of the same keys, before the node lines.
    extra_settings >"$ETC/slurm.conf.extra"
    if [ -s "$ETC/slurm.conf.extra" ]; then
        local keys
        keys=$(sed 's/=.*//' "$ETC/slurm.conf.extra" | sort -u | paste -sd'|')
        awk -v keys="^($keys)=" '
            NR == FNR { extra = extra $0 "\n"; next }
            $0 ~ keys { next }
            /^NodeName=/ && !done { printf "# Settings of ALLOT_SLURM_CONF_EXTRA\n%s", extra; done = 1 }
            { print }' "$ETC/slurm.conf.extra" "$ETC/slurm.conf" >"$ETC/slurm.conf.tmp"
        mv "$ETC/slurm.conf.tmp" "$ETC/slurm.conf"
    fi
    rm -f "$ETC/slurm.conf.extra"

    # slurmdbd refuses a slurmdbd.conf that is not mode 600 and owned by SlurmUser.
    (
        umask 077
        cat >"$ETC/slurmdbd.conf" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=slurm
DebugLevel=info
LogFile=$LOGS/slurmdbd.log
PidFile=$STATE/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=$DB
StorageUser=$DBUSER
StoragePass=$dbpass
EOF
    )
    chown slurm:slurm "$ETC/slurmdbd.conf"
    chmod 600 "$ETC/slurmdbd.conf"
    chmod 644 "$ETC/slurm.conf" "$ETC/gres.conf"
}

# The settings of ALLOT_SLURM_CONF_EXTRA, checked: one Key=Value per line, on stdout.
extra_settings() {
    [ -n "$EXTRA" ] || return 0
    [ -f "$EXTRA" ] || {
        log "ALLOT_SLURM_CONF_EXTRA: $EXTRA is not a file"
        exit 2
    }
    local line key value
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in '' | '#'*) continue ;; esac
        key=${line%%=*}
        value=${line#*=}
        case "$key" in
            PriorityType) ;;
            Priority[A-Za-z]* | SchedulerParameters | AuthInfo | KillWait)
                if [[ "$key" =~ ^[A-Za-z]+$ && "$value" =~ ^[A-Za-z0-9_=,.:/+-]+$ ]]; then
                    printf '%s=%s\n' "$key" "$value"
                    continue
                fi
                ;;
        esac
        log "ALLOT_SLURM_CONF_EXTRA: refused line: $line (only Priority* but PriorityType, SchedulerParameters, AuthInfo, KillWait; values of letters, digits and _=,.:/+-)"
        exit 2
    done <"$EXTRA"
}

# PriorityCalcPeriod in minutes, as configured.
calc_period() {
    local period
    period=$(extra_settings | sed -n 's/^PriorityCalcPeriod=//p' | tail -1)
    echo "${period:-1}"
}

write_env() {
    local version
    version=$(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo unknown)
    cat >"$STATE/env.tmp" <<EOF
SLURM_CLUSTER='$CLUSTER'
SLURM_CONF='$ETC/slurm.conf'
ALLOT_SLURM_PARTITION='$PARTITION'
ALLOT_SLURM_NODE='$NODE'
ALLOT_SLURM_CPUS='$NCPU'
ALLOT_SLURM_GPUS='$NGPU'
ALLOT_SLURM_BILLING='$BILLING'
ALLOT_SLURM_HALFLIFE='$HALFLIFE'
ALLOT_SLURM_CALC_PERIOD_MIN='$(calc_period)'
ALLOT_SLURM_VERSION='$version'
ALLOT_SLURM_STATE='$STATE'
ALLOT_SLURM_LOGS='$LOGS'
ALLOT_SLURM_SCRIPT='$SELF'
EOF
    mv "$STATE/env.tmp" "$STATE/env"
}

start_ctld() {
    launch slurmctld /usr/sbin/slurmctld -D
    wait_until slurmctld "slurmctld to answer" sh -c 'scontrol ping | grep -q "is UP"'
}

check_env_values() {
    [[ "$CLUSTER" =~ ^[a-z][a-z0-9_-]*$ ]] || die "ALLOT_SLURM_CLUSTER='$CLUSTER': use lower case letters, digits, - and _" 2
    [[ "$NCPU" =~ ^[1-9][0-9]*$ ]] || die "ALLOT_SLURM_CPUS='$NCPU' is not a positive number" 2
    { [[ "$NGPU" =~ ^[1-9][0-9]*$ ]] && [ "$NGPU" -le 64 ]; } || die "ALLOT_SLURM_GPUS='$NGPU' is not in 1..64" 2
    [[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "ALLOT_SLURM_TIMEOUT='$TIMEOUT' is not a positive number" 2
    [[ "$HALFLIFE" =~ ^[0-9:-]+$ ]] || die "ALLOT_SLURM_HALFLIFE='$HALFLIFE' is not a Slurm duration" 2
    case "$STATE" in /*) ;; *) die "ALLOT_SLURM_STATE='$STATE' is not an absolute path" 2 ;; esac
    [ "$STATE" != / ] || die "ALLOT_SLURM_STATE must not be /" 2
    [[ "$BILLING" =~ ^[A-Za-z0-9/=.,]+$ ]] || die "ALLOT_SLURM_BILLING='$BILLING' is not a TRESBillingWeights list" 2
    extra_settings >/dev/null
}

# Refuse a non-empty state folder this script did not create (it is partly wiped at each start).
claim_state() {
    if [ -d "$STATE" ] && [ ! -e "$STATE/.allot-slurm" ] && [ -n "$(ls -A "$STATE")" ]; then
        die "$STATE exists, is not empty and is not a state folder of this script" 2
    fi
    mkdir -p "$STATE" "$PIDS" "$LOGS"
    touch "$STATE/.allot-slurm"
}

do_start() {
    check_env_values
    [ "$(id -u)" = 0 ] || unavailable "start needs root (it installs packages and runs the Slurm daemons): run it as root"
    claim_state
    exec 9>"$STATE/.lock"
    flock -n 9 || die "another scripts/slurm.sh runs on $STATE"
    local t0 t
    t0=$(now)

    if have_records; then
        log "daemons of an earlier start are recorded: stopping them first"
        do_stop >/dev/null
    fi
    if [ -e "$ETC/slurm.conf" ] && ! grep -qF "$MARKER" "$ETC/slurm.conf"; then
        die "$ETC/slurm.conf was not written by this script: move it away first"
    fi
    local n p
    for n in slurmctld slurmd slurmdbd; do
        p=$(pids_named "$n" | tr '\n' ' ')
        [ -z "$p" ] || die "a $n not started by this script runs (pid $p): stop it first"
    done

    # Clean state: state save location, spool, logs. /run does not survive a reboot.
    rm -rf "$STATE/ctld" "$STATE/spool" "$STATE/run"
    rm -f "$LOGS"/*.log "$LOGS"/*.out

    t=$(now)
    install_packages
    local t_install
    t_install=$(since "$t")
    log "slurm $(dpkg-query -W -f='${Version}' slurmctld), munge $(dpkg-query -W -f='${Version}' munge), mariadb $(dpkg-query -W -f='${Version}' mariadb-server)"

    install -d -o slurm -g slurm -m 0755 "$STATE/ctld" "$STATE/run" "$LOGS"
    install -d -m 0755 "$STATE/spool"
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o mysql -g mysql -m 0755 /run/mysqld

    # munge
    t=$(now)
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        log "munged already answers (not started by this script: left alone)"
    else
        [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
        launch munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground
        wait_until munged "a munge round trip" sh -c 'munge -n | unmunge'
    fi
    local t_munge
    t_munge=$(since "$t")

    # MariaDB, on its socket only; root logs in by unix_socket.
    t=$(now)
    if mariadb-admin ping >/dev/null 2>&1; then
        log "MariaDB already answers (not started by this script: left alone)"
    else
        [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOGS/mariadb-install-db.out" 2>&1 ||
            start_failed "mariadb-install-db failed" mariadb-install-db
        # The buffer pool and lock wait values avoid slurmdbd's "not recommended values" error;
        # durability does not matter for a test database.
        launch mariadbd /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --skip-networking \
            --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
            --innodb-buffer-pool-size=512M --innodb-lock-wait-timeout=900 \
            --innodb-flush-log-at-trx-commit=0
        wait_until mariadbd "MariaDB to answer" mariadb-admin ping
    fi
    local dbpass
    dbpass=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
    mariadb <<EOF || start_failed "cannot set up the database $DB" mariadbd
DROP DATABASE IF EXISTS $DB;
CREATE USER IF NOT EXISTS '$DBUSER'@'localhost' IDENTIFIED BY '$dbpass';
ALTER USER '$DBUSER'@'localhost' IDENTIFIED BY '$dbpass';
GRANT ALL ON $DB.* TO '$DBUSER'@'localhost';
EOF
    local t_db
    t_db=$(since "$t")

    write_config "$dbpass"

    # slurmdbd (drops to SlurmUser itself)
    t=$(now)
    launch slurmdbd /usr/sbin/slurmdbd -D
    wait_until slurmdbd "slurmdbd to answer" sacctmgr -n show cluster
    local t_dbd
    t_dbd=$(since "$t")

    # slurmctld: registers the cluster and creates the TRES gres/gpu in the database.
    t=$(now)
    start_ctld
    wait_until slurmctld "cluster $CLUSTER registered with its controller address" sh -c \
        "sacctmgr -n -P show cluster format=cluster,controlhost | grep -qx '$CLUSTER|127.0.0.1'"
    wait_until slurmctld "sacctmgr show tres to list gres/gpu" sh -c \
        'sacctmgr -n -P show tres format=type,name | grep -qx "gres|gpu"'
    local cfg
    cfg=$(scontrol show config)
    { grep -Eq '^PreemptType += preempt/qos$' <<<"$cfg" && grep -Eq '^PreemptMode += REQUEUE$' <<<"$cfg"; } ||
        start_failed "slurmctld does not run with PreemptType=preempt/qos PreemptMode=REQUEUE: $(grep -E '^Preempt' <<<"$cfg" | tr -s ' ' | tr '\n' ';')" slurmctld
    { grep -Eq '^PriorityType += priority/multifactor$' <<<"$cfg" && grep -Eq '^PriorityFlags += *$' <<<"$cfg"; } ||
        start_failed "slurmctld does not run multifactor priority with empty PriorityFlags (Fair Tree)" slurmctld
    local t_ctld
    t_ctld=$(since "$t")

    # slurmd (runs as root, it launches the jobs)
    t=$(now)
    launch slurmd /usr/sbin/slurmd -D
    wait_until slurmd "node $NODE to be idle" sh -c "sinfo -h -n '$NODE' -o %T | grep -qx idle"
    local t_slurmd
    t_slurmd=$(since "$t")

    write_env
    log "timings: install $t_install, munge $t_munge, MariaDB + clean database $t_db, slurmdbd $t_dbd, slurmctld (cluster + TRES) $t_ctld, slurmd (node idle) $t_slurmd"
    echo "slurm: cluster $CLUSTER up in $(since "$t0"): $(sinfo -h -o '%P %a %D %T %N %G' | tr '\n' ' ')(env: $STATE/env)"
}

do_restart_ctld() {
    [ "$(id -u)" = 0 ] || unavailable "restart-ctld needs root"
    recorded_pid slurmctld >/dev/null || die "slurmctld is not running (recorded in $PIDS/slurmctld): run '$0 start'"
    exec 9>"$STATE/.lock"
    flock -n 9 || die "another scripts/slurm.sh runs on $STATE"
    local t0
    t0=$(now)
    stop_group slurmctld 2>/dev/null
    start_ctld
    echo "slurm: slurmctld restarted in $(since "$t0")"
}

cmd="${1:-}"
[ $# -le 1 ] || {
    log "usage: $0 start|stop|status|restart-ctld"
    exit 2
}
case "$cmd" in
    start) do_start ;;
    stop) do_stop ;;
    status) do_status ;;
    restart-ctld) do_restart_ctld ;;
    *)
        sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
