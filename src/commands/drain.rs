//! `allot drain NODES [PATH] --live slurm --reason TEXT`: empties broken nodes at the
//! contracts' boundaries. The nodes are drained in Slurm (no job starts there any more, the
//! reason `allot drain: TEXT`), then each job on them is planned ([`allot_live::drain`]):
//! a resumable job past its minimum runtime is requeued now, one still protected is
//! requeued when its protection ends, a job that is not resumable runs to its end; and the
//! nodes are empty when the last has left. Without `--wait` the plan is said with its times
//! (run it again to requeue what has come due); with `--wait` allot stays, reads the nodes'
//! jobs again at each requeue due (and every `--poll`), requeues each as its protection
//! ends, says what changed, and ends when the nodes are empty. It keeps nothing but what
//! Slurm holds: stopped and run again, it picks up where it was. `--dry-run` says it all and
//! touches nothing. A node that someone else drained, or that is down, is reported and left
//! alone. `--resume` returns nodes allot drained (and only those) to service.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use allot_compiler::escape::{self, markdown};
use allot_live::drain::{self, Kept, Leaves, Terms};
use allot_targets::slurm::qos;
use allot_targets::slurm::tree::{self};
use allot_verify::render::time;
use serde_json::{Value, json};

use crate::args::{self, Scheduler};
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::{self, print};
use crate::systems::drains::{REASON, drained_by_allot, terms, unavailable};
use crate::systems::slurm::{self, Node};

