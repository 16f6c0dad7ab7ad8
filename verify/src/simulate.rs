//! The simulator: replays a trace's submissions (not its recorded starts) on each cluster's
//! nodes under a scheduling policy, and measures the simulated schedule with the
//! [`audit`](crate::audit), so a simulated run and a recorded one report the same figures.
//!
//! The loop is event-driven: submissions (from the trace, in order), jobs becoming eligible,
//! job ends and the ends of minimum-runtime protection. After each instant's events every
//! cluster whose state changed is scheduled, pass after pass in that same instant, until no
//! further pass could change anything (see [`Simulator::pass`]), so GPUs a preemption freed
//! never sit idle while a job that may use them waits. Nodes are kept in free lists indexed
//! by free GPUs (best fit for jobs that fit a node; jobs larger than a node take whole idle
//! nodes), and decayed usage is kept per tree node in growing units so that a start or an
//! end updates one path of the tree.
//!
//! The simulation streams into its audit, which runs on a thread of its own: the simulator
//! steps from instant to instant and hands the audit its runs, as trace rows in the order
//! they entered their queue, in batches (a few batches ahead of the audit at most). A run is
//! handed on once no run still to end can have entered its queue before it: every such run is of a job not yet finished (or not yet read), and so
//! entered its queue no earlier than the earliest of those jobs did, nor than now. A job's
//! first run carries the job's wait (all its time queued, over all its runs), so it waits
//! with its job until the job finishes. Finished jobs leave the simulation: memory holds
//! the jobs queued and running, the runs ended since the earliest of them entered its queue,
//! and a wait per job for the percentiles (the audit's, the largest jobs', the short jobs').
//!
//! Under the budget and priority policies a pass takes the waiting jobs in the policy's
//! order. A job that would take a budget (or any budget above it) beyond its `max-gpus`
//! waits. The first job that cannot start, and
//! that no allowed preemption starts, holds a reservation (EASY backfill, as Slurm's backfill
//! scheduler): the earliest time it fits given the running jobs' expected ends, on the nodes
//! it would take then. Every later job starts now only if it fits without delaying that
//! reservation: it ends, by its time limit, before the reservation, or it leaves the reserved
//! GPUs free. A job's time limit is its contract's `max-runtime` when there is one, else its
//! own remaining work: the simulator knows runtimes exactly, which real users' limits do not
//! give a real scheduler, so backfill here is as good as it can be.
//!
//! Three policies:
//! - [`Policy::Budget`]: jobs in Fair Tree order over usage decayed as Slurm decays it
//!   ([`decay`](crate::decay): the half-life of window × ln 2 and the 5-minute passes
//!   allot's Slurm output sets; usage as `sshare` would show it): budgets ranked as Slurm's
//!   Fair Tree ranks users, ties given the same rank, then jobs by rank, the time they
//!   entered the queue and trace order. A budget below its entitlement whose job does not fit
//!   preempts jobs of budgets above theirs (and unbudgeted work), most over-served budget and
//!   newest job first, never a job inside its contract's minimum runtime, only as many as
//!   needed (a minimal set: none of them could be spared), and only when that brings the
//!   schedule closer to the budgets than it has been since demand last changed (more GPUs
//!   within them, or as many and fewer beyond), so that budgets cannot take turns preempting
//!   each other (the argument is at `closer_to_budgets`).
//! - [`Policy::Priority`]: the old way. A job starts high priority, not preemptible, while
//!   its team's high-priority GPUs stay within its guaranteed GPUs; beyond that it runs low
//!   and a waiting high-priority job preempts low ones at once (a minimal set, newest
//!   first). Jobs that would run high are served first, then by the time they entered the
//!   queue.
//! - [`Policy::Slurm`]: the configuration allot writes for Slurm, as Slurm 22.05 schedules
//!   it. Jobs of QOS [`PREEMPTIBLE_QOS`] after all others (every contract's QOS may preempt
//!   it, and Slurm sorts a job that may preempt another first), then by Fair Tree rank
//!   (computed again only at the decay's passes), submit time and trace order. The main
//!   scheduler (`Simulator::main_scheduler`) starts jobs in that order until one neither
//!   fits nor starts by preempting jobs of the preemptible QOS, and that one blocks the
//!   rest; the backfill scheduler (`Simulator::backfill`) runs every `bf_interval`,
//!   conservative and by requested time limits, holding whole nodes for the jobs it plans.
//!   A preempted job is requeued after `cred_expire` + 1, its place lost. What is not
//!   modelled is in docs/verifier.md.
//!
//! Under every policy a preempted resumable job keeps its progress, a non-resumable one
//! restarts (its GPU-hours are lost), and a contract's maximum runtime ends a job. A job's
//! wait is all the time it spent queued: from its eligibility to its first start, and from
//! each preemption to its restart.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::iter::Peekable;
use std::ops::{Bound, Index, IndexMut};
use std::sync::Arc;
use std::sync::mpsc::sync_channel;

use allot_compiler::ir::Model;
use allot_compiler::names::PREEMPTIBLE_QOS;
use allot_compiler::units::{DECAY_PERIOD, decay_half_life};

use crate::audit::{AuditError, audit};
use crate::budgets::{Assignment, Budgets, ClusterBudgets};
use crate::decay::{Decay, Usage};
use crate::entitlement::{Division, NodeId};
use crate::figures::{Audit, Waits};
use crate::trace::{CompactString, Job, TraceError, WaitCount};

pub use crate::slurm_settings::SlurmSettings;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Budgets by hierarchical fair share, with the scheduling contracts.
    Budget,
    /// Static priorities, not preemptible up to a per-team cap.
    Priority,
    /// The Slurm configuration `allot build` writes, scheduled as Slurm schedules it.
    Slurm(SlurmSettings),
}

impl Policy {
    /// The policy's name in the outputs.
    pub fn label(self) -> &'static str {
        match self {
            Policy::Budget => "budget policy",
            Policy::Priority => "priority baseline",
            Policy::Slurm(_) => "Slurm as configured",
        }
    }

    fn slurm(self) -> Option<SlurmSettings> {
        match self {
            Policy::Slurm(settings) => Some(settings),
            _ => None,
        }
    }
}

/// A simulated run: the audit of its schedule and what the schedule cost.
#[derive(Debug)]
pub struct Simulation {
    pub audit: Audit,
    pub preemptions: u64,
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
    /// above it): never placeable, not replayed.
    pub unplaceable: usize,
}

/// One run of a job: from a start to its end or its preemption.
#[derive(Clone, Debug)]
pub struct Run {
    pub id: Arc<str>,
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
    /// 1 for the job's first run, 2 after one preemption, and so on.
    pub attempt: u32,
    pub preempted: bool,
    /// (node, GPUs) it held on its cluster.
    pub nodes: Vec<(u32, u32)>,
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
    simulated(model, jobs, policy, skip_bad_rows, progress, false).map(|(simulation, _)| simulation)
}

/// Simulates as [`simulate`] does, and keeps every run, in the order they ended: for tests,
/// which look at the schedule itself (the command line keeps none: a run is dropped once
/// audited).
pub fn simulate_with_runs(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    policy: Policy,
    skip_bad_rows: bool,
) -> Result<(Simulation, Vec<Run>), AuditError> {
    simulated(model, jobs, policy, skip_bad_rows, &mut |_| {}, true)
}

