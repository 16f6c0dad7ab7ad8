//! One cluster in the simulator: its budget tree, nodes, queues, running jobs and decayed
//! usage, kept up to date as jobs enter, start and stop; and the budgets' Fair Tree ranks.

use std::cmp::Reverse;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use allot_verify::budgets::ClusterBudgets;
use allot_verify::entitlement::{Division, NodeId};

use super::jobs::{Holding, JobId, SimJob, Slots};
use super::pool::Pool;
use crate::decay::Usage;

/// Each node's floor: its guaranteed GPUs that none of its children is guaranteed.
fn floors(budgets: &ClusterBudgets) -> Vec<u64> {
    let hierarchy = &budgets.hierarchy;
    (0..hierarchy.len())
        .map(|i| {
            let children: u64 = hierarchy.children(NodeId(i)).iter().map(|c| budgets.guaranteed[c.0]).sum();
            budgets.guaranteed[i].saturating_sub(children)
        })
        .collect()
}

/// Each node's `max-gpus`. The unbudgeted node's cap of 0 is its entitlement, not a limit
/// on its work.
fn limits(budgets: &ClusterBudgets) -> Vec<Option<u64>> {
    let hierarchy = &budgets.hierarchy;
    (0..hierarchy.len())
        .map(|i| {
            let cap = hierarchy.node(NodeId(i)).and_then(|node| node.cap);
            cap.filter(|_| NodeId(i) != budgets.unbudgeted).map(|c| c as u64)
        })
        .collect()
}

/// A running job as the `kueue` policy orders preemption candidates: (tier, start, job), the
/// first two reversed (see [`ClusterState::by_lane`]).
pub(super) type RunKey = (Reverse<u32>, Reverse<i64>, JobId);

/// A reservation (EASY backfill): when the job that holds it can start at the latest, and
/// per node the GPUs free then that it does not need.
pub(super) struct Reservation {
    pub(super) at: i64,
    pub(super) spare: Vec<u32>,
}

/// One cluster: its tree, nodes, queues and usage.
pub(super) struct ClusterState<'b> {
    pub(super) budgets: &'b ClusterBudgets,
    /// The cluster's name and the project path of each node's jobs (an inner project's
    /// own jobs: the project's), shared by the runs: what a trace names them by.
    pub(super) name: Arc<str>,
    pub(super) paths: Vec<Arc<str>>,
    pub(super) pool: Pool,
    pub(super) leaves: Vec<usize>,
    /// Waiting jobs per tree node (leaves only), grouped by GPUs asked for: each leaf's
    /// groups by GPUs, none empty.
    pub(super) by_size: Vec<Vec<Group>>,
    pub(super) waiting: Vec<f64>,
    /// Running GPUs per tree node (an inner node: its subtree's).
    pub(super) running: Vec<f64>,
    /// Whether `by_lane` and `running_lanes` are kept (the `kueue` policy's: see
    /// [`Rules::by_lane`](super::engine::Rules::by_lane)); else they stay empty.
    pub(super) lanes: bool,
    /// The `kueue` policy's preemption candidates: each lane's running jobs, with their GPUs
    /// and place, in the order Kueue's preemptor takes one ClusterQueue's workloads (file:
    /// pkg/scheduler/preemption/common/ordering.go): lower priority (higher tier) first, the
    /// latest started first, then trace order.
    pub(super) by_lane: Vec<BTreeMap<RunKey, (u32, i64)>>,
    /// The GPUs running by (lane, tier), none zero: a ClusterQueue's usage, and what a
    /// preemptor could free there at the priorities it may take.
    pub(super) running_lanes: BTreeMap<(u32, u32), u64>,
    /// Running jobs per leaf by (start, job): all of them, and those that may be preempted
    /// (past their protection; all of them under the priority policy).
    pub(super) started: Vec<BTreeSet<(i64, JobId)>>,
    pub(super) preemptible: Vec<BTreeSet<(i64, JobId)>>,
    /// The GPUs of each leaf's preemptible runs.
    pub(super) preemptible_gpus: Vec<u64>,
    /// Running jobs by (expected end, job): what a reservation counts on.
    pub(super) ends: BTreeSet<(i64, JobId)>,
    /// The running jobs on each node (a job on several nodes is on each of them).
    pub(super) on_node: Vec<Vec<JobId>>,
    /// The GPUs of preemptible runs on each node, by leaf: (leaf, GPUs), no leaf twice.
    pub(super) preemptible_here: Vec<Vec<(u32, u32)>>,
    /// Each contract's reserve and the GPUs its jobs run within it, by contract (see
    /// [`Holding`]); the GPUs running on loan from the reserves.
    pub(super) reserves: Vec<Reserve>,
    pub(super) on_loan: u64,
    /// Each node's floor: its guaranteed GPUs that none of its children is guaranteed (a
    /// leaf's: all of them), and the GPUs running in it.
    pub(super) floor: Vec<u64>,
    pub(super) in_floor: Vec<u64>,
    /// Each node's `max-gpus` (for an inner node, its whole subtree's).
    pub(super) limits: Vec<Option<u64>>,
    /// The cluster divided by demand (each leaf's running and waiting GPUs), and each
    /// node's share of it as a scheduling pass reads it.
    pub(super) division: Division<'b>,
    pub(super) entitled: Vec<f64>,
    pub(super) usage: Usage,
    /// The leaves in rank order, with their ranks, as [`ClusterState::rank`] last brought them
    /// up to date, and the decay pass it did so in (`None`: a run has stopped since).
    pub(super) ranked: Vec<(u32, usize)>,
    pub(super) ranked_in: Option<i64>,
    /// Each node's decayed usage per unit of share as last read, with the decay pass it was
    /// read in (`None`: a run has stopped on it since).
    pub(super) per_share: Vec<Option<(i64, f64)>>,
    /// Each node's children, then the roots, unbudgeted work left out: in Fair Tree's order
    /// as last ranked.
    pub(super) siblings: Vec<Vec<NodeId>>,
    /// Each node's place among tied siblings: leaves first by index, then inner nodes by
    /// name.
    pub(super) ties: Vec<(bool, usize)>,
    pub(super) dirty: bool,
    /// A run's protection has ended since the cluster was last scheduled.
    pub(super) unprotected: bool,
    /// Jobs in its queues.
    pub(super) queued: usize,
    /// Something started, stopped or entered a queue since the last backfill run (the
    /// Slurm policy's): a run now could start a job.
    pub(super) backfill_due: bool,
    /// How the policy ranks budgets.
    pub(super) ranking: Ranking,
}

