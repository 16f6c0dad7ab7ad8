//! The simulator's engine: the jobs, their runs and events, and what every policy shares:
//! starting a job on a placement, stopping a run (finished, or preempted and requeued), a
//! preemption's victims made minimal. The policies ([`budget`](super::budget),
//! [`priority`](super::priority), [`slurm`](super::slurm), [`kueue`](super::kueue)) decide the rest behind
//! [`Rules`]: the engine never asks which policy runs.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use allot_compiler::units::DECAY_PERIOD;
use allot_verify::figures::Waits;
use allot_verify::trace::Job;

use super::EndedBy;
use super::cluster::{ClusterState, Ranking};
use super::jobs::{Detail, Due, END, ENTER, Ended, Holding, JobId, PROTECTED_UNTIL, SimJob, Slots, Terms};
use super::pool::Pool;
use super::queue::Head;

/// What a policy decides; the engine does the rest. A policy is one module implementing
/// this trait; adding one touches no other policy, and the engine only where it lacks a
/// mechanism the policy needs (Kueue's brought [`Rules::queue`], lanes and [`Engine::evict`]).
pub(super) trait Rules {
    /// The decay of the usage that ranks budgets: its period (the passes at which Slurm
    /// decays usage and computes fair-share factors again), and the time of one pass when
    /// known.
    fn decay_period(&self) -> i64 {
        DECAY_PERIOD as i64
    }

    fn decay_phase(&self) -> Option<i64> {
        None
    }

    /// How budgets are ranked in the queue: by Fair Tree over their decayed usage, or all
    /// alike (jobs then go by the time they entered the queue).
    fn ranking(&self) -> Ranking {
        Ranking::FairTree { at_stops: true }
    }

    /// Whether the clusters keep their running jobs by lane and priority
    /// ([`ClusterState::by_lane`]): only the `kueue` policy reads them.
    fn by_lane(&self) -> bool {
        false
    }

    /// What a job of the trace becomes: its tier, its time limit and the longest it runs.
    /// `terms` are its contract's.
    fn admit(&self, job: &Job, terms: Option<&Terms>) -> Admission {
        let _ = job;
        Admission::of(terms)
    }

    /// Where a job of the trace for `leaf` of `cluster` under the contract `contract` (its
    /// name, empty for none) queues, given the `tier` that [`Rules::admit`] gave it; `None`
    /// when the policy can never run it (it is not replayed, and counted unplaceable). Only
    /// the `kueue` policy decides here: a job's ClusterQueue is its lane, and its priority
    /// (its own, else its contract's priority class on its cluster) its tier.
    fn queue(
        &mut self,
        cluster: &ClusterState,
        leaf: usize,
        job: &Job,
        contract: &str,
        tier: u32,
    ) -> Option<Queued> {
        let _ = (cluster, leaf, job, contract);
        Some(Queued { tier, lane: 0 })
    }

    /// How a run that starts now stands: `min_runtime` is its contract's minimum runtime.
    fn at_start(&self, cluster: &ClusterState, job: &SimJob, min_runtime: i64) -> Start;

    /// What becomes of a preempted job.
    fn requeue(&self) -> Requeue {
        Requeue::AtOnce
    }

    /// Schedules a cluster whose state changed, at `now`.
    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64);

    /// Whether a run's protection ending is noticed at once (the cluster is scheduled at
    /// that instant), or only by the policy's periodic scheduler (Slurm's main scheduler
    /// notices it at its next periodic pass).
    fn schedules_at_protection_end(&self) -> bool {
        true
    }

    /// When the policy next acts on `cluster` of its own after `last`, the last instant
    /// simulated: its periodic scheduler (Slurm's, running every so many seconds of the
    /// trace's clock), or a change of its configuration (Kueue's quotas at a grant
    /// boundary); only when a run could change something.
    fn next_periodic(&self, cluster: &ClusterState, last: i64) -> Option<i64> {
        let _ = (cluster, last);
        None
    }

    /// Acts at an instant [`Rules::next_periodic`] gave for some cluster (each cluster is
    /// called: each policy checks that the instant is one of its own there).
    fn periodic(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        let _ = (engine, cluster, now);
    }
}

/// A job as a policy takes it in.
pub(super) struct Admission {
    /// Its place among the queue's tiers, served in order (0 first).
    pub tier: u32,
    /// It runs under no contract of its own (Slurm's QOS `preemptible`): not protected, and
    /// requeued it starts over.
    pub contractless: bool,
    /// The time limit each run is planned with; `None`: its remaining work.
    pub limit: Option<i64>,
    /// Its work is cut at this: the longest it may run.
    pub max_runtime: i64,
    /// What a job whose work is cut ends by.
    pub cut_by: EndedBy,
}

