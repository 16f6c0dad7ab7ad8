//! The `slurm` policy: the configuration `allot build` writes for Slurm, scheduled as Slurm
//! 22.05 schedules it. Each budget's guaranteed GPUs are a floor partition of a higher tier;
//! every other job runs in the bound partition (`over`), where a job in a floor with room
//! preempts it once its protection (`PreemptExemptTime`) has passed, the youngest first;
//! jobs of QOS [`PREEMPTIBLE_QOS`] run in `over` only. Within a tier jobs go by Fair Tree
//! rank (computed again only at the decay's passes), submit time and trace order. The main
//! scheduler ([`Slurm::main_scheduler`]) starts jobs in that order until one neither fits
//! nor starts by preempting, and that one blocks the rest; it runs when something changed,
//! and every `sched_interval` once a protection has ended. The backfill scheduler
//! ([`Slurm::backfill`]) runs every `bf_interval`, conservative and by requested time
//! limits, holding whole nodes for the jobs it plans. A preempted job is requeued after
//! `cred_expire` + 1, its place lost. Jobs end at their time limits. Under
//! `preempt/qos` (the configuration allot wrote before floors) there are no floors, and
//! only QOS [`PREEMPTIBLE_QOS`] is preempted, by any other job, which it follows in the
//! queue. A contract's reserve is a partition of the highest tier for its jobs, capped at
//! the reserve, walked before the floors by the main scheduler. What is not modelled is in
//! docs/verifier.md.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use allot_compiler::names::PREEMPTIBLE_QOS;
use allot_verify::trace::Job;

use super::cluster::ClusterState;
use super::cluster::Ranking;
use super::engine::{Admission, Engine, Requeue, Rules, Start};
use super::jobs::{Holding, JobId, SimJob, Slots, Terms};
use super::pool::Pool;
use super::queue::{Cursor, Head};
use super::{EndedBy, SlurmSettings};

/// The policy: a Slurm's scheduler settings, and its backfill plan (kept from run to run
/// for its buffers).
pub(super) struct Slurm {
    settings: SlurmSettings,
    plan: Plan,
    /// The partition the job about to start runs in.
    partition: Partition,
}

/// A partition allot writes for Slurm, as a starting job runs in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Partition {
    /// The bound partition, where all other work runs.
    Over,
    /// A budget's floor (its tree node's).
    Floor(u32),
    /// Its contract's reserve.
    Reserve,
}

impl Slurm {
    pub(super) fn new(settings: SlurmSettings) -> Slurm {
        Slurm { settings, plan: Plan::default(), partition: Partition::Over }
    }
}

impl Rules for Slurm {
    fn decay_period(&self) -> i64 {
        self.settings.calc_period
    }

    fn decay_phase(&self) -> Option<i64> {
        self.settings.started
    }

    /// Slurm computes fair-share factors only at its decay passes.
    fn ranking(&self) -> Ranking {
        Ranking::FairTree { at_stops: false }
    }

    /// Slurm ends a job at its time limit. Under `preempt/qos` it serves jobs of the QOS
    /// every contract's QOS may preempt after all others (Slurm sorts a job that may preempt
    /// another first); under floors, the partitions' tiers order the queue, not the QOS.
    fn admit(&self, job: &Job, terms: Option<&Terms>) -> Admission {
        let max = terms.and_then(|t| t.max_runtime).unwrap_or(i64::MAX);
        let requested = job.time_limit.unwrap_or(max);
        let contractless = job.contract == PREEMPTIBLE_QOS;
        Admission {
            tier: u32::from(contractless && !self.settings.floors),
            contractless,
            limit: Some(requested),
            max_runtime: max.min(requested),
            cut_by: if requested < max { EndedBy::TimeLimit } else { EndedBy::MaxRuntime },
        }
    }

    /// Under `preempt/qos`, only the preemptible QOS may be preempted; no contract's QOS
    /// is. Under floors, a job in its floor is never preempted, and one in `over` is once
    /// its contract's `PreemptExemptTime` has passed.
    fn at_start(&self, _: &ClusterState, job: &SimJob, min_runtime: i64) -> Start {
        if self.settings.floors {
            // QOS `preemptible` sets no PreemptExemptTime: Slurm's global one (0) applies.
            let protected_for = if job.contractless { 0 } else { min_runtime };
            return match self.partition {
                Partition::Reserve => {
                    Start { floor: None, preemptible: false, protected_for: 0, holding: Holding::Reserve }
                }
                Partition::Floor(floor) => {
                    Start { floor: Some(floor), preemptible: false, protected_for: 0, holding: Holding::Own }
                }
                Partition::Over => Start {
                    floor: None,
                    preemptible: protected_for == 0,
                    protected_for,
                    holding: Holding::Own,
                },
            };
        }
        Start { floor: None, preemptible: job.tier == 1, protected_for: 0, holding: Holding::Own }
    }