impl<'b> ClusterState<'b> {
    pub(super) fn new(
        budgets: &'b ClusterBudgets,
        gpus_per_node: u64,
        usage: Usage,
        ranking: Ranking,
        by_lane: bool,
        reserves: impl Iterator<Item = u32>,
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
        let pool = Pool::new(budgets.gpus, gpus_per_node.max(1));
        ClusterState {
            on_node: vec![Vec::new(); pool.capacity.len()],
            preemptible_here: vec![Vec::new(); pool.capacity.len()],
            reserves: reserves.map(|gpus| Reserve { gpus, held: 0 }).collect(),
            on_loan: 0,
            budgets,
            name: budgets.name.as_str().into(),
            paths: (0..n)
                .map(|i| {
                    let id = NodeId(i);
                    let parent =
                        hierarchy.node(id).and_then(|node| node.parent).filter(|_| budgets.is_own(id));
                    budgets.paths[parent.unwrap_or(id).0].as_str().into()
                })
                .collect(),
            pool,
            leaves,
            by_size: (0..n).map(|_| Vec::new()).collect(),
            waiting: vec![0.0; n],
            running: vec![0.0; n],
            lanes: by_lane,
            by_lane: Vec::new(),
            running_lanes: BTreeMap::new(),
            started: vec![BTreeSet::new(); n],
            preemptible: vec![BTreeSet::new(); n],
            preemptible_gpus: vec![0; n],
            ends: BTreeSet::new(),
            floor: floors(budgets),
            in_floor: vec![0; n],
            limits: limits(budgets),
            division: Division::new(hierarchy, budgets.gpus as f64).expect("a cluster's GPUs are a count"),
            entitled: Vec::new(),
            usage,
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
            unprotected: false,
            queued: 0,
            backfill_due: false,
            ranking,
        }
    }

