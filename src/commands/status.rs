//! `allot status [PATH] --live slurm|kueue`: who is over or under budget now. For every
//! budget of the cluster read: its share and guaranteed GPUs, the GPUs its jobs run and
//! wait for now, what it is entitled to now, its standing, until when its running jobs are
//! protected; how the scheduler ranks it (Slurm: its usage over the fair-share window
//! against its share, `sshare`'s raw usage through allot's Fair Tree on the live
//! associations; Kueue: its ClusterQueue's reserved and borrowed GPUs and Fair Sharing's
//! weighted share); on Slurm, the GPUs in use of its floor and its GPUs beyond the floors,
//! in the bound partition (preemptible once past their protection); and how far the live
//! configuration is from the budgets (Slurm: the plan's summary; Kueue: the objects allot
//! writes). Nothing is written to the live system.

use std::collections::HashMap;

use allot_compiler::calendar::Around;
use allot_compiler::escape;
use allot_compiler::ir::Model;
use allot_compiler::units::format_instant;
use allot_live::kueue::Kueue;
use allot_live::squeue;
use allot_live::standing::{self, QueueNow, Ranking, Status, WindowUsage};
use allot_targets::kubernetes::{drift, kueue as objects};
use allot_targets::slurm::fair_tree::FairTree;
use allot_targets::slurm::plan;
use allot_targets::slurm::tree;

use crate::args::{self, Scheduler};
use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::{self, json, print};
use crate::systems::saved_plan::Live;
use crate::systems::{drains, floors, kubernetes, slurm};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    budgets: args::RepositoryAt,
    /// The live scheduler to read.
    #[arg(long, value_enum)]
    live: Scheduler,
    /// The cluster to read, when the budgets bind several to the scheduler (Slurm: the
    /// Slurm cluster's name; Kueue: the allot cluster's).
    #[arg(long)]
    cluster: Option<String>,
    /// The kubeconfig context to read Kueue through (default: the current one).
    #[arg(long)]
    context: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