#[derive(clap::Args)]
pub struct Args {
    /// The nodes, separated by commas (`gpu01,gpu02`).
    nodes: String,
    #[command(flatten)]
    repository: args::Repository,
    /// The live scheduler: Slurm (Kubernetes nodes are not drained yet).
    #[arg(long, value_enum)]
    live: Scheduler,
    /// Why the nodes are drained (Slurm shows it as `allot drain: TEXT`).
    #[arg(long, required_unless_present = "resume")]
    reason: Option<String>,
    /// Say what would happen, and touch nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stay until the nodes are empty, requeuing each job as its protection ends; progress
    /// goes to standard error.
    #[arg(long, conflicts_with = "dry_run")]
    wait: bool,
    /// With --wait, how often the nodes' jobs are read again when no requeue is due sooner
    /// (`30s`, `2m`).
    #[arg(long, default_value = "15s", value_parser = poll_interval, requires = "wait")]
    poll: Duration,
    /// Return the nodes to service, when allot drained them.
    #[arg(long, conflicts_with_all = ["reason", "dry_run", "wait"])]
    resume: bool,
    /// The Slurm cluster, when the budgets bind several.
    #[arg(long)]
    cluster: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

/// The longest reason taken, in characters.
const MAX_REASON: usize = 200;

/// The most nodes one drain names.
const MAX_NODES: usize = 1_000;

pub fn run(args: Args, format: Format) -> Outcome {
    if args.live == Scheduler::Kueue {
        return Err(Error::failed(
            "allot drain drives Slurm only: a Kubernetes node is drained with `kubectl drain` (allot does not plan it yet)",
        ));
    }
    let nodes = node_names(&args.nodes)?;
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
    let cluster = slurm::live_cluster(&tree::slurm_clusters(&model), args.cluster.as_deref())?;
    let mut found = slurm::nodes(&cluster, &nodes)?;
    // Only the nodes named, whatever sinfo adds.
    found.retain(|n| nodes.contains(&n.name.as_str()));
    if let Some(missing) = nodes.iter().find(|n| !found.iter().any(|f| &f.name == *n)) {
        return Err(Error::failed(format!(
            "Slurm cluster {cluster} has no node {missing}: nothing was done"
        )));
    }
    if args.resume {
        return resume(&cluster, &found);
    }
    let reason = reason(args.reason.as_deref().unwrap_or_default())?;
    // Nodes someone else drained, or that are down, are left alone.
    let (ours, others): (Vec<&Node>, Vec<&Node>) =
        found.iter().partition(|n| !unavailable(n) || drained_by_allot(n));
    let names: Vec<&str> = ours.iter().map(|n| n.name.as_str()).collect();
    let fresh: Vec<&str> = ours.iter().filter(|n| !drained_by_allot(n)).map(|n| n.name.as_str()).collect();
    if !args.dry_run && !fresh.is_empty() {
        slurm::scontrol(
            &cluster,
            &[
                "update".into(),
                format!("NodeName={}", fresh.join(",")),
                "State=DRAIN".into(),
                format!("Reason={reason}"),
            ],
        )?;
    }
    let live =
        qos::parse(&slurm::show_qos()?).map_err(|e| Error::failed(format!("sacctmgr show qos: {e}")))?;
    let terms = terms(&model, &live);
    let jobs = if names.is_empty() { Vec::new() } else { slurm::node_jobs(&cluster, &names)? };
    let now = crate::budgets::now();
    let plan = drain::plan(&jobs, &terms, now);
    let (requeued, failed) =
        if args.dry_run { Default::default() } else { requeue_due(&cluster, &plan, &HashSet::new()) };
    let report = Report {
        cluster: &cluster,
        drained: &names,
        fresh: &fresh,
        others: &others,
        plan: &plan,
        now,
        dry_run: args.dry_run,
        waits: args.wait,
        failed: &failed,
    };
    let waited = if args.wait && !names.is_empty() {
        if args.format != output::Format::Json {
            print(&report.text(args.format == output::Format::Markdown))?;
        }
        Some(wait(&cluster, &names, &terms, plan.clone(), requeued, args.poll)?)
    } else {
        None
    };
    match (args.format, &waited) {
        (output::Format::Human, None) => print(&report.text(false))?,
        (output::Format::Markdown, None) => print(&report.text(true))?,
        (output::Format::Json, None) => print(&output::json(&report.json())?)?,
        (output::Format::Json, Some(waited)) => {
            let mut value = report.json();
            value["waited"] = waited.json();
            print(&output::json(&value)?)?
        }
        (_, Some(waited)) => print(&waited.text(args.format == output::Format::Markdown))?,
    }
    let all_requeued = failed.is_empty() && waited.as_ref().is_none_or(|w| w.failed.is_empty());
    if all_requeued { Ok(Exit::Success) } else { Ok(Exit::Problems) }
}

/// `--poll`: a duration of 1 second to 1 hour.
fn poll_interval(text: &str) -> Result<Duration, String> {
    allot_compiler::units::parse_duration(text)
        .filter(|s| (1..=3_600).contains(s))
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is not a duration of 1s to 1h (`30s`, `2m`)"))
}

/// Requeues the jobs of `plan` due now but those `done` before: those requeued, and the
/// requeues that failed, each said with its job.
fn requeue_due(cluster: &str, plan: &drain::Plan, done: &HashSet<String>) -> (Vec<String>, Vec<String>) {
    let (mut requeued, mut failed) = (Vec::new(), Vec::new());
    for (job, leaves) in &plan.jobs {
        if *leaves != Leaves::RequeueNow || done.contains(&job.id) {
            continue;
        }
        match slurm::scontrol(cluster, &["requeue".into(), job.id.clone()]) {
            Ok(()) => requeued.push(job.id.clone()),
            Err(e) => failed.push(format!("job {}: {e}", job.id)),
        }
    }
    (requeued, failed)
}

/// How many readings of the nodes in a row may fail before `--wait` gives up.
const READ_FAILURES: u32 = 5;

/// What `--wait` saw happen until the nodes were empty.
#[derive(Default)]
struct Waited {
    /// Jobs requeued as their protection ended: (job, when).
    requeued: Vec<(String, i64)>,
    /// Jobs that left the nodes on their own (ended, requeued or moved by someone else).
    left: Vec<(String, i64)>,
    /// Jobs whose way out changed (a new state, QOS or start): (job, what it is now).
    changed: Vec<(String, String)>,
    /// Requeues that failed.
    failed: Vec<String>,
    /// When the nodes were found empty.
    empty_at: i64,
}

/// Stays until no job is left on `nodes`: reads their jobs again when a requeue is due, a
/// second after a requeue (until the job has left), and at least every `poll`; requeues
/// each job as its protection ends (never twice: `requeued` holds those requeued already),
/// and says on standard error what changed. Ends with an error when a node is no longer
/// drained by allot (someone returned it to service): nothing more is requeued then.
fn wait(
    cluster: &str,
    nodes: &[&str],
    terms: &HashMap<String, Terms>,
    mut plan: drain::Plan,
    requeued: Vec<String>,
    poll: Duration,
) -> Result<Waited, Error> {
    let mut waited = Waited::default();
    let mut requeued: HashSet<String> = requeued.into_iter().collect();
    let mut said = String::new();
    let mut failures = 0;
    loop {
        let now = crate::budgets::now();
        let progress = progress(&plan, now, &requeued);
        if progress != said {
            eprintln!("{}  {progress}", time(now));
            said = progress;
        }
        if plan.jobs.is_empty() {
            waited.empty_at = now;
            return Ok(waited);
        }
        let next_requeue = plan
            .jobs
            .iter()
            .filter_map(|(_, leaves)| match leaves {
                Leaves::RequeueAt(at) => Some(*at),
                _ => None,
            })
            .min();
        let leaving = plan.jobs.iter().any(|(job, _)| requeued.contains(&job.id));
        let until_due = match next_requeue {
            _ if leaving => 1,
            Some(at) => (at - now).max(1) as u64,
            None => u64::MAX,
        };
        std::thread::sleep(poll.min(Duration::from_secs(until_due)));

        // A reading that fails (slurmctld restarting, a command past its bound) is said and
        // tried again at the next poll; only READ_FAILURES in a row end the wait.
        let reading =
            slurm::nodes(cluster, nodes).and_then(|found| Ok((found, slurm::node_jobs(cluster, nodes)?)));
        let (found, jobs) = match reading {
            Ok(read) => {
                failures = 0;
                read
            }
            Err(e) => {
                failures += 1;
                if failures >= READ_FAILURES {
                    return Err(Error::failed(format!(
                        "{e}: the nodes could not be read {READ_FAILURES} times in a row: stopped waiting, nothing more was requeued"
                    )));
                }
                eprintln!("{}  {e}: trying again", time(crate::budgets::now()));
                continue;
            }
        };
        if let Some(node) = nodes.iter().find(|n| !found.iter().any(|f| &f.name == *n && drained_by_allot(f)))
        {
            return Err(Error::failed(format!(
                "node {node} is no longer drained by allot (returned to service, or drained again by someone else): stopped waiting, nothing more was requeued"
            )));
        }
        let now = crate::budgets::now();
        let next = drain::plan(&jobs, terms, now);
        for (job, leaves) in &plan.jobs {
            match next.jobs.iter().find(|(j, _)| j.id == job.id) {
                None if requeued.contains(&job.id) => {}
                None => {
                    eprintln!("{}  job {} left the nodes", time(now), escape::line(&job.id));
                    waited.left.push((job.id.clone(), now));
                }
                Some((again, now_leaves))
                    if !requeued.contains(&job.id) && changed(job, leaves, again, now_leaves) =>
                {
                    let what = format!("{}, {}", again.state.to_lowercase(), again.qos);
                    eprintln!(
                        "{}  job {} changed ({}): left to its new course",
                        time(now),
                        escape::line(&job.id),
                        escape::line(&what)
                    );
                    waited.changed.push((job.id.clone(), what));
                }
                Some(_) => {}
            }
        }
        let (done, failed) = requeue_due(cluster, &next, &requeued);
        for id in done {
            eprintln!("{}  job {} requeued: its protection ended", time(now), escape::line(&id));
            waited.requeued.push((id.clone(), now));
            requeued.insert(id);
        }
        for failure in failed {
            eprintln!("{}  error: the requeue failed: {}", time(now), escape::line(&failure));
            if !waited.failed.contains(&failure) {
                waited.failed.push(failure);
            }
        }
        plan = next;
    }
}

/// Whether a job read again leaves otherwise than planned: a new state, QOS, start or
/// requeue flag, or a way out of another kind (a protection ending on time is no change).
fn changed(before: &drain::NodeJob, planned: &Leaves, after: &drain::NodeJob, now: &Leaves) -> bool {
    let due = matches!((planned, now), (Leaves::RequeueAt(_), Leaves::RequeueNow));
    (&before.state, &before.qos, before.start, before.requeue)
        != (&after.state, &after.qos, after.start, after.requeue)
        || (std::mem::discriminant(planned) != std::mem::discriminant(now) && !due)
}

/// One line of `--wait`'s progress: the jobs left (but those `requeued`, on their way
/// out), the next requeue, when the nodes are empty.
fn progress(plan: &drain::Plan, now: i64, requeued: &HashSet<String>) -> String {
    if plan.jobs.is_empty() {
        return "the nodes are empty".to_string();
    }
    let left = match plan.jobs.iter().filter(|(job, _)| !requeued.contains(&job.id)).count() {
        0 => return "the jobs requeued are leaving the nodes".to_string(),
        1 => "1 job left".to_string(),
        n => format!("{n} jobs left"),
    };
    let next = plan.jobs.iter().find_map(|(job, leaves)| match leaves {
        Leaves::RequeueAt(at) => {
            Some(format!("; next, job {} requeued at {}", escape::line(&job.id), time(*at)))
        }
        _ => None,
    });
    let empty = match plan.empty_at {
        Some(at) if at > now => format!("; empty at {}", time(at)),
        Some(_) => String::new(),
        None => "; a job has no known end".to_string(),
    };
    format!("{left}{}{empty}", next.unwrap_or_default())
}

impl Waited {
    fn text(&self, as_markdown: bool) -> String {
        let mut lines = vec![format!("The nodes are empty (at {}).", time(self.empty_at))];
        if !self.requeued.is_empty() {
            let ids: Vec<String> =
                self.requeued.iter().map(|(id, at)| format!("{id} at {}", time(*at))).collect();
            lines.push(format!("Requeued as their protection ended: {}.", ids.join(", ")));
        }
        if !self.left.is_empty() {
            let ids: Vec<&str> = self.left.iter().map(|(id, _)| id.as_str()).collect();
            lines.push(format!("Left on their own: {}.", ids.join(", ")));
        }
        if !self.changed.is_empty() {
            let ids: Vec<String> = self.changed.iter().map(|(id, what)| format!("{id} ({what})")).collect();
            lines.push(format!("Changed while waiting, left to their new course: {}.", ids.join(", ")));
        }
        lines.extend(self.failed.iter().map(|f| format!("error: the requeue failed: {f}")));
        let shown: Vec<String> =
            lines.iter().map(|l| if as_markdown { markdown(l) } else { escape::line(l) }).collect();
        format!("{}\n", shown.join(if as_markdown { "\n\n" } else { "\n" }))
    }

