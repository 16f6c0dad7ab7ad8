//! The simulator: replays a trace's submissions (not its recorded starts) on each cluster's
//! nodes under a scheduling policy, then measures the simulated schedule with the
//! [`audit`](crate::audit), so a simulated run and a recorded one report the same figures.
//!
//! The loop is event-driven: submissions (from the trace, in order), jobs becoming eligible,
//! job ends and the ends of minimum-runtime protection. After each instant's events every
//! cluster whose state changed is scheduled, pass after pass in that same instant, until a
//! pass changes nothing (a preemption or a start is a change), so GPUs a preemption freed
//! never sit idle while a job that may use them waits. Nodes are kept in free lists indexed
//! by free GPUs (best fit for jobs that fit a node; jobs larger than a node take whole idle
//! nodes), and decayed usage is kept per tree node in growing units so that a start or an
//! end updates one path of the tree.
//!
//! A pass takes the waiting jobs in the policy's order. A job that would take a budget (or
//! any budget above it) beyond its `max-gpus` waits. The first job that cannot start, and
//! that no allowed preemption starts, holds a reservation (EASY backfill, as Slurm's backfill
//! scheduler): the earliest time it fits given the running jobs' expected ends, on the nodes
//! it would take then. Every later job starts now only if it fits without delaying that
//! reservation: it ends, by its time limit, before the reservation, or it leaves the reserved
//! GPUs free. A job's time limit is its contract's `max-runtime` when there is one, else its
//! own remaining work: the simulator knows runtimes exactly, which real users' limits do not
//! give a real scheduler, so backfill here is as good as it can be.
//!
//! Two policies:
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
//!
//! Either way a preempted resumable job requeues keeping its progress, a non-resumable one
//! restarts (its GPU-hours are lost), and a contract's maximum runtime ends a job. A job's
//! wait is all the time it spent queued: from its eligibility to its first start, and from
//! each preemption to its restart.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::ops::Bound;
use std::sync::Arc;

use allot_compiler::ir::Model;
use allot_compiler::units::{DECAY_PERIOD, decay_half_life};

use crate::audit::{AuditError, audit};
use crate::budgets::{Assignment, Budgets, ClusterBudgets};
use crate::decay::{Decay, Usage};
use crate::entitlement::NodeId;
use crate::figures::{Audit, Waits};
use crate::trace::{Job, TraceError, WaitCount};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Budgets by hierarchical fair share, with the scheduling contracts.
    Budget,
    /// Static priorities, not preemptible up to a per-team cap.
    Priority,
}

