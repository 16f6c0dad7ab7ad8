//! `allot explain JOB --live slurm|kueue [PATH]`: for a pending job, in budget language, why it
//! waits and what would change that: Slurm's reason translated, its budget's standing now
//! and over the fair-share window, the jobs ahead of it, the running jobs it may preempt and
//! when their protection ends, and when it may start (allot's estimate beside Slurm's own).
//! A running or finished job gets a short account of what happened to it. Nothing is
//! written to the live system. This module explains Slurm's jobs; [`kueue`] Kueue's
//! workloads.

mod kueue;

use allot_targets::slurm::fair_tree::{FairTree, ShareRow};
use allot_targets::slurm::qos::{self, Qos};
use allot_targets::slurm::tree;
use allot_verify::explain::{self, Preemptible};
use allot_verify::live::{self, BudgetNow};
use allot_verify::render;
use allot_verify::squeue::{self, QueuedJob};
use serde_json::{Value, json};

use crate::budgets;
use crate::commands::status;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::print;
use crate::saved_plan::Live;
use crate::slurm;

#[derive(clap::Args)]
pub struct Args {
    /// The job: a Slurm job id, or a Kueue workload as NAMESPACE/NAME.
    job: String,
    /// The live scheduler to read.
    #[arg(long, value_enum)]
    live: status::Scheduler,
    #[command(flatten)]
    repository: budgets::Repository,
    /// The cluster to read, when the budgets bind several to the scheduler (Slurm: the
    /// Slurm cluster's name; Kueue: the allot cluster's).
    #[arg(long)]
    cluster: Option<String>,
    /// The kubeconfig context to read Kueue through (default: the current one).
    #[arg(long)]
    context: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    format: ExplainFormat,
}

/// How `explain` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum ExplainFormat {
    /// Sentences, for a terminal.
    Human,
    /// JSON, for programs.
    Json,
}

/// The most jobs ahead named one by one.
pub(super) const AHEAD_SHOWN: usize = 5;

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
    if args.live == status::Scheduler::Kueue {
        return kueue::run(&model, &args.job, args.cluster.as_deref(), args.context.as_deref(), args.format);
    }
    if args.context.is_some() {
        return Err(Error::failed("--context names a kubeconfig context: it is for --live kueue"));
    }
    if !args.job.bytes().all(|b| b.is_ascii_digit() || b == b'_') || args.job.is_empty() {
        return Err(Error::failed(format!(
            "{:?} is not a Slurm job id (digits, or an array task like 12_3)",
            args.job
        )));
    }
    let cluster = slurm::live_cluster(&tree::slurm_clusters(&model), args.cluster.as_deref())?;
    let queue = slurm::queue(&cluster)?;
    let now = status::now();
    let Some(job) = queue.iter().find(|q| q.job.id == args.job) else {
        let account = slurm::sacct_job(&cluster, &args.job)?;
        let Some(line) = account else {
            eprintln!(
                "error: job {} is not in the queue or the accounting of Slurm cluster {cluster}",
                args.job
            );
            return Ok(Exit::Problems);
        };
        print(&finished(&args.job, &line, args.format))?;
        return Ok(Exit::Success);
    };
    let (_, path) = live::budget_of(&model, &job.job).map_err(|e| Error::failed(e.to_string()))?;
    let status =
        live::status(&model, squeue::demand(&queue), now).map_err(|e| Error::failed(e.to_string()))?;
    let budget = status.clusters.iter().flat_map(|c| &c.budgets).find(|b| b.path == path).cloned();
    let qos =
        qos::parse(&slurm::show_qos()?).map_err(|e| Error::failed(format!("sacctmgr show qos: {e}")))?;
    // The GPUs of the job's partition: those of the clusters bound to it (to the Slurm
    // cluster, when none is bound to that partition).
    let bound = |partition: bool| -> u64 {
        let on = |s: &allot_compiler::ir::SlurmBinding| {
            s.cluster == cluster && (!partition || s.partition == job.job.partition)
        };
        model.clusters.iter().filter(|c| c.bindings.slurm.as_ref().is_some_and(on)).map(|c| c.gpus).sum()
    };
    let gpus = match bound(true) {
        0 => bound(false),
        gpus => gpus,
    };
    let live_tree = Live::read(&cluster, false)?
        .tree()
        .map_err(|e| Error::failed(format!("the live state of {cluster}: {e}")))?;
    let fair_tree = slurm::fair_tree(&cluster, &live_tree)?;
    let facts = Facts {
        job,
        path: &path,
        budget: budget.as_ref(),
        queue: &queue,
        qos: &qos,
        fair_tree: &fair_tree,
        gpus,
        now,
    };
    print(&match args.format {
        ExplainFormat::Json => crate::output::json(&facts.json())?,
        // What squeue says is shown, its control characters made visible.
        ExplainFormat::Human => allot_compiler::escape::controls(&facts.text(), true).into_owned(),
    })?;
    Ok(Exit::Success)
}