    fn json(&self) -> Value {
        let pairs = |list: &[(String, i64)]| -> Vec<Value> {
            list.iter().map(|(job, at)| json!({ "job": job, "at": at })).collect()
        };
        let changed: Vec<Value> =
            self.changed.iter().map(|(job, now)| json!({ "job": job, "now": now })).collect();
        json!({
            "empty_at": self.empty_at,
            "requeued": pairs(&self.requeued),
            "left": pairs(&self.left),
            "changed": changed,
            "requeues_failed": self.failed,
        })
    }
}

/// The node names of `list`: Slurm's hostnames (letters, digits, `-`, `_`, `.`), no ranges.
fn node_names(list: &str) -> Result<Vec<&str>, Error> {
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    if names.len() > MAX_NODES {
        return Err(Error::failed(format!("{} nodes: one drain names at most {MAX_NODES}", names.len())));
    }
    for name in &names {
        let plain = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !plain {
            return Err(Error::failed(format!(
                "{:?} is not a node name (letters, digits, `-`, `_` and `.`, at most 64; ranges like gpu[01-04] are not taken): nothing was done",
                escape::line(name)
            )));
        }
    }
    Ok(names)
}

/// The reason Slurm is given: [`REASON`] and `text`, one line of printable characters.
fn reason(text: &str) -> Result<String, Error> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > MAX_REASON || text.chars().any(char::is_control) {
        return Err(Error::failed(format!(
            "--reason must be one line of 1 to {MAX_REASON} printable characters: nothing was done"
        )));
    }
    Ok(format!("{REASON}{text}"))
}

