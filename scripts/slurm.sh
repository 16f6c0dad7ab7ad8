#!/usr/bin/env bash
# A real Slurm on 127.0.0.1 for allot's tests: slurmctld + slurmd + slurmdbd with MariaDB
# accounting and munge, from the Debian packages (Debian 12: Slurm 22.05). One node, named
# after `hostname -s`, with 8 CPUs and 8 fake GPUs (driverless character devices), a partition
# `gpu` whose billing is CPU=1.0,GRES/gpu=4.0, multifactor priority with Fair Tree (PriorityFlags
# empty, PriorityWeightFairshare=100000, every other weight 0, PriorityCalcPeriod=1 minute), no
# usage decay by default (PriorityDecayHalfLife=0: RawUsage is exactly billing x seconds),
# AccountingStorageEnforce=associations,limits,qos, AccountingStorageTRES=gres/gpu and QOS
# preemption (PreemptType=preempt/qos, PreemptMode=REQUEUE). Needs root; no systemd is needed.
# With ALLOT_SLURM_PARTITIONS, _PARTITION_OPTIONS, _JOB_SUBMIT and _QOS_HOOK (below) it runs
# allot's floors configuration: floor partitions beside `gpu`, allot's job_submit.lua, and
# allot's QOS script run in the order Slurm needs.
#
#   scripts/slurm.sh start         install the packages if missing (apt-get update only when
#                                  needed; postinst scripts start nothing), write the
#                                  configuration, start munged, MariaDB, slurmdbd, slurmctld and
#                                  slurmd with a CLEAN accounting state (database dropped,
#                                  StateSaveLocation emptied), wait until the cluster is registered
#                                  in the accounting database, `sacctmgr show tres` lists gres/gpu
#                                  and the node is idle, write "$STATE/env", print timings.
#                                  With ALLOT_SLURM_QOS_HOOK and _PARTITIONS, in the order
#                                  Slurm needs: the hook runs once slurmdbd answers (on the
#                                  fresh database it fails at its first gres/gpu limit:
#                                  "slurmdb_format_tres_str: no TRES known by type gres/gpu",
#                                  as slurmctld has not registered the TRES yet); each QOS a
#                                  partition names that is still missing is created without
#                                  limits (else slurmctld exits: "fatal: Partition P has an
#                                  invalid qos"); slurmctld starts and registers gres/gpu; the
#                                  hook runs again (it must succeed now); the script waits until
#                                  slurmctld holds each partition QOS's GrpTRES as slurmdbd
#                                  does, and checks that slurmctld runs the preemption,
#                                  job_submit plugin and partition QOS configured.
#                                  Daemons of this script that still run are stopped first.
#   scripts/slurm.sh stop          stop exactly the daemons this script started (by PID, after
#                                  checking /proc/PID/cmdline), cancelling any jobs first; wait
#                                  until they have exited; remove the job_submit.lua it
#                                  installed. Nothing recorded: a no-op.
#   scripts/slurm.sh status        say which recorded daemons run (and the node's state)
#   scripts/slurm.sh restart-ctld  restart slurmctld only (its state is kept) and wait until it
#                                  answers: its priority thread then recomputes Fair Tree's
#                                  LevelFS/FairShare at once instead of at the next calc period.
#   scripts/slurm.sh stop-dbd      stop slurmdbd only (the others run on without their database)
#   scripts/slurm.sh start-dbd     start slurmdbd again on the same database (after stop-dbd)
#                                  and wait until it answers
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
#                         PriorityType), SchedulerParameters (several lines are merged into one,
#                         an option set twice keeps its last value), AuthInfo, KillWait,
#                         PreemptType (preempt/qos, preempt/partition_prio, preempt/none),
#                         PreemptMode, EnforcePartLimits (ALL, ANY, NO), JobSubmitPlugins (lua:
#                         needs ALLOT_SLURM_JOB_SUBMIT), AccountingStorageEnforce (of
#                         associations, limits, qos, safe, wckeys, nojobs, nosteps),
#                         AccountingStorageTRES (must list gres/gpu); values of letters, digits
#                         and _=,.:/+-; any other key, a key set twice (but
#                         SchedulerParameters), or a value out of its set is refused (exit 2).
#                         For replays of allot's emitted configuration.
#   ALLOT_SLURM_PARTITIONS  [none] a file of partition lines added after the script's own
#                         (allot's floor partitions): `PartitionName=NAME KEY=VALUE...` with the
#                         keys Nodes (ALL or the node's name), PriorityTier (a number),
#                         PreemptMode, QOS, AllowAccounts, AllowQos, TRESBillingWeights (may be in
#                         double quotes); blank lines and # comments skipped; NAME not `gpu` nor
#                         repeated; anything else refused (exit 2).
#   ALLOT_SLURM_PARTITION_OPTIONS  [none] options added to the script's own partition `gpu`:
#                         PriorityTier=N, PreemptMode=MODE, TRESBillingWeights=W (replaces
#                         ALLOT_SLURM_BILLING; may be in double quotes), separated by spaces
#                         (e.g. allot's comment line for the bound partition, without its `#`).
#   ALLOT_SLURM_JOB_SUBMIT  [none] a job_submit.lua installed as /etc/slurm/job_submit.lua
#                         (beside slurm.conf, where JobSubmitPlugins=lua reads it; the line is
#                         added when ALLOT_SLURM_CONF_EXTRA does not set it). Checked with
#                         luac5.1 -p when there is one (exit 2 on a syntax error). The plugin is
#                         in the package slurm-wlm-basic-plugins (installed if missing).
#   ALLOT_SLURM_QOS_HOOK  [none] a shell script (allot's CLUSTER-qos.sh) run with sh as root,
#                         SLURM_CONF set, output in log/qos-hook.out: once slurmdbd answers,
#                         before slurmctld starts (it may fail there), and again once slurmctld
#                         has registered gres/gpu (it must succeed).
#
# "$STATE/env" (KEY='value' lines, sourceable): SLURM_CLUSTER, SLURM_CONF, ALLOT_SLURM_PARTITION,
# ALLOT_SLURM_NODE, ALLOT_SLURM_CPUS, ALLOT_SLURM_GPUS, ALLOT_SLURM_BILLING, ALLOT_SLURM_HALFLIFE,
# ALLOT_SLURM_CALC_PERIOD_MIN, ALLOT_SLURM_VERSION, ALLOT_SLURM_STATE, ALLOT_SLURM_LOGS,
# ALLOT_SLURM_SCRIPT, ALLOT_SLURM_EXTRA_PARTITIONS (the names of ALLOT_SLURM_PARTITIONS' lines,
# space-separated).
#
# Files outside the state folder: /etc/slurm/{slurm.conf,gres.conf,slurmdbd.conf} (the Debian
# default location, so that plain sinfo/sacctmgr/sshare work; an /etc/slurm/slurm.conf not written
# by this script is never overwritten), /etc/slurm/job_submit.lua with ALLOT_SLURM_JOB_SUBMIT
# (its first line marks it as this script's; one not so marked is never overwritten nor
# removed; removed by stop, and by a start without ALLOT_SLURM_JOB_SUBMIT), the MariaDB
# database allot_slurm_acct_db and user allot_slurm (dropped / re-created at each start),
# /run/munge, /run/mysqld. munged and MariaDB are reused, not started (and so not stopped),
# when they already answer.
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
PARTS="${ALLOT_SLURM_PARTITIONS:-}"
PART_OPTIONS="${ALLOT_SLURM_PARTITION_OPTIONS:-}"
JOB_SUBMIT="${ALLOT_SLURM_JOB_SUBMIT:-}"
QOS_HOOK="${ALLOT_SLURM_QOS_HOOK:-}"
ETC=/etc/slurm
LUA_MARKER="-- Written by allot scripts/slurm.sh"
DB=allot_slurm_acct_db
DBUSER=allot_slurm
MARKER="# Written by allot scripts/slurm.sh"
PACKAGES=(slurmctld slurmd slurmdbd slurm-client slurm-wlm-basic-plugins munge mariadb-server)
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
    read -r pid bin 2>/dev/null <"$PIDS/$1" || return 1
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
    remove_job_submit
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
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP TRESBillingWeights="$BILLING"$PART_OPTS
EOF
    if [ "${#PART_LINES[@]}" != 0 ]; then
        echo "# Partitions of ALLOT_SLURM_PARTITIONS" >>"$ETC/slurm.conf"
        printf '%s\n' "${PART_LINES[@]}" >>"$ETC/slurm.conf"
    fi
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

    # job_submit.lua beside slurm.conf, where JobSubmitPlugins=lua reads it.
    if [ -n "$JOB_SUBMIT" ]; then
        {
            echo "$LUA_MARKER (start of $(date -Is)) from ALLOT_SLURM_JOB_SUBMIT; removed at stop."
            cat "$JOB_SUBMIT"
        } >"$ETC/job_submit.lua.tmp"
        chmod 644 "$ETC/job_submit.lua.tmp"
        mv "$ETC/job_submit.lua.tmp" "$ETC/job_submit.lua"
    else
        remove_job_submit
    fi

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