    /// From now on, the budgets' shares are `budgets`' (grants started or ended), a tree of
    /// the same projects: the division, the floors, the limits and the Fair Tree ranks
    /// follow, and the cluster is scheduled again. Running jobs stay where they run, as a
    /// Slurm keeps them when a floor's `GrpTRES` is lowered.
    pub(super) fn reweigh(&mut self, budgets: &'b ClusterBudgets) {
        self.division.reweigh(&budgets.hierarchy).expect("the budgets of one model over time have one shape");
        self.budgets = budgets;
        self.floor = floors(budgets);
        self.limits = limits(budgets);
        self.per_share.iter_mut().for_each(|read| *read = None);
        self.ranked_in = None;
        self.dirty = true;
        self.backfill_due = true;
    }

    /// A node and the nodes above it, up to its root.
    pub(super) fn path(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        let hierarchy = &self.budgets.hierarchy;
        std::iter::successors(Some(NodeId(node)), |&id| hierarchy.node(id).and_then(|n| n.parent))
            .map(|id| id.0)
    }

    /// The largest job a leaf can ever run: the cluster, or a `max-gpus` on its path.
    pub(super) fn most_gpus(&self, leaf: usize) -> u64 {
        self.path(leaf).filter_map(|n| self.limits[n]).fold(self.budgets.gpus, u64::min)
    }

    /// Whether `gpus` more for `leaf` keep it and every budget above it within `max-gpus`.
    pub(super) fn within_limits(&self, leaf: usize, gpus: u32) -> bool {
        self.path(leaf)
            .all(|n| self.limits[n].is_none_or(|limit| self.running[n] + f64::from(gpus) <= limit as f64))
    }

    /// Queues a job in its budget at its place: by the time it first entered (a requeued
    /// job goes back to its place).
    pub(super) fn enqueue(&mut self, jobs: &Slots, id: JobId) {
        let job = &jobs[id];
        let (groups, queued) = (&mut self.by_size[job.leaf as usize], (job.place, id));
        match groups.binary_search_by_key(&job.group(), Group::key) {
            Ok(i) => {
                groups[i].jobs.insert(queued);
                groups[i].first = groups[i].first.min(queued);
            }
            Err(i) => groups.insert(
                i,
                Group {
                    tier: job.tier,
                    lane: job.lane,
                    gpus: job.gpus,
                    first: queued,
                    jobs: BTreeSet::from([queued]),
                },
            ),
        }
        self.queued += 1;
        self.waiting[job.leaf as usize] += f64::from(job.gpus);
        self.change_demand(job.leaf as usize, f64::from(job.gpus));
        self.backfill_due = true;
        self.dirty = true;
    }

    /// The waiting jobs of `leaf` of `tier` in `lane` that ask for `gpus`, if any.
    pub(super) fn group(&self, leaf: usize, tier: u32, lane: u32, gpus: u32) -> Option<&Group> {
        self.by_size[leaf].iter().find(|group| group.key() == (tier, lane, gpus))
    }