/// `--resume`: the nodes allot drained return to service; any other is refused.
fn resume(cluster: &str, nodes: &[Node]) -> Outcome {
    if let Some(other) = nodes.iter().find(|n| !drained_by_allot(n)) {
        return Err(Error::failed(format!(
            "node {} was not drained by allot (state {}, reason {:?}): allot returns to service only the nodes it drained; nothing was done",
            other.name,
            escape::line(&other.state),
            escape::line(&other.reason)
        )));
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    slurm::scontrol(
        cluster,
        &["update".into(), format!("NodeName={}", names.join(",")), "State=RESUME".into()],
    )?;
    println!("Returned to service on Slurm cluster {cluster}: {}", names.join(", "));
    Ok(Exit::Success)
}

/// What a drain did and will do.
struct Report<'a> {
    cluster: &'a str,
    /// The nodes drained (now or before, by allot).
    drained: &'a [&'a str],
    /// Those this run drained.
    fresh: &'a [&'a str],
    /// Nodes left alone: drained by someone else, or down.
    others: &'a [&'a Node],
    plan: &'a drain::Plan,
    now: i64,
    dry_run: bool,
    /// Whether allot stays to requeue the jobs as their protection ends (`--wait`).
    waits: bool,
    /// The requeues that failed.
    failed: &'a [String],
}