/// The simulation, and its runs when `keep_runs` (else none).
fn simulated(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    policy: Policy,
    skip_bad_rows: bool,
    progress: &mut dyn FnMut(usize),
    keep_runs: bool,
) -> Result<(Simulation, Vec<Run>), AuditError> {
    let budgets = Budgets::new(model)?;
    // The decay allot's Slurm output sets: a half-life of window × ln 2, every 5 minutes
    // (or the Slurm's own calculation period).
    let period = policy.slurm().map_or(DECAY_PERIOD as i64, |s| s.calc_period);
    let decay = Decay::new(decay_half_life(model.policy.window_seconds) as f64, period);
    let clusters = budgets
        .clusters
        .iter()
        .zip(&model.clusters)
        .map(|(budgets, c)| ClusterState::new(budgets, c.gpus_per_node, decay, policy))
        .collect();
    let contracts = model
        .contracts
        .iter()
        .map(|c| Terms {
            name: c.name.as_str().into(),
            min_runtime: c.min_runtime_seconds as i64,
            max_runtime: c.max_runtime_seconds.map(|s| s as i64),
            resumable: c.resumable,
        })
        .collect();
    let mut stream = Stream {
        budgets: &budgets,
        trace: jobs.peekable(),
        skip_bad_rows,
        progress,
        counts: Counts::default(),
        last_submit: None,
        clusters,
        sim: Simulator {
            policy,
            contracts,
            jobs: Slots::default(),
            events: BinaryHeap::new(),
            unfinished: BTreeSet::new(),
            ended: BTreeSet::new(),
            runs_ended: 0,
            horizon: i64::MIN,
            preemptions: 0,
            lost_gpu_seconds: 0.0,
            by_size: BTreeMap::new(),
            short_jobs: Waits::default(),
            runs: keep_runs.then(Vec::new),
            buffers: Default::default(),
            plan: Plan::default(),
            last_instant: None,
        },
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
    let sim = stream.sim;
    if sim.jobs.added == 0 {
        return Err(AuditError::NoJobs(no_jobs_why(read, skipped, not_replayed, unplaceable)));
    }
    let mut audit = audited?;
    audit.skipped_rows = skipped;
    audit.jobs = sim.jobs.added as usize;
    let simulation = Simulation {
        audit,
        preemptions: sim.preemptions,
        lost_gpu_hours: sim.lost_gpu_seconds / 3600.0,
        largest: largest_jobs(sim.by_size),
        short_jobs: sim.short_jobs,
        not_replayed,
        unplaceable,
    };
    Ok((simulation, sim.runs.unwrap_or_default()))
}

/// Runs handed to the audit at a time, and batches of them simulated ahead of it, at most.
const RUNS_PER_BATCH: usize = 4096;
const BATCHES_AHEAD: usize = 4;

/// Audits the runs of `stream` on a thread of its own as the simulation, on this one,
/// hands them over in batches: the two share the work of a replay. The audit stopped (an
/// error), the simulation goes on no further here. Without a thread, the audit runs here.
fn audit_alongside<I: Iterator<Item = Result<Job, TraceError>>>(
    model: &Model,
    stream: &mut Stream<'_, I>,
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
        (unplaceable, "larger than their cluster or their budget's max-gpus"),
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
struct Stream<'a, I: Iterator<Item = Result<Job, TraceError>>> {
    budgets: &'a Budgets<'a>,
    trace: Peekable<I>,
    skip_bad_rows: bool,
    progress: &'a mut dyn FnMut(usize),
    counts: Counts,
    last_submit: Option<i64>,
    clusters: Vec<ClusterState<'a>>,
    sim: Simulator,
    /// Every instant has been simulated.
    done: bool,
    /// What stopped the simulation: the trace's error, or a job the budgets cannot place.
    error: Option<AuditError>,
}

impl<I: Iterator<Item = Result<Job, TraceError>>> Iterator for Stream<'_, I> {
    type Item = Result<Job, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.error.is_none() {
            if let Some(run) = self.sim.release() {
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

impl<I: Iterator<Item = Result<Job, TraceError>>> Stream<'_, I> {
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
        let next_event = self.sim.events.peek().map(|Reverse(e)| e.at);
        let backfill = self.sim.next_backfill(&self.clusters);
        let Some(now) = [next_submit, next_event, backfill].into_iter().flatten().min() else {
            (self.progress)(self.counts.read);
            self.sim.horizon = i64::MAX;
            self.done = true;
            return Ok(());
        };
        while let Some(Reverse(event)) = self.sim.events.peek().copied()
            && event.at <= now
        {
            self.sim.events.pop();
            self.sim.handle(event, &mut self.clusters);
        }
        while let Some(Ok(job)) = self.trace.peek()
            && job.submit <= now
        {
            let Some(Ok(job)) = self.trace.next() else { unreachable!() };
            self.admit(job, now)?;
        }
        for cluster in self.clusters.iter_mut() {
            if cluster.dirty {
                self.sim.schedule(cluster, now);
                cluster.dirty = false;
            }
            if backfill == Some(now)
                && let Some(settings) = self.sim.policy.slurm()
                && cluster.queued > 0
                && cluster.backfill_due
            {
                self.sim.backfill(cluster, now, settings);
            }
        }
        self.sim.last_instant = Some(now);
        // Every run still to end is of a job not finished, or not yet read (which enters its
        // queue after now).
        self.sim.horizon = self.sim.unfinished.first().map_or(now, |&(entered, _)| entered.min(now));
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
        let sim = &mut self.sim;
        let contract = self.budgets.contract(&job);
        let terms = sim.contracts.iter().position(|c| *c.name == *contract);
        let mut max = terms.and_then(|t| sim.contracts[t].max_runtime).unwrap_or(i64::MAX);
        // Slurm ends a job at its time limit, and serves jobs of the QOS every contract's
        // QOS may preempt after all others.
        let slurm = sim.policy.slurm().is_some();
        let requested = job.time_limit.unwrap_or(max);
        if slurm {
            max = max.min(requested);
        }
        let tier = u8::from(slurm && job.contract == PREEMPTIBLE_QOS);
        // It enters its queue when it becomes eligible.
        let entered = job.eligible.map_or(job.submit, |e| e.max(job.submit));
        let id = sim.jobs.add(|number| SimJob {
            number,
            id: job.id,
            cluster: cluster as u32,
            leaf: leaf.0 as u32,
            terms: terms.map(|t| t as u16),
            gpus: job.gpus,
            tier,
            requested,
            submit: job.submit,
            entered,
            queued_at: entered,
            place: entered,
            waited: 0,
            work: work.min(max),
            remaining: work.min(max),
            expected_end: 0,
            run: 0,
            started: None,
            high: false,
            preemptible: false,
            placement: Vec::new(),
            first_run: None,
        });
        sim.unfinished.insert((entered, id));
        if entered > now {
            sim.events.push(Reverse(Due { at: entered, kind: ENTER, job: id, run: 0 }));
        } else {
            state.enqueue(&sim.jobs, id);
        }
        Ok(())
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
            contract: run
                .terms
                .map_or_else(CompactString::default, |t| (*self.sim.contracts[usize::from(t)].name).into()),
            wait: run.wait.map_or(WaitCount::Elsewhere, WaitCount::Total),
            ..Job::default()
        }
    }
}

/// A contract's terms, as the simulator applies them.
struct Terms {
    name: Arc<str>,
    min_runtime: i64,
    max_runtime: Option<i64>,
    resumable: bool,
}

/// A job in the simulation: its number in trace order, which orders it among jobs wherever
/// they are otherwise equal (in queues, among victims, among events), and the slot that
/// holds it. Numbers come first: slots never decide an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct JobId {
    number: u32,
    slot: u32,
}

/// The jobs in the simulation (read and not finished), each in a slot that a later job takes
/// once it has finished.
#[derive(Default)]
struct Slots {
    slots: Vec<Option<SimJob>>,
    free: Vec<u32>,
    /// Jobs taken in so far: the next job's number.
    added: u32,
}

impl Slots {
    /// Takes in the job `make` makes of its number.
    fn add(&mut self, make: impl FnOnce(u32) -> SimJob) -> JobId {
        let number = self.added;
        self.added += 1;
        let job = Some(make(number));
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = job;
                slot
            }
            None => {
                self.slots.push(job);
                (self.slots.len() - 1) as u32
            }
        };
        JobId { number, slot }
    }

    /// The job `id` names, unless it has finished (its slot then is empty, or another's).
    fn get(&self, id: JobId) -> Option<&SimJob> {
        self.slots[id.slot as usize].as_ref().filter(|job| job.number == id.number)
    }

    /// Takes a finished job out, freeing its slot.
    fn remove(&mut self, id: JobId) -> SimJob {
        self.free.push(id.slot);
        self.slots[id.slot as usize].take().expect("a job in the simulation")
    }
}

impl Index<JobId> for Slots {
    type Output = SimJob;

    fn index(&self, id: JobId) -> &SimJob {
        self.get(id).expect("a job in the simulation")
    }
}

impl IndexMut<JobId> for Slots {
    fn index_mut(&mut self, id: JobId) -> &mut SimJob {
        self.slots[id.slot as usize]
            .as_mut()
            .filter(|job| job.number == id.number)
            .expect("a job in the simulation")
    }
}

struct SimJob {
    /// Its number in trace order (see [`JobId`]).
    number: u32,
    id: CompactString,
    cluster: u32,
    leaf: u32,
    terms: Option<u16>,
    gpus: u32,
    /// Its place among the queue's tiers, served in order: 1 for a job of the QOS every
    /// contract's may preempt under the Slurm policy, else 0.
    tier: u8,
    /// The time limit it asked for (else its contract's maximum runtime; `i64::MAX`: none).
    requested: i64,
    submit: i64,
    /// When it first entered its queue (its eligibility, else its submission): its place in
    /// the queue, kept when it requeues.
    entered: i64,
    /// When it last entered its queue: when it entered, or its last preemption.
    queued_at: i64,
    /// Its place in its queue: when it first entered, kept when it requeues, except under
    /// the Slurm policy (Slurm sets a requeued job's submit time to its requeue).
    place: i64,
    /// Seconds spent queued so far, over all its runs.
    waited: i64,
    /// Seconds of work it does (the trace's runtime, cut at the contract's maximum).
    work: i64,
    /// Seconds of work left.
    remaining: i64,
    /// While it runs: its start plus its time limit (what a reservation counts on).
    expected_end: i64,
    /// Counts its runs: an event of an earlier run is stale.
    run: u32,
    started: Option<i64>,
    /// Runs at high priority (the priority policy): not preemptible.
    high: bool,
    /// Runs past its protection: among its budget's preemptible runs.
    preemptible: bool,
    /// (node, GPUs taken) while it runs.
    placement: Vec<(u32, u32)>,
    /// Its first run, once preempted: it carries the job's wait, known when the job finishes.
    first_run: Option<Ended>,
}

/// A run that has ended, on its way to the audit. Ordered by when it entered its queue, then
/// by when it ended (the order of the audit's rows): the fields after those never decide.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Ended {
    queued: i64,
    /// How many runs ended before it.
    order: u64,
    start: i64,
    end: i64,
    id: CompactString,
    cluster: u32,
    leaf: u32,
    terms: Option<u16>,
    gpus: u32,
    /// The job's wait (all its time queued), on its first run; none on the others.
    wait: Option<i64>,
}

/// What a [`Due`] event is.
const END: u8 = 0;
/// The end of a run's protection: the job may be preempted from then on.
const PROTECTED_UNTIL: u8 = 1;
/// A job becomes eligible and enters its queue.
const ENTER: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at: i64,
    /// [`END`], [`PROTECTED_UNTIL`] or [`ENTER`].
    kind: u8,
    job: JobId,
    run: u32,
}