# Refuse an input value: exit 2 (usage), whatever the caller.
refuse() {
    log "$1"
    exit 2
}

# Is VALUE (already of the safe characters) one that KEY of ALLOT_SLURM_CONF_EXTRA may take?
extra_value_ok() {
    local key=$1 value=$2 v
    case "$key" in
        PriorityType) return 1 ;;
        Priority[A-Za-z]* | SchedulerParameters | AuthInfo | KillWait) return 0 ;;
        PreemptType) [[ "$value" =~ ^preempt/(qos|partition_prio|none)$ ]] ;;
        PreemptMode) [[ "$value" =~ ^[A-Za-z]+(,[A-Za-z]+)*$ ]] ;;
        EnforcePartLimits) [[ "$value" =~ ^(ALL|ANY|NO)$ ]] ;;
        JobSubmitPlugins) [ "$value" = lua ] ;;
        AccountingStorageEnforce)
            for v in ${value//,/ }; do
                case "$v" in associations | limits | qos | safe | wckeys | nojobs | nosteps) ;; *) return 1 ;; esac
            done
            ;;
        AccountingStorageTRES) [[ ",$value," == *,gres/gpu,* ]] ;;
        *) return 1 ;;
    esac
}

# The settings of ALLOT_SLURM_CONF_EXTRA, checked: one Key=Value per line, on stdout. Its
# SchedulerParameters lines come out as one (an option set twice keeps its last value, in the
# place of its first); with ALLOT_SLURM_JOB_SUBMIT and no JobSubmitPlugins, JobSubmitPlugins=lua.
extra_settings() {
    local line key value seen=" " sched=() option i found
    if [ -n "$EXTRA" ]; then
        [ -f "$EXTRA" ] || refuse "ALLOT_SLURM_CONF_EXTRA: $EXTRA is not a file"
        while IFS= read -r line || [ -n "$line" ]; do
            case "$line" in '' | '#'*) continue ;; esac
            key=${line%%=*}
            value=${line#*=}
            if ! [[ "$key" =~ ^[A-Za-z]+$ && "$value" =~ ^[A-Za-z0-9_=,.:/+-]+$ ]] ||
                ! extra_value_ok "$key" "$value"; then
                refuse "ALLOT_SLURM_CONF_EXTRA: refused line: $line (only Priority* but PriorityType, SchedulerParameters, AuthInfo, KillWait, PreemptType, PreemptMode, EnforcePartLimits, JobSubmitPlugins=lua, AccountingStorageEnforce, AccountingStorageTRES with gres/gpu; values of letters, digits and _=,.:/+-)"
            fi
            if [ "$key" = SchedulerParameters ]; then
                for option in ${value//,/ }; do
                    found=0
                    for i in "${!sched[@]}"; do
                        if [ "${sched[$i]%%=*}" = "${option%%=*}" ]; then
                            sched[i]=$option
                            found=1
                        fi
                    done
                    [ "$found" = 1 ] || sched+=("$option")
                done
                continue
            fi
            case "$seen" in *" $key "*) refuse "ALLOT_SLURM_CONF_EXTRA: $key is set twice" ;; esac
            seen="$seen$key "
            printf '%s=%s\n' "$key" "$value"
        done <"$EXTRA"
    fi
    if [ "${#sched[@]}" != 0 ]; then
        local IFS=,
        printf 'SchedulerParameters=%s\n' "${sched[*]}"
    fi
    case "$seen" in
        *" JobSubmitPlugins "*)
            [ -n "$JOB_SUBMIT" ] || refuse "ALLOT_SLURM_CONF_EXTRA: JobSubmitPlugins=lua needs ALLOT_SLURM_JOB_SUBMIT (the job_submit.lua)"
            ;;
        *) if [ -n "$JOB_SUBMIT" ]; then printf 'JobSubmitPlugins=lua\n'; fi ;;
    esac
}

