//! The `kueue` policy's scheduling: each ClusterQueue's queue, Kueue's scheduling cycles and
//! the order of a cycle's entries, admission, and the preemptions issued (their victims found
//! by [`preemption`](super::preemption)).
//!
//! The policy follows Kueue v0.17.0 with its default feature gates (the version the Kueue
//! oracle, `tests/kueue-oracle`, runs; every file cited is of that version). Kueue runs a
//! cycle every few milliseconds while workloads wait (file: pkg/scheduler/scheduler.go,
//! funcs: Start, schedule): the simulator runs all the cycles of an instant at that instant,
//! one after another, until a cycle changes nothing (no head left, or each head as it was).
//! Each cycle:
//!
//! - takes one head per ClusterQueue (file: pkg/cache/queue/manager.go, func: heads): its
//!   sticky preemptor (BestEffortFIFO, see below), else its first pending workload by
//!   priority (descending), then creation time (a preempted workload keeps its place), then
//!   trace order (Kueue's last key is the UID; file: pkg/cache/queue/cluster_queue.go, func:
//!   baseCompareFunc). Priorities are the engine's tiers (tier 0 the highest priority), so
//!   each budget leaf's groups of waiting jobs (by tier and GPUs) give the head cheaply;
//! - nominates each head against the quota as it stands (file: pkg/scheduler/scheduler.go,
//!   func: nominate): it fits ([`QuotaTree::fit`]) and the cluster's nodes can place it;
//!   or it may preempt and the victims are found; or it may preempt and none are (no
//!   candidates); or it does not fit;
//! - orders the entries: classical, by the height of the lowest subtree the request fits
//!   in, then priority, then creation time, then trace order (file:
//!   pkg/scheduler/scheduler.go, func: makeClassicalIterator; Kueue leaves the last tie to
//!   its unstable sort); under Fair Sharing, the tournament of
//!   [`fair_next`](State::fair_next), run again before each entry on the quota as the
//!   cycle's admissions left it);
//! - processes them in order (file: pkg/scheduler/scheduler.go, func: schedule), each
//!   checked again against the quota as the cycle left it, without the usage of the
//!   cycle's victims (func: fits): a fitting entry is admitted (started on the nodes at
//!   once, its usage added); a preempting one whose victims another entry of the cycle
//!   took, or that no longer fits once its victims are gone, is skipped (it stays its
//!   queue's head); otherwise its victims are evicted now and it is not admitted in this
//!   cycle (Kueue admits it in a later one, when it fits), its usage added for the rest of
//!   the cycle, its victims' kept there too (Kueue's snapshot keeps it: the shares of the
//!   tournament and the reserves below count it); an
//!   entry without candidates reserves, unless its ClusterQueue reclaims `Any`, what of its
//!   request its quota could still hold, for the rest of the cycle (func:
//!   reserveCapacityForUnreclaimablePreempt); an entry that does not fit, or has no
//!   candidates, is not admitted.
//!
//! A head not admitted (not fitting, or without candidates) leaves its queue's heads under
//! BestEffortFIFO: it alone goes to the inadmissible set (the gate
//! SchedulingEquivalenceHashing, which sets aside its look-alikes too, is off in 0.17),
//! until quota is released in its cohort tree (a workload ends or is evicted; file:
//! pkg/cache/queue/inadmissible_workloads.go, func: queueInadmissibleWorkloads). The
//! simulator brings them back at the first schedule of an instant where a job of the tree
//! ended, and after the cycle whose evictions freed quota (Kueue, when the victims' quota is
//! released; the oracle agrees). Under StrictFIFO the head stays and blocks its queue until
//! quota is released in its tree (or a workload of higher priority, or earlier, comes before
//! it). A workload that issued preemptions is its queue's sticky workload under
//! BestEffortFIFO, first in its queue's order whenever it is not set aside, until admitted
//! (file: pkg/cache/queue/cluster_queue.go, funcs: RequeueIfNotPresent, baseCompareFunc,
//! delete).
//!
//! Timing: victims release their quota the instant they are evicted (in Kueue, once their
//! pods have stopped, seconds later), and come back to their queues then, as Kueue requeues
//! them in the handler that releases their quota; the preemptor, its queue's sticky head,
//! is admitted at the same instant, in a later cycle, if it still fits then (another
//! queue's entry served before it in that cycle may take the room). Victims are found by
//! quota, as Kueue finds them; a preemption whose
//! victims would not free room for the preemptor on the nodes is not issued (Kueue would
//! issue it, and the preemptor's pods would wait for kube-scheduler). The time between
//! cycles, the requeue batch period (a second) of the workloads set aside, the backoff after
//! cycles that admit nothing, and `waitForPodsReady` are not modelled.
//!
//! A guard against endless cycles: the cycle that evicts a job a second time at one instant
//! is the instant's last (the Kueue oracle's rule too), and so is the cycle past
//! [`CYCLES_AT_LEAST`] and [`CYCLES_PER_JOB`] more per job queued or running (the oracle's
//! bound is its `--max-cycles`, 10,000 by default); the instant is counted in
//! [`Simulation::stalled`](crate::Simulation), and its cycles go on at the next instant the
//! cluster is scheduled (a job ends or enters), or, with no job left running, at the next
//! second, without preemption (as if every queue's policies were `Never`; see
//! [`State::wake`]). It fires where Kueue itself preempts round in circles, an
//! eviction at a time (a livelock): `borrowWithinCohort` may take a lender below its quota,
//! which the lender reclaims before borrowing again; a preemptor's room may go to another
//! queue's borrower served before it, and a workload of the preemptor's queue within its
//! quota reclaims it, and is preempted again; Fair Sharing's LessThanInitialShare may
//! preempt a queue whose next workload then has the lower share and preempts back; under
//! Fair Sharing with `withinClusterQueue: LowerPriority` and `reclaimWithinCohort: Any`, a
//! high-priority workload larger than its queue's quota preempts its own queue's lower one
//! to borrow, and another queue's workload within its quota reclaims it at once (Fair
//! Sharing takes from a borrowing queue unconditionally for a preemptor within its quota),
//! and so on while such workloads wait. Such setups show many preemptions, as Kueue would
//! make.
//!
//! At a grant boundary the quotas change (the objects of that moment): see
//! [`State::follow`]; the cluster is scheduled then while jobs wait there.
//!
//! No run is protected: Kueue has no minimum runtime. Budgets are not ranked by usage
//! (`Ranking::Flat`): Kueue's order is its own.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use allot_verify::trace::Job;