struct Simulator {
    policy: Policy,
    contracts: Vec<Terms>,
    jobs: Slots,
    events: BinaryHeap<Reverse<Due>>,
    /// The jobs read and not finished, by the time they first entered their queue.
    unfinished: BTreeSet<(i64, JobId)>,
    /// Runs ended and not yet handed to the audit, in the audit's order.
    ended: BTreeSet<Ended>,
    runs_ended: u64,
    /// No run still to end entered its queue before this.
    horizon: i64,
    preemptions: u64,
    lost_gpu_seconds: f64,
    /// The waits of the finished jobs of each size.
    by_size: BTreeMap<u32, Waits>,
    short_jobs: Waits,
    /// Every run, as it ends, when they are kept.
    runs: Option<Vec<Run>>,
    /// A pass's buffers: which budgets have tried a preemption, the cursor's heads.
    buffers: (Vec<bool>, BinaryHeap<Reverse<Head>>),
    /// The backfill scheduler's plan (the Slurm policy's), kept for its buffers.
    plan: Plan,
    /// The last instant simulated.
    last_instant: Option<i64>,
}

/// A reservation (EASY backfill): when the job that holds it can start at the latest, and
/// per node the GPUs free then that it does not need.
struct Reservation {
    at: i64,
    spare: Vec<u32>,
}

/// The plan of a run of Slurm's backfill scheduler, per node: when the running jobs give
/// their GPUs back (by their time limits, rounded down to the plan's resolution), and the
/// stretches of time held whole for waiting jobs, [from, to), in order (they never overlap
/// on a node). Kept from run to run, for its buffers.
#[derive(Default)]
struct Plan {
    resolution: i64,
    releases: Vec<Vec<(i64, u32)>>,
    held: Vec<Vec<(i64, i64)>>,
    /// The first release, and whether any node is held.
    first_release: i64,
    holds: bool,
}

impl Plan {
    /// The plan before any job is looked at: the running jobs of `cluster`, nothing held.
    fn start_over(&mut self, cluster: &ClusterState, jobs: &Slots, resolution: i64) {
        self.resolution = resolution;
        self.held.resize_with(cluster.pool.capacity.len(), Vec::new);
        self.held.iter_mut().for_each(Vec::clear);
        self.holds = false;
        self.count_releases(cluster, jobs);
    }

    /// The running jobs of `cluster` again (a preemption changed them), what is held kept.
    fn count_releases(&mut self, cluster: &ClusterState, jobs: &Slots) {
        self.releases.resize_with(cluster.pool.capacity.len(), Vec::new);
        self.releases.iter_mut().for_each(Vec::clear);
        self.first_release = cluster.ends.first().map_or(i64::MAX, |&(end, _)| self.floor(end));
        // By expected end: each node's releases come in order.
        for &(end, id) in &cluster.ends {
            let end = self.floor(end);
            for &(node, gpus) in &jobs[id].placement {
                self.releases[node as usize].push((end, gpus));
            }
        }
    }

    /// `t` rounded down to the plan's resolution, as Slurm's backfill rounds times.
    fn floor(&self, t: i64) -> i64 {
        t - t.rem_euclid(self.resolution)
    }

    /// The end of a stretch of `limit` seconds from `at`: rounded down, one unit at least.
    fn until(&self, at: i64, limit: i64) -> i64 {
        self.floor(at.saturating_add(limit)).max(self.floor(at).saturating_add(self.resolution))
    }

    /// Whether a running job gives GPUs back before `t`, or a node is held at all: else a
    /// job that does not fit now fits nowhere before `t`.
    fn changes_before(&self, t: i64) -> bool {
        self.holds || self.first_release < t
    }

    /// A job started on `placement`, to run until `end` by its limit.
    fn started(&mut self, placement: &[(u32, u32)], end: i64) {
        let end = self.floor(end);
        self.first_release = self.first_release.min(end);
        for &(node, gpus) in placement {
            let releases = &mut self.releases[node as usize];
            let at = releases.partition_point(|&(e, _)| e <= end);
            releases.insert(at, (end, gpus));
        }
    }

    /// The first time from `from` at which `node` is held by no job for `limit` seconds.
    fn gap(&self, node: usize, from: i64, limit: i64) -> i64 {
        let held = &self.held[node];
        let mut at = from;
        for &(start, end) in &held[held.partition_point(|&(_, end)| end <= from)..] {
            if self.until(at, limit) <= start {
                break;
            }
            at = at.max(end);
        }
        at
    }

    /// Per node, all its GPUs (`capacity`) when no job holds it from `at` for `limit`
    /// seconds, else none.
    fn open(&self, capacity: &[u32], at: i64, limit: i64) -> Vec<u32> {
        (0..capacity.len()).map(|n| if self.gap(n, at, limit) == at { capacity[n] } else { 0 }).collect()
    }

    /// When `node`, with `free` GPUs free now, has `gpus` free, by its releases (`None`:
    /// never; `idle` asks for all of them).
    fn free_at(&self, node: usize, free: u32, gpus: u32, now: i64) -> Option<i64> {
        let mut free = free;
        if free >= gpus {
            return Some(now);
        }
        self.releases[node].iter().find_map(|&(end, given)| {
            free += given;
            (free >= gpus).then_some(end.max(now))
        })
    }

    /// The earliest time from `now` at which `gpus` fit on `pool` for `limit` seconds:
    /// on one node, the first that has them free and is not held meanwhile; across nodes,
    /// whole nodes idle and not held. With the nodes it would take; `None`: never.
    fn earliest(&self, pool: &Pool, gpus: u32, limit: i64, now: i64) -> Option<(i64, Vec<(u32, u32)>)> {
        let nodes = 0..pool.capacity.len();
        if gpus <= pool.per_node {
            return nodes
                .filter_map(|n| {
                    let free = self.free_at(n, pool.free[n], gpus, now)?;
                    Some((self.gap(n, free, limit), n))
                })
                .min()
                .map(|(at, n)| (at, vec![(n as u32, gpus)]));
        }
        // Each node idle from when its last running job ends; a start can only come then, or
        // when a stretch held ends.
        let idle: Vec<Option<i64>> =
            nodes.clone().map(|n| self.free_at(n, pool.free[n], pool.capacity[n], now)).collect();
        let mut times: Vec<i64> = idle.iter().flatten().copied().collect();
        times.extend(self.held.iter().flatten().map(|&(_, end)| end).filter(|&end| end > now));
        times.sort_unstable();
        times.dedup();
        times.into_iter().find_map(|at| {
            let mut chosen = Vec::new();
            let mut room = 0;
            for n in nodes.clone() {
                if room >= gpus {
                    break;
                }
                if idle[n].is_some_and(|idle| idle <= at) && self.gap(n, at, limit) == at {
                    room += pool.capacity[n];
                    chosen.push((n as u32, pool.capacity[n]));
                }
            }
            (room >= gpus).then_some((at, chosen))
        })
    }

    /// Holds `nodes` whole from `at` for `limit` seconds.
    fn hold(&mut self, nodes: &[(u32, u32)], at: i64, limit: i64) {
        let until = self.until(at, limit);
        let at = self.floor(at);
        self.holds = true;
        for &(node, _) in nodes {
            let held = &mut self.held[node as usize];
            let place = held.partition_point(|&(start, _)| start < at);
            held.insert(place, (at, until));
        }
    }
}

impl Simulator {
    fn terms(&self, job: &SimJob) -> Option<&Terms> {
        job.terms.map(|t| &self.contracts[usize::from(t)])
    }

    /// A run's time limit from its start: under the Slurm policy the limit it asked for (a
    /// requeued job starts over with it); else its contract's maximum runtime, else its
    /// remaining work (the simulator knows it exactly).
    fn limit(&self, job: &SimJob) -> i64 {
        if self.policy.slurm().is_some() {
            return job.requested;
        }
        self.terms(job).and_then(|t| t.max_runtime).unwrap_or(job.remaining)
    }

    /// The next run of Slurm's backfill scheduler after the last instant simulated (every
    /// `bf_interval` seconds of the trace's clock), under the Slurm policy when a cluster
    /// has jobs waiting and has changed since its last run (else a run would change
    /// nothing).
    fn next_backfill(&self, clusters: &[ClusterState]) -> Option<i64> {
        let interval = self.policy.slurm()?.backfill_interval.max(1);
        let last = self.last_instant?;
        clusters
            .iter()
            .any(|c| c.queued > 0 && c.backfill_due)
            .then(|| (last.div_euclid(interval) + 1).saturating_mul(interval))
    }

    /// The next run for the audit, if no run still to end can come before it.
    fn release(&mut self) -> Option<Ended> {
        if self.ended.first()?.queued >= self.horizon {
            return None;
        }
        self.ended.pop_first()
    }

    fn handle(&mut self, due: Due, clusters: &mut [ClusterState]) {
        // An event of a job that has finished is stale.
        let Some(job) = self.jobs.get(due.job) else { return };
        let cluster = &mut clusters[job.cluster as usize];
        if due.kind == ENTER {
            cluster.enqueue(&self.jobs, due.job);
            return;
        }
        if job.run != due.run || job.started.is_none() {
            return;
        }
        cluster.dirty = true;
        match due.kind {
            END => self.stop(cluster, due.job, due.at, false),
            _ => cluster.unprotect(&mut self.jobs[due.job], due.job),
        }
    }