# Is VALUE one that KEY of a partition line (ALLOT_SLURM_PARTITIONS, _PARTITION_OPTIONS) may take?
partition_value_ok() {
    local key=$1 value=$2
    case "$key" in
        PartitionName | QOS) [[ "$value" =~ ^[A-Za-z0-9_.-]+$ ]] ;;
        Nodes) [ "$value" = ALL ] || [ "$value" = "$NODE" ] ;;
        PriorityTier) [[ "$value" =~ ^[0-9]{1,5}$ ]] ;;
        PreemptMode) [[ "$value" =~ ^[A-Za-z]+(,[A-Za-z]+)*$ ]] ;;
        AllowAccounts | AllowQos) [[ "$value" =~ ^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$ ]] ;;
        TRESBillingWeights) [[ "$value" =~ ^[A-Za-z0-9/=.,]+$ || "$value" =~ ^\"[A-Za-z0-9/=.,]+\"$ ]] ;;
        *) return 1 ;;
    esac
}

# ALLOT_SLURM_PARTITIONS, checked, into PART_LINES (one line per partition, its words separated
# by one space), PART_NAMES and PART_QOS (each partition's QOS, without repeats).
PART_LINES=()
PART_NAMES=()
PART_QOS=()
read_partitions() {
    PART_LINES=() PART_NAMES=() PART_QOS=()
    [ -n "$PARTS" ] || return 0
    [ -f "$PARTS" ] || refuse "ALLOT_SLURM_PARTITIONS: $PARTS is not a file"
    local line words word key value keys out
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in '' | '#'*) continue ;; esac
        read -ra words <<<"$line"
        out="" keys=" "
        for word in "${words[@]}"; do
            key=${word%%=*}
            value=${word#*=}
            { [ "$key" != "$word" ] && partition_value_ok "$key" "$value"; } ||
                refuse "ALLOT_SLURM_PARTITIONS: refused '$word' in: $line (keys PartitionName, Nodes=ALL or =$NODE, PriorityTier, PreemptMode, QOS, AllowAccounts, AllowQos, TRESBillingWeights; names of letters, digits and _.-)"
            case "$keys" in *" $key "*) refuse "ALLOT_SLURM_PARTITIONS: $key twice in: $line" ;; esac
            keys="$keys$key "
            if [ -z "$out" ]; then
                [ "$key" = PartitionName ] || refuse "ALLOT_SLURM_PARTITIONS: a line starts with PartitionName=: $line"
                case " $PARTITION ${PART_NAMES[*]} " in
                    *" $value "*) refuse "ALLOT_SLURM_PARTITIONS: partition $value is the script's own or defined twice" ;;
                esac
                PART_NAMES+=("$value")
            fi
            if [ "$key" = QOS ]; then
                case " ${PART_QOS[*]} " in *" $value "*) ;; *) PART_QOS+=("$value") ;; esac
            fi
            out="$out${out:+ }$word"
        done
        PART_LINES+=("$out")
    done <"$PARTS"
}

