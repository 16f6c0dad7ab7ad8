//! The simulator: replays a trace's submissions (not its recorded starts) on each cluster's
//! nodes under a scheduling policy, and measures the simulated schedule with the
//! [`audit`](allot_verify::audit), so a simulated run and a recorded one report the same figures.
//!
//! The loop is event-driven: submissions (from the trace, in order), jobs becoming eligible,
//! job ends and the ends of minimum-runtime protection. After each instant's events every
//! cluster whose state changed is scheduled by its policy. Nodes are kept in free lists
//! indexed by free GPUs (best fit for jobs that fit a node; jobs larger than a node take
//! whole idle nodes), and decayed usage is kept per tree node in growing units so that a
//! start or an end updates one path of the tree.
//!
//! The simulation streams into its audit, which runs on a thread of its own: the simulator
//! steps from instant to instant and hands the audit its runs, as trace rows in the order
//! they entered their queue, in batches (a few batches ahead of the audit at most). A run is
//! handed on once no run still to end can have entered its queue before it: every such run
//! is of a job not yet finished (or not yet read), and so entered its queue no earlier than
//! the earliest of those jobs did, nor than now. A job's first run carries the job's wait
//! (all its time queued, over all its runs), so it waits with its job until the job
//! finishes. Finished jobs leave the simulation: memory holds
//! the jobs queued and running, the runs ended since the earliest of them entered its queue,
//! and a wait per job for the percentiles (the audit's, the largest jobs', the short jobs').
//!
//! A policy is a module behind one interface ([`engine::Rules`]): [`budget`] (the budget
//! rule, the reference), [`priority`] (static priorities, the baseline), [`slurm`] (the
//! Slurm configuration allot writes, as Slurm 22.05 schedules it) and [`kueue`] (Kueue's
//! admission and preemption, as a setup of Kueue objects configures them). The budget and priority
//! policies schedule in [`passes`]; the engine ([`engine`]) keeps the jobs, their runs and
//! events, on each cluster's nodes ([`pool`]), queues ([`queue`]) and usage ([`cluster`]).
//!
//! Under every policy a preempted resumable job keeps its progress, a non-resumable one
//! restarts (its GPU-hours are lost), and a contract's maximum runtime ends a job. A job's
//! wait is all the time it spent queued: from its eligibility to its first start, and from
//! each preemption to its restart.

mod budget;
mod cluster;
mod engine;
mod jobs;
pub mod kueue;
mod passes;
mod pool;
mod priority;
mod queue;
mod slurm;
mod victims;

pub mod decay;
pub mod render;
pub mod schedule;
pub mod slurm_settings;

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::sync::Arc;
use std::sync::mpsc::sync_channel;

use allot_compiler::ir::Model;
use allot_compiler::units::decay_half_life;

use self::cluster::ClusterState;
use self::engine::{Admission, Engine, Queued, Rules};
use self::jobs::{Due, ENTER, Ended, Holding, SimJob, Terms};
use crate::decay::{Decay, Usage};
use allot_verify::audit::{AuditError, audit};
use allot_verify::budgets::{Assignment, Budgets};
use allot_verify::figures::{Audit, Waits};
use allot_verify::trace::{CompactString, Job, TraceError, WaitCount};

pub use self::kueue::{ClusterObjects, Kueue, UNBUDGETED};
pub use crate::slurm_settings::SlurmSettings;

#[derive(Clone, Debug, PartialEq)]
pub enum Policy {
    /// The budget rule: budgets by hierarchical fair share, with the scheduling contracts.
    Budget,
    /// Static priorities, not preemptible up to a per-team cap.
    Priority,
    /// The Slurm configuration `allot build` writes, scheduled as Slurm schedules it.
    Slurm(SlurmSettings),
    /// Kueue's admission and preemption, as the Kueue objects of each cluster set them.
    Kueue(Arc<Kueue>),
}

impl Policy {
    /// The policy's name in the outputs.
    pub fn label(&self) -> &'static str {
        match self {
            Policy::Budget => "budget policy",
            Policy::Priority => "priority baseline",
            Policy::Slurm(_) => "Slurm as configured",
            Policy::Kueue(_) => "Kueue as configured",
        }
    }

    /// The policy's rules, for the engine.
    fn rules(&self) -> Box<dyn Rules> {
        match self {
            Policy::Budget => Box::new(budget::Budget),
            Policy::Priority => Box::new(priority::Priority),
            Policy::Slurm(settings) => Box::new(slurm::Slurm::new(*settings)),
            Policy::Kueue(kueue) => Box::new(kueue::Rules::new(kueue.clone())),
        }
    }
}