    /// Takes a job out of its queue (nothing when it is not there).
    pub(super) fn dequeue(&mut self, jobs: &Slots, id: JobId) {
        let job = &jobs[id];
        let (leaf, queued) = (job.leaf as usize, (job.place, id));
        let groups = &mut self.by_size[leaf];
        let Ok(i) = groups.binary_search_by_key(&job.group(), Group::key) else {
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
    }

    /// A running job's protection is over.
    pub(super) fn unprotect(&mut self, job: &mut SimJob, id: JobId) {
        self.unprotected = true;
        job.preemptible = true;
        self.preemptible[job.leaf as usize].insert((job.started.expect("a running job"), id));
        self.preemptible_gpus[job.leaf as usize] += u64::from(job.gpus);
        self.count_preemptible(job, true);
    }

    /// Counts a preemptible run's GPUs on its nodes in, or out.
    fn count_preemptible(&mut self, job: &SimJob, add: bool) {
        for &(node, gpus) in &job.placement {
            let here = &mut self.preemptible_here[node as usize];
            match here.iter().position(|&(leaf, _)| leaf == job.leaf) {
                Some(i) if add => here[i].1 += gpus,
                Some(i) => {
                    here[i].1 -= gpus;
                    if here[i].1 == 0 {
                        here.swap_remove(i);
                    }
                }
                None => {
                    debug_assert!(add, "a preemptible run counted out before in");
                    here.push((job.leaf, gpus));
                }
            }
        }
    }

    /// Whether a contract's reserve has room for one more GPU.
    pub(super) fn reserve_room(&self) -> bool {
        self.reserves.iter().any(|r| r.holds(1))
    }

    /// The fewest GPUs that running jobs must free before `gpus` fit: those the node with the
    /// most free lacks, for a job that fits a node; else those the free GPUs lack.
    pub(super) fn short_of(&self, gpus: u32) -> u64 {
        let pool = &self.pool;
        if gpus <= pool.per_node {
            let most_free =
                (0..=pool.per_node).rev().find(|&f| !pool.by_free[f as usize].is_empty()).unwrap_or(0);
            u64::from(gpus.saturating_sub(most_free))
        } else {
            u64::from(gpus).saturating_sub(pool.free_gpus)
        }
    }

    /// Whether any floor has a GPU free (else a walk of the floors starts nothing).
    pub(super) fn any_floor_room(&self) -> bool {
        self.in_floor.iter().zip(&self.floor).any(|(used, floor)| used < floor)
    }

    /// Whether `gpus` more fit in `node`'s floor.
    pub(super) fn floor_room(&self, node: usize, gpus: u32) -> bool {
        self.in_floor[node] + u64::from(gpus) <= self.floor[node]
    }

    pub(super) fn occupy(&mut self, jobs: &Slots, id: JobId, now: i64) {
        let job = &jobs[id];
        self.started[job.leaf as usize].insert((now, id));
        if job.preemptible {
            self.preemptible[job.leaf as usize].insert((now, id));
            self.preemptible_gpus[job.leaf as usize] += u64::from(job.gpus);
            self.count_preemptible(job, true);
        }
        self.ends.insert((job.expected_end, id));
        if self.lanes {
            *self.running_lanes.entry((job.lane, job.tier)).or_default() += u64::from(job.gpus);
            let lane = job.lane as usize;
            if self.by_lane.len() <= lane {
                self.by_lane.resize_with(lane + 1, BTreeMap::new);
            }
            self.by_lane[lane].insert((Reverse(job.tier), Reverse(now), id), (job.gpus, job.place));
        }
        for &(node, _) in &job.placement {
            self.on_node[node as usize].push(id);
        }
        self.hold(job, i64::from(job.gpus));
        if let Some(floor) = job.floor {
            self.in_floor[floor as usize] += u64::from(job.gpus);
        }
        self.add_running(job.leaf as usize, f64::from(job.gpus), now, None);
    }

    /// The GPUs running in `lane` at the tiers `tiers` lets in.
    pub(super) fn lane_gpus(&self, lane: u32, tiers: impl Fn(u32) -> bool) -> u64 {
        let running = self.running_lanes.range((lane, 0)..=(lane, u32::MAX));
        running.filter(|&(&(_, tier), _)| tiers(tier)).map(|(_, &gpus)| gpus).sum()
    }

    pub(super) fn release(&mut self, jobs: &mut Slots, id: JobId, now: i64) {
        let job = &mut jobs[id];
        let leaf = job.leaf as usize;
        let started = job.started.expect("a running job");
        self.started[leaf].remove(&(started, id));
        if std::mem::take(&mut job.preemptible) {
            self.preemptible[leaf].remove(&(started, id));
            self.preemptible_gpus[leaf] -= u64::from(job.gpus);
            self.count_preemptible(job, false);
        }
        self.ends.remove(&(job.expected_end, id));
        if self.lanes {
            self.by_lane[job.lane as usize].remove(&(Reverse(job.tier), Reverse(started), id));
            if let Entry::Occupied(mut lane) = self.running_lanes.entry((job.lane, job.tier)) {
                *lane.get_mut() -= u64::from(job.gpus);
                if *lane.get() == 0 {
                    lane.remove();
                }
            }
        }
        self.hold(job, -i64::from(job.gpus));
        for &(node, _) in &job.placement {
            let jobs = &mut self.on_node[node as usize];
            if let Some(i) = jobs.iter().position(|&j| j == id) {
                jobs.swap_remove(i);
            }
        }
        if let Some(floor) = job.floor {
            self.in_floor[floor as usize] -= u64::from(job.gpus);
        }
        self.pool.free(&std::mem::take(&mut job.placement));
        let gpus = f64::from(job.gpus);
        self.add_running(leaf, -gpus, now, Some(started));
        self.dirty = true;
    }

    /// Books `gpus` more (or fewer) of `job` in its reserve or on loan, as it holds them.
    fn hold(&mut self, job: &SimJob, gpus: i64) {
        match job.holding {
            Holding::Own => {}
            Holding::Reserve => {
                let reserve = &mut self.reserves[usize::from(job.terms.expect("a reserve's contract"))];
                reserve.held = reserve.held.saturating_add_signed(gpus as i32);
            }
            Holding::Loan => self.on_loan = self.on_loan.saturating_add_signed(gpus),
        }
    }

    /// The reserves' GPUs not held by their contracts' jobs, but that of `except`'s.
    pub(super) fn reserved_free(&self, except: Option<u16>) -> u64 {
        let except = except.map(usize::from);
        self.reserves
            .iter()
            .enumerate()
            .filter(|&(t, _)| Some(t) != except)
            .map(|(_, r)| u64::from(r.gpus.saturating_sub(r.held)))
            .sum()
    }

    /// `gpus` more (or fewer, stopping runs that `started`) running on `leaf` and its
    /// ancestors, in their counts and their usage.
    pub(super) fn add_running(&mut self, leaf: usize, gpus: f64, now: i64, started: Option<i64>) {
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
                    if self.ranking == (Ranking::FairTree { at_stops: true }) {
                        self.ranked_in = None;
                    }
                }
            }
            node = self.budgets.hierarchy.node(id).and_then(|n| n.parent);
        }
    }

    /// A leaf's demand (running and waiting GPUs) changes by `gpus`.
    pub(super) fn change_demand(&mut self, leaf: usize, gpus: f64) {
        self.division.change_demand(NodeId(leaf), gpus).expect("a leaf's demand is a count of GPUs");
    }

    /// The reservation of the job `holder`: the earliest expected end of running jobs at
    /// which it fits, and the nodes it would take then (best fit, or whole idle nodes).
    pub(super) fn reserve(&self, jobs: &Slots, holder: JobId) -> Reservation {
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

    /// Brings each leaf's rank up to date: its Fair Tree rank, or the same for all, as the
    /// policy's [`Ranking`] says (lower served first). Ranks follow usage,
    /// which changes only at the decay's passes and when a run stops (its last stretch is
    /// booked at once; a start books nothing before the next pass): they are computed again
    /// only then.
    pub(super) fn rank(&mut self, now: i64) {
        let pass = self.usage.pass_at(now);
        if self.ranked_in == Some(pass) {
            return;
        }
        let mut ranked = std::mem::take(&mut self.ranked);
        ranked.clear();
        match self.ranking {
            Ranking::FairTree { .. } => {
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
            Ranking::Flat => ranked.extend(self.leaves.iter().map(|&leaf| (0, leaf))),
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
    pub(super) fn fair_tree(&self, siblings: &[NodeId], parent_tied: bool, ranked: &mut Vec<(u32, usize)>) {
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

/// A contract's reserve on a cluster: the GPUs it holds (0: none), and those its jobs run
/// within it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reserve {
    pub(super) gpus: u32,
    pub(super) held: u32,
}

impl Reserve {
    /// Whether a job of `gpus` more runs within it.
    pub(super) fn holds(&self, gpus: u32) -> bool {
        self.gpus > 0 && self.held + gpus <= self.gpus
    }
}

/// How budgets are ranked in a cluster's queue (see [`ClusterState::rank`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ranking {
    /// By Fair Tree; computed again when a run stops (its usage is then booked) when
    /// `at_stops`, else only at the decay's passes (as Slurm does).
    FairTree { at_stops: bool },
    /// All alike.
    Flat,
}

/// The waiting jobs of one budget, tier and lane that ask for the same GPUs, by (time
/// entered, job), and the first of them (read at every pass).
pub(super) struct Group {
    pub(super) tier: u32,
    pub(super) lane: u32,
    pub(super) gpus: u32,
    pub(super) first: (i64, JobId),
    pub(super) jobs: BTreeSet<(i64, JobId)>,
}

impl Group {
    /// Its key among its budget's groups (their order): (tier, lane, GPUs).
    pub(super) fn key(&self) -> (u32, u32, u32) {
        (self.tier, self.lane, self.gpus)
    }
}