impl Admission {
    /// A job under `terms` as most policies take it: tier 0, planned with its remaining work
    /// and cut at its contract's maximum runtime.
    pub fn of(terms: Option<&Terms>) -> Admission {
        let contract_max = terms.and_then(|t| t.max_runtime);
        Admission {
            tier: 0,
            contractless: false,
            limit: contract_max,
            max_runtime: contract_max.unwrap_or(i64::MAX),
            cut_by: EndedBy::MaxRuntime,
        }
    }
}

/// Where a job queues (see [`Rules::queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Queued {
    pub tier: u32,
    /// See [`SimJob::lane`].
    pub lane: u32,
}

/// How a run stands as it starts.
pub(super) struct Start {
    /// The tree node whose floor it runs in, if any.
    pub floor: Option<u32>,
    /// May be preempted from its start.
    pub preemptible: bool,
    /// Protected for this many seconds from its start, then preemptible (0: not protected
    /// by the engine).
    pub protected_for: i64,
    /// What it holds its GPUs as.
    pub holding: Holding,
}

/// What becomes of a preempted job.
#[derive(Clone, Copy)]
pub(super) enum Requeue {
    /// Back in its queue at once, at its place.
    AtOnce,
    /// Back in its queue after `delay` seconds, its place in the queue lost (Slurm's
    /// requeue after `cred_expire`).
    After { delay: i64 },
}

pub(super) struct Engine {
    pub contracts: Vec<Terms>,
    pub jobs: Slots,
    pub events: BinaryHeap<Reverse<Due>>,
    /// The jobs read and not finished, by the time they first entered their queue.
    pub unfinished: BTreeSet<(i64, JobId)>,
    /// Runs ended and not yet handed to the audit, in the audit's order.
    pub ended: BTreeSet<Ended>,
    runs_ended: u64,
    /// No run still to end entered its queue before this.
    pub horizon: i64,
    pub preemptions: u64,
    /// Instants whose scheduling a policy's guard against endless cycles cut short (see
    /// [`Simulation::stalled`](super::Simulation)).
    pub stalled: u64,
    pub lost_gpu_seconds: f64,
    /// The waits of the finished jobs of each size.
    pub by_size: BTreeMap<u32, Waits>,
    pub short_jobs: Waits,
    /// Runs carry their [`Detail`] (someone records the schedule).
    record: bool,
    /// Runs started so far.
    starts: u64,
    /// A pass's buffers: which budgets have tried a preemption, the cursor's heads.
    pub buffers: (Vec<bool>, BinaryHeap<Reverse<Head>>),
    /// The last instant simulated.
    pub last_instant: Option<i64>,
    requeue: Requeue,
}

impl Engine {
    pub fn new(contracts: Vec<Terms>, requeue: Requeue, record: bool) -> Engine {
        Engine {
            contracts,
            jobs: Slots::default(),
            events: BinaryHeap::new(),
            unfinished: BTreeSet::new(),
            ended: BTreeSet::new(),
            runs_ended: 0,
            horizon: i64::MIN,
            preemptions: 0,
            stalled: 0,
            lost_gpu_seconds: 0.0,
            by_size: BTreeMap::new(),
            short_jobs: Waits::default(),
            record,
            starts: 0,
            buffers: Default::default(),
            last_instant: None,
            requeue,
        }
    }

    pub fn terms(&self, job: &SimJob) -> Option<&Terms> {
        self.contract(job.terms)
    }

    /// The contract `terms` indexes, if any.
    pub fn contract(&self, terms: Option<u16>) -> Option<&Terms> {
        terms.map(|t| &self.contracts[usize::from(t)])
    }

    /// The next run for the audit, if no run still to end can come before it.
    pub fn release(&mut self) -> Option<Ended> {
        if self.ended.first()?.queued >= self.horizon {
            return None;
        }
        self.ended.pop_first()
    }

    pub fn handle(&mut self, due: Due, clusters: &mut [ClusterState]) {
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
        match due.kind {
            END => {
                cluster.dirty = true;
                self.stop(cluster, due.job, due.at, None);
            }
            _ => cluster.unprotect(&mut self.jobs[due.job], due.job),
        }
    }