use super::super::cluster::Ranking;
use super::super::cluster::{ClusterState, Group};
use super::super::engine::{Engine, Queued, Rules as EngineRules, Start};
use super::super::jobs::{Holding, JobId, SimJob};
use super::quota::{NoFit, QuotaFit, QuotaTree};
use super::setup::{Kind, Preemption, Queueing, ReclaimWithinCohort, Strategy, WithinClusterQueue};
use super::{Kueue, Queues, priority, tier};

/// Cycles one schedule of a cluster may run, per job queued or running there (and at least
/// [`CYCLES_AT_LEAST`]): the guard against endless cycles (see the module's documentation).
/// Only the cycles with a head that may be admitted or preempt are counted: those that only
/// set heads aside come at most one per waiting job between two of them (see
/// [`State::next_entries`]). Without a livelock of preemptions each job is admitted and
/// evicted a few times in an instant at most. At the guard, the instant is cut short.
const CYCLES_PER_JOB: usize = 16;
const CYCLES_AT_LEAST: usize = 64;

/// The policy: the setups, and each cluster's state as it schedules.
pub(in super::super) struct Rules {
    kueue: Arc<Kueue>,
    states: HashMap<Arc<str>, State>,
}

impl Rules {
    pub(in super::super) fn new(kueue: Arc<Kueue>) -> Rules {
        Rules { kueue, states: HashMap::new() }
    }
}

/// Starts runs as Kueue does: none protected.
struct Unprotected;

impl EngineRules for Unprotected {
    fn at_start(&self, _: &ClusterState, _: &SimJob, _: i64) -> Start {
        Start { floor: None, preemptible: true, protected_for: 0, holding: Holding::Own }
    }

    fn schedule(&mut self, _: &mut Engine, _: &mut ClusterState, _: i64) {}
}

impl EngineRules for Rules {
    fn ranking(&self) -> Ranking {
        Ranking::Flat
    }

    /// Each ClusterQueue's running jobs, for its usage and its preemption candidates.
    fn by_lane(&self) -> bool {
        true
    }

    /// The job's ClusterQueue as its lane (the one its `queue` names, else its contract's
    /// own, else its budget's),
    /// and its priority (its own, else its contract's priority class on its cluster) as its
    /// tier; none (never run) when it has no ClusterQueue, its ClusterQueue does not cover
    /// GPUs, or it asks for more than its ClusterQueue could ever hold (Kueue's
    /// `ExceedsMaxQuota`).
    fn queue(
        &mut self,
        cluster: &ClusterState,
        leaf: usize,
        job: &Job,
        contract: &str,
        _: u32,
    ) -> Option<Queued> {
        let kueue = self.kueue.clone();
        let queues = kueue.clusters.get(&*cluster.name)?;
        let node = match job.queue.as_str() {
            "" => match queues.by_contract.get(contract) {
                Some(&node) => node,
                None => *queues.by_path.get(&*cluster.paths[leaf])?,
            },
            named => queues.cluster_queue(named)?,
        };
        let Kind::ClusterQueue { preemption, .. } = &queues.setup.nodes[node].kind else {
            return None;
        };
        let fair = queues.setup.fair_sharing.is_some();
        // Never run: not even the quotas of a later grant boundary could hold it.
        let never = |tree: &QuotaTree| {
            matches!(
                tree.fit(node, u64::from(job.gpus), preemption, fair),
                QuotaFit::NoFit(NoFit::Uncovered | NoFit::ExceedsMaxQuota)
            )
        };
        if queues.trees_from(job.submit).all(never) {
            return None;
        }
        let state = self.states.entry(cluster.name.clone()).or_insert_with(|| State::new(queues));
        state.take(leaf, node);
        let priority = job.priority.unwrap_or_else(|| queues.priority(contract));
        Some(Queued { tier: tier(priority), lane: node as u32 })
    }