    /// Ends the current run of `id` at `now`: finished, or preempted (then requeued).
    fn stop(&mut self, cluster: &mut ClusterState, id: JobId, now: i64, preempted: bool) {
        let job = &self.jobs[id];
        let start = job.started.expect("a running job");
        // A job of the preemptible QOS has no contract of its own: requeued, it starts over.
        let resumable = self.terms(job).is_some_and(|t| t.resumable) && job.tier == 0;
        let elapsed = now - start;
        let contract =
            || job.terms.map_or_else(|| Arc::from(""), |t| self.contracts[usize::from(t)].name.clone());
        if let Some(runs) = &mut self.runs {
            runs.push(Run {
                id: (*job.id).into(),
                cluster: cluster.name.clone(),
                project: cluster.paths[job.leaf as usize].clone(),
                contract: contract(),
                gpus: job.gpus,
                submit: job.submit,
                queued: job.queued_at,
                start,
                end: now,
                attempt: job.run,
                preempted,
                nodes: job.placement.clone(),
            });
        }
        let run = Ended {
            queued: job.queued_at,
            order: self.runs_ended,
            start,
            end: now,
            id: job.id.clone(),
            cluster: job.cluster,
            leaf: job.leaf,
            terms: job.terms,
            gpus: job.gpus,
            wait: None,
        };
        self.runs_ended += 1;
        cluster.release(&mut self.jobs, id, now);
        let job = &mut self.jobs[id];
        job.started = None;
        if job.run == 1 {
            job.first_run = Some(run);
        } else {
            self.ended.insert(run);
        }
        if !preempted {
            self.finish(id);
            return;
        }
        self.preemptions += 1;
        if self.policy.slurm().is_some() {
            job.place = now;
        }
        if resumable {
            job.remaining -= elapsed;
        } else {
            self.lost_gpu_seconds += elapsed as f64 * f64::from(job.gpus);
        }
        job.queued_at = now;
        match self.policy.slurm() {
            // Slurm holds a requeued job until its credentials have expired, its place in
            // the queue lost.
            Some(settings) => self.events.push(Reverse(Due {
                at: now + settings.requeue_delay,
                kind: ENTER,
                job: id,
                run: job.run,
            })),
            None => cluster.enqueue(&self.jobs, id),
        }
    }

    /// Takes a job that has done its work out of the simulation: its first run, with the
    /// job's wait, goes on to the audit, and the wait to the largest and short jobs'.
    fn finish(&mut self, id: JobId) {
        let job = self.jobs.remove(id);
        self.unfinished.remove(&(job.entered, id));
        let mut first = job.first_run.expect("a job that ran has a first run");
        first.wait = Some(job.waited);
        self.ended.insert(first);
        self.by_size.entry(job.gpus).or_default().push(job.waited);
        if job.work <= SHORT_JOB {
            self.short_jobs.push(job.waited);
        }
    }

    /// Starts `id` (taken out of its queue) on `placement`.
    fn start(&mut self, cluster: &mut ClusterState, id: JobId, placement: Vec<(u32, u32)>, now: i64) {
        cluster.dequeue(&self.jobs, id);
        let min_runtime = self.terms(&self.jobs[id]).map_or(0, |t| t.min_runtime);
        let limit = self.limit(&self.jobs[id]);
        let job = &mut self.jobs[id];
        let high = self.policy == Policy::Priority && cluster.has_high_room(job.leaf as usize, job.gpus);
        job.run += 1;
        job.started = Some(now);
        job.waited += now - job.queued_at;
        job.placement = placement;
        job.high = high;
        job.expected_end = now.saturating_add(limit);
        self.events.push(Reverse(Due { at: now + job.remaining, kind: END, job: id, run: job.run }));
        // Only the budget policy protects runs; one whose protection outlasts its work is
        // protected to its end. Under the Slurm policy only the preemptible QOS is.
        let protected = self.policy == Policy::Budget && min_runtime > 0;
        job.preemptible = match self.policy {
            Policy::Slurm(_) => job.tier == 1,
            _ => !protected,
        };
        if protected && min_runtime < job.remaining {
            self.events.push(Reverse(Due {
                at: now + min_runtime,
                kind: PROTECTED_UNTIL,
                job: id,
                run: job.run,
            }));
        }
        cluster.occupy(&self.jobs, id, now);
    }

    /// Schedules a cluster at `now`, pass after pass until no further pass could change
    /// anything. Demand
    /// (each budget's running and waiting GPUs) stays as it is through starts and
    /// preemptions, and so do the entitlements.
    fn schedule(&mut self, cluster: &mut ClusterState, now: i64) {
        if self.policy.slurm().is_some() {
            self.main_scheduler(cluster, now);
            return;
        }
        let mut entitled = std::mem::take(&mut cluster.entitled);
        entitled.clear();
        if self.policy == Policy::Budget {
            entitled.extend_from_slice(cluster.division.entitlement().allocations());
        }
        while self.pass(cluster, &entitled, now) {}
        cluster.entitled = entitled;
    }

    /// One scheduling pass: the waiting jobs in the policy's order, each started if it fits
    /// (within its budgets' `max-gpus`, and, once a job holds a reservation, without delaying
    /// it), else, for the first such job of each budget, by a preemption if the policy
    /// allows one. Whether a next pass could change more: a preemption was made, or a job
    /// started after one was held back. (When every start came before the first job held
    /// back, a next pass would find the jobs held back as this one left them.)
    fn pass(&mut self, cluster: &mut ClusterState, entitled: &[f64], now: i64) -> bool {
        cluster.rank(self.policy, now);
        // The walk's buffers, kept from pass to pass.
        let (mut tried, mut heads) = std::mem::take(&mut self.buffers);
        tried.clear();
        tried.resize(cluster.by_size.len(), false);
        let again = self.walk(cluster, entitled, now, &mut tried, &mut heads);
        self.buffers = (tried, heads);
        again
    }

    /// The walk of a pass over the waiting jobs (see [`Simulator::pass`]): `tried` says
    /// which budgets have had their try at a preemption.
    fn walk(
        &mut self,
        cluster: &mut ClusterState,
        entitled: &[f64],
        now: i64,
        tried: &mut [bool],
        heads: &mut BinaryHeap<Reverse<Head>>,
    ) -> bool {
        // The priority policy serves the jobs that would run high first, then the others.
        let phases: &[Option<bool>] = match self.policy {
            Policy::Priority => &[Some(true), Some(false)],
            _ => &[None],
        };
        let mut holder: Option<JobId> = None;
        let mut reservation: Option<Reservation> = None;
        // A job was held back: it did not start, and its phase and limits were not why.
        let mut held = false;
        let mut again = false;
        for &phase in phases {
            let mut cursor = Cursor::new(heads);
            while let Some(head) = cursor.next(cluster) {
                if cluster.pool.free_gpus == 0 && !self.may_preempt(cluster, tried, phase, entitled) {
                    break;
                }
                // The job itself is read only if it may start: most heads are dropped.
                let Head(_, _, _, id, leaf, gpus) = head;
                // Dropping a group (not following it) skips the rest of its jobs, all of the
                // same budget and size, for this pass; each condition only grows stricter as
                // the pass goes on (jobs start, none ends), so none of them could start:
                // - the priority phase is not theirs (high-priority GPUs only grow);
                // - they would take a budget beyond its `max-gpus` (running GPUs only grow);
                // - they fit nowhere now (free GPUs only shrink), their budget has had its
                //   try at a preemption, and a job already holds the reservation.
                if phase.is_some_and(|high| cluster.has_high_room(leaf, gpus) != high)
                    || !cluster.within_limits(leaf, gpus)
                {
                    continue;
                }
                let fits = cluster.pool.fits(gpus);
                if !fits && tried[leaf] && holder.is_some() {
                    continue;
                }
                cursor.follow(cluster, head);
                if fits {
                    let limit = self.limit(&self.jobs[id]);
                    let placement = match holder {
                        None => cluster.pool.place(gpus),
                        Some(holder) => {
                            let reserved =
                                reservation.get_or_insert_with(|| cluster.reserve(&self.jobs, holder));
                            if now.saturating_add(limit) <= reserved.at {
                                cluster.pool.place(gpus)
                            } else {
                                cluster.pool.place_within(gpus, &mut reserved.spare)
                            }
                        }
                    };
                    if let Some(placement) = placement {
                        self.start(cluster, id, placement, now);
                        again |= held;
                        continue;
                    }
                }
                held = true;
                if !tried[leaf] {
                    tried[leaf] = true;
                    if !fits && self.preempt_for(cluster, id, entitled, now) {
                        // The running jobs changed: a new pass, with a new reservation.
                        return true;
                    }
                }
                holder.get_or_insert(id);
            }
        }
        again
    }

    /// Whether a job not yet looked at could still start by a preemption in this pass.
    fn may_preempt(
        &self,
        cluster: &ClusterState,
        tried: &[bool],
        phase: Option<bool>,
        entitled: &[f64],
    ) -> bool {
        match self.policy {
            Policy::Budget => cluster
                .leaves
                .iter()
                .any(|&l| !tried[l] && !cluster.by_size[l].is_empty() && cluster.running[l] < entitled[l]),
            // Its schedulers walk the queue on their own.
            Policy::Slurm(_) => false,
            Policy::Priority => {
                phase == Some(true)
                    && cluster.leaves.iter().any(|&l| !tried[l] && !cluster.by_size[l].is_empty())
            }
        }
    }

    /// Preempts for a waiting job when the policy allows it and a set of victims frees room
    /// for it; starts it then. The victims are a minimal set: none could be spared.
    fn preempt_for(&mut self, cluster: &mut ClusterState, id: JobId, entitled: &[f64], now: i64) -> bool {
        let job = &self.jobs[id];
        let (leaf, gpus) = (job.leaf as usize, job.gpus);
        if self.policy == Policy::Budget {
            cluster.observe_standing(entitled);
        }
        let victims = match self.policy {
            Policy::Budget => self.enough(&cluster.pool, gpus, cluster.budget_victims(leaf, entitled)),
            Policy::Priority => {
                self.enough(&cluster.pool, gpus, self.priority_victims(cluster, id).into_iter())
            }
            Policy::Slurm(_) => self.enough(&cluster.pool, gpus, self.slurm_victims(cluster)),
        };
        let Some(victims) = victims else { return false };
        let victims = self.spare(&cluster.pool, gpus, victims);
        if self.policy == Policy::Budget {
            match self.closer_to_budgets(cluster, entitled, leaf, gpus, &victims) {
                Some(standing) => cluster.best.standing = standing,
                None => return false,
            }
        }
        for victim in victims {
            self.stop(cluster, victim, now, true);
        }
        let placement = cluster.pool.place(gpus).expect("the freed room fits the job");
        self.start(cluster, id, placement, now);
        true
    }