impl Policy {
    /// The policy's name in the outputs.
    pub fn label(self) -> &'static str {
        match self {
            Policy::Budget => "budget policy",
            Policy::Priority => "priority baseline",
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
    /// Every run of every job, in the order they ended.
    pub runs: Vec<Run>,
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
    /// How the audit counts the job's wait: its first run carries the job's total time
    /// queued, over all its runs; later runs count none.
    pub wait: WaitCount,
    /// The job's index among the simulated jobs.
    job: u32,
}

impl Run {
    /// The run as a trace row, for the audit.
    fn as_job(&self) -> Job {
        Job {
            id: (*self.id).into(),
            project: (*self.project).into(),
            cluster: (*self.cluster).into(),
            gpus: self.gpus,
            submit: self.queued,
            start: Some(self.start),
            end: Some(self.end),
            contract: (*self.contract).into(),
            wait: self.wait,
            ..Job::default()
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
    let budgets = Budgets::new(model)?;
    // The decay allot's Slurm output sets: a half-life of window × ln 2, every 5 minutes.
    let decay = Decay::new(decay_half_life(model.policy.window_seconds) as f64, DECAY_PERIOD as i64);
    let mut clusters: Vec<ClusterState> = budgets
        .clusters
        .iter()
        .zip(&model.clusters)
        .map(|(budgets, c)| ClusterState::new(budgets, c.gpus_per_node, decay))
        .collect();
    let contracts: Vec<Terms> = model
        .contracts
        .iter()
        .map(|c| Terms {
            name: c.name.as_str().into(),
            min_runtime: c.min_runtime_seconds as i64,
            max_runtime: c.max_runtime_seconds.map(|s| s as i64),
            resumable: c.resumable,
        })
        .collect();
    let mut sim = Simulator {
        policy,
        jobs: Vec::new(),
        events: BinaryHeap::new(),
        runs: Vec::new(),
        preemptions: 0,
        lost_gpu_seconds: 0.0,
        contracts,
    };
    let (mut not_replayed, mut unplaceable, mut skipped, mut read) = (0, 0, 0, 0);
    let mut last_submit = None;
    let mut jobs = jobs.peekable();
    loop {
        let next_submit = match jobs.peek() {
            Some(Ok(job)) => Some(job.submit),
            Some(Err(_)) => {
                let Some(Err(e)) = jobs.next() else { unreachable!() };
                if skip_bad_rows {
                    skipped += 1;
                    continue;
                }
                return Err(AuditError::Trace(e));
            }
            None => None,
        };
        let next_event = sim.events.peek().map(|Reverse(e)| e.at);
        let now = match (next_submit, next_event) {
            (None, None) => break,
            (Some(s), Some(e)) => s.min(e),
            (Some(t), None) | (None, Some(t)) => t,
        };
        while let Some(Reverse(event)) = sim.events.peek().copied()
            && event.at <= now
        {
            sim.events.pop();
            sim.handle(event, &mut clusters);
        }
        while let Some(Ok(job)) = jobs.peek()
            && job.submit <= now
        {
            let Some(Ok(job)) = jobs.next() else { unreachable!() };
            if let Some(previous) = last_submit
                && job.submit < previous
            {
                return Err(AuditError::NotSorted { id: job.id.into(), submit: job.submit, previous });
            }
            last_submit = Some(job.submit);
            read += 1;
            if read % 65_536 == 0 {
                progress(read);
            }
            // The work: the trace's duration, else its recorded runtime.
            let recorded = job.start.zip(job.end).map(|(start, end)| end - start);
            let Some(work) = job.duration.or(recorded) else {
                not_replayed += 1;
                continue;
            };
            let Assignment { cluster, node: leaf } = match budgets.assign(&job) {
                Ok(assignment) => assignment,
                Err(_) if skip_bad_rows => {
                    skipped += 1;
                    continue;
                }
                Err(error) => return Err(AuditError::Job { id: job.id.to_string(), error }),
            };
            let state = &mut clusters[cluster];
            if u64::from(job.gpus) > state.most_gpus(leaf.0) {
                unplaceable += 1;
                continue;
            }
            let contract = budgets.contract(&job);
            let terms = sim.contracts.iter().position(|c| *c.name == *contract);
            let max = terms.and_then(|t| sim.contracts[t].max_runtime).unwrap_or(i64::MAX);
            // It enters its queue when it becomes eligible.
            let entered = job.eligible.map_or(job.submit, |e| e.max(job.submit));
            let index = sim.jobs.len() as u32;
            sim.jobs.push(SimJob {
                id: job.id.into(),
                cluster: cluster as u32,
                leaf: leaf.0 as u32,
                terms: terms.map(|t| t as u16),
                gpus: job.gpus,
                submit: job.submit,
                entered,
                queued_at: entered,
                waited: 0,
                work: work.min(max),
                remaining: work.min(max),
                expected_end: 0,
                run: 0,
                started: None,
                high: false,
                placement: Vec::new(),
            });
            if entered > now {
                sim.events.push(Reverse(Due { at: entered, kind: ENTER, job: index, run: 0 }));
            } else {
                state.enqueue(&sim.jobs, index);
            }
        }
        for cluster in clusters.iter_mut() {
            if cluster.dirty {
                sim.schedule(cluster, now);
                cluster.dirty = false;
            }
        }
    }
    progress(read);

    if sim.jobs.is_empty() {
        return Err(AuditError::NoJobs(no_jobs_why(read, skipped, not_replayed, unplaceable)));
    }
    let largest = largest_jobs(&sim.jobs);
    let short_jobs = total_waits(sim.jobs.iter().filter(|j| j.work <= SHORT_JOB));
    let mut runs = std::mem::take(&mut sim.runs);
    for run in &mut runs {
        run.wait = match run.attempt {
            1 => WaitCount::Total(sim.jobs[run.job as usize].waited),
            _ => WaitCount::Elsewhere,
        };
    }
    let mut by_queue_time: Vec<&Run> = runs.iter().collect();
    by_queue_time.sort_by_key(|r| r.queued);
    let rows = by_queue_time.into_iter().map(|r| Ok(r.as_job()));
    let mut audit = audit(model, rows, model.policy.window_seconds, false)?;
    audit.skipped_rows = skipped;
    audit.jobs = sim.jobs.len();
    Ok(Simulation {
        audit,
        preemptions: sim.preemptions,
        lost_gpu_hours: sim.lost_gpu_seconds / 3600.0,
        largest,
        short_jobs,
        not_replayed,
        unplaceable,
        runs,
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

fn largest_jobs(jobs: &[SimJob]) -> LargestJobs {
    let mut sizes: Vec<u32> = jobs.iter().map(|j| j.gpus).collect();
    sizes.sort_unstable();
    let Some(&min_gpus) = sizes.get((sizes.len() * 99 / 100).min(sizes.len().saturating_sub(1))) else {
        return LargestJobs::default();
    };
    LargestJobs { min_gpus, waits: total_waits(jobs.iter().filter(|j| j.gpus >= min_gpus)) }
}

/// How long the jobs spent queued, over all their runs.
fn total_waits<'j>(jobs: impl Iterator<Item = &'j SimJob>) -> Waits {
    let mut waits = Waits::default();
    for job in jobs.filter(|j| j.run > 0) {
        waits.push(job.waited);
    }
    waits
}

/// A contract's terms, as the simulator applies them.
struct Terms {
    name: Arc<str>,
    min_runtime: i64,
    max_runtime: Option<i64>,
    resumable: bool,
}

struct SimJob {
    id: Arc<str>,
    cluster: u32,
    leaf: u32,
    terms: Option<u16>,
    gpus: u32,
    submit: i64,
    /// When it first entered its queue (its eligibility, else its submission): its place in
    /// the queue, kept when it requeues.
    entered: i64,
    /// When it last entered its queue: when it entered, or its last preemption.
    queued_at: i64,
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
    /// (node, GPUs taken) while it runs.
    placement: Vec<(u32, u32)>,
}

/// What a [`Due`] event is.
const END: u8 = 0;
/// The end of a run's protection: only a reason to schedule again.
const PROTECTED_UNTIL: u8 = 1;
/// A job becomes eligible and enters its queue.
const ENTER: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at: i64,
    /// [`END`], [`PROTECTED_UNTIL`] or [`ENTER`].
    kind: u8,
    job: u32,
    run: u32,
}

struct Simulator {
    policy: Policy,
    jobs: Vec<SimJob>,
    events: BinaryHeap<Reverse<Due>>,
    runs: Vec<Run>,
    preemptions: u64,
    lost_gpu_seconds: f64,
    contracts: Vec<Terms>,
}

/// A reservation (EASY backfill): when the job that holds it can start at the latest, and
/// per node the GPUs free then that it does not need.
struct Reservation {
    at: i64,
    spare: Vec<u32>,
}

impl Simulator {
    fn terms(&self, job: &SimJob) -> Option<&Terms> {
        job.terms.map(|t| &self.contracts[usize::from(t)])
    }

    /// A run's time limit from its start: its contract's maximum runtime, else its remaining
    /// work (the simulator knows it exactly).
    fn limit(&self, job: &SimJob) -> i64 {
        self.terms(job).and_then(|t| t.max_runtime).unwrap_or(job.remaining)
    }

    fn handle(&mut self, due: Due, clusters: &mut [ClusterState]) {
        let job = &self.jobs[due.job as usize];
        let cluster = &mut clusters[job.cluster as usize];
        if due.kind == ENTER {
            cluster.enqueue(&self.jobs, due.job);
            return;
        }
        if job.run != due.run || job.started.is_none() {
            return;
        }
        cluster.dirty = true;
        if due.kind == END {
            self.stop(cluster, due.job, due.at, false);
        }
    }

    /// Ends the current run of `index` at `now`: finished, or preempted (then requeued).
    fn stop(&mut self, cluster: &mut ClusterState, index: u32, now: i64, preempted: bool) {
        let job = &self.jobs[index as usize];
        let start = job.started.expect("a running job");
        let resumable = self.terms(job).is_some_and(|t| t.resumable);
        let elapsed = now - start;
        self.runs.push(Run {
            id: job.id.clone(),
            cluster: cluster.name.clone(),
            project: cluster.paths[job.leaf as usize].clone(),
            contract: job
                .terms
                .map_or_else(|| Arc::from(""), |t| self.contracts[usize::from(t)].name.clone()),
            gpus: job.gpus,
            submit: job.submit,
            queued: job.queued_at,
            start,
            end: now,
            attempt: job.run,
            preempted,
            nodes: job.placement.clone(),
            wait: WaitCount::Measured,
            job: index,
        });
        cluster.release(&mut self.jobs, index, now);
        let job = &mut self.jobs[index as usize];
        job.started = None;
        if preempted {
            self.preemptions += 1;
            if resumable {
                job.remaining -= elapsed;
            } else {
                self.lost_gpu_seconds += elapsed as f64 * f64::from(job.gpus);
            }
            job.queued_at = now;
            cluster.enqueue(&self.jobs, index);
        }
    }

    /// Starts `index` (taken out of its queue) on `placement`.
    fn start(&mut self, cluster: &mut ClusterState, index: u32, placement: Vec<(u32, u32)>, now: i64) {
        cluster.dequeue(&self.jobs, index);
        let min_runtime = self.terms(&self.jobs[index as usize]).map_or(0, |t| t.min_runtime);
        let limit = self.limit(&self.jobs[index as usize]);
        let high = self.policy == Policy::Priority && cluster.has_high_room(&self.jobs[index as usize]);
        let job = &mut self.jobs[index as usize];
        job.run += 1;
        job.started = Some(now);
        job.waited += now - job.queued_at;
        job.placement = placement;
        job.high = high;
        job.expected_end = now + limit;
        self.events.push(Reverse(Due { at: now + job.remaining, kind: END, job: index, run: job.run }));
        if self.policy == Policy::Budget && min_runtime > 0 && min_runtime < job.remaining {
            self.events.push(Reverse(Due {
                at: now + min_runtime,
                kind: PROTECTED_UNTIL,
                job: index,
                run: job.run,
            }));
        }
        cluster.occupy(&self.jobs, index, now);
    }

    /// Schedules a cluster at `now`, pass after pass until a pass changes nothing. Demand
    /// (each budget's running and waiting GPUs) stays as it is through starts and
    /// preemptions, and so do the entitlements.
    fn schedule(&mut self, cluster: &mut ClusterState, now: i64) {
        let entitled = match self.policy {
            Policy::Budget => cluster.entitlement(),
            Policy::Priority => Vec::new(),
        };
        while self.pass(cluster, &entitled, now) {}
    }

    /// One scheduling pass: the waiting jobs in the policy's order, each started if it fits
    /// (within its budgets' `max-gpus`, and, once a job holds a reservation, without delaying
    /// it), else, for the first such job of each budget, by a preemption if the policy
    /// allows one. Whether anything changed.
    fn pass(&mut self, cluster: &mut ClusterState, entitled: &[f64], now: i64) -> bool {
        let ranks = cluster.ranks(self.policy, now);
        // The priority policy serves the jobs that would run high first, then the others.
        let phases: &[Option<bool>] = match self.policy {
            Policy::Budget => &[None],
            Policy::Priority => &[Some(true), Some(false)],
        };
        let mut tried = vec![false; cluster.queues.len()];
        let mut holder: Option<u32> = None;
        let mut reservation: Option<Reservation> = None;
        let mut changed = false;
        for &phase in phases {
            let mut cursor = Cursor::new(cluster, &ranks);
            while let Some(head) = cursor.next() {
                if cluster.pool.free_gpus == 0 && !self.may_preempt(cluster, &tried, phase, entitled) {
                    break;
                }
                let index = head.2;
                let job = &self.jobs[index as usize];
                let (leaf, gpus, limit) = (job.leaf as usize, job.gpus, self.limit(job));
                // Dropping a group (not following it) skips the rest of its jobs, all of the
                // same budget and size, for this pass; each condition only grows stricter as
                // the pass goes on (jobs start, none ends), so none of them could start:
                // - the priority phase is not theirs (high-priority GPUs only grow);
                // - they would take a budget beyond its `max-gpus` (running GPUs only grow);
                // - they fit nowhere now (free GPUs only shrink), their budget has had its
                //   try at a preemption, and a job already holds the reservation.
                if phase.is_some_and(|high| cluster.has_high_room(job) != high)
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
                    let placement = match holder {
                        None => cluster.pool.place(gpus),
                        Some(holder) => {
                            let reserved =
                                reservation.get_or_insert_with(|| cluster.reserve(&self.jobs, holder));
                            if now + limit <= reserved.at {
                                cluster.pool.place(gpus)
                            } else {
                                cluster.pool.place_within(gpus, &mut reserved.spare)
                            }
                        }
                    };
                    if let Some(placement) = placement {
                        self.start(cluster, index, placement, now);
                        changed = true;
                        continue;
                    }
                }
                if !tried[leaf] {
                    tried[leaf] = true;
                    if !fits && self.preempt_for(cluster, index, entitled, now) {
                        // The running jobs changed: a new pass, with a new reservation.
                        return true;
                    }
                }
                holder.get_or_insert(index);
            }
        }
        changed
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
                .any(|&l| !tried[l] && !cluster.queues[l].is_empty() && cluster.running[l] < entitled[l]),
            Policy::Priority => {
                phase == Some(true)
                    && cluster.leaves.iter().any(|&l| !tried[l] && !cluster.queues[l].is_empty())
            }
        }
    }

    /// Preempts for a waiting job when the policy allows it and a set of victims frees room
    /// for it; starts it then. The victims are a minimal set: none could be spared.
    fn preempt_for(&mut self, cluster: &mut ClusterState, index: u32, entitled: &[f64], now: i64) -> bool {
        let job = &self.jobs[index as usize];
        let (leaf, gpus) = (job.leaf as usize, job.gpus);
        if self.policy == Policy::Budget {
            cluster.observe_standing(entitled);
        }
        let mut room = cluster.pool.room_for(gpus);
        let mut victims = Vec::new();
        let jobs = &self.jobs;
        let mut enough = |candidates: &mut dyn Iterator<Item = u32>| {
            for victim in candidates {
                victims.push(victim);
                if room.give_back(&jobs[victim as usize].placement) {
                    return true;
                }
            }
            false
        };
        let fits = match self.policy {
            Policy::Budget => enough(&mut self.budget_victims(cluster, leaf, entitled, now)),
            Policy::Priority => enough(&mut self.priority_victims(cluster, index).into_iter()),
        };
        if !fits {
            return false;
        }
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
        self.start(cluster, index, placement, now);
        true
    }

    /// Makes `victims` (in the order they were chosen, enough to free room for `gpus`)
    /// minimal: each is given back, the one chosen last first, when the others free room
    /// enough without it. Room only grows with more victims, so once one is found needed it
    /// stays needed as others are spared: no victim of the result can be spared. (Minimal,
    /// not the fewest possible: a smaller set of other jobs may exist.)
    fn spare(&self, pool: &Pool, gpus: u32, mut victims: Vec<u32>) -> Vec<u32> {
        // The last one chosen is needed: the ones before it did not free room enough.
        for i in (0..victims.len().saturating_sub(1)).rev() {
            let mut room = pool.room_for(gpus);
            let mut fits = false;
            for (j, &v) in victims.iter().enumerate() {
                if j != i {
                    fits |= room.give_back(&self.jobs[v as usize].placement);
                }
            }
            if fits {
                victims.remove(i);
            }
        }
        victims
    }

    /// Running jobs that may give way to a job of an under-served budget: past their
    /// protection, in budgets above their entitlement, most over-served budget first,
    /// newest job first.
    fn budget_victims<'a>(
        &'a self,
        cluster: &'a ClusterState,
        leaf: usize,
        entitled: &[f64],
        now: i64,
    ) -> impl Iterator<Item = u32> + 'a {
        let mut over: Vec<(usize, f64)> = if cluster.running[leaf] < entitled[leaf] {
            cluster
                .leaves
                .iter()
                .map(|&l| (l, cluster.running[l] - entitled[l]))
                .filter(|&(l, excess)| l != leaf && excess > 0.0)
                .collect()
        } else {
            Vec::new()
        };
        over.sort_by(|a, b| b.1.total_cmp(&a.1));
        over.into_iter()
            .flat_map(|(l, _)| cluster.running_jobs[l].iter().rev().map(|&(_, index)| index))
            .filter(move |&index| {
                let job = &self.jobs[index as usize];
                job.started.unwrap_or(now) + self.terms(job).map_or(0, |t| t.min_runtime) <= now
            })
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
        victims: &[u32],
    ) -> Option<Standing> {
        let mut change: BTreeMap<usize, f64> = BTreeMap::from([(leaf, f64::from(gpus))]);
        for &victim in victims {
            let job = &self.jobs[victim as usize];
            *change.entry(job.leaf as usize).or_default() -= f64::from(job.gpus);
        }
        let mut after = cluster.standing(entitled);
        for (&l, &delta) in &change {
            let (before, then) = (cluster.running[l], cluster.running[l] + delta);
            after.within += then.min(entitled[l]) - before.min(entitled[l]);
            after.beyond += (then - entitled[l]).max(0.0) - (before - entitled[l]).max(0.0);
        }
        after.better_than(&cluster.best.standing).then_some(after)
    }