/// A simulated run: the audit of its schedule and what the schedule cost.
#[derive(Debug)]
pub struct Simulation {
    pub audit: Audit,
    pub preemptions: u64,
    /// Instants at which the policy's scheduling was cut short by its guard against
    /// endless cycles: only the `kueue` policy has one, for setups where Kueue itself would
    /// go round in circles (a livelock of preemptions: see `kueue::policy`). 0 otherwise.
    pub stalled: u64,
    /// GPU-hours of work redone because non-resumable jobs restarted.
    pub lost_gpu_hours: f64,
    /// Waits (all the time queued) of the largest jobs: those of at least `min_gpus` GPUs,
    /// the trace's 99th percentile of job size.
    pub largest: LargestJobs,
    /// Waits of the short jobs: those of at most [`SHORT_JOB`] seconds of work.
    pub short_jobs: Waits,
    /// Jobs the trace gives no runtime (never started, or never ended): not replayed.
    pub not_replayed: usize,
    /// Jobs larger than their cluster, or than their budget's `max-gpus` (or a budget's
    /// above it); under the `kueue` policy also those without a ClusterQueue (naming none
    /// the setup has, or of a budget that none takes: an inner project's own jobs, as Kueue
    /// queues only at the leaves), or larger than their ClusterQueue could ever hold: never
    /// placeable, not replayed.
    pub unplaceable: usize,
}

/// One run of a job: from a start to its end or its preemption.
#[derive(Clone, Debug)]
pub struct Run {
    pub id: Arc<str>,
    pub user: Arc<str>,
    pub cluster: Arc<str>,
    pub project: Arc<str>,
    pub contract: Arc<str>,
    pub gpus: u32,
    /// When the job was submitted to the trace.
    pub submit: i64,
    /// When it entered the queue for this run: its eligibility (else its submission), or its
    /// last preemption.
    pub queued: i64,
    pub start: i64,
    pub end: i64,
    /// The job's wait (all its time queued, over all its runs), on its first run; `None` on
    /// the others.
    pub wait: Option<i64>,
    /// 1 for the job's first run, 2 after one preemption, and so on.
    pub attempt: u32,
    pub ended_by: EndedBy,
    /// The job it was preempted for, when it was, and which of that job's runs (its
    /// `attempt`): a job may start and be preempted more than once in an instant.
    pub preempted_for: Option<(Arc<str>, u32)>,
    /// Its place among all the runs started, in the order the simulator started them (the
    /// runs of one instant start one after another).
    pub start_order: u64,
    /// (node, GPUs) it held on its cluster.
    pub nodes: Vec<(u32, u32)>,
}

impl Run {
    pub fn preempted(&self) -> bool {
        self.ended_by == EndedBy::Preempted
    }
}

/// What ended a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EndedBy {
    /// The job did all its work.
    Finished,
    /// It was preempted (and requeued).
    Preempted,
    /// Its contract's maximum runtime ended it, its work not done.
    MaxRuntime,
    /// The time limit it asked for ended it, its work not done (the Slurm policy's).
    TimeLimit,
}

impl EndedBy {
    /// Its name in a schedule (`ended_by`).
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Finished => "finished",
            EndedBy::Preempted => "preempted",
            EndedBy::MaxRuntime => "max-runtime",
            EndedBy::TimeLimit => "time-limit",
        }
    }
}

/// The most work (seconds) a short job does: an hour.
pub const SHORT_JOB: i64 = 3600;

#[derive(Debug, Default)]
pub struct LargestJobs {
    pub min_gpus: u32,
    pub waits: Waits,
}

/// Simulates `jobs` (in submit order) on the model's clusters under `policy`. `progress` is
/// called with the number of jobs read, every 65,536 jobs.
pub fn simulate(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    policy: Policy,
    skip_bad_rows: bool,
    progress: &mut dyn FnMut(usize),
) -> Result<Simulation, AuditError> {
    simulated(model, jobs, policy, skip_bad_rows, progress, None, 0)
}

