//! Slurm's client commands, run as programs (found on `PATH`) with their arguments as a
//! list, never through a shell, their output read within a bound: the live association tree
//! (`sacctmgr dump`) and QOS (`sacctmgr show qos`), the queue (`squeue`), the partitions
//! (`scontrol show partition`), the usage (`sshare`), the jobs' accounting (`sacct`); and a
//! plan applied (`sacctmgr load` of a flat file, and commands). Each runs within a bound in
//! time ([`timeout`]): past it, the command is killed and the error names it,
//! the bound, and what to check.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use allot_targets::slurm::fair_tree::{FairTree, SiblingOrder};
use allot_targets::slurm::qos::SHOW_FORMAT;
use allot_targets::slurm::tree::MAX_DUMP_BYTES;
use allot_targets::slurm::tree::Tree;
use allot_targets::slurm::usage::Usage;

use wait_timeout::ChildExt;

use crate::exit::Error;
use crate::systems::timeout;

const SACCTMGR: &str = "sacctmgr";

/// The Slurm cluster whose live tree to read: the one named, or the budgets' only one.
pub fn live_cluster(clusters: &[String], named: Option<&str>) -> Result<String, Error> {
    match (named, clusters) {
        (Some(name), _) if clusters.iter().any(|c| c == name) => Ok(name.to_string()),
        (Some(name), _) => Err(Error::failed(format!(
            "the budgets bind no Slurm cluster `{name}` (they bind: {})",
            if clusters.is_empty() { "none".to_string() } else { clusters.join(", ") }
        ))),
        (None, [only]) => Ok(only.clone()),
        (None, []) => Err(Error::failed("the budgets bind no Slurm cluster: nothing to plan")),
        (None, _) => Err(Error::failed(format!(
            "the budgets bind several Slurm clusters ({}): name one with --cluster",
            clusters.join(", ")
        ))),
    }
}

/// The live association tree of `cluster`, as `sacctmgr dump` writes it (at most
/// [`MAX_DUMP_BYTES`]).
pub fn dump(cluster: &str) -> Result<String, Error> {
    let what = format!("sacctmgr dump {cluster}");
    // The dump echoes every line to standard error: it is not kept.
    let read = Reading::new(SACCTMGR, &what, "read the live associations", false);
    let text = read.output(&["dump", cluster, "file=/dev/stdout"])?;
    if !text.lines().any(|l| l.starts_with("Cluster - ")) {
        return Err(Error::failed(format!(
            "{what} failed: is `{cluster}` a cluster of this Slurm database, and may this user read it?"
        )));
    }
    Ok(text)
}

/// How the QOS that are allot's apply locks are named: this, or this, `-` and a number
/// (taken and released by [`apply_lock`](crate::systems::apply_lock)).
pub const APPLY_LOCK: &str = "allot-apply-lock";

/// Whether QOS `name` is one of allot's apply locks.
pub fn is_apply_lock(name: &str) -> bool {
    name.strip_prefix(APPLY_LOCK).is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// The live QOS, as `sacctmgr -n -P show qos format=`[`SHOW_FORMAT`] lists them, but for
/// allot's apply locks ([`APPLY_LOCK`]), which are no configuration.
pub fn show_qos() -> Result<String, Error> {
    let format = format!("format={SHOW_FORMAT}");
    let read = Reading::new(SACCTMGR, "sacctmgr show qos", "read the live QOS", true);
    let text = read.output(&["-n", "-P", "show", "qos", &format])?;
    let lock = |line: &str| is_apply_lock(line.split('|').next().unwrap_or_default());
    Ok(text.lines().filter(|line| !lock(line)).flat_map(|line| [line, "\n"]).collect())
}

/// Every QOS's name and description.
pub fn qos_descriptions() -> Result<Vec<(String, String)>, Error> {
    let read = Reading::new(SACCTMGR, "sacctmgr show qos", "read the apply lock", true);
    let text = read.output(&["-n", "-P", "show", "qos", "format=name,description"])?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('|'))
        .map(|(name, description)| (name.to_string(), description.to_string()))
        .collect())
}

/// The jobs of `cluster` running and pending now, as `squeue -O `[`FORMAT`](allot_live::squeue::FORMAT)
/// lists them (times in epoch seconds).
fn squeue(cluster: &str) -> Result<String, Error> {
    let clusters = format!("--clusters={cluster}");
    let read = Reading::new("squeue", "squeue", "read the live queue", true);
    read.output(&[
        "--noheader",
        "--all",
        "--array",
        &clusters,
        "--states=PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING,REQUEUED",
        "-O",
        allot_live::squeue::FORMAT,
    ])
}