    /// The first `candidates` that free room enough for `gpus`, if they all do.
    fn enough(&self, pool: &Pool, gpus: u32, candidates: impl Iterator<Item = JobId>) -> Option<Vec<JobId>> {
        let mut candidates = candidates.peekable();
        // Most attempts have no candidate: they count no room.
        candidates.peek()?;
        let mut room = pool.room_for(gpus);
        let mut victims = Vec::new();
        for victim in candidates {
            victims.push(victim);
            if room.give_back(&self.jobs[victim].placement) {
                return Some(victims);
            }
        }
        None
    }

    /// Makes `victims` (in the order they were chosen, enough to free room for `gpus`)
    /// minimal: each is given back, the one chosen last first, when the others free room
    /// enough without it. Room only grows with more victims, so once one is found needed it
    /// stays needed as others are spared: no victim of the result can be spared. (Minimal,
    /// not the fewest possible: a smaller set of other jobs may exist.)
    fn spare(&self, pool: &Pool, gpus: u32, mut victims: Vec<JobId>) -> Vec<JobId> {
        // The last one chosen is needed: the ones before it did not free room enough.
        for i in (0..victims.len().saturating_sub(1)).rev() {
            let mut room = pool.room_for(gpus);
            let mut fits = false;
            for (j, &v) in victims.iter().enumerate() {
                if j != i {
                    fits |= room.give_back(&self.jobs[v].placement);
                }
            }
            if fits {
                victims.remove(i);
            }
        }
        victims
    }

    /// Whether starting `gpus` for `leaf` in place of the `victims` brings the schedule
    /// closer to the budgets than it has been since demand last changed: more GPUs within
    /// budgets (each budget's running GPUs up to its entitlement, summed) than the best
    /// standing seen, or as many and fewer beyond them.
    ///
    /// Why budgets cannot take turns preempting each other: while demand (each budget's
    /// running and waiting GPUs) is unchanged, the entitlements stay as they are, and every
    /// accepted preemption raises the best standing seen. A standing takes finitely many
    /// values (running GPUs are whole numbers), so only finitely many preemptions happen
    /// before demand changes, and demand changes only when a job enters its queue or ends.
    /// Comparing with the current standing alone would not do: starts on the GPUs a
    /// preemption left idle can raise the GPUs beyond budgets again, and the same exchange
    /// would then repeat every time a protection ends.
    ///
    /// A bound that follows: the standings accepted while demand is unchanged strictly
    /// increase, the GPUs within never fall (starts only add GPUs) and, at equal GPUs within,
    /// the GPUs beyond fall by at least one each time (running GPUs are whole numbers). The
    /// tests check a consequence they can count (see `verify/tests/simulate.rs`).
    fn closer_to_budgets(
        &self,
        cluster: &ClusterState,
        entitled: &[f64],
        leaf: usize,
        gpus: u32,
        victims: &[JobId],
    ) -> Option<Standing> {
        // Each budget's change, by budget.
        let mut change: Vec<(usize, f64)> = vec![(leaf, f64::from(gpus))];
        for &victim in victims {
            let job = &self.jobs[victim];
            let l = job.leaf as usize;
            match change.binary_search_by_key(&l, |&(l, _)| l) {
                Ok(i) => change[i].1 -= f64::from(job.gpus),
                Err(i) => change.insert(i, (l, -f64::from(job.gpus))),
            }
        }
        // Observed just before (see `preempt_for`): the standing now.
        let mut after = cluster.current;
        for &(l, delta) in &change {
            let (before, then) = (cluster.running[l], cluster.running[l] + delta);
            after.within += then.min(entitled[l]) - before.min(entitled[l]);
            after.beyond += (then - entitled[l]).max(0.0) - (before - entitled[l]).max(0.0);
        }
        after.better_than(&cluster.best.standing).then_some(after)
    }

    /// Low-priority running jobs, newest first, when the job would run at high priority.
    fn priority_victims(&self, cluster: &ClusterState, id: JobId) -> Vec<JobId> {
        let job = &self.jobs[id];
        if !cluster.has_high_room(job.leaf as usize, job.gpus) {
            return Vec::new();
        }
        self.newest_preemptible(cluster, |j| !j.high)
    }

    /// The preemptible running jobs that `keep` keeps, of every budget, newest first.
    fn newest_preemptible(&self, cluster: &ClusterState, keep: impl Fn(&SimJob) -> bool) -> Vec<JobId> {
        let mut jobs: Vec<(i64, JobId)> = cluster
            .leaves
            .iter()
            .flat_map(|&l| cluster.preemptible[l].iter().copied())
            .filter(|&(_, j)| keep(&self.jobs[j]))
            .collect();
        jobs.sort_unstable_by(|a, b| b.cmp(a));
        jobs.into_iter().map(|(_, j)| j).collect()
    }

    /// The running jobs of the preemptible QOS in the order Slurm's preempt/qos offers them:
    /// (all of one QOS priority) the fewest nodes first, then the oldest job.
    fn slurm_victims(&self, cluster: &ClusterState) -> std::vec::IntoIter<JobId> {
        let mut jobs: Vec<JobId> =
            cluster.leaves.iter().flat_map(|&l| cluster.preemptible[l].iter().map(|&(_, j)| j)).collect();
        jobs.sort_unstable_by_key(|&j| (self.jobs[j].placement.len(), j));
        jobs.into_iter()
    }

    /// Slurm's main scheduler: the waiting jobs in priority order, each started if it fits,
    /// or, when its QOS may preempt, by preempting jobs of the preemptible QOS. A job that
    /// its budgets' `max-gpus` hold back is passed over (Slurm passes over a job that an
    /// association limit holds); the first job that cannot start blocks every job after it,
    /// which wait for the backfill scheduler.
    fn main_scheduler(&mut self, cluster: &mut ClusterState, now: i64) {
        cluster.rank(self.policy, now);
        let (tried, mut heads) = std::mem::take(&mut self.buffers);
        let mut cursor = Cursor::new(&mut heads);
        while let Some(head) = cursor.next(cluster) {
            let Head(tier, _, _, id, leaf, gpus) = head;
            if !cluster.within_limits(leaf, gpus) {
                continue;
            }
            cursor.follow(cluster, head);
            if let Some(placement) = cluster.pool.place(gpus) {
                self.start(cluster, id, placement, now);
            } else if tier > 0 || !self.preempt_for(cluster, id, &[], now) {
                break;
            }
        }
        self.buffers = (tried, heads);
    }

    /// A run of Slurm's backfill scheduler: the waiting jobs in priority order (the first
    /// `bf_max_job_test` of them), each started now if it fits on nodes that no job before
    /// it holds before it would end (by its time limit), else given the earliest time it
    /// fits, by the time limits of the jobs running, on nodes free of the plan so far; the
    /// nodes it would take are held whole for it from then to its time limit (Slurm plans
    /// whole nodes). Times are rounded down to `bf_resolution`, as Slurm rounds them. A job
    /// whose QOS may preempt preempts when no job before it holds any node before it would
    /// end (Slurm's backfill preempts on the nodes free of the plan).
    fn backfill(&mut self, cluster: &mut ClusterState, now: i64, settings: SlurmSettings) {
        cluster.rank(self.policy, now);
        cluster.backfill_due = false;
        let mut plan = std::mem::take(&mut self.plan);
        plan.start_over(cluster, &self.jobs, settings.backfill_resolution.max(1));
        let (tried, mut heads) = std::mem::take(&mut self.buffers);
        let mut cursor = Cursor::new(&mut heads);
        let mut tested = 0;
        // Jobs of the preemptible QOS run: a job may start by preempting them.
        let victims =
            |cluster: &ClusterState| cluster.leaves.iter().any(|&l| !cluster.preemptible[l].is_empty());
        let mut preemptible = victims(cluster);
        // The jobs looked at since the plan and the running jobs last changed that changed
        // neither, by (tier, GPUs, time limit): a job like one of them would change nothing
        // either (its answer depends on nothing else), so it is counted and passed over.
        let mut unchanged: Vec<(u8, u32, i64)> = Vec::new();
        while let Some(head) = cursor.next(cluster)
            && tested < settings.backfill_max_jobs
        {
            // Nothing free and nothing to preempt: no job after this one can start now, and
            // what the plan holds for them changes nothing else.
            if cluster.pool.free_gpus == 0 && !preemptible {
                break;
            }
            let Head(tier, _, _, id, leaf, gpus) = head;
            if !cluster.within_limits(leaf, gpus) {
                continue;
            }
            cursor.follow(cluster, head);
            tested += 1;
            let limit = self.limit(&self.jobs[id]);
            let like = (tier, gpus, limit);
            if unchanged.contains(&like) {
                continue;
            }
            // The nodes open to it are looked up only when it could use them.
            let placement = if cluster.pool.fits(gpus) {
                let mut open = plan.open(&cluster.pool.capacity, now, limit);
                cluster.pool.place_within(gpus, &mut open)
            } else {
                None
            };
            if let Some(placement) = placement {
                plan.started(&placement, now.saturating_add(limit));
                self.start(cluster, id, placement, now);
                unchanged.clear();
            } else if tier > 0
                || !preemptible
                || plan.open(&cluster.pool.capacity, now, limit) != cluster.pool.capacity
                || !self.preempt_for(cluster, id, &[], now)
            {
                // Slurm reserves nothing for a job that cannot start within its window (nor
                // can any job that does not fit now, when nothing is held and no running job
                // gives GPUs back within it).
                let horizon = now.saturating_add(settings.backfill_window);
                if plan.changes_before(horizon)
                    && let Some((at, nodes)) = plan.earliest(&cluster.pool, gpus, limit, now)
                    && at < horizon
                {
                    plan.hold(&nodes, at, limit);
                    unchanged.clear();
                } else {
                    unchanged.push(like);
                }
            } else {
                // The preemption changed the running jobs: the plan starts again from them.
                plan.count_releases(cluster, &self.jobs);
                preemptible = victims(cluster);
                unchanged.clear();
            }
        }
        self.buffers = (tried, heads);
        self.plan = plan;
        // Its own starts need no second run.
        cluster.backfill_due = false;
    }
}