    /// Low-priority running jobs, newest first, when the job would run at high priority.
    fn priority_victims(&self, cluster: &ClusterState, index: u32) -> Vec<u32> {
        if !cluster.has_high_room(&self.jobs[index as usize]) {
            return Vec::new();
        }
        let mut low: Vec<(i64, u32)> = cluster
            .leaves
            .iter()
            .flat_map(|&l| cluster.running_jobs[l].iter().copied())
            .filter(|&(_, j)| !self.jobs[j as usize].high)
            .collect();
        low.sort_unstable_by(|a, b| b.cmp(a));
        low.into_iter().map(|(_, j)| j).collect()
    }
}

/// The waiting jobs of a cluster in the policy's order, merged from the budgets' queues by
/// (rank of the budget, time entered, trace order). Each queue is read by job size (one
/// group per budget and size, each in queue order), so that a pass can drop a whole group
/// none of whose jobs can start in it; a group is read from where the last job taken from
/// it stood, so starts during the walk do not disturb it.
struct Cursor {
    heads: BinaryHeap<Reverse<Head>>,
    ranks: Vec<Option<u32>>,
}

/// The next job of one group: (rank, time entered, job, leaf, GPUs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Head(u32, i64, u32, usize, u32);

impl Cursor {
    fn new(cluster: &ClusterState, ranks: &[Option<u32>]) -> Cursor {
        let mut cursor = Cursor { heads: BinaryHeap::new(), ranks: ranks.to_vec() };
        for &leaf in &cluster.leaves {
            for &gpus in cluster.by_size[leaf].keys() {
                cursor.push_after(cluster, leaf, gpus, Bound::Unbounded);
            }
        }
        cursor
    }