    fn at_start(&self, cluster: &ClusterState, job: &SimJob, min_runtime: i64) -> Start {
        Unprotected.at_start(cluster, job, min_runtime)
    }

    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        // A cluster's state is made when its first job queues.
        let Some(state) = self.states.get_mut(&cluster.name) else { return };
        state.follow(&self.kueue.clusters[&*cluster.name], now);
        state.schedule(engine, cluster, now);
    }

    /// The cluster's next quota change after `last` (its objects of a later grant boundary),
    /// or the second after an instant cut short with nothing running (see [`State::wake`]),
    /// while jobs wait there: with none waiting, a new quota changes nothing until the next
    /// schedule, which takes it.
    fn next_periodic(&self, cluster: &ClusterState, last: i64) -> Option<i64> {
        if cluster.queued == 0 {
            return None;
        }
        let later = &self.kueue.clusters.get(&*cluster.name)?.later;
        let boundary = later.get(later.partition_point(|(from, _)| *from <= last)).map(|(from, _)| *from);
        let wake = self.states.get(&cluster.name).and_then(|state| state.wake).filter(|&at| at > last);
        boundary.into_iter().chain(wake).min()
    }

    /// At a quota change, or the second after an instant cut short, the cluster is
    /// scheduled (with the new quotas).
    fn periodic(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        let Some(state) = self.states.get_mut(&cluster.name) else { return };
        let passed = state.follow(&self.kueue.clusters[&*cluster.name], now);
        if passed || state.wake == Some(now) {
            state.schedule(engine, cluster, now);
        }
    }
}

/// One ClusterQueue that jobs are submitted to, as it schedules.
pub(super) struct Queue {
    /// Its node in the setup (and the quota tree).
    pub(super) node: usize,
    /// The root of its cohort tree (itself without a cohort).
    pub(super) root: usize,
    /// The budget leaves whose jobs it takes (those of its lane: see [`SimJob::lane`]).
    pub(super) leaves: Vec<usize>,
    pub(super) preemption: Preemption,
    pub(super) queueing: Queueing,
    /// GPUs its admitted jobs use, as last booked in the quota tree.
    pub(super) usage: u64,
    /// BestEffortFIFO: the workloads set aside as inadmissible, for each group of waiting
    /// jobs (by budget leaf, tier and GPUs) the last of them in the group's order: a group's
    /// heads are set aside in its order, and a job that comes back earlier than one set
    /// aside (a victim) brings them all back (see [`State::release`]). A sticky head set
    /// aside may have jobs of its group before it waiting: it is set aside alone.
    parked: BTreeMap<(u32, u32, u32), (i64, JobId)>,
    parked_alone: BTreeSet<JobId>,
    /// StrictFIFO: the head that blocks it.
    blocked: Option<JobId>,
    /// BestEffortFIFO: the preemptor kept at its head.
    sticky: Option<JobId>,
    /// The last head of each class (priority tier, GPUs) set aside, nominated at which
    /// moment (see [`State::moment`]), with what outcome.
    nominated: BTreeMap<(u32, u32), (u64, Mode)>,
}

impl Queue {
    /// Its groups of waiting jobs, with their budget leaves.
    fn groups<'a>(&'a self, cluster: &'a ClusterState) -> impl Iterator<Item = (usize, &'a Group)> {
        let lane = self.node as u32;
        self.leaves
            .iter()
            .flat_map(|&leaf| cluster.by_size[leaf].iter().map(move |group| (leaf, group)))
            .filter(move |(_, group)| group.lane == lane)
    }

    /// Sets aside the jobs of `group` (budget leaf, tier, GPUs) up to `last`, in its order:
    /// whether that set aside more than before.
    fn park(&mut self, group: (u32, u32, u32), last: (i64, JobId)) -> bool {
        let more = self.parked.get(&group).is_none_or(|&before| before < last);
        if more {
            self.parked.insert(group, last);
        }
        more
    }

    /// A group's jobs not set aside, in its order.
    fn waiting<'a>(&'a self, leaf: usize, group: &'a Group) -> impl Iterator<Item = &'a (i64, JobId)> {
        let after = match self.parked.get(&(leaf as u32, group.tier, group.gpus)) {
            Some(&last) => Bound::Excluded(last),
            None => Bound::Unbounded,
        };
        group.jobs.range((after, Bound::Unbounded)).filter(|(_, id)| !self.parked_alone.contains(id))
    }
}