/// The jobs of `cluster` running and pending now, read from [`squeue`].
pub fn queue(cluster: &str) -> Result<Vec<allot_live::squeue::QueuedJob>, Error> {
    allot_live::squeue::parse(&squeue(cluster)?, cluster).map_err(|e| Error::failed(format!("squeue: {e}")))
}

/// The names of the partitions of `cluster`, as `scontrol --oneliner show partition` lists
/// them.
pub fn partitions(cluster: &str) -> Result<Vec<String>, Error> {
    let clusters = format!("--clusters={cluster}");
    let read = Reading::new("scontrol", "scontrol show partition", "read the live partitions", true);
    let text = read.output(&[&clusters, "--oneliner", "show", "partition"])?;
    Ok(text.split_whitespace().filter_map(|w| w.strip_prefix("PartitionName=")).map(str::to_string).collect())
}

/// A node as `sinfo` lists it.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    /// Its state with every flag, lower case (`mixed+drain`, `idle`, `down+not_responding`).
    pub state: String,
    /// Why it is unavailable, as whoever made it so wrote it (empty: no reason).
    pub reason: String,
}

/// The nodes `names` of `cluster` that Slurm has (each once, whatever its partitions); all
/// its nodes when `names` is empty.
pub fn nodes(cluster: &str, names: &[&str]) -> Result<Vec<Node>, Error> {
    let clusters = format!("--clusters={cluster}");
    let list = format!("--nodes={}", names.join(","));
    let read = Reading::new("sinfo", "sinfo", "read the nodes", true);
    let mut args = vec!["--noheader", "--Node", &clusters, "-O", "NodeList:|,StateComplete:|,Reason:"];
    if !names.is_empty() {
        args.push(&list);
    }
    let text = read.output(&args)?;
    let mut nodes: Vec<Node> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("CLUSTER: ")) {
        let mut fields = line.splitn(3, '|');
        let (Some(name), Some(state), Some(reason)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(Error::failed(format!(
                "sinfo: a line not of 3 fields: {:?}",
                allot_compiler::escape::line(line)
            )));
        };
        let name = name.trim();
        if !nodes.iter().any(|n| n.name == name) {
            let reason = reason.trim();
            let reason = if reason == "none" { "" } else { reason };
            nodes.push(Node {
                name: name.into(),
                state: state.trim().to_ascii_lowercase(),
                reason: reason.into(),
            });
        }
    }
    Ok(nodes)
}

/// The jobs running on the nodes `names` of `cluster`, as `squeue --nodelist -O
/// `[`FORMAT`](allot_live::drain::FORMAT) lists them.
pub fn node_jobs(cluster: &str, names: &[&str]) -> Result<Vec<allot_live::drain::NodeJob>, Error> {
    let clusters = format!("--clusters={cluster}");
    let list = format!("--nodelist={}", names.join(","));
    let read = Reading::new("squeue", "squeue", "read the jobs on the nodes", true);
    let text = read.output(&[
        "--noheader",
        "--all",
        "--array",
        &clusters,
        &list,
        "--states=RUNNING,SUSPENDED,COMPLETING,CONFIGURING,STAGE_OUT,SIGNALING,RESIZING",
        "-O",
        allot_live::drain::FORMAT,
    ])?;
    allot_live::drain::parse(&text).map_err(|e| Error::failed(format!("squeue: {e}")))
}

/// The raw usage of every association of `cluster`, as a usage file
/// (`account,user,raw_usage`) from `sshare -a -P -n -o account,user,rawusage`.
pub fn sshare_usage(cluster: &str) -> Result<String, Error> {
    let clusters = format!("--clusters={cluster}");
    let read = Reading::new("sshare", "sshare", "read the live usage", true);
    let text = read.output(&["-a", "-P", "-n", &clusters, "-o", "account,user,rawusage"])?;
    // Slurm's names hold no comma: `|` becomes the usage file's separator.
    Ok(text
        .lines()
        .filter(|l| !l.starts_with("CLUSTER: "))
        .map(|l| format!("{}\n", l.replace('|', ",")))
        .collect())
}

/// The live Fair Tree of `cluster`: its associations (`live_tree`) with their raw usage
/// ([`sshare_usage`]), ranked by allot's Fair Tree as Slurm 22.05 ranks them.
pub fn fair_tree(cluster: &str, live_tree: &Tree) -> Result<FairTree, Error> {
    let usage = Usage::parse(&sshare_usage(cluster)?).map_err(|e| Error::failed(format!("sshare: {e}")))?;
    FairTree::compute_in(&usage.associations(live_tree), SiblingOrder::Slurm22)
        .map_err(|e| Error::failed(format!("the live Fair Tree of {cluster}: {e}")))
}