/// The waiting jobs of a cluster in the policy's order, merged from the budgets' queues by
/// (rank of the budget, time entered, trace order). Each queue is read by job size (one
/// group per budget and size, each in queue order), so that a pass can drop a whole group
/// none of whose jobs can start in it; a group is read from where the last job taken from
/// it stood, so starts during the walk do not disturb it. A budget's groups join the merge
/// only when the walk reaches its rank: a pass that ends early reads no further.
struct Cursor<'h> {
    heads: &'h mut BinaryHeap<Reverse<Head>>,
    /// How many budgets, in rank order, have joined.
    joined: usize,
}

/// The next job of one group: (tier, rank, time entered, job, leaf, GPUs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Head(u8, u32, i64, JobId, usize, u32);

impl<'h> Cursor<'h> {
    /// A cursor over a cluster's queues by the ranks [`ClusterState::rank`] brought up to
    /// date, in `heads` (emptied).
    fn new(heads: &'h mut BinaryHeap<Reverse<Head>>) -> Cursor<'h> {
        heads.clear();
        Cursor { heads, joined: 0 }
    }

    /// The next job; its group goes on only when [`Cursor::follow`] says so.
    fn next(&mut self, cluster: &ClusterState) -> Option<Head> {
        // Every budget that could have a job before the next one joins before it is taken
        // (tied budgets merge their jobs): its jobs of the first tier are ranked no later.
        while let Some(&(rank, leaf)) = cluster.ranked.get(self.joined)
            && self.heads.peek().is_none_or(|Reverse(head)| (0, rank) <= (head.0, head.1))
        {
            for group in &cluster.by_size[leaf] {
                let (entered, id) = group.first;
                self.heads.push(Reverse(Head(group.tier, rank, entered, id, leaf, group.gpus)));
            }
            self.joined += 1;
        }
        self.heads.pop().map(|Reverse(head)| head)
    }

    /// Goes on with the group of `head` after it.
    fn follow(&mut self, cluster: &ClusterState, head: Head) {
        let Head(tier, rank, entered, id, leaf, gpus) = head;
        let Some(group) = cluster.by_size[leaf].iter().find(|group| (group.tier, group.gpus) == (tier, gpus))
        else {
            return;
        };
        let after = (Bound::Excluded((entered, id)), Bound::Unbounded);
        if let Some(&(entered, id)) = group.jobs.range(after).next() {
            self.heads.push(Reverse(Head(tier, rank, entered, id, leaf, gpus)));
        }
    }
}

/// The waiting jobs of one budget and tier that ask for the same GPUs, by (time entered,
/// job), and the first of them (read at every pass).
struct Group {
    tier: u8,
    gpus: u32,
    first: (i64, JobId),
    jobs: BTreeSet<(i64, JobId)>,
}

/// One cluster: its tree, nodes, queues and usage.
struct ClusterState<'b> {
    budgets: &'b ClusterBudgets,
    /// The cluster's name and each node's project path, shared by the runs.
    name: Arc<str>,
    paths: Vec<Arc<str>>,
    pool: Pool,
    leaves: Vec<usize>,
    /// Waiting jobs per tree node (leaves only), grouped by GPUs asked for: each leaf's
    /// groups by GPUs, none empty.
    by_size: Vec<Vec<Group>>,
    waiting: Vec<f64>,
    /// Running GPUs per tree node (an inner node: its subtree's).
    running: Vec<f64>,
    /// Running jobs per leaf past their protection (all of them under the priority policy),
    /// by (start, job): the ones a preemption may take.
    preemptible: Vec<BTreeSet<(i64, JobId)>>,
    /// Running jobs by (expected end, job): what a reservation counts on.
    ends: BTreeSet<(i64, JobId)>,
    /// High-priority GPUs per leaf, and each node's guaranteed GPUs (the priority policy's
    /// caps).
    high: Vec<u64>,
    guaranteed: Vec<u64>,
    /// Each node's `max-gpus` (for an inner node, its whole subtree's).
    limits: Vec<Option<u64>>,
    /// The cluster divided by demand (each leaf's running and waiting GPUs), and each
    /// node's share of it as a scheduling pass reads it.
    division: Division<'b>,
    entitled: Vec<f64>,
    usage: Usage,
    /// The leaves in rank order, with their ranks, as [`ClusterState::rank`] last brought them
    /// up to date, and the decay pass it did so in (`None`: a run has stopped since).
    ranked: Vec<(u32, usize)>,
    ranked_in: Option<i64>,
    /// Each node's decayed usage per unit of share as last read, with the decay pass it was
    /// read in (`None`: a run has stopped on it since).
    per_share: Vec<Option<(i64, f64)>>,
    /// Each node's children, then the roots, unbudgeted work left out: in Fair Tree's order
    /// as last ranked.
    siblings: Vec<Vec<NodeId>>,
    /// Each node's place among tied siblings: leaves first by index, then inner nodes by
    /// name.
    ties: Vec<(bool, usize)>,
    dirty: bool,
    /// Jobs in its queues.
    queued: usize,
    /// Something started, stopped or entered a queue since the last backfill run (the
    /// Slurm policy's): a run now could start a job.
    backfill_due: bool,
    /// Ranks are computed again when a run stops, not only at the decay's passes (Slurm
    /// computes fair-share factors only at its passes).
    rank_at_stops: bool,
    /// The best standing since demand last changed (the budget policy's preemption rule).
    best: Best,
    /// The standing when last observed: the standing now while `standing_seen`.
    current: Standing,
    /// The budgets over their entitlement when the standing was last observed, by (budget,
    /// GPUs beyond), the most over-served first.
    over: Vec<(usize, f64)>,
    /// Nothing has started, stopped, entered or left a queue since the standing was last
    /// observed: observing it again would change nothing.
    standing_seen: bool,
}

/// How close running work is to the budgets: GPUs running within entitlements (each
/// budget's running GPUs up to its entitlement, summed) and beyond them.
#[derive(Clone, Copy, Debug, Default)]
struct Standing {
    within: f64,
    beyond: f64,
}

impl Standing {
    /// More GPUs within, or as many and fewer beyond.
    fn better_than(&self, other: &Standing) -> bool {
        self.within > other.within + 1e-9
            || (self.within > other.within - 1e-9 && self.beyond < other.beyond - 1e-9)
    }
}

/// The best standing seen while demand was `demand`.
#[derive(Debug, Default)]
struct Best {
    demand: Vec<f64>,
    standing: Standing,
}