/// What `explain` found of one job.
struct Facts<'a> {
    job: &'a QueuedJob,
    path: &'a str,
    budget: Option<&'a BudgetNow>,
    queue: &'a [QueuedJob],
    qos: &'a [Qos],
    /// The live associations ranked, with their usage.
    fair_tree: &'a FairTree,
    /// The GPUs of the partition's clusters.
    gpus: u64,
    now: i64,
}

impl Facts<'_> {
    fn qos(&self, name: &str) -> Option<&Qos> {
        self.qos.iter().find(|q| q.name == name)
    }

    /// The running jobs this one may preempt.
    fn preemptible(&self) -> Vec<Preemptible<'_>> {
        let preempts = self.qos(&self.job.job.contract).map(|q| q.preempt.clone()).unwrap_or_default();
        let exempt = |name: &str| self.qos(name).and_then(|q| q.preempt_exempt).map_or(0, |s| s as i64);
        explain::preemptible(self.queue, self.job, |name| preempts.iter().any(|p| p == name), exempt)
    }

    fn estimate(&self) -> Option<i64> {
        explain::estimated_start(self.queue, self.job, self.gpus, self.now)
    }

    fn text(&self) -> String {
        let j = &self.job.job;
        let time = render::time;
        let contract = if j.contract.is_empty() { "-" } else { j.contract.as_str() };
        let mut out = format!(
            "Job {} of {} on Slurm cluster {}: {} GPUs for budget {} under contract {}, {}\n",
            j.id, j.user, j.cluster, j.gpus, self.path, contract, self.job.state
        );
        if let Some(start) = j.start {
            out.push_str(&format!("  running since {} (waited {})\n", time(start), span(start - j.submit)));
            // Only jobs of a QOS whose Preempt list names this job's may preempt it.
            let preemptors: Vec<&str> = self
                .qos
                .iter()
                .filter(|q| q.preempt.iter().any(|p| p == j.contract.as_str()))
                .map(|q| q.name.as_str())
                .collect();
            let until = self.qos(&j.contract).map(|q| start + q.preempt_exempt.unwrap_or(0) as i64);
            match until {
                _ if preemptors.is_empty() => {
                    out.push_str("  no QOS may preempt it (its QOS is in no QOS's Preempt list)\n")
                }
                Some(until) if until > self.now => out.push_str(&format!(
                    "  protected from preemption until {} (then jobs of QOS {} may preempt it)\n",
                    time(until),
                    preemptors.join(", ")
                )),
                _ => out.push_str(&format!("  jobs of QOS {} may preempt it now\n", preemptors.join(", "))),
            }
            if let Some(limit) = self.job.time_limit {
                out.push_str(&format!("  its time limit ends it at {}\n", time(start + limit)));
            }
            out.push_str(&budget_lines(self.budget));
            return out;
        }
        out.push_str(&format!("  waiting since {} ({})\n", time(j.submit), span(self.now - j.submit)));
        out.push_str(&format!("\nWhy: {}\n", explain::reason(&self.job.reason)));
        out.push_str(&budget_lines(self.budget));
        out.push_str(&self.fair_tree_lines());
        let ahead = explain::ahead(self.queue, self.job);
        let ahead_gpus: u64 = ahead.iter().map(|q| u64::from(q.job.gpus)).sum();
        out.push_str(&format!(
            "\nAhead of it in partition {}: {} jobs waiting for {ahead_gpus} GPUs (jobs held by a limit, a hold or a dependency hold none back)\n",
            j.partition,
            ahead.len()
        ));
        for q in ahead.iter().take(AHEAD_SHOWN) {
            out.push_str(&format!(
                "  job {} of {} ({}, {} GPUs, priority {})\n",
                q.job.id, q.job.user, q.job.project, q.job.gpus, q.priority
            ));
        }
        let preemptible = self.preemptible();
        out.push_str(&format!(
            "\nRunning jobs it may preempt (its contract's QOS may preempt theirs): {}\n",
            preemptible.len()
        ));
        for p in preemptible.iter().take(AHEAD_SHOWN) {
            let when = if p.protected_until > self.now {
                format!("protected until {}", time(p.protected_until))
            } else {
                "preemptible now".to_string()
            };
            out.push_str(&format!(
                "  job {} of {} ({}, {} GPUs, QOS {}): {when}\n",
                p.job.job.id, p.job.job.user, p.job.job.project, p.job.job.gpus, p.job.job.contract
            ));
        }
        out.push_str("\nWhen it may start:\n");
        out.push_str(&match self.estimate() {
            Some(t) => format!("  allot: {} (every running job runs to its time limit, the jobs ahead start in priority order, no backfill or preemption)\n", time(t)),
            None => "  allot: no estimate (a job it waits for has no time limit, or it asks for more GPUs than the cluster has)\n".to_string(),
        });
        out.push_str(&match self.job.expected_start {
            Some(t) => format!("  Slurm (backfill's plan, as `squeue --start` shows it): {}\n", time(t)),
            None => "  Slurm: no estimate (its backfill scheduler has not planned this job)\n".to_string(),
        });
        out
    }

    /// The job's account in the Fair Tree beside its siblings, the highest LevelFS first,
    /// and the fair-share factor of its user's association: where its priority comes from.
    fn siblings(&self) -> Vec<&ShareRow> {
        let mut siblings = self.fair_tree.siblings(&self.job.job.project);
        // Fairshare=parent (no LevelFS) last; no usage (an infinite LevelFS) first.
        siblings.sort_by(|a, b| b.level_fs.unwrap_or(f64::MIN).total_cmp(&a.level_fs.unwrap_or(f64::MIN)));
        siblings
    }

    fn fair_tree_lines(&self) -> String {
        let j = &self.job.job;
        let Some(row) = self.fair_tree.row(&j.project, None) else { return String::new() };
        let siblings = self.siblings();
        let place =
            siblings.iter().position(|r| r.user.is_none() && r.account == row.account).map_or(0, |p| p + 1);
        let listed: Vec<String> =
            siblings.iter().map(|r| format!("{} {}", sibling_name(r), level_fs(r.level_fs))).collect();
        let mut out = format!(
            "Its account {} in the Fair Tree: LevelFS {} ({:.1}% of its parent's usage over the window, for {:.1}% of its shares), {place} of {} beside it by LevelFS: {}. The highest goes first.\n",
            row.account,
            level_fs(row.level_fs),
            row.effective_usage * 100.0,
            row.norm_shares * 100.0,
            siblings.len(),
            listed.join(", ")
        );
        if let Some(fair_share) = self.fair_tree.row(&j.project, Some(&j.user)).and_then(|r| r.fair_share) {
            out.push_str(&format!(
                "The fair-share factor of {} under {}: {fair_share:.3}, the fair-share part of its priority.\n",
                j.user, row.account
            ));
        }
        out
    }

    fn json(&self) -> Value {
        let j = &self.job.job;
        let fair_tree = self.fair_tree.row(&j.project, None).map(|row| {
            let finite = |l: Option<f64>| l.filter(|l| l.is_finite());
            let siblings: Vec<Value> = self
                .siblings()
                .iter()
                .map(|r| json!({ "name": sibling_name(r), "level_fs": finite(r.level_fs), "used": r.raw_usage > 0.0 }))
                .collect();
            json!({
                "account": row.account,
                "level_fs": finite(row.level_fs),
                "effective_usage": row.effective_usage,
                "norm_shares": row.norm_shares,
                "siblings": siblings,
                "fair_share": self.fair_tree.row(&j.project, Some(&j.user)).and_then(|r| r.fair_share),
            })
        });
        let preemptible: Vec<Value> = self
            .preemptible()
            .iter()
            .map(|p| json!({ "job": p.job.job.id.as_str(), "qos": p.job.job.contract.as_str(), "gpus": p.job.job.gpus, "protected_until": p.protected_until }))
            .collect();
        let ahead: Vec<Value> = explain::ahead(self.queue, self.job)
            .iter()
            .map(|q| json!({ "job": q.job.id.as_str(), "user": q.job.user.as_str(), "account": q.job.project.as_str(), "gpus": q.job.gpus, "priority": q.priority }))
            .collect();
        json!({
            "job": j.id.as_str(),
            "state": self.job.state,
            "user": j.user.as_str(),
            "cluster": j.cluster.as_str(),
            "budget": self.path,
            "contract": j.contract.as_str(),
            "gpus": j.gpus,
            "submit": j.submit,
            "start": j.start,
            "reason": self.job.reason,
            "reason_explained": j.start.is_none().then(|| explain::reason(&self.job.reason)),
            "budget_now": self.budget.map(|b| json!({
                "running_gpus": b.running_gpus, "pending_gpus": b.pending_gpus,
                "entitled_gpus": b.entitled_gpus, "standing": b.standing.word(),
            })),
            "fair_tree": fair_tree,
            "ahead": ahead,
            "preemptible": preemptible,
            "estimated_start": j.start.is_none().then(|| self.estimate()).flatten(),
            "slurm_expected_start": self.job.expected_start,
        })
    }
}