/// What `sacct` recorded of job `id` on `cluster`, as one line
/// `JobID|State|Account|QOS|Submit|Start|End|AllocTRES` (its last run), if anything.
pub fn sacct_job(cluster: &str, id: &str) -> Result<Option<String>, Error> {
    let clusters = format!("--clusters={cluster}");
    let read = Reading::new("sacct", "sacct", "read the job's accounting", true);
    let text = read.output(&[
        "-j",
        id,
        "-X",
        "-P",
        "-n",
        &clusters,
        "-o",
        "JobID,State,Account,QOS,Submit,Start,End,AllocTRES",
    ])?;
    Ok(text.lines().rfind(|l| l.split('|').next() == Some(id)).map(str::to_string))
}

/// The most bytes of `sacct` output a live trace takes (about ten million jobs).
pub const MAX_SACCT_BYTES: u64 = 2 << 30;

/// The jobs of the Slurm `clusters` over the last `seconds`, as `sacct --parsable2` lists
/// them with the columns the verifier reads (every run of a requeued job on its own row),
/// written to `out`.
pub fn sacct_since(clusters: &[String], seconds: u64, out: &mut (impl Write + Send)) -> Result<(), Error> {
    let read = Reading::new("sacct", "sacct", "read the live trace", true);
    let since = format!("--starttime=now-{seconds}seconds");
    let clusters = format!("--clusters={}", clusters.join(","));
    read.output_to(
        &[
            "--allusers",
            "--allocations",
            "--parsable2",
            "--duplicates",
            &since,
            "--endtime=now",
            &clusters,
            "--format=JobID,User,Account,Cluster,Partition,QOS,Submit,Eligible,Start,End,Timelimit,AllocTRES,ReqTRES,State",
        ],
        out,
        MAX_SACCT_BYTES,
    )
}

/// One read of a Slurm command's output.
struct Reading<'a> {
    program: &'a str,
    /// What the command is called in errors.
    what: &'a str,
    /// What allot runs it for, in the error when it is missing.
    to: &'a str,
    /// Whether its standard error says what went wrong (and is kept, up to [`MAX_SAID`]).
    errors: bool,
    /// How long it may take.
    bound: Duration,
}

impl<'a> Reading<'a> {
    /// A read of `program`'s output, bounded by `--timeout`.
    fn new(program: &'a str, what: &'a str, to: &'a str, errors: bool) -> Reading<'a> {
        Reading { program, what, to, errors, bound: timeout::read() }
    }

    /// What the command writes on standard output (at most [`MAX_DUMP_BYTES`]), with times
    /// as epoch seconds.
    fn output(&self, arguments: &[&str]) -> Result<String, Error> {
        let mut bytes = Vec::new();
        self.output_to(arguments, &mut bytes, MAX_DUMP_BYTES as u64)?;
        String::from_utf8(bytes).map_err(|_| Error::failed(format!("{}: its output is not UTF-8", self.what)))
    }

    /// Copies what the command writes on standard output into `out` (at most `limit`
    /// bytes), with times as epoch seconds.
    fn output_to(&self, arguments: &[&str], out: &mut (impl Write + Send), limit: u64) -> Result<(), Error> {
        let what = self.what;
        let mut child = Command::new(self.program)
            .args(arguments)
            .env("SLURM_TIME_FORMAT", "%s")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if self.errors { Stdio::piped() } else { Stdio::null() })
            .spawn()
            .map_err(|e| missing(self.program, e, self.to))?;
        let stderr = child.stderr.take();
        let stdout = child.stdout.take().expect("piped");
        // Its output is read while it runs, and it is waited for within the bound.
        let (status, copied, said) = std::thread::scope(|scope| {
            let said = stderr.map(|stderr| scope.spawn(move || said(stderr)));
            let copied = scope.spawn(move || {
                // Past the limit its output is no longer read: the pipe closes and it stops.
                std::io::copy(&mut stdout.take(limit + 1), out)
            });
            let status = wait_within(&mut child, self.bound);
            let copied = copied.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            let said = said.and_then(|thread| thread.join().ok()).unwrap_or_default();
            (status, copied, said)
        });
        let status = status.map_err(|e| e.named(what))?;
        let copied = copied.map_err(|e| Error::failed(format!("{what}: {e}")))?;
        if copied > limit {
            return Err(Error::failed(format!("{what}: more than {limit} bytes, more than allot reads")));
        }
        if !status.success() {
            let said = if said.is_empty() { String::new() } else { format!(": {said}") };
            return Err(Error::failed(format!(
                "{what} failed ({status}){said}\n  is Slurm's controller or database reachable, and may this user read it?"
            )));
        }
        Ok(())
    }
}

