//! `allot explain JOB --live slurm|kueue [PATH]`: for a pending job, in budget language, why it
//! waits and what would change that: Slurm's reason translated, its budget's standing now
//! and over the fair-share window, the jobs ahead of it, the running jobs it may preempt and
//! when their protection ends, and when it may start (allot's estimate beside Slurm's own);
//! with allot's floors, whether its budget's floor has room for it and, when it waits to
//! preempt protected work, when that protection ends. A running or finished job gets a short
//! account of what happened to it (a running one with floors: the tier it runs in, and from
//! when it is preemptible). Nothing is written to the live system. This module explains
//! Slurm's jobs; [`kueue`] Kueue's workloads.

mod kueue;

use std::borrow::Cow;

use allot_live::explain::{self, FloorWait, Preemptible, Tier};
use allot_live::squeue::{self, QueuedJob};
use allot_live::standing::{self, BudgetNow};
use allot_targets::slurm::fair_tree::{FairTree, ShareRow};
use allot_targets::slurm::qos::{self, Qos};
use allot_targets::slurm::tree;
use allot_verify::render;
use serde_json::{Value, json};

use crate::args::{self, Scheduler};
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::print;
use crate::systems::saved_plan::Live;
use crate::systems::{floors, slurm};

#[derive(clap::Args)]
pub struct Args {
    /// The job: a Slurm job id, or a Kueue workload as NAMESPACE/NAME.
    job: String,
    /// The live scheduler to read.
    #[arg(long, value_enum)]
    live: Scheduler,
    #[command(flatten)]
    repository: args::Repository,
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
    if args.live == Scheduler::Kueue {
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
    let now = crate::budgets::now();
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
    let floors = floors::floors(&model, &cluster)?;
    let (_, path) =
        standing::budget_of(&model, &job.job, &floors).map_err(|e| Error::failed(e.to_string()))?;
    let status = standing::status_with_floors(&model, squeue::demand(&queue), now, &floors)
        .map_err(|e| Error::failed(e.to_string()))?;
    let budget = status.clusters.iter().flat_map(|c| &c.budgets).find(|b| b.path == path).cloned();
    let qos =
        qos::parse(&slurm::show_qos()?).map_err(|e| Error::failed(format!("sacctmgr show qos: {e}")))?;
    // With floors, each job is counted on the bound partition its floors lie over (they
    // share its nodes): the jobs ahead, the start estimate and the partition's GPUs are the
    // bound partition's.
    let homed: Cow<[QueuedJob]> = if floors.is_empty() {
        Cow::Borrowed(&queue)
    } else {
        Cow::Owned(
            queue
                .iter()
                .map(|q| QueuedJob { job: standing::placed(&q.job, &floors).into_owned(), ..q.clone() })
                .collect(),
        )
    };
    let placed = homed.iter().find(|q| q.job.id == job.job.id).unwrap_or(job);
    // The GPUs of the job's partition: those of the clusters bound to it (to the Slurm
    // cluster, when none is bound to that partition).
    let bound = |partition: bool| -> u64 {
        let on = |s: &allot_compiler::ir::SlurmBinding| {
            s.cluster == cluster && (!partition || s.partition == placed.job.partition)
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
    // A QOS's protection: its PreemptExemptTime (allot writes a contract's minimum runtime).
    let exempt = |name: &str| {
        qos.iter().find(|q| q.name == name).and_then(|q| q.preempt_exempt).map_or(0, |s| s as i64)
    };
    let facts = Facts {
        job: placed,
        path: &path,
        budget: budget.as_ref(),
        queue: &homed,
        qos: &qos,
        fair_tree: &fair_tree,
        gpus,
        now,
        tier: explain::tier(job, &floors, exempt),
        floor: explain::floor_wait(&queue, job, &floors, gpus, exempt),
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
    /// With allot's floors: the tier a running job runs in.
    tier: Option<Tier<'a>>,
    /// With allot's floors: a pending job's floors, their room, and the work it would preempt.
    floor: Option<FloorWait<'a, 'a>>,
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

    /// With floors, a pending job whose floor has room but too few GPUs free: when the
    /// protection of the work it would preempt ends (not before now).
    fn preempt_from(&self) -> Option<i64> {
        let floor = self.waiting_floor().filter(|f| f.must_preempt(u64::from(self.job.job.gpus)))?;
        floor.preempt_from.map(|t| t.max(self.now))
    }

    /// A pending job's floors, when it waits for GPUs (or for room under a floor's cap,
    /// Slurm's `QOSGrpGRES`) rather than for a limit, a hold, a dependency or a time.
    fn waiting_floor(&self) -> Option<&FloorWait<'_, '_>> {
        let waits = self.job.waits_for_gpus() || self.job.reason == "QOSGrpGRES";
        self.floor.as_ref().filter(|_| waits)
    }

    /// What the floors say in place of Slurm's reason (see [`Facts::waiting_floor`]).
    fn floor_reason(&self) -> Option<String> {
        let floor = self.waiting_floor()?;
        Some(format!(
            "{} (Slurm: `{}`)",
            floor_why(floor, u64::from(self.job.job.gpus), self.now),
            self.job.reason
        ))
    }

    /// The running jobs it may preempt: with floors, those of the bound partition when its
    /// floor has room; else those whose QOS its QOS may preempt.
    fn may_preempt(&self) -> Vec<Preemptible<'_>> {
        match &self.floor {
            Some(floor) => floor.preemptible.clone(),
            None => self.preemptible(),
        }
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
            match (self.tier, until) {
                (Some(Tier::Floor(floor)), _) => out.push_str(&format!(
                    "  runs in the floor {} of budget {} ({} GPUs): never preempted\n",
                    floor.partition,
                    floor.budget().unwrap_or_default(),
                    floor.gpus
                )),
                (Some(Tier::Reserve(reserve)), _) => out.push_str(&format!(
                    "  runs in the reserve {} of contract {} ({} GPUs): never preempted\n",
                    reserve.partition,
                    reserve.contract().unwrap_or_default(),
                    reserve.gpus
                )),
                (Some(Tier::Over { over, from }), _) => out.push_str(&format!(
                    "  runs in {over}, beyond the budgets' floors: preemptible {} by any budget under its floor; the youngest jobs go first\n",
                    if from > self.now {
                        format!("from {} (its start plus its contract's protection)", time(from))
                    } else {
                        "now (past its contract's protection, or without one)".to_string()
                    }
                )),
                _ if preemptors.is_empty() => {
                    out.push_str("  no QOS may preempt it (its QOS is in no QOS's Preempt list)\n")
                }
                (_, Some(until)) if until > self.now => out.push_str(&format!(
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
        let why = self.floor_reason().unwrap_or_else(|| explain::reason(&self.job.reason));
        out.push_str(&format!("\nWhy: {why}\n"));
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
        let preemptible = self.may_preempt();
        let which = match &self.floor {
            Some(FloorWait { room: Some(room), over, .. }) => format!(
                "from its floor {}, the jobs in {over} once past their protection, the youngest first",
                room.floor.partition
            ),
            Some(FloorWait { floors, over, .. }) if floors.is_empty() => {
                format!("it may run only in {over}, beyond the floors, where no job preempts another")
            }
            Some(FloorWait { over, .. }) => {
                format!("its floors are full, and in {over}, beyond them, no job preempts another")
            }
            None => "its contract's QOS may preempt theirs".to_string(),
        };
        out.push_str(&format!("\nRunning jobs it may preempt ({which}): {}\n", preemptible.len()));
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
        let over = self.floor.as_ref().map_or("", |f| f.over);
        out.push_str(&match (self.preempt_from(), self.estimate()) {
            (Some(t), estimate) if estimate.is_none_or(|e| t <= e) => format!(
                "  allot: {} (from its floor it preempts jobs in {over} once their protection ends; Slurm's main scheduler does so at its next pass)\n",
                time(t)
            ),
            (_, Some(t)) => format!("  allot: {} (every running job runs to its time limit, the jobs ahead start in priority order, no backfill or preemption)\n", time(t)),
            (_, None) => "  allot: no estimate (a job it waits for has no time limit, or it asks for more GPUs than the cluster has)\n".to_string(),
        });
        // Slurm's backfill plans no preemption: a job that will start by preempting gets a
        // start when the jobs it would preempt reach their time limits.
        let backfill = if self.preempt_from().is_some() { ", which counts no preemption" } else { "" };
        out.push_str(&match self.job.expected_start {
            Some(t) => {
                format!("  Slurm (backfill's plan, as `squeue --start` shows it{backfill}): {}\n", time(t))
            }
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
            .may_preempt()
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
            "reason_explained": j.start.is_none().then(|| self.floor_reason().unwrap_or_else(|| explain::reason(&self.job.reason))),
            "budget_now": self.budget.map(|b| json!({
                "running_gpus": b.running_gpus, "pending_gpus": b.pending_gpus,
                "entitled_gpus": b.entitled_gpus, "standing": b.standing.word(),
            })),
            "fair_tree": fair_tree,
            "ahead": ahead,
            "preemptible": preemptible,
            "tier": self.tier.map(|tier| match tier {
                Tier::Floor(floor) => json!({ "partition": floor.partition, "floor": true, "budget": floor.budget(), "floor_gpus": floor.gpus }),
                Tier::Reserve(reserve) => json!({ "partition": reserve.partition, "floor": false, "reserve": reserve.contract(), "reserve_gpus": reserve.gpus }),
                Tier::Over { over, from } => json!({ "partition": over, "floor": false, "preemptible_from": from }),
            }),
            "floor": self.floor.as_ref().map(|f| json!({
                "floors": f.floors.iter().map(|r| json!({ "partition": r.floor.partition, "budget": r.floor.budget(), "gpus": r.floor.gpus, "in_use": r.in_use })).collect::<Vec<_>>(),
                "room": f.room.map(|r| r.floor.partition.as_str()),
                "over": f.over,
                "free_gpus": f.free_gpus,
                "preemptible_from": self.preempt_from(),
            })),
            "estimated_start": j.start.is_none().then(|| {
                let estimate = self.estimate();
                match self.preempt_from() {
                    Some(t) if estimate.is_none_or(|e| t <= e) => Some(t),
                    _ => estimate,
                }
            }).flatten(),
            "slurm_expected_start": self.job.expected_start,
        })
    }
}

/// What a pending job's floors say of its wait (`want`: its GPUs).
fn floor_why(floor: &FloorWait, want: u64, now: i64) -> String {
    let over = floor.over;
    let shown = |r: &explain::FloorRoom| format!("floor {} GPUs, {} in use", r.floor.gpus, r.in_use);
    let Some(room) = floor.room else {
        if floor.floors.is_empty() {
            return format!(
                "it may run only in {over}, beyond the budgets' floors (its QOS, or its budget, has no floor): it waits for GPUs to free up there, and preempts nothing"
            );
        }
        let full: Vec<String> =
            floor.floors.iter().map(|r| format!("{} ({})", r.floor.partition, shown(r))).collect();
        let (its, are) = if full.len() == 1 { ("its floor", "is") } else { ("its floors", "are") };
        let (full, asks) = (full.join(", "), gpus(want));
        return if floor.in_over {
            format!(
                "{its} {full} {are} too full for its {asks}: it waits in {over}, beyond its floor, for GPUs to free up, and preempts nothing"
            )
        } else {
            format!(
                "{its} {full} {are} too full for its {asks}, and it runs in its floor only (it may not be requeued): it waits for the floor's jobs to end"
            )
        };
    };
    let has = format!("its floor {} has room for it ({})", room.floor.partition, shown(&room));
    if floor.free_gpus >= want {
        return format!(
            "{has}, with {} free: it starts at the main scheduler's next pass, unless a job ahead takes them",
            gpus(floor.free_gpus)
        );
    }
    let free = floor.free_gpus;
    let lacks = format!(
        "{has}; of the {} it asks for, {free} {} free",
        gpus(want),
        if free == 1 { "is" } else { "are" }
    );
    match floor.preempt_from {
        Some(t) if t > now => format!(
            "{lacks}, and the rest are held by jobs in {over} still protected by their contracts: it preempts them (the youngest first) once their protection ends, at {}",
            render::time(t)
        ),
        Some(_) => format!(
            "{lacks}, and the rest are held by jobs in {over} past their protection: it preempts them (the youngest first) at the main scheduler's next pass"
        ),
        None => format!(
            "{lacks}, and the rest are held by jobs in floors, which are never preempted: it waits for them to end"
        ),
    }
}

/// `n GPUs`, `1 GPU`.
fn gpus(n: u64) -> String {
    if n == 1 { "1 GPU".to_string() } else { format!("{n} GPUs") }
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
            standing::Standing::Over =>
                "over its entitlement: its work beyond it is borrowed from budgets owed it",
            standing::Standing::Under => "under its entitlement: it is owed GPUs",
            standing::Standing::Within => "within its entitlement",
            standing::Standing::Idle => "idle",
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