    fn push_after(&mut self, cluster: &ClusterState, leaf: usize, gpus: u32, after: Bound<(i64, u32)>) {
        let Some(rank) = self.ranks[leaf] else { return };
        let Some(group) = cluster.by_size[leaf].get(&gpus) else { return };
        if let Some(&(entered, index)) = group.range((after, Bound::Unbounded)).next() {
            self.heads.push(Reverse(Head(rank, entered, index, leaf, gpus)));
        }
    }

    /// The next job; its group goes on only when [`Cursor::follow`] says so.
    fn next(&mut self) -> Option<Head> {
        self.heads.pop().map(|Reverse(head)| head)
    }

    /// Goes on with the group of `head` after it.
    fn follow(&mut self, cluster: &ClusterState, head: Head) {
        let Head(_, entered, index, leaf, gpus) = head;
        self.push_after(cluster, leaf, gpus, Bound::Excluded((entered, index)));
    }
}

/// One cluster: its tree, nodes, queues and usage.
struct ClusterState<'b> {
    budgets: &'b ClusterBudgets,
    /// The cluster's name and each node's project path, shared by the runs.
    name: Arc<str>,
    paths: Vec<Arc<str>>,
    pool: Pool,
    leaves: Vec<usize>,
    /// Waiting jobs per tree node (leaves only), by (time entered, job).
    queues: Vec<BTreeSet<(i64, u32)>>,
    /// The same, grouped by GPUs asked for.
    by_size: Vec<BTreeMap<u32, BTreeSet<(i64, u32)>>>,
    waiting: Vec<f64>,
    /// Running GPUs per tree node (an inner node: its subtree's).
    running: Vec<f64>,
    /// Running jobs per leaf, by (start, job).
    running_jobs: Vec<BTreeSet<(i64, u32)>>,
    /// Running jobs by (expected end, job): what a reservation counts on.
    ends: BTreeSet<(i64, u32)>,
    /// High-priority GPUs per leaf, and each node's guaranteed GPUs (the priority policy's
    /// caps).
    high: Vec<u64>,
    guaranteed: Vec<u64>,
    /// Each node's `max-gpus` (for an inner node, its whole subtree's).
    limits: Vec<Option<u64>>,
    usage: Usage,
    dirty: bool,
    /// The best standing since demand last changed (the budget policy's preemption rule).
    best: Best,
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