impl<'b> ClusterState<'b> {
    fn new(
        budgets: &'b ClusterBudgets,
        gpus_per_node: u64,
        decay: Decay,
        policy: Policy,
    ) -> ClusterState<'b> {
        let hierarchy = &budgets.hierarchy;
        let n = hierarchy.len();
        let leaves: Vec<usize> = (0..n).filter(|&i| hierarchy.is_leaf(NodeId(i))).collect();
        let mut by_name: Vec<usize> = (0..n).collect();
        by_name.sort_by_key(|&i| hierarchy.node(NodeId(i)).map(|node| node.name.as_str()));
        let mut ties = vec![(false, 0); n];
        for (place, i) in by_name.into_iter().enumerate() {
            let inner = !hierarchy.is_leaf(NodeId(i));
            ties[i] = (inner, if inner { place } else { i });
        }
        // The unbudgeted node's cap of 0 is its entitlement, not a limit on its work.
        let limits = (0..n)
            .map(|i| {
                let cap = hierarchy.node(NodeId(i)).and_then(|node| node.cap);
                cap.filter(|_| NodeId(i) != budgets.unbudgeted).map(|c| c as u64)
            })
            .collect();
        ClusterState {
            budgets,
            name: budgets.name.as_str().into(),
            paths: budgets.paths.iter().map(|p| p.as_str().into()).collect(),
            pool: Pool::new(budgets.gpus, gpus_per_node.max(1)),
            leaves,
            by_size: (0..n).map(|_| Vec::new()).collect(),
            waiting: vec![0.0; n],
            running: vec![0.0; n],
            preemptible: vec![BTreeSet::new(); n],
            ends: BTreeSet::new(),
            high: vec![0; n],
            guaranteed: budgets.guaranteed.clone(),
            limits,
            division: Division::new(hierarchy, budgets.gpus as f64).expect("a cluster's GPUs are a count"),
            entitled: Vec::new(),
            usage: Usage::new(n, decay).with_phase(policy.slurm().and_then(|s| s.started)),
            ranked: Vec::new(),
            ranked_in: None,
            per_share: vec![None; n],
            siblings: (0..n)
                .map(|i| hierarchy.children(NodeId(i)))
                .chain([hierarchy.roots()])
                .map(|group| group.iter().copied().filter(|&id| id != budgets.unbudgeted).collect())
                .collect(),
            ties,
            dirty: false,
            queued: 0,
            backfill_due: false,
            rank_at_stops: policy.slurm().is_none(),
            best: Best::default(),
            current: Standing::default(),
            over: Vec::new(),
            standing_seen: false,
        }
    }

    /// The largest job a leaf can ever run: the cluster, or a `max-gpus` on its path.
    fn most_gpus(&self, leaf: usize) -> u64 {
        let mut most = self.budgets.gpus;
        let mut node = Some(NodeId(leaf));
        while let Some(id) = node {
            if let Some(limit) = self.limits[id.0] {
                most = most.min(limit);
            }
            node = self.budgets.hierarchy.node(id).and_then(|n| n.parent);
        }
        most
    }

    /// Whether `gpus` more for `leaf` keep it and every budget above it within `max-gpus`.
    fn within_limits(&self, leaf: usize, gpus: u32) -> bool {
        let mut node = Some(NodeId(leaf));
        while let Some(id) = node {
            if let Some(limit) = self.limits[id.0]
                && self.running[id.0] + f64::from(gpus) > limit as f64
            {
                return false;
            }
            node = self.budgets.hierarchy.node(id).and_then(|n| n.parent);
        }
        true
    }

    /// The standing of running work against `entitled`.
    fn standing(&self, entitled: &[f64]) -> Standing {
        let mut standing = Standing::default();
        for &l in &self.leaves {
            standing.within += self.running[l].min(entitled[l]);
            standing.beyond += (self.running[l] - entitled[l]).max(0.0);
        }
        standing
    }

    /// Takes the current standing into the best seen, which starts again when demand has
    /// changed since the last look, and lists the budgets over their entitlement.
    fn observe_standing(&mut self, entitled: &[f64]) {
        // Demand is as it was, and so are the entitlements, which follow it.
        if self.standing_seen {
            return;
        }
        self.standing_seen = true;
        let now = self.standing(entitled);
        self.current = now;
        let (running, waiting) = (&self.running, &self.waiting);
        let demand = self.leaves.iter().map(|&l| running[l] + waiting[l]);
        if !demand.clone().eq(self.best.demand.iter().copied()) {
            self.best.demand.clear();
            self.best.demand.extend(demand);
            self.best.standing = now;
        } else if now.better_than(&self.best.standing) {
            self.best.standing = now;
        }
        self.over.clear();
        self.over.extend(
            self.leaves
                .iter()
                .map(|&l| (l, self.running[l] - entitled[l]))
                .filter(|&(_, excess)| excess > 0.0),
        );
        self.over.sort_by(|a, b| b.1.total_cmp(&a.1));
    }

    /// Queues a job in its budget at its place: by the time it first entered (a requeued
    /// job goes back to its place).
    fn enqueue(&mut self, jobs: &Slots, id: JobId) {
        let job = &jobs[id];
        let (groups, queued) = (&mut self.by_size[job.leaf as usize], (job.place, id));
        match groups.binary_search_by_key(&(job.tier, job.gpus), |group| (group.tier, group.gpus)) {
            Ok(i) => {
                groups[i].jobs.insert(queued);
                groups[i].first = groups[i].first.min(queued);
            }
            Err(i) => groups.insert(
                i,
                Group { tier: job.tier, gpus: job.gpus, first: queued, jobs: BTreeSet::from([queued]) },
            ),
        }
        self.queued += 1;
        self.waiting[job.leaf as usize] += f64::from(job.gpus);
        self.change_demand(job.leaf as usize, f64::from(job.gpus));
        self.standing_seen = false;
        self.backfill_due = true;
        self.dirty = true;
    }

    /// Takes a job out of its queue (nothing when it is not there).
    fn dequeue(&mut self, jobs: &Slots, id: JobId) {
        let job = &jobs[id];
        let (leaf, queued) = (job.leaf as usize, (job.place, id));
        let groups = &mut self.by_size[leaf];
        let Ok(i) = groups.binary_search_by_key(&(job.tier, job.gpus), |group| (group.tier, group.gpus))
        else {
            return;
        };
        if !groups[i].jobs.remove(&queued) {
            return;
        }
        self.queued -= 1;
        if groups[i].jobs.is_empty() {
            groups.remove(i);
        } else if groups[i].first == queued {
            groups[i].first = *groups[i].jobs.first().expect("not empty");
        }
        self.waiting[leaf] -= f64::from(job.gpus);
        self.change_demand(leaf, -f64::from(job.gpus));
        self.standing_seen = false;
    }

    /// Running jobs that may give way to a job of an under-served budget: past their
    /// protection, in budgets above their entitlement (as last observed), most over-served
    /// budget first, newest job first.
    fn budget_victims(&self, leaf: usize, entitled: &[f64]) -> impl Iterator<Item = JobId> + '_ {
        let over = if self.running[leaf] < entitled[leaf] { &self.over[..] } else { &[] };
        over.iter().flat_map(|&(l, _)| self.preemptible[l].iter().rev().map(|&(_, id)| id))
    }

    /// A running job's protection is over.
    fn unprotect(&mut self, job: &mut SimJob, id: JobId) {
        job.preemptible = true;
        self.preemptible[job.leaf as usize].insert((job.started.expect("a running job"), id));
    }

    /// Whether `gpus` more for `leaf` stay within its guaranteed GPUs (the priority policy's
    /// high priority).
    fn has_high_room(&self, leaf: usize, gpus: u32) -> bool {
        self.high[leaf] + u64::from(gpus) <= self.guaranteed[leaf]
    }

    fn occupy(&mut self, jobs: &Slots, id: JobId, now: i64) {
        let job = &jobs[id];
        if job.preemptible {
            self.preemptible[job.leaf as usize].insert((now, id));
        }
        self.ends.insert((job.expected_end, id));
        if job.high {
            self.high[job.leaf as usize] += u64::from(job.gpus);
        }
        self.add_running(job.leaf as usize, f64::from(job.gpus), now, None);
    }

    fn release(&mut self, jobs: &mut Slots, id: JobId, now: i64) {
        let job = &mut jobs[id];
        let leaf = job.leaf as usize;
        let started = job.started.expect("a running job");
        if std::mem::take(&mut job.preemptible) {
            self.preemptible[leaf].remove(&(started, id));
        }
        self.ends.remove(&(job.expected_end, id));
        if job.high {
            self.high[leaf] -= u64::from(job.gpus);
        }
        self.pool.free(&std::mem::take(&mut job.placement));
        let gpus = f64::from(job.gpus);
        self.add_running(leaf, -gpus, now, Some(started));
        self.dirty = true;
    }

    /// `gpus` more (or fewer, stopping runs that `started`) running on `leaf` and its
    /// ancestors, in their counts and their usage.
    fn add_running(&mut self, leaf: usize, gpus: f64, now: i64, started: Option<i64>) {
        self.standing_seen = false;
        self.backfill_due = true;
        self.change_demand(leaf, gpus);
        let mut node = Some(NodeId(leaf));
        while let Some(id) = node {
            self.running[id.0] += gpus;
            match started {
                None => self.usage.start(id.0, now, gpus),
                Some(started) => {
                    self.usage.stop(id.0, now, -gpus, started);
                    self.per_share[id.0] = None;
                    if self.rank_at_stops {
                        self.ranked_in = None;
                    }
                }
            }
            node = self.budgets.hierarchy.node(id).and_then(|n| n.parent);
        }
    }

    /// A leaf's demand (running and waiting GPUs) changes by `gpus`.
    fn change_demand(&mut self, leaf: usize, gpus: f64) {
        self.division.change_demand(NodeId(leaf), gpus).expect("a leaf's demand is a count of GPUs");
    }

    /// The reservation of the job `holder`: the earliest expected end of running jobs at
    /// which it fits, and the nodes it would take then (best fit, or whole idle nodes).
    fn reserve(&self, jobs: &Slots, holder: JobId) -> Reservation {
        let gpus = jobs[holder].gpus;
        let mut room = self.pool.room_for(gpus);
        let mut at = None;
        for &(end, id) in &self.ends {
            if at.is_some_and(|at| end > at) {
                break;
            }
            // Every job expected to end by then gives its GPUs back, not only the first.
            if room.give_back(&jobs[id].placement) {
                at.get_or_insert(end);
            }
        }
        let free_then = room.free;
        let Some(at) = at else {
            // It cannot fit even once every running job has ended: it never will (it is
            // not placeable, which the reading of the trace rules out); nothing to hold.
            return Reservation { at: i64::MAX, spare: free_then };
        };
        let mut spare = free_then;
        for (node, taken) in self.pool.shadow(gpus, &spare) {
            spare[node as usize] -= taken;
        }
        Reservation { at, spare }
    }

    /// Brings each leaf's rank up to date: its Fair Tree rank under the budget policy, the
    /// same for all under the priority policy (lower served first). Ranks follow usage,
    /// which changes only at the decay's passes and when a run stops (its last stretch is
    /// booked at once; a start books nothing before the next pass): they are computed again
    /// only then.
    fn rank(&mut self, policy: Policy, now: i64) {
        let pass = self.usage.pass_at(now);
        if self.ranked_in == Some(pass) {
            return;
        }
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        match policy {
            Policy::Budget | Policy::Slurm(_) => {
                // Only the nodes a run stopped on are read again within a pass.
                let budgets = self.budgets;
                for (i, read) in self.per_share.iter_mut().enumerate() {
                    if read.is_none_or(|(read_in, _)| read_in != pass) {
                        let weight = budgets.hierarchy.node(NodeId(i)).expect("a node").weight;
                        *read = Some((pass, self.usage.raw(i, now) / weight));
                    }
                }
                // Siblings in Fair Tree's order (see `fair_tree`), sorted again where they
                // stand: most are in order already.
                let per_share = |id: NodeId| self.per_share[id.0].expect("read above").1;
                let ties = &self.ties;
                for siblings in &mut self.siblings {
                    siblings.sort_by(|&a, &b| {
                        per_share(a).total_cmp(&per_share(b)).then(ties[a.0].cmp(&ties[b.0]))
                    });
                }
                let roots = self.siblings.last().expect("the roots");
                self.fair_tree(roots, false, &mut ranked);
                // Work no budget covers goes after every budget.
                ranked.push((u32::MAX, budgets.unbudgeted.0));
            }
            Policy::Priority => ranked.extend(self.leaves.iter().map(|&leaf| (0, leaf))),
        }
        self.ranked = ranked;
        self.ranked_in = Some(pass);
        self.backfill_due = true;
    }

    /// Fair Tree's ranking, as Slurm's (`_calc_tree_fs`): depth first, siblings by Level FS
    /// (share over usage) descending, that is by decayed usage per unit of share ascending.
    /// Budgets are Slurm's users (leaves) and accounts (inner nodes). A leaf whose usage per
    /// share equals its previous sibling's gets the same rank as the previous leaf ranked;
    /// the first child of an inner node tied with its previous sibling is tied too; inner
    /// nodes are never merged. Tied siblings are visited as Slurm 22.05 does (the test
    /// suite's Slurm): leaves first, then inner nodes by name. (Slurm 23.11 and later order
    /// tied siblings by their lineage instead.) Zero usage ties every budget that has none.
    /// `siblings` are in that order (see [`ClusterState::rank`]); each leaf ranked is appended
    /// to `ranked` with its rank, in rank order.
    fn fair_tree(&self, siblings: &[NodeId], parent_tied: bool, ranked: &mut Vec<(u32, usize)>) {
        let mut previous = None;
        for (position, &id) in siblings.iter().enumerate() {
            let (_, per_share) = self.per_share[id.0].expect("read by rank");
            let tied = if position == 0 { parent_tied } else { previous == Some(per_share) };
            previous = Some(per_share);
            if self.budgets.hierarchy.is_leaf(id) {
                // Tied, it takes the rank of the last leaf ranked; else as many as were before.
                let rank = match ranked.last() {
                    Some(&(last, _)) if tied => last,
                    _ => ranked.len() as u32,
                };
                ranked.push((rank, id.0));
            } else {
                self.fair_tree(&self.siblings[id.0], tied, ranked);
            }
        }
    }
}

