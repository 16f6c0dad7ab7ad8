//! `allot status [PATH] --live slurm`: who is over or under budget now. For every budget of
//! every cluster bound to the Slurm cluster: its share and guaranteed GPUs, the GPUs its
//! jobs run and wait for now (`squeue`), what it is entitled to now, its standing, until
//! when its running jobs are protected, and its usage over the fair-share window against
//! its share (`sshare`'s raw usage through allot's Fair Tree, on the live associations);
//! and how far the live associations and QOS are from the budgets (the plan's summary).
//! Nothing is written to the live system.

use std::time::{SystemTime, UNIX_EPOCH};

use allot_compiler::ir::Model;
use allot_targets::slurm::fair_tree::{FairTree, SiblingOrder};
use allot_targets::slurm::plan;
use allot_targets::slurm::tree::{self, Tree};
use allot_targets::slurm::usage::Usage;
use allot_verify::live::{self, Status, WindowUsage};
use allot_verify::{render, squeue};

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::{self, json, print};
use crate::saved_plan::Live;
use crate::slurm;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    repository: budgets::Repository,
    /// The live scheduler to read.
    #[arg(long, value_enum)]
    live: Scheduler,
    /// The Slurm cluster to read, when the budgets bind several.
    #[arg(long)]
    cluster: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

/// The schedulers `--live` reads.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Scheduler {
    Slurm,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
    let Scheduler::Slurm = args.live;
    let cluster = slurm::live_cluster(&tree::slurm_clusters(&model), args.cluster.as_deref())?;
    let jobs = slurm::queue(&cluster)?;
    let state = Live::read(&cluster, true)?;
    let live_tree = state.tree().map_err(|e| Error::failed(format!("the live state of {cluster}: {e}")))?;
    let usage = slurm::sshare_usage(&cluster)?;
    let usage = Usage::parse(&usage).map_err(|e| Error::failed(format!("sshare: {e}")))?;
    let mut status = live::status(&model, squeue::demand(&jobs), now())
        .map_err(|e| Error::failed(format!("the queue of Slurm cluster {cluster}: {e}")))?;
    keep_bound(&mut status, &model, &cluster);
    add_fair_tree(&mut status, &live_tree, &usage)?;
    let drift = plan::plan(&tree::desired(&model, &cluster), &live_tree);
    let drift_line = if drift.is_empty() {
        format!("The live associations and QOS of Slurm cluster {cluster} match the budgets.")
    } else {
        format!(
            "The live associations and QOS of Slurm cluster {cluster} differ from the budgets: {} (`allot plan slurm --live` shows how).",
            drift.summary()
        )
    };
    match args.format {
        output::Format::Human => print(&format!("{}\n{drift_line}\n", render::live::text(&status)))?,
        output::Format::Markdown => print(&format!("{}\n{drift_line}\n", render::live::markdown(&status)))?,
        output::Format::Json => {
            let mut value = render::live::json(&status);
            value["slurm_cluster"] = cluster.clone().into();
            value["drift"] = plan::json(&drift);
            print(&json(&value)?)?
        }
    }
    Ok(Exit::Success)
}

/// Seconds since the epoch, the instant the live commands measure.
pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
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
fn add_fair_tree(status: &mut Status, live_tree: &Tree, usage: &Usage) -> Result<(), Error> {
    let fair_tree = FairTree::compute_in(&usage.associations(live_tree), SiblingOrder::Slurm22)
        .map_err(|e| Error::failed(format!("the live Fair Tree: {e}")))?;
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
    Ok(())
}