/// One cluster as the policy schedules it.
pub(super) struct State {
    /// The quota tree, its usage in step with the jobs running (and, within a cycle, what
    /// the cycle reserved).
    pub(super) tree: QuotaTree,
    pub(super) queues: Vec<Queue>,
    /// Each setup node's queue, if any: a job's lane is its queue's node.
    pub(super) of_node: Vec<Option<usize>>,
    /// The (budget leaf, setup node) pairs taken.
    taken: HashSet<(usize, usize)>,
    /// Fair Sharing's strategies when it is on.
    pub(super) fair: Option<Vec<Strategy>>,
    /// Each setup node's children (for Fair Sharing's walks).
    pub(super) children: Vec<Vec<usize>>,
    /// The jobs evicted at this instant.
    evicted: BTreeSet<JobId>,
    /// This instant is the second after one cut short with nothing left running (see
    /// [`State::wake`]): it runs as if every queue's preemption policies were `Never`.
    no_preemption: bool,
    /// A job was evicted a second time at this instant: its cycles end.
    circle: bool,
    /// The second after an instant cut short with no job left running: the cycles go on
    /// then, without preemption (a running job's end is an instant of its own anyway;
    /// without one, a preemptor whose victims are gone would wait for the next submission,
    /// or for ever; with preemption, the circle could go on for ever, as in Kueue). The
    /// Kueue oracle does the same.
    wake: Option<i64>,
    /// Advanced whenever the quota tree (its quotas or usage), the running jobs or the
    /// preemption policies in force change: what a head's nomination depends on (with its
    /// class: queue, priority, GPUs). A schedule for a job that only entered a queue keeps
    /// it.
    moment: u64,
    /// How many of the setup's later quota trees ([`Queues::later`]) are in force.
    period: usize,
}

/// What a head can do in a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Fit,
    Preempt(Vec<JobId>),
    NoCandidates,
    NoFit,
}

/// A head nominated in a cycle.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) queue: usize,
    pub(super) id: JobId,
    /// Its budget leaf (its group of waiting jobs: see [`Queue::parked`]).
    pub(super) leaf: u32,
    pub(super) gpus: u32,
    pub(super) tier: u32,
    pub(super) place: i64,
    /// The height of the lowest subtree its request fits in (0: within its quota), for the
    /// classical order; 0 under Fair Sharing.
    pub(super) borrowing: u32,
    pub(super) mode: Mode,
}

impl State {
    /// A cluster's state before any job queues: a queue per ClusterQueue, in the setup's
    /// order, none taking jobs yet ([`State::take`]).
    fn new(queues: &Queues) -> State {
        let setup = &queues.setup;
        let count = setup.nodes.len();
        let mut children = vec![Vec::new(); count];
        let (mut of_node, mut state_queues) = (vec![None; count], Vec::new());
        for (index, node) in setup.nodes.iter().enumerate() {
            if let Some(parent) = node.parent {
                children[parent].push(index);
            }
            let Kind::ClusterQueue { preemption, queueing, .. } = node.kind else { continue };
            let mut root = index;
            while let Some(parent) = setup.nodes[root].parent {
                root = parent;
            }
            of_node[index] = Some(state_queues.len());
            state_queues.push(Queue {
                node: index,
                root,
                leaves: Vec::new(),
                preemption,
                queueing,
                usage: 0,
                parked: BTreeMap::new(),
                nominated: BTreeMap::new(),
                parked_alone: BTreeSet::new(),
                blocked: None,
                sticky: None,
            });
        }
        State {
            tree: queues.tree.clone(),
            queues: state_queues,
            of_node,
            taken: HashSet::new(),
            fair: setup.fair_sharing.clone(),
            children,
            evicted: BTreeSet::new(),
            no_preemption: false,
            circle: false,
            wake: None,
            moment: 0,
            period: 0,
        }
    }

    /// Takes the quotas in force at `now`: past a grant boundary, the quota tree is the later
    /// objects', each queue's running GPUs booked in it again. Kueue keeps admitted workloads
    /// admitted when a quota is lowered (preemption may reclaim them later), and a
    /// ClusterQueue whose spec changed brings back the inadmissible workloads of its whole
    /// cohort tree (file: pkg/cache/queue/manager.go, func: UpdateClusterQueue; file:
    /// pkg/cache/queue/inadmissible_workloads.go, func: notifyRetryInadmissibleWithoutLock):
    /// every queue's set-aside workloads come back. Whether a boundary passed.
    fn follow(&mut self, queues: &Queues, now: i64) -> bool {
        let passed = queues.later[self.period..].iter().take_while(|(from, _)| *from <= now).count();
        let Some((_, tree)) = passed.checked_sub(1).map(|last| &queues.later[self.period + last]) else {
            return false;
        };
        self.period += passed;
        self.tree = tree.clone();
        self.moment += 1;
        for queue in &mut self.queues {
            self.tree.add(queue.node, queue.usage);
            queue.parked.clear();
            queue.parked_alone.clear();
            queue.blocked = None;
        }
        true
    }

    /// The ClusterQueue of setup node `node` takes jobs of budget leaf `leaf`.
    fn take(&mut self, leaf: usize, node: usize) {
        if self.taken.insert((leaf, node)) {
            let index = self.of_node[node].expect("jobs queue in ClusterQueues only");
            self.queues[index].leaves.push(leaf);
        }
    }

    /// A job's priority.
    pub(super) fn priority(&self, job: &SimJob) -> i32 {
        priority(job.tier)
    }