/// What a pool would have free once some jobs are given back: checked one job at a time.
struct Room<'p> {
    pool: &'p Pool,
    gpus: u32,
    /// Free GPUs of each node, counting what was given back.
    free: Vec<u32>,
    /// GPUs on idle nodes, counting those the given-back jobs leave idle.
    idle: u32,
}

impl Room<'_> {
    /// Gives back a job's (node, GPUs); whether the GPUs asked for fit now.
    fn give_back(&mut self, placement: &[(u32, u32)]) -> bool {
        let pool = self.pool;
        let mut fits = false;
        for &(node, gpus) in placement {
            let free = &mut self.free[node as usize];
            *free += gpus;
            let capacity = pool.capacity[node as usize];
            // Idle now, and not before (a node with a job given back was not idle).
            if *free == capacity {
                self.idle += capacity;
            }
            fits |= self.gpus <= pool.per_node && *free >= self.gpus;
        }
        fits || (self.gpus > pool.per_node && self.idle >= self.gpus)
    }
}

/// A cluster's nodes, indexed by free GPUs.
struct Pool {
    per_node: u32,
    capacity: Vec<u32>,
    free: Vec<u32>,
    /// Nodes by free GPUs: `by_free[f]` holds the nodes with `f` free, idle or not.
    by_free: Vec<BTreeSet<u32>>,
    /// Nodes with all their GPUs free.
    idle: BTreeSet<u32>,
    /// Free GPUs in all, and on idle nodes.
    free_gpus: u64,
    idle_gpus: u64,
}

impl Pool {
    /// Whole nodes of `per_node` GPUs, and one smaller node for a remainder.
    fn new(gpus: u64, per_node: u64) -> Pool {
        let per_node = per_node.min(u64::from(u32::MAX)) as u32;
        let mut capacity = vec![per_node; (gpus / u64::from(per_node)) as usize];
        let remainder = (gpus % u64::from(per_node)) as u32;
        if remainder > 0 {
            capacity.push(remainder);
        }
        let mut by_free = vec![BTreeSet::new(); per_node as usize + 1];
        for (node, &c) in capacity.iter().enumerate() {
            by_free[c as usize].insert(node as u32);
        }
        Pool {
            per_node,
            free: capacity.clone(),
            idle: (0..capacity.len() as u32).collect(),
            capacity,
            by_free,
            free_gpus: gpus,
            idle_gpus: gpus,
        }
    }

    /// Places `gpus`: on the fullest node that fits, or across whole idle nodes.
    fn place(&mut self, gpus: u32) -> Option<Vec<(u32, u32)>> {
        self.place_where(gpus, None)
    }

    /// Whether `gpus` can be placed now.
    fn fits(&self, gpus: u32) -> bool {
        if gpus <= self.per_node {
            gpus == 0 || (gpus..=self.per_node).any(|f| !self.by_free[f as usize].is_empty())
        } else {
            self.idle_gpus >= u64::from(gpus)
        }
    }

    /// Places `gpus` as [`Pool::place`] does, but only where `spare` (per node, GPUs that a
    /// reservation leaves free) allows, and takes them from `spare`.
    fn place_within(&mut self, gpus: u32, spare: &mut [u32]) -> Option<Vec<(u32, u32)>> {
        self.place_where(gpus, Some(spare))
    }

    /// Places `gpus` on the fullest node that fits, or across whole idle nodes, where `spare`
    /// allows when there is one (and takes them from it).
    fn place_where(&mut self, gpus: u32, mut spare: Option<&mut [u32]>) -> Option<Vec<(u32, u32)>> {
        let allows = |spare: &Option<&mut [u32]>, node: u32, gpus: u32| {
            spare.as_ref().is_none_or(|spare| spare[node as usize] >= gpus)
        };
        if gpus == 0 {
            return Some(Vec::new());
        }
        if gpus <= self.per_node {
            let node = (gpus..=self.per_node)
                .find_map(|f| self.by_free[f as usize].iter().find(|&&n| allows(&spare, n, gpus)).copied())?;
            self.take(node, gpus);
            if let Some(spare) = spare.as_deref_mut() {
                spare[node as usize] -= gpus;
            }
            return Some(vec![(node, gpus)]);
        }
        let mut chosen = Vec::new();
        let mut room = 0;
        for &node in &self.idle {
            if room >= gpus {
                break;
            }
            let whole = self.capacity[node as usize];
            if allows(&spare, node, whole) {
                room += whole;
                chosen.push(node);
            }
        }
        if room < gpus {
            return None;
        }
        Some(
            chosen
                .into_iter()
                .map(|node| {
                    let whole = self.capacity[node as usize];
                    self.take(node, whole);
                    if let Some(spare) = spare.as_deref_mut() {
                        spare[node as usize] = 0;
                    }
                    (node, whole)
                })
                .collect(),
        )
    }

    /// Where [`Pool::place`] would put `gpus` if each node had `free` GPUs free: the fullest
    /// node that fits (the lowest numbered among equals), or whole idle nodes in order.
    fn shadow(&self, gpus: u32, free: &[u32]) -> Vec<(u32, u32)> {
        if gpus == 0 {
            return Vec::new();
        }
        if gpus <= self.per_node {
            let best = (0..free.len()).filter(|&n| free[n] >= gpus).min_by_key(|&n| (free[n], n));
            return best.map(|n| vec![(n as u32, gpus)]).unwrap_or_default();
        }
        let mut chosen = Vec::new();
        let mut room = 0;
        for (node, &f) in free.iter().enumerate() {
            if room >= gpus {
                break;
            }
            if f == self.capacity[node] {
                room += f;
                chosen.push((node as u32, f));
            }
        }
        chosen
    }

    /// Room for `gpus` as running jobs are given back one by one (nothing changes).
    fn room_for(&self, gpus: u32) -> Room<'_> {
        Room { pool: self, gpus, free: self.free.clone(), idle: self.idle_gpus as u32 }
    }

    fn take(&mut self, node: u32, gpus: u32) {
        let free = &mut self.free[node as usize];
        self.by_free[*free as usize].remove(&node);
        if self.idle.remove(&node) {
            self.idle_gpus -= u64::from(self.capacity[node as usize]);
        }
        self.free_gpus -= u64::from(gpus);
        *free -= gpus;
        self.by_free[*free as usize].insert(node);
    }

    fn free(&mut self, placement: &[(u32, u32)]) {
        for &(node, gpus) in placement {
            let free = &mut self.free[node as usize];
            self.by_free[*free as usize].remove(&node);
            *free += gpus;
            self.by_free[*free as usize].insert(node);
            self.free_gpus += u64::from(gpus);
            if *free == self.capacity[node as usize] && self.idle.insert(node) {
                self.idle_gpus += u64::from(*free);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_keeps_whole_nodes_free() {
        let mut pool = Pool::new(16, 8);
        let a = pool.place(6).expect("fits");
        let b = pool.place(2).expect("fits");
        assert_eq!(a[0].0, b[0].0, "the 2-GPU job fills the node the 6-GPU job left");
        assert_eq!(pool.place(8).expect("an idle node").len(), 1);
        assert!(pool.place(1).is_none());
        pool.free(&b);
        assert!(!pool.room_for(16).give_back(&a));
    }

    #[test]
    fn large_jobs_take_whole_idle_nodes() {
        let mut pool = Pool::new(20, 8);
        let small = pool.place(5).expect("fits");
        assert!(pool.place(16).is_none(), "one 8-GPU node and the 4-GPU remainder are idle: 12 GPUs");
        assert!(pool.room_for(16).give_back(&small));
        pool.free(&small);
        assert_eq!(pool.place(16).expect("two idle nodes").len(), 2);
    }
}