    /// Ends the current run of `id` at `now`: finished, or preempted for the job
    /// `preempted_for` (then requeued).
    fn stop(&mut self, cluster: &mut ClusterState, id: JobId, now: i64, preempted_for: Option<JobId>) {
        let preempted = preempted_for.is_some();
        let job = &self.jobs[id];
        let start = job.started.expect("a running job");
        // A job without a contract of its own (the preemptible QOS): requeued, it starts over.
        let resumable = self.terms(job).is_some_and(|t| t.resumable) && !job.contractless;
        let elapsed = now - start;
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
            detail: self.record.then(|| {
                Box::new(Detail {
                    user: job.user.clone(),
                    submit: job.submit,
                    attempt: job.run,
                    ended_by: match (preempted, job.cut) {
                        (true, _) => EndedBy::Preempted,
                        (false, Some(cut)) => cut,
                        (false, None) => EndedBy::Finished,
                    },
                    nodes: job.placement.clone(),
                    start_order: job.start_order,
                    // The job starts once its victims are stopped: its next run.
                    preempted_for: preempted_for.map(|j| (self.jobs[j].id.clone(), self.jobs[j].run + 1)),
                })
            }),
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
        if resumable {
            job.remaining -= elapsed;
        } else {
            self.lost_gpu_seconds += elapsed as f64 * f64::from(job.gpus);
        }
        job.queued_at = now;
        match self.requeue {
            Requeue::AtOnce => cluster.enqueue(&self.jobs, id),
            Requeue::After { delay } => {
                job.place = now;
                self.events.push(Reverse(Due { at: now + delay, kind: ENTER, job: id, run: job.run }));
            }
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
        if job.work <= super::SHORT_JOB {
            self.short_jobs.push(job.waited);
        }
    }

    /// Starts `id` (taken out of its queue) on `placement`, as `rules` has it stand.
    pub fn start(
        &mut self,
        rules: &dyn Rules,
        cluster: &mut ClusterState,
        id: JobId,
        placement: Vec<(u32, u32)>,
        now: i64,
    ) {
        cluster.dequeue(&self.jobs, id);
        let job = &self.jobs[id];
        let min_runtime = self.terms(job).map_or(0, |t| t.min_runtime);
        let limit = job.limit();
        let Start { floor, preemptible, protected_for, holding } = rules.at_start(cluster, job, min_runtime);
        let job = &mut self.jobs[id];
        job.run += 1;
        job.started = Some(now);
        job.waited += now - job.queued_at;
        job.placement = placement;
        job.floor = floor;
        job.expected_end = now.saturating_add(limit);
        job.preemptible = preemptible;
        job.holding = holding;
        job.start_order = self.starts;
        self.starts += 1;
        self.events.push(Reverse(Due { at: now + job.remaining, kind: END, job: id, run: job.run }));
        // A run whose protection outlasts its work is protected to its end.
        if protected_for > 0 && protected_for < job.remaining {
            self.events.push(Reverse(Due {
                at: now + protected_for,
                kind: PROTECTED_UNTIL,
                job: id,
                run: job.run,
            }));
        }
        cluster.occupy(&self.jobs, id, now);
    }

    /// Preempts `victims` (running jobs that free room for `id`) and starts `id` in the
    /// room they leave.
    pub fn preempt(
        &mut self,
        rules: &dyn Rules,
        cluster: &mut ClusterState,
        id: JobId,
        victims: Vec<JobId>,
        now: i64,
    ) {
        for victim in victims {
            self.stop(cluster, victim, now, Some(id));
        }
        let placement = cluster.pool.place(self.jobs[id].gpus).expect("the freed room fits the job");
        self.start(rules, cluster, id, placement, now);
    }

    /// Preempts `victims` for `id` without starting it: they stop now, their GPUs free at
    /// once, and requeue; `id` starts later, if the policy starts it (Kueue admits a
    /// preemptor in a later scheduling cycle, once its victims have released their quota).
    pub fn evict(&mut self, cluster: &mut ClusterState, id: JobId, victims: &[JobId], now: i64) {
        for &victim in victims {
            self.stop(cluster, victim, now, Some(id));
        }
    }

    /// The first `candidates` that free room enough for `gpus`, if they all do.
    pub fn enough(
        &self,
        pool: &Pool,
        gpus: u32,
        candidates: impl Iterator<Item = JobId>,
    ) -> Option<Vec<JobId>> {
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
    /// enough without it and `allows` the set without it. Room only grows with more
    /// victims, so once one is found needed it stays needed as others are spared: no victim
    /// of the result can be spared for room. (Minimal, not the fewest possible: a smaller
    /// set of other jobs may exist.)
    pub fn spare(
        &self,
        pool: &Pool,
        gpus: u32,
        mut victims: Vec<JobId>,
        allows: impl Fn(&[JobId]) -> bool,
    ) -> Vec<JobId> {
        // The last one chosen is needed: the ones before it did not free room enough.
        let mut without = Vec::with_capacity(victims.len());
        for i in (0..victims.len().saturating_sub(1)).rev() {
            let mut room = pool.room_for(gpus);
            let mut fits = false;
            without.clear();
            for (j, &v) in victims.iter().enumerate() {
                if j != i {
                    fits |= room.give_back(&self.jobs[v].placement);
                    without.push(v);
                }
            }
            if fits && allows(&without) {
                victims.remove(i);
            }
        }
        victims
    }
}