    /// Slurm holds a requeued job until its credentials have expired, its place in the
    /// queue lost (its submit time becomes its requeue).
    fn requeue(&self) -> Requeue {
        Requeue::After { delay: self.settings.requeue_delay }
    }

    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        self.main_scheduler(engine, cluster, now);
    }

    /// Slurm's main scheduler notices a protection ending only at its periodic pass.
    fn schedules_at_protection_end(&self) -> bool {
        false
    }

    /// The main scheduler's periodic pass (every `sched_interval`) when a protection has
    /// ended since it last ran; the backfill scheduler's (every `bf_interval`) when anything
    /// changed since its last run. Both only while jobs wait.
    fn next_periodic(&self, cluster: &ClusterState, last: i64) -> Option<i64> {
        let next = |interval: i64| (last.div_euclid(interval) + 1).saturating_mul(interval);
        let main = cluster.unprotected.then(|| next(self.settings.sched_interval));
        let backfill = cluster.backfill_due.then(|| next(self.settings.backfill_interval));
        (cluster.queued > 0).then(|| main.into_iter().chain(backfill).min()).flatten()
    }

    fn periodic(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        if cluster.queued == 0 {
            return;
        }
        if cluster.unprotected && now.rem_euclid(self.settings.sched_interval) == 0 {
            cluster.unprotected = false;
            self.main_scheduler(engine, cluster, now);
        }
        if cluster.backfill_due && now.rem_euclid(self.settings.backfill_interval) == 0 {
            self.backfill(engine, cluster, now);
        }
    }
}

impl Slurm {
    /// Slurm's main scheduler (`_schedule` in `src/slurmctld/job_scheduler.c`): the waiting
    /// jobs in priority order (under floors, [`Slurm::pass_with_floors`]), each started if
    /// it fits, or, when it may preempt, by preempting. A job that its budgets' `max-gpus`
    /// hold back is passed over (Slurm passes over a job that an association limit holds);
    /// the first job that cannot start blocks every job after it (its partition's nodes,
    /// every partition's here, are taken out of the pass), which wait for the backfill
    /// scheduler.
    fn main_scheduler(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        cluster.rank(now);
        cluster.unprotected = false;
        let (tried, mut heads) = std::mem::take(&mut engine.buffers);
        if self.settings.floors {
            while self.pass_with_floors(engine, cluster, &mut heads, now) {}
        } else {
            let mut cursor = Cursor::new(&mut heads);
            while let Some(head) = cursor.next(cluster) {
                let Head(tier, _, _, id, leaf, gpus, _) = head;
                if !cluster.within_limits(leaf, gpus) {
                    continue;
                }
                cursor.follow(cluster, head);
                if let Some(placement) = cluster.pool.place(gpus) {
                    engine.start(self, cluster, id, placement, now);
                } else if tier > 0 || !self.preempt_for(engine, cluster, id, now) {
                    break;
                }
            }
        }
        engine.buffers = (tried, heads);
    }