# ALLOT_SLURM_PARTITION_OPTIONS, checked, into PART_OPTS (" KEY=VALUE" each); its
# TRESBillingWeights replaces BILLING.
PART_OPTS=""
read_partition_options() {
    local words word key value keys=" "
    read -ra words <<<"$PART_OPTIONS"
    for word in "${words[@]}"; do
        key=${word%%=*}
        value=${word#*=}
        case "$key" in PriorityTier | PreemptMode | TRESBillingWeights) ;; *) key="" ;; esac
        { [ -n "$key" ] && [ "$key" != "$word" ] && partition_value_ok "$key" "$value"; } ||
            refuse "ALLOT_SLURM_PARTITION_OPTIONS: refused '$word' (PriorityTier=N, PreemptMode=MODE, TRESBillingWeights=W)"
        case "$keys" in *" $key "*) refuse "ALLOT_SLURM_PARTITION_OPTIONS: $key twice" ;; esac
        keys="$keys$key "
        if [ "$key" = TRESBillingWeights ]; then
            BILLING=${value//\"/}
        else
            PART_OPTS="$PART_OPTS $word"
        fi
    done
}

# ALLOT_SLURM_JOB_SUBMIT, checked.
check_job_submit() {
    [ -n "$JOB_SUBMIT" ] || return 0
    [ -f "$JOB_SUBMIT" ] && [ -s "$JOB_SUBMIT" ] || refuse "ALLOT_SLURM_JOB_SUBMIT: $JOB_SUBMIT is not a non-empty file"
    if command -v luac5.1 >/dev/null; then
        local said
        said=$(luac5.1 -p "$JOB_SUBMIT" 2>&1) || refuse "ALLOT_SLURM_JOB_SUBMIT: $JOB_SUBMIT is not valid Lua 5.1: $said"
    fi
}