/// Simulates as [`simulate`] does, and hands every run to `on_run` as the audit takes it:
/// the simulated schedule, as trace rows in the order they entered their queue (then the
/// order they ended), each once its job's wait is known, before it is audited and dropped.
pub fn simulate_into(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    policy: Policy,
    skip_bad_rows: bool,
    progress: &mut dyn FnMut(usize),
    on_run: &mut dyn FnMut(&Run),
) -> Result<Simulation, AuditError> {
    simulated(model, jobs, policy, skip_bad_rows, progress, Some(on_run), 0)
}

/// Simulates as [`simulate`] does, and keeps every run, in the order [`simulate_into`]
/// gives them: for tests, which look at the schedule itself.
pub fn simulate_with_runs(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    policy: Policy,
    skip_bad_rows: bool,
) -> Result<(Simulation, Vec<Run>), AuditError> {
    let mut runs = Vec::new();
    let simulation = simulated(
        model,
        jobs,
        policy,
        skip_bad_rows,
        &mut |_| {},
        Some(&mut |run: &Run| runs.push(run.clone())),
        0,
    )?;
    Ok((simulation, runs))
}

/// Simulates from a moment on, as [`simulate_with_runs`] does: `running` are jobs already
/// running then, started at their submission before anything else is scheduled (on their
/// cluster's nodes best fit; one that finds no room queues), and `queued` the jobs
/// after them (all in submit order). What a live view's estimate runs: the jobs running
/// now, with the work left to them, and those waiting.
pub fn simulate_from(
    model: &Model,
    running: Vec<Job>,
    queued: impl Iterator<Item = Job>,
    policy: Policy,
) -> Result<(Simulation, Vec<Run>), AuditError> {
    let mut runs = Vec::new();
    let pinned = running.len();
    let jobs = running.into_iter().chain(queued).map(Ok);
    let record = &mut |run: &Run| runs.push(run.clone());
    let simulation = simulated(model, jobs, policy, false, &mut |_| {}, Some(record), pinned)?;
    Ok((simulation, runs))
}

/// Simulates, the first `pinned` jobs of the trace started as they are submitted.
fn simulated(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    policy: Policy,
    skip_bad_rows: bool,
    progress: &mut dyn FnMut(usize),
    on_run: Option<&mut dyn FnMut(&Run)>,
    pinned: usize,
) -> Result<Simulation, AuditError> {
    let rules = policy.rules();
    // The budgets before the first grant boundary, and from each boundary on.
    let (budgets, later) = Budgets::over_time(model)?;
    // The decay allot's Slurm output sets: a half-life of window × ln 2, every 5 minutes
    // (or the Slurm's own calculation period).
    let decay = Decay::new(decay_half_life(model.policy.window_seconds) as f64, rules.decay_period());
    let contracts = Terms::of(model);
    let clusters = budgets
        .clusters
        .iter()
        .zip(&model.clusters)
        .map(|(budgets, c)| {
            let usage = Usage::new(budgets.hierarchy.len(), decay).with_phase(rules.decay_phase());
            ClusterState::new(
                budgets,
                c.gpus_per_node,
                usage,
                rules.ranking(),
                rules.by_lane(),
                contracts.iter().map(|t| t.reserve),
            )
        })
        .collect();
    let engine = Engine::new(contracts, rules.requeue(), on_run.is_some());
    let mut stream = Stream {
        budgets: &budgets,
        later: &later,
        period: 0,
        trace: jobs.peekable(),
        pinned,
        skip_bad_rows,
        progress,
        counts: Counts::default(),
        last_submit: None,
        clusters,
        rules,
        engine,
        on_run,
        done: false,
        error: None,
    };
    let audited = audit_alongside(model, &mut stream);
    // The simulation's own errors come first, as they did when it ran before its audit: an
    // audit that stopped early leaves the rest of the simulation to run.
    stream.by_ref().for_each(drop);
    if let Some(error) = stream.error {
        return Err(error);
    }
    let Counts { read, skipped, not_replayed, unplaceable } = stream.counts;
    let engine = stream.engine;
    if engine.jobs.added == 0 {
        return Err(AuditError::NoJobs(no_jobs_why(read, skipped, not_replayed, unplaceable)));
    }
    let mut audit = audited?;
    audit.skipped_rows = skipped;
    audit.jobs = engine.jobs.added as usize;
    Ok(Simulation {
        audit,
        preemptions: engine.preemptions,
        stalled: engine.stalled,
        lost_gpu_hours: engine.lost_gpu_seconds / 3600.0,
        largest: largest_jobs(engine.by_size),
        short_jobs: engine.short_jobs,
        not_replayed,
        unplaceable,
    })
}