impl Report<'_> {
    /// The report for a terminal, or as Markdown (each sentence a paragraph, the jobs a
    /// list).
    fn text(&self, as_markdown: bool) -> String {
        let shown = |s: &str| if as_markdown { markdown(s) } else { escape::line(s) };
        let would = if self.dry_run { "would be " } else { "" };
        let mut before = Vec::new();
        if self.dry_run {
            before.push("Dry run: nothing was changed.".to_string());
        }
        if !self.drained.is_empty() {
            let already: Vec<&str> =
                self.drained.iter().copied().filter(|n| !self.fresh.contains(n)).collect();
            let mut line = format!(
                "Nodes {would}drained on Slurm cluster {}: {}",
                shown(self.cluster),
                self.drained.join(", ")
            );
            if !already.is_empty() {
                line.push_str(&format!(" ({} drained by allot before)", already.join(", ")));
            }
            before.push(line);
        }
        for node in self.others {
            before.push(format!(
                "Node {} left alone: {} by someone else (reason: {})",
                shown(&node.name),
                shown(&node.state),
                shown(&node.reason)
            ));
        }
        if self.drained.is_empty() {
            before.push("No node is drained by allot: nothing more to do.".to_string());
            return format!("{}\n", before.join(if as_markdown { "\n\n" } else { "\n" }));
        }
        if self.plan.jobs.is_empty() {
            before.push("No job runs on them.".to_string());
        }
        let items: Vec<String> = self
            .plan
            .jobs
            .iter()
            .map(|(job, leaves)| {
                let what = match leaves {
                    Leaves::RequeueNow => format!("{would}requeued now (resumable, past its protection)"),
                    Leaves::RequeueAt(at) => {
                        format!("to requeue at {} (resumable, protected until then)", time(*at))
                    }
                    Leaves::RunsToEnd { kept, end: Some(end) } => {
                        format!("runs to its end at {} ({})", time(*end), kept.said())
                    }
                    Leaves::RunsToEnd { kept, end: None } => {
                        format!("runs to its end, with no time limit ({})", kept.said())
                    }
                    Leaves::Ending => "ending".to_string(),
                    Leaves::Held => {
                        format!(
                            "{}: left alone, it holds the node until someone acts",
                            shown(&job.state.to_lowercase())
                        )
                    }
                };
                format!("job {} ({}, {}): {what}", shown(&job.id), shown(&job.user), shown(&job.qos))
            })
            .collect();
        let mut after = vec![match self.plan.empty_at {
            Some(at) if at <= self.now => "The nodes are empty now.".to_string(),
            Some(at) => format!("The nodes will be empty at {}.", time(at)),
            None => "The nodes have no time to be empty: a job on them has no known end.".to_string(),
        }];
        if !self.waits && self.plan.jobs.iter().any(|(_, l)| matches!(l, Leaves::RequeueAt(_))) {
            after.push(
                "Run `allot drain` again after each time above to requeue the jobs whose protection has ended, or with --wait to stay and requeue them then."
                    .to_string(),
            );
        }
        after.extend(
            self.failed.iter().map(|failure| format!("error: the requeue failed: {}", shown(failure))),
        );
        if as_markdown {
            let list = items.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n");
            let blocks: Vec<String> =
                before.into_iter().chain((!items.is_empty()).then_some(list)).chain(after).collect();
            format!("{}\n", blocks.join("\n\n"))
        } else {
            let lines: Vec<String> =
                before.into_iter().chain(items.iter().map(|i| format!("  {i}"))).chain(after).collect();
            format!("{}\n", lines.join("\n"))
        }
    }

    fn json(&self) -> Value {
        let jobs: Vec<Value> = self
            .plan
            .jobs
            .iter()
            .map(|(job, leaves)| {
                let (action, at, kept) = match leaves {
                    Leaves::RequeueNow => ("requeue_now", Some(self.now), None),
                    Leaves::RequeueAt(at) => ("requeue_at", Some(*at), None),
                    Leaves::RunsToEnd { kept, end } => ("runs_to_end", *end, Some(*kept)),
                    Leaves::Ending => ("ending", None, None),
                    Leaves::Held => ("held", None, None),
                };
                json!({
                    "job": job.id, "user": job.user, "qos": job.qos, "state": job.state,
                    "start": job.start, "action": action, "at": at,
                    "kept_because": kept.map(Kept::said),
                })
            })
            .collect();
        let others: BTreeMap<&str, Value> = self
            .others
            .iter()
            .map(|n| (n.name.as_str(), json!({ "state": n.state, "reason": n.reason })))
            .collect();
        json!({
            "slurm_cluster": self.cluster,
            "dry_run": self.dry_run,
            "drained": self.drained,
            "drained_now": self.fresh,
            "left_alone": others,
            "jobs": jobs,
            "empty_at": if self.drained.is_empty() { None } else { self.plan.empty_at },
            "requeues_failed": self.failed,
        })
    }
}