    /// One pass of the main scheduler under floors. Slurm queues a job once per partition
    /// it may run in, and serves a higher `PriorityTier` first (`sort_job_queue2`): every
    /// job's floors first, its budget's then the projects' above it, then every job's
    /// `over`. A floor without room for the job (its partition QOS's `GrpTRES` reached) is
    /// passed over (`ESLURM_ACCOUNTING_POLICY` blocks nothing); one with room starts it on
    /// free GPUs, or by preempting jobs running in `over` past their protection. A
    /// preemption ends the pass (`_preempt_jobs` answers `ESLURM_NODES_BUSY`); the
    /// preemptor starts in the next, which comes once the victims have exited, seconds
    /// later: here at the same instant. Whether it preempted (a next pass follows).
    fn pass_with_floors(
        &mut self,
        engine: &mut Engine,
        cluster: &mut ClusterState,
        heads: &mut BinaryHeap<Reverse<Head>>,
        now: i64,
    ) -> bool {
        // The reserves' partitions first, of the highest tier: each holds its contract's
        // jobs only, up to its GPUs.
        if cluster.reserve_room() {
            let mut cursor = Cursor::new(heads);
            while let Some(head) = cursor.next(cluster) {
                let Head(_, _, _, id, leaf, gpus, _) = head;
                if !cluster.within_limits(leaf, gpus) {
                    continue;
                }
                cursor.follow(cluster, head);
                let reserve = engine.jobs[id].terms.map(|t| cluster.reserves[usize::from(t)]);
                if !reserve.is_some_and(|r| r.holds(gpus)) {
                    continue;
                }
                // As in a floor: it starts on free GPUs, or by preempting work in `over`
                // past its protection, or it ends the pass.
                self.partition = Partition::Reserve;
                let Some(placement) = cluster.pool.place(gpus) else {
                    let preempted = self.preempt_for(engine, cluster, id, now);
                    self.partition = Partition::Over;
                    return preempted;
                };
                engine.start(self, cluster, id, placement, now);
                self.partition = Partition::Over;
                if !cluster.reserve_room() {
                    break;
                }
            }
        }
        let mut cursor = Cursor::new(heads);
        // Floors only fill as the walk goes on: once none has room, none will.
        let mut room = cluster.any_floor_room();
        while room && let Some(head) = cursor.next(cluster) {
            let Head(_, _, _, id, leaf, gpus, _) = head;
            if !cluster.within_limits(leaf, gpus) {
                continue;
            }
            // The preemptible QOS runs in `over` only (its group may hold other jobs).
            if engine.jobs[id].contractless {
                cursor.follow(cluster, head);
                continue;
            }
            // No floor with room: none for the later jobs of its group either (floors only
            // fill as the pass goes on).
            let Some(floor) = cluster.path(leaf).find(|&n| cluster.floor_room(n, gpus)) else {
                continue;
            };
            cursor.follow(cluster, head);
            self.partition = Partition::Floor(floor as u32);
            if let Some(placement) = cluster.pool.place(gpus) {
                engine.start(self, cluster, id, placement, now);
                room = cluster.any_floor_room();
            } else {
                return self.preempt_for(engine, cluster, id, now);
            }
        }
        self.partition = Partition::Over;
        let mut cursor = Cursor::new(heads);
        while let Some(head) = cursor.next(cluster) {
            let Head(_, _, _, id, leaf, gpus, _) = head;
            if !cluster.within_limits(leaf, gpus) {
                continue;
            }
            cursor.follow(cluster, head);
            // Jobs in `over` preempt nothing: no partition is below it.
            let Some(placement) = cluster.pool.place(gpus) else { break };
            engine.start(self, cluster, id, placement, now);
        }
        false
    }

    /// Preempts jobs that may be preempted for `id` when a minimal set of them frees room
    /// for it, and starts it.
    fn preempt_for(&self, engine: &mut Engine, cluster: &mut ClusterState, id: JobId, now: i64) -> bool {
        let gpus = engine.jobs[id].gpus;
        let victims = if self.settings.floors {
            engine.enough(&cluster.pool, gpus, youngest_first(cluster))
        } else {
            engine.enough(&cluster.pool, gpus, victims(engine, cluster))
        };
        let Some(victims) = victims else {
            return false;
        };
        let victims = engine.spare(&cluster.pool, gpus, victims, |_| true);
        engine.preempt(self, cluster, id, victims, now);
        true
    }