/// Runs handed to the audit at a time, and batches of them simulated ahead of it, at most.
const RUNS_PER_BATCH: usize = 4096;
const BATCHES_AHEAD: usize = 4;

/// Audits the runs of `stream` on a thread of its own as the simulation, on this one,
/// hands them over in batches: the two share the work of a replay. The audit stopped (an
/// error), the simulation goes on no further here. Without a thread, the audit runs here.
fn audit_alongside<I: Iterator<Item = Result<Job, TraceError>>>(
    model: &Model,
    stream: &mut Stream<'_, '_, '_, I>,
) -> Result<Audit, AuditError> {
    let window = model.policy.window_seconds;
    let (sender, batches) = sync_channel::<Vec<Result<Job, TraceError>>>(BATCHES_AHEAD);
    std::thread::scope(|scope| {
        let audit_thread = std::thread::Builder::new()
            .name("audit".into())
            .spawn_scoped(scope, move || audit(model, batches.into_iter().flatten(), window, false));
        let Ok(audit_thread) = audit_thread else {
            return audit(model, stream, window, false);
        };
        loop {
            let batch: Vec<_> = stream.by_ref().take(RUNS_PER_BATCH).collect();
            // An empty batch is the end; a failed send, an audit that stopped.
            if batch.is_empty() || sender.send(batch).is_err() {
                break;
            }
        }
        drop(sender);
        audit_thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Why no job could be simulated: what became of the rows read.
fn no_jobs_why(read: usize, skipped: usize, not_replayed: usize, unplaceable: usize) -> String {
    if read == 0 && skipped == 0 {
        return "the trace has no rows".into();
    }
    let counts = [
        (not_replayed, "without a runtime (never started, or never ended, and no duration)"),
        (
            unplaceable,
            "larger than their cluster or their budget's max-gpus (or, under Kueue, without a ClusterQueue or larger than theirs)",
        ),
        (skipped, "skipped as bad rows"),
    ];
    let parts: Vec<String> =
        counts.iter().filter(|(n, _)| *n > 0).map(|(n, why)| format!("{n} {why}")).collect();
    format!("of {} rows, {}", read + skipped, parts.join(", "))
}

/// The largest jobs, from the waits of the jobs of each size: the 99th percentile of job
/// size (nearest rank below) and the waits of the jobs of that size or more.
fn largest_jobs(by_size: BTreeMap<u32, Waits>) -> LargestJobs {
    let jobs: usize = by_size.values().map(Waits::jobs).sum();
    let rank = (jobs * 99 / 100).min(jobs.saturating_sub(1));
    let mut counted = 0;
    let Some(min_gpus) = by_size.iter().find_map(|(&gpus, waits)| {
        counted += waits.jobs();
        (counted > rank).then_some(gpus)
    }) else {
        return LargestJobs::default();
    };
    let mut waits = Waits::default();
    for wait in by_size.range(min_gpus..).flat_map(|(_, w)| w.values()) {
        waits.push(i64::from(*wait));
    }
    LargestJobs { min_gpus, waits }
}

/// What became of the trace's rows.
#[derive(Default)]
struct Counts {
    read: usize,
    skipped: usize,
    not_replayed: usize,
    unplaceable: usize,
}

/// The simulation as its audit reads it: the runs as trace rows, in the order they entered
/// their queue (then in the order they ended), simulated as far as it takes to know them.
struct Stream<'a, 'p, 'r, I: Iterator<Item = Result<Job, TraceError>>> {
    budgets: &'a Budgets<'a>,
    /// The budgets from each later moment on (grants starting and ending), and how many of
    /// them are in force.
    later: &'a [(i64, Budgets<'a>)],
    period: usize,
    trace: Peekable<I>,
    /// The trace's jobs still to read that start as they are submitted (see
    /// [`simulate_from`]).
    pinned: usize,
    skip_bad_rows: bool,
    progress: &'p mut dyn FnMut(usize),
    counts: Counts,
    last_submit: Option<i64>,
    clusters: Vec<ClusterState<'a>>,
    rules: Box<dyn Rules>,
    engine: Engine,
    /// Where every run goes as it is handed to the audit, when someone records them.
    on_run: Option<&'r mut dyn FnMut(&Run)>,
    /// Every instant has been simulated.
    done: bool,
    /// What stopped the simulation: the trace's error, or a job the budgets cannot place.
    error: Option<AuditError>,
}