# Is $ETC/job_submit.lua this script's (or absent)?
job_submit_ours() {
    local first=""
    [ -e "$ETC/job_submit.lua" ] || return 0
    IFS= read -r first <"$ETC/job_submit.lua" || true
    [[ "$first" == "$LUA_MARKER"* ]]
}

remove_job_submit() {
    if [ -e "$ETC/job_submit.lua" ] && job_submit_ours; then rm -f "$ETC/job_submit.lua"; fi
    return 0
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
ALLOT_SLURM_EXTRA_PARTITIONS='${PART_NAMES[*]}'
EOF
    mv "$STATE/env.tmp" "$STATE/env"
}

# run_qos_hook WHEN: run ALLOT_SLURM_QOS_HOOK, its output appended to log/qos-hook.out.
run_qos_hook() {
    echo "=== $(date -Is): $1" >>"$LOGS/qos-hook.out"
    local rc=0
    SLURM_CONF="$ETC/slurm.conf" sh "$QOS_HOOK" </dev/null >>"$LOGS/qos-hook.out" 2>&1 || rc=$?
    echo "=== exit status $rc" >>"$LOGS/qos-hook.out"
    [ "$rc" = 0 ] && log "QOS hook ran ($1)"
    return "$rc"
}

# The QOS the partitions name that slurmdbd does not hold, created bare in one call:
# slurmctld refuses to start with a partition whose QOS is unknown ("Partition ... has an
# invalid qos").
make_partition_qos() {
    local q have missing=()
    have=$(sacctmgr -n -P show qos format=name 2>/dev/null || true)
    for q in "${PART_QOS[@]}"; do
        grep -qxF -- "$q" <<<"$have" || missing+=("$q")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    local list
    list=$(IFS=,; echo "${missing[*]}")
    log "QOS of partitions that do not exist, created without limits (the QOS hook's run after slurmctld sets them): $list"
    sacctmgr -i add qos "$list" >>"$LOGS/qos-hook.out" 2>&1 || start_failed "cannot create QOS $list" qos-hook
}