    /// A run of Slurm's backfill scheduler: the waiting jobs in priority order (the first
    /// `bf_max_job_test` of them), each started now if it fits on nodes that no job before
    /// it holds before it would end (by its time limit), else given the earliest time it
    /// fits, by the time limits of the jobs running, on nodes free of the plan so far; the
    /// nodes it would take are held whole for it from then to its time limit (Slurm plans
    /// whole nodes). Times are rounded down to `bf_resolution`, as Slurm rounds them. A job
    /// whose QOS may preempt preempts when no job before it holds any node before it would
    /// end (Slurm's backfill preempts on the nodes free of the plan).
    fn backfill(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        let settings = self.settings;
        cluster.rank(now);
        cluster.backfill_due = false;
        let mut plan = std::mem::take(&mut self.plan);
        plan.start_over(cluster, &engine.jobs, settings.backfill_resolution.max(1));
        let (tried, mut heads) = std::mem::take(&mut engine.buffers);
        let mut tested = 0;
        // Jobs that may be preempted run: a job may start by preempting them.
        let any_victim =
            |cluster: &ClusterState| cluster.leaves.iter().any(|&l| !cluster.preemptible[l].is_empty());
        let mut preemptible = any_victim(cluster);
        // The jobs looked at since the plan and the running jobs last changed that changed
        // neither, by (tier, GPUs, time limit, partition): a job like one of them would
        // change nothing either (its answer depends on nothing else), so it is counted and
        // passed over.
        let mut unchanged: Vec<(u32, u32, i64, Partition)> = Vec::new();
        // Under floors, every job's floors first, then every job's `over` (their tiers).
        let walks: &[Walk] = if settings.floors { &[Walk::Floors, Walk::Over] } else { &[Walk::All] };
        for &walk in walks {
            if walk == Walk::Floors && !cluster.any_floor_room() {
                continue;
            }
            let mut cursor = Cursor::new(&mut heads);
            while let Some(head) = cursor.next(cluster)
                && tested < settings.backfill_max_jobs
            {
                // Nothing free and nothing to preempt: no job after this one can start now, and
                // what the plan holds for them changes nothing else.
                if cluster.pool.free_gpus == 0 && (!preemptible || walk == Walk::Over) {
                    break;
                }
                let Head(tier, _, _, id, leaf, gpus, _) = head;
                if !cluster.within_limits(leaf, gpus) {
                    continue;
                }
                // The first of its floors with room for it; none: none for the later jobs of its
                // group either (floors only fill as the walk goes on).
                self.partition = Partition::Over;
                if walk == Walk::Floors {
                    let Some(floor) = cluster.path(leaf).find(|&n| cluster.floor_room(n, gpus)) else {
                        continue;
                    };
                    // The preemptible QOS runs in `over` only (its group may hold other jobs).
                    if engine.jobs[id].contractless {
                        cursor.follow(cluster, head);
                        continue;
                    }
                    self.partition = Partition::Floor(floor as u32);
                }
                cursor.follow(cluster, head);
                tested += 1;
                let limit = engine.jobs[id].limit();
                let like = (tier, gpus, limit, self.partition);
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
                    engine.start(self, cluster, id, placement, now);
                    unchanged.clear();
                } else if tier > 0
                    || !preemptible
                    || walk == Walk::Over
                    || plan.open(&cluster.pool.capacity, now, limit) != cluster.pool.capacity
                    || !self.preempt_for(engine, cluster, id, now)
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
                    plan.count_releases(cluster, &engine.jobs);
                    preemptible = any_victim(cluster);
                    unchanged.clear();
                }
            }
        }
        engine.buffers = (tried, heads);
        self.plan = plan;
        // Its own starts need no second run.
        cluster.backfill_due = false;
    }
}

/// Which of the backfill scheduler's queue records a walk reads: every job once (without
/// floors), or each job's floor or its `over`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Walk {
    All,
    Floors,
    Over,
}

/// The running jobs in `over` past their protection, the most recently started first
/// (`preempt_youngest_first`).
/// Read lazily, merged from each budget's (a preemption mostly needs a few).
fn youngest_first<'c>(cluster: &'c ClusterState) -> impl Iterator<Item = JobId> + 'c {
    let mut next: BinaryHeap<((i64, JobId), usize)> = cluster
        .leaves
        .iter()
        .filter_map(|&l| cluster.preemptible[l].last().map(|&started| (started, l)))
        .collect();
    std::iter::from_fn(move || {
        let (started, leaf) = next.pop()?;
        if let Some(&before) = cluster.preemptible[leaf].range(..started).next_back() {
            next.push((before, leaf));
        }
        Some(started.1)
    })
}

/// The running jobs of the preemptible QOS in the order Slurm's preempt/qos offers them:
/// (all of one QOS priority) the fewest nodes first, then the oldest job.
fn victims(engine: &Engine, cluster: &ClusterState) -> std::vec::IntoIter<JobId> {
    let mut jobs: Vec<JobId> =
        cluster.leaves.iter().flat_map(|&l| cluster.preemptible[l].iter().map(|&(_, j)| j)).collect();
    jobs.sort_unstable_by_key(|&j| (engine.jobs[j].placement.len(), j));
    jobs.into_iter()
}

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