/// What a command says on standard error (at most [`MAX_SAID`] bytes, the rest read and
/// dropped, control characters made visible).
fn said(mut stderr: impl Read) -> String {
    let mut said = Vec::new();
    let _ = stderr.by_ref().take(MAX_SAID).read_to_end(&mut said);
    // The rest is read and dropped: a full pipe would stop the command.
    let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    allot_compiler::escape::controls(String::from_utf8_lossy(&said).trim(), true).into_owned()
}

/// Runs `sacctmgr -i load` of `flat_file` (written to a temporary file of its own, removed
/// after).
pub fn load(flat_file: &str) -> Result<(), Error> {
    let mut file = tempfile::Builder::new().prefix("allot-load-").suffix(".cfg").tempfile()?;
    file.write_all(flat_file.as_bytes())?;
    file.flush()?;
    run(&["load".to_string(), format!("file={}", file.path().display())])
}

/// Runs `sacctmgr -i ARGUMENTS`; on failure, what it said on standard error (at most
/// [`MAX_SAID`] bytes, control characters made visible). Its standard output, which echoes
/// every association a load touches, is not kept.
pub fn run(arguments: &[String]) -> Result<(), Error> {
    write(SACCTMGR, "-i", arguments, "apply the plan")
}

/// Runs `scontrol --quiet --clusters=CLUSTER ARGUMENTS` (a change: nodes drained, a job
/// requeued), as [`run`] runs `sacctmgr`.
pub fn scontrol(cluster: &str, arguments: &[String]) -> Result<(), Error> {
    let arguments: Vec<String> =
        std::iter::once(format!("--clusters={cluster}")).chain(arguments.iter().cloned()).collect();
    write("scontrol", "--quiet", &arguments, "change the nodes and jobs")
}

/// Runs `PROGRAM FIRST ARGUMENTS` within the bound of a write: what it said on standard
/// error when it fails.
fn write(program: &str, first: &str, arguments: &[String], to: &str) -> Result<(), Error> {
    let mut child = Command::new(program)
        .arg(first)
        .args(arguments)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| missing(program, e, to))?;
    let stderr = child.stderr.take().expect("piped");
    let (status, said) = std::thread::scope(|scope| {
        let said = scope.spawn(move || said(stderr));
        let status = wait_within(&mut child, timeout::write());
        (status, said.join().unwrap_or_default())
    });
    let what = format!("{program} {}", arguments.first().map_or("", String::as_str));
    let status = status.map_err(|e| e.named(&what))?;
    if status.success() {
        return Ok(());
    }
    if said.is_empty() {
        return Err(Error::failed(format!("{program} said nothing on standard error ({status})")));
    }
    Err(Error::failed(format!("{program} said: {said} ({status})")))
}

/// Why a command did not end well: it ran past its bound (and was killed), or waiting for it
/// failed.
enum Waited {
    TimedOut(Duration),
    Failed(std::io::Error),
}

impl Waited {
    /// The error, naming the command as `what`.
    fn named(self, what: &str) -> Error {
        match self {
            Waited::TimedOut(bound) => Error::failed(format!(
                "{what} did not finish within {}: allot stopped it\n  is Slurm's controller (slurmctld) or database (slurmdbd) up and answering (`scontrol ping`, `sacctmgr show stats`)? A slow one may be given longer with --timeout",
                timeout::shown(bound)
            )),
            Waited::Failed(e) => Error::failed(format!("{what}: waiting for it failed: {e}")),
        }
    }
}

/// Waits for `child` for at most `bound`; past it, kills it (it is reaped, so that no process
/// is left behind).
fn wait_within(child: &mut Child, bound: Duration) -> Result<ExitStatus, Waited> {
    match child.wait_timeout(bound) {
        Ok(Some(status)) => Ok(status),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(Waited::TimedOut(bound))
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(Waited::Failed(e))
        }
    }
}

/// The most of a failed command's standard error that is kept.
const MAX_SAID: u64 = 64 << 10;

fn missing(program: &str, e: std::io::Error, to: &str) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::failed(format!(
            "`{program}` is not on PATH: allot runs it to {to} (install Slurm's client tools, or run allot where they are)"
        ))
    } else {
        Error::failed(format!("cannot run `{program}` to {to}: {e}"))
    }
}
