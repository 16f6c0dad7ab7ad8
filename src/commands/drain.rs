//! `allot drain NODES [PATH] --live slurm --reason TEXT`: empties broken nodes at the
//! contracts' boundaries. The nodes are drained in Slurm (no job starts there any more, the
//! reason `allot drain: TEXT`), then each job on them is planned ([`allot_verify::drain`]):
//! a resumable job past its minimum runtime is requeued now, one still protected is
//! requeued when its protection ends (said, with the time: `--wait` is not built yet), a job
//! that is not resumable runs to its end; and the nodes are empty when the last has left.
//! `--dry-run` says it all and touches nothing. A node that someone else drained, or that is
//! down, is reported and left alone. `--resume` returns nodes allot drained (and only those)
//! to service.

use std::collections::{BTreeMap, HashMap};

use allot_compiler::escape::{controls, markdown};
use allot_compiler::ir::Model;
use allot_targets::slurm::qos;
use allot_targets::slurm::tree::{self, PREEMPTIBLE_QOS};
use allot_verify::drain::{self, Kept, Leaves, Terms};
use allot_verify::render::time;
use serde_json::{Value, json};

use crate::budgets;
use crate::commands::status::{self, Scheduler};
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::{self, print};
use crate::slurm::{self, Node};

#[derive(clap::Args)]
pub struct Args {
    /// The nodes, separated by commas (`gpu01,gpu02`).
    nodes: String,
    #[command(flatten)]
    repository: budgets::Repository,
    /// The live scheduler: Slurm (Kubernetes nodes are not drained yet).
    #[arg(long, value_enum)]
    live: Scheduler,
    /// Why the nodes are drained (Slurm shows it as `allot drain: TEXT`).
    #[arg(long, required_unless_present = "resume")]
    reason: Option<String>,
    /// Say what would happen, and touch nothing.
    #[arg(long)]
    dry_run: bool,
    /// Return the nodes to service, when allot drained them.
    #[arg(long, conflicts_with_all = ["reason", "dry_run"])]
    resume: bool,
    /// The Slurm cluster, when the budgets bind several.
    #[arg(long)]
    cluster: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

/// How the reason of a drain allot made starts.
pub const REASON: &str = "allot drain: ";

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
    let jobs = if names.is_empty() { Vec::new() } else { slurm::node_jobs(&cluster, &names)? };
    let now = status::now();
    let plan = drain::plan(&jobs, &terms(&model)?, now);
    let mut failed = Vec::new();
    if !args.dry_run {
        for (job, leaves) in &plan.jobs {
            if *leaves == Leaves::RequeueNow
                && let Err(e) = slurm::scontrol(&cluster, &["requeue".into(), job.id.clone()])
            {
                failed.push(format!("job {}: {e}", job.id));
            }
        }
    }
    let report = Report {
        cluster: &cluster,
        drained: &names,
        fresh: &fresh,
        others: &others,
        plan: &plan,
        now,
        dry_run: args.dry_run,
        failed: &failed,
    };
    match args.format {
        output::Format::Human => print(&report.text(false))?,
        output::Format::Markdown => print(&report.text(true))?,
        output::Format::Json => print(&output::json(&report.json())?)?,
    }
    if failed.is_empty() { Ok(Exit::Success) } else { Ok(Exit::Problems) }
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
                controls(name, false)
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

/// What each QOS lets a drain do: the budgets' contracts (and the preemptible QOS: no
/// protection, resumable), each merged with its live QOS when Slurm has it (the longer
/// protection; resumable only when the live QOS requeues too).
fn terms(model: &Model) -> Result<HashMap<String, Terms>, Error> {
    let live =
        qos::parse(&slurm::show_qos()?).map_err(|e| Error::failed(format!("sacctmgr show qos: {e}")))?;
    let live: HashMap<&str, &qos::Qos> = live.iter().map(|q| (q.name.as_str(), q)).collect();
    let contracts = model
        .contracts
        .iter()
        .map(|c| (c.name.as_str(), c.min_runtime_seconds, c.resumable, c.max_runtime_seconds));
    let preemptible = std::iter::once((PREEMPTIBLE_QOS, 0, true, None));
    Ok(contracts
        .chain(preemptible)
        .map(|(name, protected, resumable, max_runtime)| {
            let terms = match live.get(name) {
                None => Terms { protected_seconds: protected, resumable, max_runtime_seconds: max_runtime },
                Some(q) => Terms {
                    protected_seconds: protected.max(q.preempt_exempt.unwrap_or(0)),
                    resumable: resumable && q.preempt_mode.split(',').any(|m| m == "requeue"),
                    max_runtime_seconds: max_runtime,
                },
            };
            (name.to_string(), terms)
        })
        .collect())
}

/// `--resume`: the nodes allot drained return to service; any other is refused.
fn resume(cluster: &str, nodes: &[Node]) -> Outcome {
    if let Some(other) = nodes.iter().find(|n| !drained_by_allot(n)) {
        return Err(Error::failed(format!(
            "node {} was not drained by allot (state {}, reason {:?}): allot returns to service only the nodes it drained; nothing was done",
            other.name,
            controls(&other.state, false),
            controls(&other.reason, false)
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
    /// The requeues that failed.
    failed: &'a [String],
}

impl Report<'_> {
    /// The report for a terminal, or as Markdown (each sentence a paragraph, the jobs a
    /// list).
    fn text(&self, as_markdown: bool) -> String {
        let shown = |s: &str| if as_markdown { markdown(s) } else { controls(s, false).into_owned() };
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
        if self.plan.jobs.iter().any(|(_, l)| matches!(l, Leaves::RequeueAt(_))) {
            after.push(
                "Run `allot drain` again after each time above to requeue the jobs whose protection has ended."
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

/// Whether `node` cannot take jobs: drained, draining, down, failed or in maintenance.
fn unavailable(node: &Node) -> bool {
    node.state
        .split('+')
        .any(|f| matches!(f, "drain" | "drained" | "draining" | "down" | "fail" | "failing" | "maint"))
}

/// Whether allot drained `node`: draining or drained, with allot's reason.
fn drained_by_allot(node: &Node) -> bool {
    node.state.split('+').any(|f| matches!(f, "drain" | "drained" | "draining"))
        && node.reason.starts_with(REASON)
}