impl<I: Iterator<Item = Result<Job, TraceError>>> Iterator for Stream<'_, '_, '_, I> {
    type Item = Result<Job, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.error.is_none() {
            if let Some(run) = self.engine.release() {
                if self.on_run.is_some() {
                    let recorded = self.run(&run);
                    if let Some(on_run) = &mut self.on_run {
                        on_run(&recorded);
                    }
                }
                return Some(Ok(self.row(run)));
            }
            if self.done {
                break;
            }
            if let Err(error) = self.step() {
                self.error = Some(error);
            }
        }
        None
    }
}

impl<I: Iterator<Item = Result<Job, TraceError>>> Stream<'_, '_, '_, I> {
    /// Simulates the next instant: its events, its submissions, then every cluster they
    /// changed. Sets `done` when there is none.
    fn step(&mut self) -> Result<(), AuditError> {
        let next_submit = loop {
            match self.trace.peek() {
                Some(Ok(job)) => break Some(job.submit),
                Some(Err(_)) => {
                    let Some(Err(e)) = self.trace.next() else { unreachable!() };
                    if !self.skip_bad_rows {
                        return Err(AuditError::Trace(e));
                    }
                    self.counts.skipped += 1;
                }
                None => break None,
            }
        };
        let next_event = self.engine.events.peek().map(|Reverse(e)| e.at);
        let periodic = self.engine.last_instant.and_then(|last| {
            self.clusters.iter().filter_map(|cluster| self.rules.next_periodic(cluster, last)).min()
        });
        let Some(next) = [next_submit, next_event, periodic].into_iter().flatten().min() else {
            (self.progress)(self.counts.read);
            self.engine.horizon = i64::MAX;
            self.done = true;
            return Ok(());
        };
        // A grant boundary is an instant of its own while anything is left to simulate.
        let now = self.later.get(self.period).map_or(next, |(from, _)| next.min(*from));
        while let Some((from, period)) = self.later.get(self.period)
            && *from <= now
        {
            for (cluster, budgets) in self.clusters.iter_mut().zip(&period.clusters) {
                cluster.reweigh(budgets);
            }
            self.period += 1;
        }
        while let Some(Reverse(event)) = self.engine.events.peek().copied()
            && event.at <= now
        {
            self.engine.events.pop();
            self.engine.handle(event, &mut self.clusters);
        }
        while let Some(Ok(job)) = self.trace.peek()
            && job.submit <= now
        {
            let Some(Ok(job)) = self.trace.next() else { unreachable!() };
            self.admit(job, now)?;
        }
        for cluster in self.clusters.iter_mut() {
            if cluster.dirty || (cluster.unprotected && self.rules.schedules_at_protection_end()) {
                self.rules.schedule(&mut self.engine, cluster, now);
                cluster.dirty = false;
                cluster.unprotected = false;
            }
            if periodic == Some(now) {
                self.rules.periodic(&mut self.engine, cluster, now);
            }
        }
        self.engine.last_instant = Some(now);
        // Every run still to end is of a job not finished, or not yet read (which enters its
        // queue after now).
        self.engine.horizon = self.engine.unfinished.first().map_or(now, |&(entered, _)| entered.min(now));
        Ok(())
    }

    /// Takes a job of the trace submitted at `now` into the simulation, or counts why not.
    fn admit(&mut self, job: Job, now: i64) -> Result<(), AuditError> {
        if let Some(previous) = self.last_submit
            && job.submit < previous
        {
            return Err(AuditError::NotSorted { id: job.id.into(), submit: job.submit, previous });
        }
        self.last_submit = Some(job.submit);
        let pinned = self.pinned > 0;
        self.pinned = self.pinned.saturating_sub(1);
        let counts = &mut self.counts;
        counts.read += 1;
        if counts.read.is_multiple_of(65_536) {
            (self.progress)(counts.read);
        }
        // The work: the trace's duration, else its recorded runtime.
        let recorded = job.start.zip(job.end).map(|(start, end)| end - start);
        let Some(work) = job.duration.or(recorded) else {
            counts.not_replayed += 1;
            return Ok(());
        };
        let Assignment { cluster, node: leaf } = match self.budgets.assign(&job) {
            Ok(assignment) => assignment,
            Err(_) if self.skip_bad_rows => {
                counts.skipped += 1;
                return Ok(());
            }
            Err(error) => return Err(AuditError::Job { id: job.id.to_string(), error }),
        };
        let state = &mut self.clusters[cluster];
        if u64::from(job.gpus) > state.most_gpus(leaf.0) {
            counts.unplaceable += 1;
            return Ok(());
        }
        let engine = &mut self.engine;
        let contract = self.budgets.contract(&job);
        let terms = engine.contracts.iter().position(|c| *c.name == *contract);
        let Admission { tier, contractless, limit, max_runtime, cut_by } =
            self.rules.admit(&job, terms.map(|t| &engine.contracts[t]));
        let Some(Queued { tier, lane }) = self.rules.queue(state, leaf.0, &job, contract, tier) else {
            counts.unplaceable += 1;
            return Ok(());
        };
        // It enters its queue when it becomes eligible.
        let entered = job.eligible.map_or(job.submit, |e| e.max(job.submit));
        let id = engine.jobs.add(|number| SimJob {
            number,
            id: job.id,
            user: job.user,
            cluster: cluster as u32,
            leaf: leaf.0 as u32,
            terms: terms.map(|t| t as u16),
            gpus: job.gpus,
            tier,
            lane,
            contractless,
            limit,
            cut: (work > max_runtime).then_some(cut_by),
            submit: job.submit,
            entered,
            queued_at: entered,
            place: entered,
            waited: 0,
            work: work.min(max_runtime),
            remaining: work.min(max_runtime),
            expected_end: 0,
            start_order: 0,
            run: 0,
            started: None,
            floor: None,
            preemptible: false,
            holding: Holding::Own,
            placement: Vec::new(),
            first_run: None,
        });
        engine.unfinished.insert((entered, id));
        if entered > now {
            engine.events.push(Reverse(Due { at: entered, kind: ENTER, job: id, run: 0 }));
        } else {
            state.enqueue(&engine.jobs, id);
        }
        if pinned
            && entered <= now
            && let Some(placement) = state.pool.place(job.gpus)
        {
            engine.start(&*self.rules, state, id, placement, now);
        }
        Ok(())
    }

    /// A run as a schedule shows it.
    fn run(&self, run: &Ended) -> Run {
        let cluster = &self.clusters[run.cluster as usize];
        let detail = run.detail.as_deref().expect("recorded runs carry their detail");
        Run {
            id: (*run.id).into(),
            user: (*detail.user).into(),
            cluster: cluster.name.clone(),
            project: cluster.paths[run.leaf as usize].clone(),
            contract: self.engine.contract(run.terms).map_or_else(|| Arc::from(""), |c| c.name.clone()),
            gpus: run.gpus,
            submit: detail.submit,
            queued: run.queued,
            start: run.start,
            end: run.end,
            wait: run.wait,
            attempt: detail.attempt,
            ended_by: detail.ended_by,
            preempted_for: detail
                .preempted_for
                .as_ref()
                .map(|(id, attempt)| (Arc::from(id.as_str()), *attempt)),
            start_order: detail.start_order,
            nodes: detail.nodes.clone(),
        }
    }

    /// A run as a trace row, for the audit: it entered its queue when the row is submitted.
    fn row(&self, run: Ended) -> Job {
        let cluster = &self.clusters[run.cluster as usize];
        Job {
            id: run.id,
            project: (*cluster.paths[run.leaf as usize]).into(),
            cluster: (*cluster.name).into(),
            gpus: run.gpus,
            submit: run.queued,
            start: Some(run.start),
            end: Some(run.end),
            contract: self
                .engine
                .contract(run.terms)
                .map_or_else(CompactString::default, |c| (*c.name).into()),
            wait: run.wait.map_or(WaitCount::Elsewhere, WaitCount::Total),
            ..Job::default()
        }
    }
}
