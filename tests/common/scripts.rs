//! The stand-ins for Slurm's client commands that the tests put first on PATH (through
//! [`SlurmStandIns`](super::SlurmStandIns)), each defined once. They read the state the test
//! writes in `$FAKE_SLURM_STATE` (a file per command) and fail, saying so, on what they do not
//! stand in for.

/// `sinfo`: the nodes as `sinfo.txt` holds them.
pub const SINFO: &str = "#!/bin/sh\ncat \"$FAKE_SLURM_STATE/sinfo.txt\"\n";

/// `squeue`: the jobs of `squeue.txt`; those on node n1 (`--nodelist=n1`) from
/// `nodejobs.txt` when the test wrote one.
pub const SQUEUE: &str = r#"#!/bin/sh
case "$*" in
*--nodelist=n1*) if [ -e "$FAKE_SLURM_STATE/nodejobs.txt" ]; then cat "$FAKE_SLURM_STATE/nodejobs.txt"; else cat "$FAKE_SLURM_STATE/squeue.txt"; fi ;;
*) cat "$FAKE_SLURM_STATE/squeue.txt" ;;
esac
"#;

/// `squeue` that fails once when the test leaves a `squeue.fail` file, as a restarting
/// slurmctld makes it.
pub const SQUEUE_FAILING_ONCE: &str = r#"#!/bin/sh
if [ -e "$FAKE_SLURM_STATE/squeue.fail" ]; then
    rm "$FAKE_SLURM_STATE/squeue.fail"
    echo "squeue: error: Unable to contact slurm controller (connect failure)" >&2
    exit 1
fi
cat "$FAKE_SLURM_STATE/squeue.txt"
"#;

/// `scontrol` that shows the partitions of `partitions.txt` and does nothing else.
pub const SCONTROL_PARTITIONS: &str = r#"#!/bin/sh
if [ "$2 $3 $4" = "--oneliner show partition" ]; then cat "$FAKE_SLURM_STATE/partitions.txt"; exit 0; fi
echo "scontrol stand-in: $*" >&2
exit 1
"#;

/// `scontrol` that writes each call to `scontrol.log`, and does nothing.
pub const SCONTROL_LOGGED: &str = "#!/bin/sh\nprintf '%s\\n' \"$*\" >> \"$FAKE_SLURM_STATE/scontrol.log\"\n";

/// `scontrol` as Slurm would act for `allot drain --wait`: each call written to
/// `scontrol.log`, a drained node shows allot's reason, and a requeued job leaves the node.
pub const SCONTROL_ACTING: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$FAKE_SLURM_STATE/scontrol.log"
case "$*" in
*State=DRAIN*) printf 'CLUSTER: s\nn1|mixed+drain|%s\n' "${6#Reason=}" > "$FAKE_SLURM_STATE/sinfo.txt" ;;
*" requeue "*) grep -v "^$4|" "$FAKE_SLURM_STATE/squeue.txt" > "$FAKE_SLURM_STATE/squeue.new"
    mv "$FAKE_SLURM_STATE/squeue.new" "$FAKE_SLURM_STATE/squeue.txt" ;;
esac
"#;

/// `sshare`: the usage of `sshare.txt`.
pub const SSHARE: &str = "#!/bin/sh\ncat \"$FAKE_SLURM_STATE/sshare.txt\"\n";

/// `sacct`: no job.
pub const SACCT: &str = "#!/bin/sh\nexit 0\n";

/// `sacctmgr`: the dump of `dump.cfg` and the QOS of `qos.txt`, nothing else.
pub const SACCTMGR: &str = r#"#!/bin/sh
if [ "$1" = dump ]; then cat "$FAKE_SLURM_STATE/dump.cfg"; exit 0; fi
if [ "$1 $2 $3 $4" = "-n -P show qos" ]; then cat "$FAKE_SLURM_STATE/qos.txt"; exit 0; fi
echo "sacctmgr stand-in: $*" >&2
exit 1
"#;