# Does slurmctld hold every partition QOS's GrpTRES as slurmdbd does (each TRES limit
# slurmdbd has)? Both read once: `sacctmgr show qos` and `scontrol show assoc_mgr`'s QOS
# records (a `QOS=NAME(ID)` line, then its `GrpTRES=` line).
partition_qos_synced() {
    local db ctld q limit
    db=$(sacctmgr -n -P show qos format=name,grptres) || return 1
    ctld=$(scontrol show assoc_mgr flags=qos) || return 1
    ctld=$(awk '/^QOS=/ { sub(/^QOS=/, ""); sub(/\([0-9]+\)$/, ""); name = $0 }
                /^ *GrpTRES=/ && name != "" { sub(/^ *GrpTRES=/, ""); sub(/ .*/, ""); print name "|" $0; name = "" }' <<<"$ctld")
    local -A db_limits=() ctld_limits=()
    while IFS='|' read -r q limit; do db_limits[$q]=$limit; done <<<"$db"
    while IFS='|' read -r q limit; do ctld_limits[$q]=$limit; done <<<"$ctld"
    for q in "${PART_QOS[@]}"; do
        [ -n "${ctld_limits[$q]:-}" ] || return 1
        for limit in ${db_limits[$q]//,/ }; do
            [[ ",${ctld_limits[$q]}" == *",$limit("* ]] || return 1
        done
    done
}

# config_value TEXT KEY: KEY's value in TEXT, `scontrol show config`'s output.
config_value() { sed -n "s/^$2 *= *//p" <<<"$1"; }

# slurmctld runs what slurm.conf says: preemption, Fair Tree, job_submit.lua, each partition's
# QOS.
check_ctld_config() {
    local cfg want_type want_mode got p q line
    cfg=$(scontrol show config)
    want_type=$(extra_settings | sed -n 's/^PreemptType=//p')
    want_mode=$(extra_settings | sed -n 's/^PreemptMode=//p')
    want_type=${want_type:-preempt/qos} want_mode=${want_mode:-REQUEUE}
    got="$(config_value "$cfg" PreemptType) $(config_value "$cfg" PreemptMode)"
    [ "${got^^}" = "${want_type^^} ${want_mode^^}" ] ||
        start_failed "slurmctld does not run with PreemptType=$want_type PreemptMode=$want_mode: $(grep -E '^Preempt' <<<"$cfg" | tr -s ' ' | tr '\n' ';')" slurmctld
    { [ "$(config_value "$cfg" PriorityType)" = priority/multifactor ] && [ -z "$(config_value "$cfg" PriorityFlags)" ]; } ||
        start_failed "slurmctld does not run multifactor priority with empty PriorityFlags (Fair Tree)" slurmctld
    if [ -n "$JOB_SUBMIT" ] && [ "$(config_value "$cfg" JobSubmitPlugins)" != lua ]; then
        start_failed "slurmctld does not run JobSubmitPlugins=lua" slurmctld
    fi
    for line in "${PART_LINES[@]}"; do
        p=${line%% *}
        p=${p#PartitionName=}
        q=$(sed -n 's/.* QOS=\([^ ]*\).*/\1/p' <<<" $line")
        got=$(scontrol show partition "$p" -o 2>/dev/null) || start_failed "slurmctld has no partition $p" slurmctld
        [ -z "$q" ] || [[ "$got" == *" QoS=$q "* ]] ||
            start_failed "slurmctld's partition $p has not QOS $q: $got" slurmctld
    done
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
    read_partition_options # its TRESBillingWeights replaces BILLING
    [[ "$BILLING" =~ ^[A-Za-z0-9/=.,]+$ ]] || die "ALLOT_SLURM_BILLING='$BILLING' is not a TRESBillingWeights list" 2
    read_partitions
    check_job_submit
    if [ -n "$QOS_HOOK" ]; then
        [ -f "$QOS_HOOK" ] || refuse "ALLOT_SLURM_QOS_HOOK: $QOS_HOOK is not a file"
    fi
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
    job_submit_ours || die "$ETC/job_submit.lua was not written by this script: move it away first"
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

    # The QOS hook, first run: the partitions' QOS must exist before slurmctld reads them.
    t=$(now)
    if [ -n "$QOS_HOOK" ]; then
        run_qos_hook "before slurmctld" ||
            log "the QOS hook failed before slurmctld started (expected on a fresh database: a limit on gres/gpu cannot be set before slurmctld registers the TRES): $(grep -v '^===' "$LOGS/qos-hook.out" | tail -n 1)"
    fi
    make_partition_qos
    local t_hook1
    t_hook1=$(since "$t")

    # slurmctld: registers the cluster and creates the TRES gres/gpu in the database.
    t=$(now)
    start_ctld
    wait_until slurmctld "cluster $CLUSTER registered with its controller address" sh -c \
        "sacctmgr -n -P show cluster format=cluster,controlhost | grep -qx '$CLUSTER|127.0.0.1'"
    wait_until slurmctld "sacctmgr show tres to list gres/gpu" sh -c \
        'sacctmgr -n -P show tres format=type,name | grep -qx "gres|gpu"'
    local t_ctld
    t_ctld=$(since "$t")

    # The QOS hook again, now that gres/gpu is known; slurmctld gets the QOS from slurmdbd.
    t=$(now)
    if [ -n "$QOS_HOOK" ]; then
        run_qos_hook "after slurmctld registered gres/gpu" || start_failed "the QOS hook $QOS_HOOK failed" qos-hook
    fi
    [ "${#PART_QOS[@]}" -eq 0 ] ||
        wait_until slurmctld "slurmctld to hold the partitions' QOS limits as slurmdbd does" partition_qos_synced
    local t_hook2
    t_hook2=$(since "$t")

    check_ctld_config

    # slurmd (runs as root, it launches the jobs)
    t=$(now)
    launch slurmd /usr/sbin/slurmd -D
    wait_until slurmd "node $NODE to be idle" sh -c "sinfo -h -n '$NODE' -o %T | grep -qx idle"
    local t_slurmd
    t_slurmd=$(since "$t")

    write_env
    local hooks=""
    [ -z "$QOS_HOOK$PARTS" ] || hooks=", partition QOS before slurmctld $t_hook1, QOS hook after it $t_hook2"
    log "timings: install $t_install, munge $t_munge, MariaDB + clean database $t_db, slurmdbd $t_dbd, slurmctld (cluster + TRES) $t_ctld$hooks, slurmd (node idle) $t_slurmd"
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

# For the fault tests: slurmdbd stopped and started again, the rest left running.
do_stop_dbd() {
    [ "$(id -u)" = 0 ] || unavailable "stop-dbd needs root"
    recorded_pid slurmdbd >/dev/null || die "slurmdbd is not running (recorded in $PIDS/slurmdbd)"
    exec 9>"$STATE/.lock"
    flock -n 9 || die "another scripts/slurm.sh runs on $STATE"
    stop_group slurmdbd
}

do_start_dbd() {
    [ "$(id -u)" = 0 ] || unavailable "start-dbd needs root"
    recorded_pid slurmctld >/dev/null || die "slurmctld is not running (recorded in $PIDS/slurmctld): run '$0 start'"
    ! recorded_pid slurmdbd >/dev/null || die "slurmdbd already runs"
    exec 9>"$STATE/.lock"
    flock -n 9 || die "another scripts/slurm.sh runs on $STATE"
    local t0
    t0=$(now)
    launch slurmdbd /usr/sbin/slurmdbd -D
    wait_until slurmdbd "slurmdbd to answer" sacctmgr -n show cluster
    echo "slurm: slurmdbd started in $(since "$t0")"
}

cmd="${1:-}"
[ $# -le 1 ] || {
    log "usage: $0 start|stop|status|restart-ctld|stop-dbd|start-dbd"
    exit 2
}
case "$cmd" in
    start) do_start ;;
    stop) do_stop ;;
    status) do_status ;;
    restart-ctld) do_restart_ctld ;;
    stop-dbd) do_stop_dbd ;;
    start-dbd) do_start_dbd ;;
    *)
        sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