/// The budget's standing now.
fn budget_lines(budget: Option<&BudgetNow>) -> String {
    let Some(b) = budget else { return String::new() };
    format!(
        "\nIts budget {} now: {} GPUs running, {} pending, entitled to {:.1}: {}.\n",
        b.path,
        b.running_gpus,
        b.pending_gpus,
        b.entitled_gpus,
        match b.standing {
            live::Standing::Over =>
                "over its entitlement: its work beyond it is borrowed from budgets owed it",
            live::Standing::Under => "under its entitlement: it is owed GPUs",
            live::Standing::Within => "within its entitlement",
            live::Standing::Idle => "idle",
        }
    )
}

/// A sibling in the Fair Tree: an account, or a user's association.
fn sibling_name(row: &ShareRow) -> String {
    match &row.user {
        Some(user) => format!("user {user}"),
        None => row.account.clone(),
    }
}

/// A LevelFS as `sshare` reads: two decimals, `inf` without usage, `-` for Fairshare=parent.
fn level_fs(level_fs: Option<f64>) -> String {
    match level_fs {
        None => "-".into(),
        Some(l) if l.is_infinite() => "inf (no usage)".into(),
        Some(l) => format!("{l:.2}"),
    }
}

/// A span of seconds, briefly.
fn span(seconds: i64) -> String {
    render::wait(seconds.max(0) as u64)
}

/// A job that left the queue, from its `sacct` line (`JobID|State|Account|QOS|Submit|Start|End|AllocTRES`).
fn finished(id: &str, line: &str, format: ExplainFormat) -> String {
    let fields: Vec<&str> = line.split('|').collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or("").trim();
    let time = |text: &str| text.parse::<i64>().ok().map_or("-".to_string(), render::time);
    if format == ExplainFormat::Json {
        return format!(
            "{}\n",
            json!({ "job": id, "state": field(1), "account": field(2), "qos": field(3), "submit": field(4), "start": field(5), "end": field(6), "tres": field(7) })
        );
    }
    let gpus = allot_verify::trace::tres_gpus(field(7)).unwrap_or("0");
    // What sacct says is shown, its control characters made visible.
    let text = format!(
        "Job {id} is no longer in the queue: {} ({} GPUs for account {} under QOS {}), submitted {}, started {}, ended {}.\n",
        field(1),
        gpus,
        field(2),
        field(3),
        time(field(4)),
        time(field(5)),
        time(field(6)),
    );
    allot_compiler::escape::controls(&text, true).into_owned()
}