/// Where the Fair Tree ranking stands: the rank the last budget received (a budget tied
/// with it receives it too), and how many budgets were ranked.
#[derive(Default)]
struct RankState {
    rank: u32,
    ranked: u32,
}

impl<'b> ClusterState<'b> {
    fn new(budgets: &'b ClusterBudgets, gpus_per_node: u64, decay: Decay) -> ClusterState<'b> {
        let hierarchy = &budgets.hierarchy;
        let n = hierarchy.len();
        let leaves: Vec<usize> = (0..n).filter(|&i| hierarchy.is_leaf(NodeId(i))).collect();
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
            queues: vec![BTreeSet::new(); n],
            by_size: vec![BTreeMap::new(); n],
            waiting: vec![0.0; n],
            running: vec![0.0; n],
            running_jobs: vec![BTreeSet::new(); n],
            ends: BTreeSet::new(),
            high: vec![0; n],
            guaranteed: budgets.guaranteed.clone(),
            limits,
            usage: Usage::new(n, decay),
            dirty: false,
            best: Best::default(),
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
    /// changed since the last look.
    fn observe_standing(&mut self, entitled: &[f64]) {
        let demand: Vec<f64> = self.leaves.iter().map(|&l| self.running[l] + self.waiting[l]).collect();
        let now = self.standing(entitled);
        if demand != self.best.demand {
            self.best = Best { demand, standing: now };
        } else if now.better_than(&self.best.standing) {
            self.best.standing = now;
        }
    }

    /// Queues a job in its budget at its place: by the time it first entered (a requeued
    /// job goes back to its place).
    fn enqueue(&mut self, jobs: &[SimJob], index: u32) {
        let job = &jobs[index as usize];
        self.queues[job.leaf as usize].insert((job.entered, index));
        self.by_size[job.leaf as usize].entry(job.gpus).or_default().insert((job.entered, index));
        self.waiting[job.leaf as usize] += f64::from(job.gpus);
        self.dirty = true;
    }

    /// Takes a job out of its queue (nothing when it is not there).
    fn dequeue(&mut self, jobs: &[SimJob], index: u32) {
        let job = &jobs[index as usize];
        let leaf = job.leaf as usize;
        if self.queues[leaf].remove(&(job.entered, index)) {
            self.waiting[leaf] -= f64::from(job.gpus);
            if let Some(group) = self.by_size[leaf].get_mut(&job.gpus) {
                group.remove(&(job.entered, index));
                if group.is_empty() {
                    self.by_size[leaf].remove(&job.gpus);
                }
            }
        }
    }

    fn has_high_room(&self, job: &SimJob) -> bool {
        let leaf = job.leaf as usize;
        self.high[leaf] + u64::from(job.gpus) <= self.guaranteed[leaf]
    }

    fn occupy(&mut self, jobs: &[SimJob], index: u32, now: i64) {
        let job = &jobs[index as usize];
        self.running_jobs[job.leaf as usize].insert((now, index));
        self.ends.insert((job.expected_end, index));
        if job.high {
            self.high[job.leaf as usize] += u64::from(job.gpus);
        }
        self.add_running(job.leaf as usize, f64::from(job.gpus), now, None);
    }

    fn release(&mut self, jobs: &mut [SimJob], index: u32, now: i64) {
        let job = &mut jobs[index as usize];
        let leaf = job.leaf as usize;
        let started = job.started.expect("a running job");
        self.running_jobs[leaf].remove(&(started, index));
        self.ends.remove(&(job.expected_end, index));
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
        let mut node = Some(NodeId(leaf));
        while let Some(id) = node {
            self.running[id.0] += gpus;
            match started {
                None => self.usage.start(id.0, now, gpus),
                Some(started) => self.usage.stop(id.0, now, -gpus, started),
            }
            node = self.budgets.hierarchy.node(id).and_then(|n| n.parent);
        }
    }

    /// Each node's entitlement now: the cluster divided by demand (running and waiting).
    fn entitlement(&self) -> Vec<f64> {
        let hierarchy = &self.budgets.hierarchy;
        let demand: Vec<f64> = (0..hierarchy.len())
            .map(|i| if hierarchy.is_leaf(NodeId(i)) { self.running[i] + self.waiting[i] } else { 0.0 })
            .collect();
        hierarchy
            .allocate(self.budgets.gpus as f64, &demand)
            .map(|e| e.allocations().to_vec())
            .expect("GPUs and demands are finite and not negative")
    }

    /// The reservation of the job `holder`: the earliest expected end of running jobs at
    /// which it fits, and the nodes it would take then (best fit, or whole idle nodes).
    fn reserve(&self, jobs: &[SimJob], holder: u32) -> Reservation {
        let gpus = jobs[holder as usize].gpus;
        let mut room = self.pool.room_for(gpus);
        let mut at = None;
        for &(end, index) in &self.ends {
            if at.is_some_and(|at| end > at) {
                break;
            }
            // Every job expected to end by then gives its GPUs back, not only the first.
            if room.give_back(&jobs[index as usize].placement) {
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

    /// Each leaf's Fair Tree rank (lower served first; `None` for a leaf without waiting
    /// jobs under the priority policy, which ranks them all alike).
    fn ranks(&self, policy: Policy, now: i64) -> Vec<Option<u32>> {
        let mut ranks = vec![None; self.queues.len()];
        match policy {
            Policy::Budget => {
                let mut state = RankState::default();
                self.fair_tree(self.budgets.hierarchy.roots(), now, false, &mut state, &mut ranks);
                // Work no budget covers goes after every budget.
                ranks[self.budgets.unbudgeted.0] = Some(u32::MAX);
            }
            Policy::Priority => {
                for &leaf in &self.leaves {
                    ranks[leaf] = Some(0);
                }
            }
        }
        ranks
    }

    /// Fair Tree's ranking, as Slurm's (`_calc_tree_fs`): depth first, siblings by Level FS
    /// (share over usage) descending, that is by decayed usage per unit of share ascending.
    /// Budgets are Slurm's users (leaves) and accounts (inner nodes). A leaf whose usage per
    /// share equals its previous sibling's gets the same rank as the previous leaf ranked;
    /// the first child of an inner node tied with its previous sibling is tied too; inner
    /// nodes are never merged. Tied siblings are visited as Slurm 22.05 does (the test
    /// suite's Slurm): leaves first, then inner nodes by name. (Slurm 23.11 and later order
    /// tied siblings by their lineage instead.) Zero usage ties every budget that has none.
    fn fair_tree(
        &self,
        siblings: &[NodeId],
        now: i64,
        parent_tied: bool,
        state: &mut RankState,
        ranks: &mut [Option<u32>],
    ) {
        let hierarchy = &self.budgets.hierarchy;
        let mut ranked: Vec<(f64, bool, &str, NodeId)> = siblings
            .iter()
            .filter(|id| **id != self.budgets.unbudgeted)
            .map(|&id| {
                let node = hierarchy.node(id).expect("a node");
                let per_share = self.usage.raw(id.0, now) / node.weight;
                (per_share, !hierarchy.is_leaf(id), node.name.as_str(), id)
            })
            .collect();
        ranked.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.cmp(&b.1))
                .then_with(|| if a.1 { a.2.cmp(b.2) } else { a.3.0.cmp(&b.3.0) })
        });
        let mut previous = None;
        for (position, &(per_share, inner, _, id)) in ranked.iter().enumerate() {
            let tied = if position == 0 { parent_tied } else { previous == Some(per_share) };
            previous = Some(per_share);
            if inner {
                self.fair_tree(hierarchy.children(id), now, tied, state, ranks);
            } else {
                if !tied || state.ranked == 0 {
                    state.rank = state.ranked;
                }
                state.ranked += 1;
                ranks[id.0] = Some(state.rank);
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
        let idle = self.idle.iter().map(|&n| self.capacity[n as usize]).sum();
        Room { pool: self, gpus, free: self.free.clone(), idle }
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