/// What was read of a live scheduler: the budgets now, a sentence on the drift (Slurm: and
/// the nodes allot drains), and what the JSON form adds.
struct Reading {
    status: Status,
    drift_line: String,
    json: Vec<(&'static str, serde_json::Value)>,
}

pub fn run(args: Args, format: Format) -> Outcome {
    // One clock read: the live figures' instant, and the budgets' moment unless `--at`.
    let now = budgets::now();
    let at = args.budgets.moment.at.unwrap_or(now);
    // With the grant boundaries around: when the shares change next, and what they were
    // before the last change.
    let Some((model, around)) = args.budgets.repository.model_around(format, at)? else {
        return Ok(Exit::Problems);
    };
    let reading = match args.live {
        Scheduler::Slurm => {
            if args.context.is_some() {
                return Err(Error::failed("--context names a kubeconfig context: it is for --live kueue"));
            }
            read_slurm(&model, &around, args.cluster.as_deref(), now)?
        }
        Scheduler::Kueue => {
            read_kueue(&model, &around, args.cluster.as_deref(), args.context.as_deref(), now)?
        }
    };
    let Reading { status, drift_line, json: extra } = reading;
    match args.format {
        output::Format::Human => print(&format!("{}\n{drift_line}\n", allot_live::render::text(&status)))?,
        output::Format::Markdown => {
            // The drift's lines, Markdown-escaped: the objects' names come from the server.
            let lines: Vec<String> = drift_line
                .lines()
                .map(|l| match l.strip_prefix("  ") {
                    Some(item) => format!("- {}", allot_compiler::escape::markdown(item)),
                    None => allot_compiler::escape::markdown(l),
                })
                .collect();
            print(&format!("{}\n{}\n", allot_live::render::markdown(&status), lines.join("\n")))?
        }
        output::Format::Json => {
            let mut value = allot_live::render::json(&status);
            for (key, extra) in extra {
                value[key] = extra;
            }
            print(&json(&value)?)?
        }
    }
    Ok(Exit::Success)
}

fn read_slurm(model: &Model, around: &Around, cluster: Option<&str>, now: i64) -> Result<Reading, Error> {
    let cluster = slurm::live_cluster(&tree::slurm_clusters(model), cluster)?;
    let jobs = slurm::queue(&cluster)?;
    let state = Live::read(&cluster, true)?;
    let live_tree = state.tree().map_err(|e| Error::failed(format!("the live state of {cluster}: {e}")))?;
    let floors = floors::floors(model, &cluster)?;
    let mut status = standing::status_with_floors(model, squeue::demand(&jobs), now, &floors)
        .map_err(|e| Error::failed(format!("the queue of Slurm cluster {cluster}: {e}")))?;
    keep_bound(&mut status, model, &cluster);
    add_fair_tree(&mut status, &slurm::fair_tree(&cluster, &live_tree)?);
    let drift = plan::plan(&tree::desired(model, &cluster), &live_tree);
    let mut drift_line = if drift.is_empty() {
        format!("The live associations and QOS of Slurm cluster {cluster} match the budgets.")
    } else {
        format!(
            "The live associations and QOS of Slurm cluster {cluster} differ from the budgets: {} (`allot plan slurm --live` shows how).",
            drift.summary()
        )
    };
    let behind = |before: &Model| plan::plan(&tree::desired(before, &cluster), &live_tree).is_empty();
    let (grants_line, grants_json) = grant_moments(around, !drift.is_empty(), behind);
    drift_line.push_str(&grants_line);
    // The live QOS, read with the associations.
    let live_qos = live_tree.qos.as_deref().unwrap_or_default();
    let draining = drains::draining(model, live_qos, &cluster, now)?;
    if !draining.is_empty() {
        drift_line.push_str("\nNodes allot drains:");
        for node in &draining {
            drift_line.push_str(&format!("\n  {}", node.said(now)));
        }
    }
    let mut json = vec![
        ("slurm_cluster", cluster.clone().into()),
        ("drift", plan::json(&drift)),
        ("draining", draining.iter().map(drains::Draining::json).collect()),
    ];
    json.extend(grants_json);
    Ok(Reading { status, drift_line, json })
}

/// What grants say of the live configuration: a line for each (empty when none applies) and
/// their JSON fields. When the live configuration differs from the budgets (`drifted`) but
/// is the budgets' of before the last grant boundary at or before the moment read
/// (`behind` says whether it matches a model), it is behind that boundary; the next
/// boundary, when there is one, is when the shares change next.
fn grant_moments(
    around: &Around,
    drifted: bool,
    behind: impl Fn(&Model) -> bool,
) -> (String, Vec<(&'static str, serde_json::Value)>) {
    let behind_since =
        around.last.as_ref().filter(|_| drifted).filter(|(_, before)| behind(before)).map(|(from, _)| *from);
    let next = around.next;
    let mut line = String::new();
    if let Some(since) = behind_since {
        line.push_str(&format!(
            "\nIt is the budgets' configuration of before {}, when grants changed the shares: it is behind them (apply the budgets as they are now).",
            format_instant(since)
        ));
    }
    if let Some(next) = next {
        line.push_str(&format!("\nShares change next on {} (`allot grants`).", format_instant(next)));
    }
    let json = vec![
        ("behind_since", behind_since.map(format_instant).into()),
        ("next_share_change", next.map(format_instant).into()),
    ];
    (line, json)
}

fn read_kueue(
    model: &Model,
    around: &Around,
    cluster: Option<&str>,
    context: Option<&str>,
    now: i64,
) -> Result<Reading, Error> {
    let (cluster, binding) = kubernetes::live_cluster(model, cluster)?;
    let connection = kubernetes::Connection::open(context)?;
    let reading = kubernetes::Reading::read(&connection, &binding.resource, true)?;
    let live_kueue = &reading.kueue;
    let jobs = kubernetes::demand(model, &cluster.name, live_kueue, now);
    let mut status = standing::status(model, &jobs, now)
        .map_err(|e| Error::failed(format!("Kueue's workloads of cluster {}: {e}", cluster.name)))?;
    status.clusters.retain(|c| c.name == cluster.name);
    status.ranking = Ranking::Kueue;
    add_queues(&mut status, model, live_kueue);
    let (drift, written) = match &reading.written {
        Ok(written) => (drift::drift(&objects::objects(model, &cluster.name), written), written),
        Err(e) => {
            let line = format!(
                "The live Kueue objects of cluster {} could not be compared with the budgets: {e}",
                cluster.name
            );
            return Ok(Reading { status, drift_line: line, json: vec![("drift", serde_json::Value::Null)] });
        }
    };
    let mut drift_line = if drift.is_empty() {
        format!("The live Kueue objects of cluster {} match the budgets.", cluster.name)
    } else {
        let mut line = format!(
            "The live Kueue objects of cluster {} differ from the budgets: {} (`allot build` writes them):",
            cluster.name,
            drift::summary(&drift)
        );
        for d in &drift {
            // Names read from the server are shown on their line, their controls visible.
            line.push_str(&format!("\n  {}", escape::line(&format!("{}: {}", d.object(), d.change()))));
        }
        line
    };
    let behind = |before: &Model| drift::drift(&objects::objects(before, &cluster.name), written).is_empty();
    let (grants_line, grants_json) = grant_moments(around, !drift.is_empty(), behind);
    drift_line.push_str(&grants_line);
    let mut json = vec![("drift", drift::json(&drift))];
    json.extend(grants_json);
    Ok(Reading { status, drift_line, json })
}

/// Each budget's ClusterQueue figures (an inner budget: its Cohort's weighted share).
fn add_queues(status: &mut Status, model: &Model, live: &Kueue) {
    for cluster in &mut status.clusters {
        let names: HashMap<String, String> =
            objects::queue_names(model, &cluster.name).into_iter().map(|(name, path)| (path, name)).collect();
        for budget in &mut cluster.budgets {
            let Some(name) = names.get(&budget.path) else { continue };
            budget.queue = match live.cluster_queue(name) {
                Some(q) => Some(QueueNow {
                    reserved_gpus: Some(q.reserved_gpus),
                    borrowed_gpus: Some(q.borrowed_gpus),
                    weighted_share: q.weighted_share,
                }),
                None => live.cohorts.iter().find(|c| &c.name == name).map(|c| QueueNow {
                    reserved_gpus: None,
                    borrowed_gpus: None,
                    weighted_share: c.weighted_share,
                }),
            };
        }
    }
}

/// Only the allot clusters bound to Slurm cluster `cluster`: the queue is of no other.
fn keep_bound(status: &mut Status, model: &Model, cluster: &str) {
    let bound = |name: &str| {
        model
            .clusters
            .iter()
            .any(|c| c.name == name && c.bindings.slurm.as_ref().is_some_and(|s| s.cluster == cluster))
    };
    status.clusters.retain(|c| bound(&c.name));
}

/// Each budget's Fair Tree figures, from the live associations and their raw usage: the
/// account named like its project (an inner project's own jobs and the unbudgeted work have
/// none).
fn add_fair_tree(status: &mut Status, fair_tree: &FairTree) {
    for budget in status.clusters.iter_mut().flat_map(|c| c.budgets.iter_mut()) {
        let account = budget.path.rsplit('/').next().unwrap_or(&budget.path);
        if let Some(row) = fair_tree.row(account, None) {
            budget.window = Some(WindowUsage {
                norm_shares: row.norm_shares,
                effective_usage: row.effective_usage,
                level_fs: row.level_fs.filter(|l| l.is_finite()),
            });
        }
    }
}