    /// A job's queue.
    pub(super) fn queue_of(&self, job: &SimJob) -> usize {
        self.of_node[job.lane as usize].expect("a job of a ClusterQueue")
    }

    /// Schedules the cluster at `now`: cycle after cycle until one changes nothing. A victim
    /// is back in its queue the moment its quota is released: Kueue requeues it in the same
    /// event handler that takes its quota out of the cache (file:
    /// pkg/controller/core/workload_controller.go, func: Update, the case of a workload
    /// going from QuotaReserved or Admitted back to Pending), and the Kueue oracle agrees.
    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        let no_preemption = self.wake == Some(now);
        if no_preemption != self.no_preemption {
            self.no_preemption = no_preemption;
            self.moment += 1;
        }
        self.wake = self.wake.filter(|&at| at > now);
        self.sync(cluster);
        let running: usize = cluster.started.iter().map(|s| s.len()).sum();
        let bound = CYCLES_AT_LEAST + CYCLES_PER_JOB * (cluster.queued + running);
        let mut cycles = 0;
        loop {
            let entries = self.next_entries(engine, cluster);
            if entries.is_empty() || !self.cycle(engine, cluster, entries, now) {
                break;
            }
            cycles += 1;
            if self.circle || cycles == bound {
                // Cut short: the rest of the instant's cycles wait for the next instant.
                engine.stalled += 1;
                if cluster.started.iter().all(BTreeSet::is_empty) {
                    self.wake = Some(now + 1);
                }
                break;
            }
        }
        self.evicted.clear();
        self.circle = false;
    }

    /// A queue's preemption policies at this instant: every one `Never` at the second after
    /// an instant cut short (see [`State::wake`]).
    fn preemption_of(&self, queue: usize) -> Preemption {
        match self.no_preemption {
            true => Preemption::default(),
            false => self.queues[queue].preemption,
        }
    }

    /// Books in the quota tree each queue's running GPUs (jobs ended since the last schedule
    /// release theirs), and brings back the workloads set aside in each cohort tree where
    /// quota was released.
    fn sync(&mut self, cluster: &ClusterState) {
        let mut released = Vec::new();
        for queue in &mut self.queues {
            let running = cluster.lane_gpus(queue.node as u32, |_| true);
            if running < queue.usage {
                self.tree.remove(queue.node, queue.usage - running);
                released.push(queue.root);
            } else if running > queue.usage {
                self.tree.add(queue.node, running - queue.usage);
            }
            if running != queue.usage {
                queue.usage = running;
                self.moment += 1;
            }
        }
        // Once per tree, however many of its queues released quota.
        released.sort_unstable();
        released.dedup();
        for root in released {
            self.release(root);
        }
    }

    /// Quota was released in the cohort tree of `root`: its inadmissible workloads come back.
    fn release(&mut self, root: usize) {
        for queue in self.queues.iter_mut().filter(|q| q.root == root) {
            queue.parked.clear();
            queue.parked_alone.clear();
            queue.blocked = None;
        }
    }

    /// The entries of the next cycle that may admit or evict: the cycles before it, whose
    /// every head is set aside, are run here. Such a cycle changes neither the quota nor the
    /// running jobs, so it ends the same in any order (what an entry without candidates
    /// reserves is given back at the cycle's end), and the next cycle's heads are nominated
    /// as if it had not run. Where one queue alone has a head, the cycles that set aside its
    /// heads of classes already set aside at this moment are run at once (see
    /// [`State::set_aside_run`]); where several have, so are all the cycles left when every
    /// head they would give is set aside.
    fn next_entries(&mut self, engine: &Engine, cluster: &ClusterState) -> Vec<Entry> {
        loop {
            let heads = self.heads(engine, cluster);
            let entries: Vec<Entry> =
                heads.into_iter().map(|(queue, id)| self.nominate(engine, cluster, queue, id)).collect();
            if !entries.iter().all(|e| matches!(e.mode, Mode::NoFit | Mode::NoCandidates)) {
                return entries;
            }
            match entries.as_slice() {
                [] => return entries,
                [one] => self.set_aside_run(cluster, one),
                _ if entries.iter().all(|entry| self.all_set_aside(engine, cluster, entry)) => {
                    for entry in &entries {
                        self.set_aside_run(cluster, entry);
                    }
                }
                _ => {
                    for entry in &entries {
                        self.set_aside(entry);
                    }
                }
            }
        }
    }

    /// Sets aside `head` and the heads its queue would give the cycles after it, one a
    /// cycle, while no other queue's head may admit or evict (it is the only queue with
    /// heads, or every queue's are set aside: see [`State::all_set_aside`]): under
    /// BestEffortFIFO, each waiting job of a class (priority tier, GPUs) set aside at this
    /// moment (see [`Queue::nominated`]) that comes before the first waiting job of any
    /// other class.
    fn set_aside_run(&mut self, cluster: &ClusterState, head: &Entry) {
        self.set_aside(head);
        let queue = &self.queues[head.queue];
        if queue.queueing == Queueing::StrictFifo {
            return;
        }
        let first_other = self.first_of_other_class(cluster, head.queue);
        let marks: Vec<_> = queue
            .groups(cluster)
            .filter(|(_, group)| self.set_aside_now(head.queue, group))
            .filter_map(|(leaf, group)| {
                let last = match first_other {
                    None => group.jobs.last(),
                    Some((tier, _)) if group.tier < tier => group.jobs.last(),
                    Some((tier, _)) if group.tier > tier => None,
                    Some((_, job)) => group.jobs.range(..job).next_back(),
                };
                last.map(|&last| ((leaf as u32, group.tier, group.gpus), last))
            })
            .collect();
        let queue = &mut self.queues[head.queue];
        for (group, last) in marks {
            queue.park(group, last);
        }
    }

    /// Whether every head queue `head.queue` would give the cycles from now on (`head`, set
    /// aside, then the next, one a cycle) is set aside at this moment: the first waiting job
    /// of each class not yet nominated at this moment is nominated ahead of its cycle, as
    /// it would be then (cycles that set heads aside change nothing a nomination depends
    /// on). No, too, when a class's outcome is not kept (see [`State::nominate`]).
    fn all_set_aside(&mut self, engine: &Engine, cluster: &ClusterState, head: &Entry) -> bool {
        if self.queues[head.queue].queueing == Queueing::StrictFifo {
            return true;
        }
        loop {
            let Some((_, (_, id))) = self.first_of_other_class(cluster, head.queue) else { return true };
            if id == head.id {
                return false;
            }
            let entry = self.nominate(engine, cluster, head.queue, id);
            if self.kept(head.queue, (entry.tier, entry.gpus)).is_none() {
                return false;
            }
        }
    }

    /// The outcome kept for the class (tier, GPUs) in `queue` at this moment, if any: a
    /// class set aside (see [`Queue::nominated`]).
    fn kept(&self, queue: usize, class: (u32, u32)) -> Option<&Mode> {
        let (at, mode) = self.queues[queue].nominated.get(&class)?;
        (*at == self.moment).then_some(mode)
    }

    /// Whether the class of `group`'s jobs is set aside in `queue` at this moment.
    fn set_aside_now(&self, queue: usize, group: &Group) -> bool {
        self.kept(queue, (group.tier, group.gpus)).is_some()
    }

    /// The first waiting job of `queue`, in its order, of a class not set aside at this
    /// moment (its sticky workload aside), with its tier.
    fn first_of_other_class(&self, cluster: &ClusterState, queue: usize) -> Option<(u32, (i64, JobId))> {
        let q = &self.queues[queue];
        q.groups(cluster)
            .filter(|(_, group)| !self.set_aside_now(queue, group))
            .filter_map(|(leaf, group)| {
                let mut waiting = q.waiting(leaf, group).filter(|&&(_, id)| Some(id) != q.sticky);
                waiting.next().map(|&job| (group.tier, job))
            })
            .min()
    }

    /// Each queue's head, if it has one now.
    fn heads(&mut self, engine: &Engine, cluster: &ClusterState) -> Vec<(usize, JobId)> {
        let mut heads = Vec::new();
        for (index, queue) in self.queues.iter_mut().enumerate() {
            if let Some(sticky) = queue.sticky {
                if engine.jobs.get(sticky).is_none_or(|job| job.started.is_some()) {
                    queue.sticky = None;
                } else if !queue.parked_alone.contains(&sticky) {
                    heads.push((index, sticky));
                    continue;
                }
            }
            let strict = queue.queueing == Queueing::StrictFifo;
            let first = queue
                .groups(cluster)
                .filter_map(|(leaf, group)| {
                    if strict {
                        return Some((group.tier, group.first));
                    }
                    queue.waiting(leaf, group).next().map(|&job| (group.tier, job))
                })
                .min();
            if let Some((_, (_, id))) = first
                && queue.blocked != Some(id)
            {
                heads.push((index, id));
            }
        }
        heads
    }

    /// One cycle over `entries`, the heads as nominated: whether it changed anything.
    fn cycle(
        &mut self,
        engine: &mut Engine,
        cluster: &mut ClusterState,
        mut entries: Vec<Entry>,
        now: i64,
    ) -> bool {
        let classical = self.fair.is_none();
        if classical {
            // Served from the end.
            entries.sort_by_key(|e| std::cmp::Reverse((e.borrowing, e.tier, e.place, e.id)));
        }
        let mut changed = false;
        let mut chosen: BTreeSet<JobId> = BTreeSet::new();
        let mut reserved: Vec<(usize, u64)> = Vec::new();
        // The cycle's victims (setup node, GPUs): their usage stays in the quota tree until
        // the cycle ends, as Kueue's snapshot keeps it (the shares of Fair Sharing's
        // tournament, the reserves count it); whether an entry fits is decided without it
        // (file: pkg/scheduler/scheduler.go, func: fits).
        let mut victims: Vec<(usize, u64)> = Vec::new();
        // The cohort trees where victims released quota: their set-aside workloads come back
        // after the cycle, as Kueue brings them back when the victims' quota is released,
        // after the cycle that evicted them (a head set aside later in the cycle too).
        let mut released: Vec<usize> = Vec::new();
        while !entries.is_empty() {
            let entry = match classical {
                true => entries.pop().expect("not empty"),
                false => {
                    let next = self.fair_next(&entries);
                    entries.remove(next)
                }
            };
            let queue = &self.queues[entry.queue];
            let (node, gpus) = (queue.node, u64::from(entry.gpus));
            let (root, strict) = (queue.root, queue.queueing == Queueing::StrictFifo);
            let reclaims_any =
                self.preemption_of(entry.queue).reclaim_within_cohort == ReclaimWithinCohort::Any;
            match &entry.mode {
                Mode::NoFit => changed |= self.set_aside(&entry),
                Mode::NoCandidates => {
                    if !reclaims_any {
                        let reserve = self.to_reserve(node, gpus);
                        if reserve > 0 {
                            self.tree.add(node, reserve);
                            reserved.push((node, reserve));
                        }
                    }
                    changed |= self.set_aside(&entry);
                }
                Mode::Fit => {
                    let fits = self.without(&victims, |state| {
                        matches!(state.fit(entry.queue, gpus), QuotaFit::Fit { .. })
                    });
                    let Some(placement) = fits.then(|| cluster.pool.place(entry.gpus)).flatten() else {
                        // Skipped: it stays its queue's head.
                        continue;
                    };
                    engine.start(&Unprotected, cluster, entry.id, placement, now);
                    self.tree.add(node, gpus);
                    self.moment += 1;
                    let queue = &mut self.queues[entry.queue];
                    queue.usage += gpus;
                    if queue.sticky == Some(entry.id) {
                        queue.sticky = None;
                    }
                    changed = true;
                }
                Mode::Preempt(targets) => {
                    if targets.iter().any(|t| chosen.contains(t)) {
                        continue;
                    }
                    let freed: Vec<(usize, u64)> = targets
                        .iter()
                        .map(|&t| {
                            let job = &engine.jobs[t];
                            (self.queue_of(job), u64::from(job.gpus))
                        })
                        .collect();
                    let before = victims.len();
                    victims.extend(freed.iter().map(|&(q, g)| (self.queues[q].node, g)));
                    if !self.without(&victims, |state| gpus <= state.tree.cq_available(node) as u64) {
                        victims.truncate(before);
                        continue;
                    }
                    for &(q, g) in &freed {
                        self.queues[q].usage -= g;
                    }
                    // A job evicted twice at one instant: preemption goes round in circles.
                    // The instant ends with this cycle.
                    self.circle |= targets.iter().any(|t| self.evicted.contains(t));
                    chosen.extend(targets.iter().copied());
                    self.evicted.extend(targets.iter().copied());
                    engine.evict(cluster, entry.id, targets, now);
                    self.moment += 1;
                    // The preemptor's usage holds its place for the rest of the cycle, and
                    // its victims' stays booked (see `victims`).
                    self.tree.add(node, gpus);
                    reserved.push((node, gpus));
                    if !strict {
                        self.queues[entry.queue].sticky = Some(entry.id);
                    }
                    released.push(root);
                    changed = true;
                }
            }
        }
        for (node, gpus) in reserved.into_iter().chain(victims) {
            self.tree.remove(node, gpus);
        }
        for root in released {
            self.release(root);
        }
        changed
    }

    /// `decide` on the quota tree without the usage of `gone` (setup node, GPUs).
    pub(super) fn without<R>(&mut self, gone: &[(usize, u64)], decide: impl FnOnce(&Self) -> R) -> R {
        for &(node, gpus) in gone {
            self.tree.remove(node, gpus);
        }
        let decided = decide(self);
        for &(node, gpus) in gone {
            self.tree.add(node, gpus);
        }
        decided
    }

    /// Kueue's quota decision for `gpus` in queue `queue` now.
    pub(super) fn fit(&self, queue: usize, gpus: u64) -> QuotaFit {
        self.tree.fit(self.queues[queue].node, gpus, &self.preemption_of(queue), self.fair.is_some())
    }

    /// A head as this cycle nominates it.
    fn nominate(&mut self, engine: &Engine, cluster: &ClusterState, queue: usize, id: JobId) -> Entry {
        let job = &engine.jobs[id];
        let gpus = u64::from(job.gpus);
        let node = self.queues[queue].node;
        // Only the classical order reads it.
        let borrowing = match self.fair {
            None => self.tree.lowest_subtree_that_fits(node, gpus).0,
            Some(_) => 0,
        };
        let class = (job.tier, job.gpus);
        let entry = |mode| Entry {
            queue,
            id,
            leaf: job.leaf,
            gpus: job.gpus,
            tier: job.tier,
            place: job.place,
            borrowing,
            mode,
        };
        let sticky = self.queues[queue].sticky == Some(id);
        if !sticky && let Some(mode) = self.kept(queue, class) {
            return entry(mode.clone());
        }
        let mode = match self.fit(queue, gpus) {
            QuotaFit::Fit { .. } if cluster.pool.fits(job.gpus) => Mode::Fit,
            QuotaFit::Fit { .. } | QuotaFit::NoFit(_) => Mode::NoFit,
            QuotaFit::MayPreempt if self.no_preemption => Mode::NoCandidates,
            QuotaFit::MayPreempt => {
                let targets = match self.fair.is_some() {
                    false => self.classical_targets(engine, cluster, queue, id),
                    true => self.fair_targets(engine, cluster, queue, id),
                };
                // Victims that would not free room on the nodes are not taken: Kueue, which
                // sees only quota, would evict them, and the preemptor's pods would wait.
                let mut room = cluster.pool.room_for(job.gpus);
                let placed = targets.iter().fold(cluster.pool.fits(job.gpus), |placed, &t| {
                    room.give_back(&engine.jobs[t].placement) || placed
                });
                if targets.is_empty() || !placed { Mode::NoCandidates } else { Mode::Preempt(targets) }
            }
        };
        // A head set aside tells of the next ones of its class until the moment changes: the
        // same quota and running jobs give the same decision (a later workload has no more
        // candidates than an earlier one of its priority; the sticky one may come first).
        let again = match mode {
            Mode::NoFit => true,
            Mode::NoCandidates => {
                !sticky
                    && self.queues[queue].preemption.within_cluster_queue
                        != WithinClusterQueue::LowerOrNewerEqualPriority
            }
            Mode::Fit | Mode::Preempt(_) => false,
        };
        if again {
            self.queues[queue].nominated.insert(class, (self.moment, mode.clone()));
        }
        entry(mode)
    }

    /// What a head without preemption candidates holds of the quota for the rest of the
    /// cycle (file: pkg/scheduler/scheduler.go, func: quotaResourcesToReserve): when it
    /// would borrow, what its quota and borrowing limit still allow (all of the request
    /// without a limit); else what is left of its nominal quota.
    fn to_reserve(&self, node: usize, gpus: u64) -> u64 {
        let value = gpus as i64;
        let usage = self.tree.usage(node);
        let nominal = self.tree.nominal(node);
        let reserve = if self.tree.borrowing_with(node, gpus) {
            match self.tree.borrowing_limit(node) {
                Some(limit) => value.min(nominal + limit - usage),
                None => value,
            }
        } else {
            value.min(nominal - usage)
        };
        reserve.max(0) as u64
    }

    /// A head not admitted: set aside (BestEffortFIFO) or blocking its queue (StrictFIFO).
    /// Whether that changed anything.
    fn set_aside(&mut self, entry: &Entry) -> bool {
        let queue = &mut self.queues[entry.queue];
        match queue.queueing {
            Queueing::BestEffortFifo => {
                if queue.sticky == Some(entry.id) {
                    return queue.parked_alone.insert(entry.id);
                }
                queue.park((entry.leaf, entry.tier, entry.gpus), (entry.place, entry.id))
            }
            Queueing::StrictFifo => queue.blocked.replace(entry.id) != Some(entry.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::setup::{Node, Preemption};
    use super::*;

    /// A state of the quota tree `nodes` alone (no queue takes jobs).
    fn state(nodes: &[Node]) -> State {
        State {
            tree: QuotaTree::new(nodes),
            queues: Vec::new(),
            of_node: vec![None; nodes.len()],
            taken: HashSet::new(),
            fair: None,
            children: vec![Vec::new(); nodes.len()],
            evicted: BTreeSet::new(),
            no_preemption: false,
            circle: false,
            wake: None,
            moment: 0,
            period: 0,
        }
    }

    fn node(name: &str, parent: Option<usize>, nominal: u64, limit: Option<u64>, queue: bool) -> Node {
        let kind = match queue {
            true => Kind::ClusterQueue {
                preemption: Preemption::default(),
                queueing: Queueing::BestEffortFifo,
                afs: false,
            },
            false => Kind::Cohort,
        };
        Node {
            name: name.into(),
            kind,
            parent,
            nominal,
            borrowing_limit: limit,
            lending_limit: None,
            weight: 1.0,
            covers: true,
        }
    }

    #[test]
    fn what_a_head_without_candidates_reserves() {
        // A cohort of 4 over a (nominal 4, borrowing limit 2) and b (nominal 2, no limit).
        let mut s = state(&[
            node("pool", None, 4, None, false),
            node("a", Some(0), 4, Some(2), true),
            node("b", Some(0), 2, None, true),
        ]);
        s.tree.add(1, 3);
        // a asks 1: within its quota (3 + 1 ≤ 4): what is left of it, min(1, 4 − 3) = 1.
        assert_eq!(s.to_reserve(1, 1), 1);
        // a asks 3: it would borrow: min(3, 4 + 2 − 3) = 3; asks 5: capped at 3.
        assert_eq!((s.to_reserve(1, 3), s.to_reserve(1, 5)), (3, 3));
        // b asks 5: it would borrow, and has no limit: all 5.
        assert_eq!(s.to_reserve(2, 5), 5);
        // a over its quota and limit (7 > 4 + 2): nothing, not a negative reserve.
        s.tree.add(1, 4);
        assert_eq!(s.to_reserve(1, 2), 0);
    }
}
