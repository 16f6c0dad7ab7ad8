//! The `kueue` policy's preemption: the victims Kueue's preemptor chooses for a workload that
//! does not fit, classical (notes §4) or under Fair Sharing (§5), and Fair Sharing's order of
//! a cycle's entries (§2.5). Each search works on the quota tree as the cycle found it,
//! removing candidates' usage as it simulates their preemption, and leaves the tree as it
//! found it. Only quota decides: the nodes the victims free are not looked at (the preemptor
//! is admitted later only if the nodes can place it).

use std::cmp::{Ordering, Reverse};
use std::collections::VecDeque;

use super::super::cluster::ClusterState;
use super::super::engine::Engine;
use super::super::jobs::JobId;
use super::policy::{Entry, State};
use super::priority;
use super::quota::Drs;
use super::setup::{BorrowWithinCohort, ReclaimWithinCohort, Strategy, WithinClusterQueue};

/// How a candidate may be preempted (file:
/// pkg/scheduler/preemption/classical/hierarchical_preemption.go, type: preemptionVariant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// In the preemptor's own ClusterQueue.
    WithinQueue,
    /// The preemptor's subtree has a right to the quota the candidate uses.
    HierarchicalReclaim,
    /// Only if the preemptor ends up not borrowing.
    ReclaimWithoutBorrowing,
    /// Even while the preemptor borrows (`borrowWithinCohort`).
    ReclaimWhileBorrowing,
}

/// A running workload that may be preempted.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    id: JobId,
    /// Its queue.
    queue: usize,
    gpus: u64,
    priority: i32,
    /// When its run started: the most recent is preempted first. Kueue compares the instants
    /// its conditions record, in whole seconds, so runs started in one second tie.
    started: i64,
    variant: Variant,
    /// The cohort it was found under (the lowest common ancestor with the preemptor).
    lca: Option<usize>,
}

/// Kueue's `CandidatesOrdering` (file: pkg/scheduler/preemption/common/ordering.go), for
/// candidates of one list: another ClusterQueue's before the preemptor's own, lower
/// priority first, the most recently started first, then trace order (Kueue: the UID).
/// Evicted workloads come first in Kueue; here none is still running once evicted.
fn ordering(own: usize) -> impl Fn(&Candidate, &Candidate) -> Ordering {
    move |a, b| {
        (a.queue == own)
            .cmp(&(b.queue == own))
            .then(a.priority.cmp(&b.priority))
            .then(b.started.cmp(&a.started))
            .then(a.id.cmp(&b.id))
    }
}

/// The preemptor: its queue, GPUs, priority and place (creation time).
#[derive(Clone, Copy)]
struct Preemptor {
    queue: usize,
    node: usize,
    gpus: u64,
    priority: i32,
    place: i64,
}

impl State {
    fn preemptor(&self, engine: &Engine, queue: usize, id: JobId) -> Preemptor {
        let job = &engine.jobs[id];
        Preemptor {
            queue,
            node: self.queues[queue].node,
            gpus: u64::from(job.gpus),
            priority: self.priority(job),
            place: job.place,
        }
    }

    /// The running jobs of `queue` that `variant` (priority, place) lets be preempted, as
    /// candidates, in [`ordering`].
    fn candidates_of(
        &self,
        cluster: &ClusterState,
        queue: usize,
        variant: impl Fn(i32, i64) -> Option<Variant>,
        lca: Option<usize>,
        into: &mut Vec<Candidate>,
    ) {
        let Some(running) = cluster.by_lane.get(self.queues[queue].node) else { return };
        into.reserve(running.len());
        for (&(Reverse(tier), Reverse(started), id), &(gpus, place)) in running {
            let priority = priority(tier);
            if let Some(variant) = variant(priority, place) {
                into.push(Candidate { id, queue, gpus: u64::from(gpus), priority, started, variant, lca });
            }
        }
    }

    /// Whether `withinClusterQueue` lets the preemptor take a workload of its own queue of
    /// `priority` queued at `place` (file: pkg/scheduler/preemption/common/preemption_policy.go,
    /// func: SatisfiesPreemptionPolicy).
    fn within_allows(&self, p: &Preemptor, priority: i32, place: i64) -> bool {
        match self.queues[p.queue].preemption.within_cluster_queue {
            WithinClusterQueue::Never => false,
            WithinClusterQueue::LowerPriority => p.priority > priority,
            WithinClusterQueue::LowerOrNewerEqualPriority => {
                p.priority > priority || (p.priority == priority && p.place < place)
            }
        }
    }

    /// Whether the preemptor may take other queues' workloads at all: it has a cohort, and
    /// `reclaimWithinCohort` is not `Never`.
    fn reclaims(&self, p: &Preemptor) -> bool {
        self.tree.parent(p.node).is_some()
            && self.queues[p.queue].preemption.reclaim_within_cohort != ReclaimWithinCohort::Never
    }

    /// Whether `reclaimWithinCohort` lets the preemptor take another queue's workload of
    /// `priority`.
    fn reclaim_allows(&self, p: &Preemptor, priority: i32) -> bool {
        match self.queues[p.queue].preemption.reclaim_within_cohort {
            ReclaimWithinCohort::Never => false,
            ReclaimWithinCohort::LowerPriority => p.priority > priority,
            ReclaimWithinCohort::Any => true,
        }
    }

    /// Classical preemption's victims for the head `id` of `queue`, a minimal set; none when
    /// no set lets it fit (file: pkg/scheduler/preemption/preemption.go, funcs:
    /// classicalPreemptions, fillBackWorkloads, workloadFits).
    ///
    /// Candidates (file: pkg/scheduler/preemption/classical/hierarchical_preemption.go,
    /// funcs: collectSameQueueCandidates, collectCandidatesForHierarchicalReclaim,
    /// collectCandidatesInSubtree, classifyPreemptionVariant): its own queue's workloads that
    /// `withinClusterQueue` allows; with a cohort and `reclaimWithinCohort`, the workloads it
    /// allows of the other ClusterQueues above their quota (in subtrees above theirs),
    /// walking up from the parent: those found while the preemptor's subtree has a right to
    /// the quota are hierarchical reclaims, the others reclaims without borrowing, or while
    /// borrowing when `borrowWithinCohort` allows it for a lower priority within its
    /// `maxPriorityThreshold`. Each list in [`ordering`], hierarchical ones first, then the
    /// others, then the own queue's (file: classical/candidate_generator.go).
    ///
    /// Attempts, each with borrowing allowed or not: one allowing it when there is no other
    /// queue's candidate, or when `borrowWithinCohort` is `Never` and the queue uses its
    /// quota already; not then allowing when `borrowWithinCohort` is `Never` and no candidate
    /// is hierarchical; else allowing then not. Each walks the candidates, skipping those
    /// not valid (func: candidateIsValid: a reclaim without borrowing when borrowing is
    /// allowed; another queue's once its queue, or a cohort between it and the common
    /// ancestor, is back within its quota), removing each until the preemptor fits (and,
    /// borrowing not allowed, fits its nominal quota); then gives back each victim but the
    /// last, the one chosen last first, whose return still lets it fit.
    pub(super) fn classical_targets(
        &mut self,
        engine: &Engine,
        cluster: &ClusterState,
        queue: usize,
        id: JobId,
    ) -> Vec<JobId> {
        let p = self.preemptor(engine, queue, id);
        let preemption = self.queues[queue].preemption;
        // Candidates of other queues only above their nominal quota.
        if !self.could_make_room(cluster, &p, |state, node| !state.tree.within_nominal(node)) {
            return Vec::new();
        }
        let mut own = Vec::new();
        if preemption.within_cluster_queue != WithinClusterQueue::Never {
            let allows =
                |priority, place| self.within_allows(&p, priority, place).then_some(Variant::WithinQueue);
            self.candidates_of(cluster, queue, allows, None, &mut own);
        }
        let (mut hierarchical, mut others) = (Vec::new(), Vec::new());
        if let Some(parent) = self.tree.parent(p.node)
            && self.reclaims(&p)
        {
            let tree = &self.tree;
            let mut advantage = tree.usage(p.node) + p.gpus as i64 <= tree.subtree_quota(p.node);
            let mut remaining = (p.gpus as i64 - tree.local_available(p.node)).max(0);
            let mut previous = None;
            let mut at = Some(parent);
            while let Some(subtree) = at {
                let into = if advantage { &mut hierarchical } else { &mut others };
                self.collect_in_subtree(cluster, &p, subtree, subtree, previous, advantage, into);
                let tree = &self.tree;
                let fits = tree.usage(subtree) + remaining <= tree.subtree_quota(subtree);
                remaining = (remaining - tree.local_available(subtree)).max(0);
                advantage |= fits;
                previous = Some(subtree);
                at = tree.parent(subtree);
            }
        }
        let order = ordering(queue);
        hierarchical.sort_unstable_by(&order);
        others.sort_unstable_by(&order);
        own.sort_unstable_by(&order);
        let forbidden = preemption.borrow_within_cohort == BorrowWithinCohort::Never;
        let attempts: &[bool] = if (hierarchical.is_empty() && others.is_empty())
            || (forbidden && self.tree.usage(p.node) >= self.tree.nominal(p.node))
        {
            &[true]
        } else if forbidden && hierarchical.is_empty() {
            &[false, true]
        } else {
            &[true, false]
        };
        let candidates: Vec<Candidate> = hierarchical.into_iter().chain(others).chain(own).collect();
        for &borrow in attempts {
            let fits = |state: &mut State| {
                p.gpus as i64 <= state.tree.cq_available(p.node)
                    && (borrow || !state.tree.borrowing_with(p.node, p.gpus))
            };
            let mut targets: Vec<Candidate> = Vec::new();
            let mut fit = false;
            for c in &candidates {
                if !self.valid(c, borrow) {
                    continue;
                }
                self.tree.remove(self.queues[c.queue].node, c.gpus);
                targets.push(*c);
                if fits(self) {
                    fit = true;
                    break;
                }
            }
            if let Some(victims) = self.settle(targets, fit, fits) {
                return victims;
            }
        }
        Vec::new()
    }

    /// Whether the preemptor `p` would fit, borrowing allowed, were every workload gone
    /// that it may take: its own queue's that `withinClusterQueue` allows, and those
    /// `reclaimWithinCohort` allows of the other queues of its cohort tree that `others`
    /// (state, setup node) lets give candidates. Fitting only grows as usage goes, so when it
    /// would not, no set of candidates makes room and the search is not made: most
    /// nominations of a busy cluster end here, before a candidate is gathered (the GPUs are
    /// the cluster's running ones by lane and priority).
    fn could_make_room(
        &mut self,
        cluster: &ClusterState,
        p: &Preemptor,
        others: impl Fn(&State, usize) -> bool,
    ) -> bool {
        let reclaims = self.reclaims(p);
        let root = self.queues[p.queue].root;
        let mut gone = Vec::new();
        for (index, queue) in self.queues.iter().enumerate() {
            let allows: &dyn Fn(i32) -> bool = if index == p.queue {
                // At any place: equal priorities counted under LowerOrNewerEqualPriority.
                &|priority| self.within_allows(p, priority, i64::MAX)
            } else if reclaims && queue.root == root && others(self, queue.node) {
                &|priority| self.reclaim_allows(p, priority)
            } else {
                continue;
            };
            let gpus = cluster.lane_gpus(queue.node as u32, |tier| allows(priority(tier)));
            if gpus > 0 {
                gone.push((queue.node, gpus));
            }
        }
        self.without(&gone, |state| p.gpus as i64 <= state.tree.cq_available(p.node))
    }

    /// Adds to `into` the workloads of the queues above their quota under `cohort`, skipping
    /// the subtree `skip` (already walked) and subtrees within their quota.
    #[allow(clippy::too_many_arguments)]
    fn collect_in_subtree(
        &self,
        cluster: &ClusterState,
        p: &Preemptor,
        cohort: usize,
        lca: usize,
        skip: Option<usize>,
        advantage: bool,
        into: &mut Vec<Candidate>,
    ) {
        for &child in &self.children[cohort] {
            if Some(child) == skip || child == p.node || self.tree.within_nominal(child) {
                continue;
            }
            if !self.tree.is_cluster_queue(child) {
                self.collect_in_subtree(cluster, p, child, lca, skip, advantage, into);
                continue;
            }
            let Some(queue) = self.of_node[child] else { continue };
            let bwc = self.queues[p.queue].preemption.borrow_within_cohort;
            let variant = |priority: i32, _| {
                if !self.reclaim_allows(p, priority) {
                    return None;
                }
                Some(match bwc {
                    _ if advantage => Variant::HierarchicalReclaim,
                    BorrowWithinCohort::Never => Variant::ReclaimWithoutBorrowing,
                    BorrowWithinCohort::LowerPriority { max_priority_threshold } => {
                        if priority >= p.priority || max_priority_threshold.is_some_and(|t| priority > t) {
                            Variant::ReclaimWithoutBorrowing
                        } else {
                            Variant::ReclaimWhileBorrowing
                        }
                    }
                })
            };
            self.candidates_of(cluster, queue, variant, Some(lca), into);
        }
    }

    /// Kueue's `candidateIsValid` for an attempt that allows borrowing or not.
    fn valid(&self, c: &Candidate, borrow: bool) -> bool {
        if c.variant == Variant::WithinQueue {
            return true;
        }
        if borrow && c.variant == Variant::ReclaimWithoutBorrowing {
            return false;
        }
        let mut at = Some(self.queues[c.queue].node);
        while let Some(node) = at
            && Some(node) != c.lca
        {
            if self.tree.within_nominal(node) {
                return false;
            }
            at = self.tree.parent(node);
        }
        true
    }

    /// The end of a search whose `targets` were taken out of the tree: when the preemptor
    /// `fit`, the targets made minimal ([`State::fill_back`]); the tree as it was before the
    /// search; the victims, if it fit.
    fn settle(
        &mut self,
        mut targets: Vec<Candidate>,
        fit: bool,
        fits: impl Fn(&mut State) -> bool,
    ) -> Option<Vec<JobId>> {
        if fit {
            self.fill_back(&mut targets, fits);
        }
        for c in &targets {
            self.tree.add(self.queues[c.queue].node, c.gpus);
        }
        fit.then(|| targets.into_iter().map(|c| c.id).collect())
    }

    /// Gives back each of `targets` (removed from the tree) but the last, the one chosen
    /// last first, that the preemptor `fits` without (file: preemption.go, func:
    /// fillBackWorkloads); those given back leave `targets` (and are in the tree again).
    fn fill_back(&mut self, targets: &mut Vec<Candidate>, fits: impl Fn(&mut State) -> bool) {
        for i in (0..targets.len().saturating_sub(1)).rev() {
            let node = self.queues[targets[i].queue].node;
            self.tree.add(node, targets[i].gpus);
            if fits(self) {
                targets.remove(i);
            } else {
                self.tree.remove(node, targets[i].gpus);
            }
        }
    }

    /// The cohort below `ancestor` on the way from `node` up to it (or `node` itself when
    /// its parent is `ancestor`).
    fn below(&self, node: usize, ancestor: usize) -> usize {
        let mut at = node;
        while let Some(parent) = self.tree.parent(at) {
            if parent == ancestor {
                return at;
            }
            at = parent;
        }
        at
    }

    /// The lowest common ancestor of two nodes of one tree.
    fn lca(&self, a: usize, b: usize) -> usize {
        let mut above_a = Vec::new();
        let mut at = Some(a);
        while let Some(n) = at {
            above_a.push(n);
            at = self.tree.parent(n);
        }
        let mut at = Some(b);
        while let Some(n) = at {
            if above_a.contains(&n) {
                return n;
            }
            at = self.tree.parent(n);
        }
        *above_a.last().expect("a node")
    }

    /// Fair Sharing's victims for the head `id` of `queue` (file:
    /// pkg/scheduler/preemption/preemption.go, funcs: fairPreemptions, runFirstFsStrategy,
    /// runSecondFsStrategy; pkg/scheduler/preemption/fairsharing/).
    ///
    /// Candidates (func: findCandidates): its own queue's that `withinClusterQueue` allows;
    /// with a cohort and `reclaimWithinCohort`, those it allows of every other queue of the
    /// whole cohort tree that borrows; in [`ordering`]. With the preemptor's request added
    /// to its queue, target queues come from [`State::next_target`]; from its own queue the
    /// next candidate is removed; while its queue stays within its nominal quota (with the
    /// request), the target's next candidate is removed as well; otherwise a candidate is
    /// removed when the first strategy holds between the preemptor's share and the
    /// target's (each at the children of their lowest common ancestor): at most the
    /// target's share after (LessThanOrEqualToFinalShare) or below its share before
    /// (LessThanInitialShare); candidates refused wait for the second strategy
    /// (LessThanInitialShare, one victim per target queue). Stops when the preemptor fits
    /// (borrowing allowed); the set is then made minimal as in classical preemption.
    pub(super) fn fair_targets(
        &mut self,
        engine: &Engine,
        cluster: &ClusterState,
        queue: usize,
        id: JobId,
    ) -> Vec<JobId> {
        let p = self.preemptor(engine, queue, id);
        let preemption = self.queues[queue].preemption;
        // Candidates of other queues only while they borrow.
        if !self.could_make_room(cluster, &p, |state, node| state.tree.borrowing_with(node, 0)) {
            return Vec::new();
        }
        let strategies = self.fair.clone().unwrap_or_default();
        let mut by_queue: Vec<VecDeque<Candidate>> = vec![VecDeque::new(); self.queues.len()];
        if preemption.within_cluster_queue != WithinClusterQueue::Never {
            let mut own = Vec::new();
            let allows =
                |priority, place| self.within_allows(&p, priority, place).then_some(Variant::WithinQueue);
            self.candidates_of(cluster, queue, allows, None, &mut own);
            by_queue[queue] = own.into();
        }
        let root = self.queues[queue].root;
        if self.reclaims(&p) {
            for (other, candidates) in by_queue.iter_mut().enumerate() {
                let node = self.queues[other].node;
                if other == queue || self.queues[other].root != root || !self.tree.borrowing_with(node, 0) {
                    continue;
                }
                let mut found = Vec::new();
                let allows =
                    |priority, _| self.reclaim_allows(&p, priority).then_some(Variant::HierarchicalReclaim);
                self.candidates_of(cluster, other, allows, None, &mut found);
                *candidates = found.into();
            }
        }
        self.tree.add(p.node, p.gpus);
        // Whether it fits, borrowing allowed, its own request taken out again (file:
        // preemption.go, func: workloadFitsForFairSharing).
        let fits = |state: &mut State| {
            state.tree.remove(p.node, p.gpus);
            let fits = p.gpus as i64 <= state.tree.cq_available(p.node);
            state.tree.add(p.node, p.gpus);
            fits
        };
        let mut targets: Vec<Candidate> = Vec::new();
        let mut retry: Vec<VecDeque<Candidate>> = vec![VecDeque::new(); self.queues.len()];
        let mut fit = false;
        let first = strategies.first().copied().unwrap_or(Strategy::LessThanOrEqualToFinalShare);
        // Within its quota with its request, the preemptor takes from other queues without
        // the strategies (gate FairSharingPreemptWithinNominal, on in 0.17): decided once,
        // before any candidate is taken out (func: runFirstFsStrategy).
        let within_nominal = !self.tree.borrowing_with(p.node, 0);
        'first: while let Some(target) = self.next_target(&p, &by_queue) {
            if target == queue || within_nominal {
                let c = by_queue[target].pop_front().expect("a target has candidates");
                self.tree.remove(self.queues[c.queue].node, c.gpus);
                targets.push(c);
                if fits(self) {
                    fit = true;
                    break;
                }
                continue;
            }
            let target_node = self.queues[target].node;
            let lca = self.lca(p.node, target_node);
            let (mine, theirs) = (self.below(p.node, lca), self.below(target_node, lca));
            let preemptor_new = self.tree.drs(mine, 0);
            let target_old = self.tree.drs(theirs, 0);
            if preemptor_new.weighted_share().is_infinite() && !target_old.weighted_share().is_infinite() {
                retry[target].extend(by_queue[target].drain(..));
                continue;
            }
            while let Some(c) = by_queue[target].pop_front() {
                let node = self.queues[c.queue].node;
                self.tree.remove(node, c.gpus);
                let target_new = self.tree.drs(theirs, 0);
                let holds = match first {
                    Strategy::LessThanOrEqualToFinalShare => {
                        preemptor_new.compare(&target_new) != Ordering::Greater
                    }
                    Strategy::LessThanInitialShare => preemptor_new.compare(&target_old) == Ordering::Less,
                };
                if !holds {
                    self.tree.add(node, c.gpus);
                    retry[target].push_back(c);
                    continue;
                }
                targets.push(c);
                if fits(self) {
                    fit = true;
                    break 'first;
                }
                continue 'first;
            }
        }
        if !fit && strategies.get(1) == Some(&Strategy::LessThanInitialShare) {
            while let Some(target) = self.next_target(&p, &retry) {
                let c = retry[target].pop_front().expect("a target has candidates");
                retry[target].clear();
                let target_node = self.queues[target].node;
                let lca = self.lca(p.node, target_node);
                let (mine, theirs) = (self.below(p.node, lca), self.below(target_node, lca));
                if self.tree.drs(mine, 0).compare(&self.tree.drs(theirs, 0)) == Ordering::Less {
                    self.tree.remove(self.queues[c.queue].node, c.gpus);
                    targets.push(c);
                    if fits(self) {
                        fit = true;
                        break;
                    }
                }
            }
        }
        let victims = self.settle(targets, fit, fits);
        self.tree.remove(p.node, p.gpus);
        victims.unwrap_or_default()
    }

    /// Fair Sharing's next target queue (file: pkg/scheduler/preemption/fairsharing/ordering.go,
    /// funcs: Iter, nextTarget): without a cohort, the preemptor's own queue while it has
    /// candidates; else down from the root, at each level to the child of the highest share:
    /// a queue that does not borrow (but the preemptor's) or has no candidate left is passed
    /// over, and so is a cohort that does not borrow and is not above the preemptor, or whose
    /// children are all passed over; among queues of equal share, the one whose first
    /// candidate comes first; a cohort before a queue of equal share.
    fn next_target(&self, p: &Preemptor, candidates: &[VecDeque<Candidate>]) -> Option<usize> {
        if self.tree.parent(p.node).is_none() {
            return (!candidates[p.queue].is_empty()).then_some(p.queue);
        }
        self.best_under(p, self.queues[p.queue].root, candidates)
    }

    fn best_under(&self, p: &Preemptor, cohort: usize, candidates: &[VecDeque<Candidate>]) -> Option<usize> {
        let order = ordering(p.queue);
        let mut best_queue: Option<(usize, Drs)> = None;
        let mut best_cohort: Option<(usize, Drs)> = None;
        for &child in &self.children[cohort] {
            let drs = self.tree.drs(child, 0);
            if self.tree.is_cluster_queue(child) {
                let Some(queue) = self.of_node[child] else { continue };
                if candidates[queue].is_empty() || (queue != p.queue && !drs.borrowing) {
                    continue;
                }
                let better = match &best_queue {
                    None => true,
                    Some((other, best)) => match drs.compare(best) {
                        Ordering::Greater => true,
                        Ordering::Less => false,
                        Ordering::Equal => {
                            order(&candidates[queue][0], &candidates[*other][0]) == Ordering::Less
                        }
                    },
                };
                if better {
                    best_queue = Some((queue, drs));
                }
            } else {
                if !drs.borrowing && !self.is_above(child, p.node) {
                    continue;
                }
                // The queue the cohort would lead to, kept: found once per cohort.
                let Some(found) = self.best_under(p, child, candidates) else { continue };
                if best_cohort.as_ref().is_none_or(|(_, best)| drs.compare(best) == Ordering::Greater) {
                    best_cohort = Some((found, drs));
                }
            }
        }
        match (best_cohort, best_queue) {
            (Some((found, c)), Some((_, q))) if c.compare(&q) != Ordering::Less => Some(found),
            (_, Some((queue, _))) => Some(queue),
            (Some((found, _)), None) => Some(found),
            (None, None) => None,
        }
    }

    /// Whether `ancestor` is above `node`.
    fn is_above(&self, ancestor: usize, node: usize) -> bool {
        let mut at = self.tree.parent(node);
        while let Some(n) = at {
            if n == ancestor {
                return true;
            }
            at = self.tree.parent(n);
        }
        false
    }

    /// The index in `entries` of the entry Fair Sharing's tournament serves next (file:
    /// pkg/scheduler/fair_sharing_iterator.go, funcs: pop, computeDRS, runTournament,
    /// entryComparer.less), on the quota as the cycle's admissions left it. Trees are served
    /// in the order of their first entry (Kueue picks one at random); an entry of a queue
    /// without a cohort is served as it comes; within a tree, the tournament runs from the
    /// leaves up: at each cohort, among its child queues' entries and its child cohorts'
    /// winners, an entry whose subtree at that level would not borrow with it first, then
    /// the lower share (with its request), the higher priority, the earlier creation, and
    /// the first found.
    pub(super) fn fair_next(&mut self, entries: &[Entry]) -> usize {
        let first = &entries[0];
        let queue = &self.queues[first.queue];
        if entries.len() == 1 || self.tree.parent(queue.node).is_none() {
            return 0;
        }
        let root = queue.root;
        // Each entry's share at each level: the share of the child on its path, with it.
        let shares: Vec<Vec<(usize, Drs)>> = entries
            .iter()
            .map(|e| {
                let node = self.queues[e.queue].node;
                if self.queues[e.queue].root != root {
                    return Vec::new();
                }
                self.tree.add(node, u64::from(e.gpus));
                let mut levels = Vec::new();
                let mut at = node;
                while let Some(parent) = self.tree.parent(at) {
                    levels.push((parent, self.tree.drs(at, 0)));
                    at = parent;
                }
                self.tree.remove(node, u64::from(e.gpus));
                levels
            })
            .collect();
        // Each queue's entry (a queue has one head in a cycle).
        let mut entry_of = vec![None; self.children.len()];
        for (i, e) in entries.iter().enumerate().filter(|(i, _)| !shares[*i].is_empty()) {
            entry_of[self.queues[e.queue].node] = Some(i);
        }
        self.tournament(root, entries, &shares, &entry_of).expect("the tree has an entry")
    }

    /// The winner among the entries under `cohort`, if any.
    fn tournament(
        &self,
        cohort: usize,
        entries: &[Entry],
        shares: &[Vec<(usize, Drs)>],
        entry_of: &[Option<usize>],
    ) -> Option<usize> {
        let at = |i: usize| shares[i].iter().find(|(level, _)| *level == cohort).map(|(_, drs)| *drs);
        let mut contenders: Vec<usize> = Vec::new();
        for &child in &self.children[cohort] {
            if !self.tree.is_cluster_queue(child) {
                contenders.extend(self.tournament(child, entries, shares, entry_of));
            }
        }
        for &child in &self.children[cohort] {
            if self.tree.is_cluster_queue(child) {
                contenders.extend(entry_of[child]);
            }
        }
        let mut winner: Option<usize> = None;
        for i in contenders {
            let Some(mine) = at(i) else { continue };
            let better = match winner {
                None => true,
                Some(w) => {
                    let theirs = at(w).expect("a contender has a share here");
                    let (a, b) = (&entries[i], &entries[w]);
                    let key = mine
                        .borrowing
                        .cmp(&theirs.borrowing)
                        .then(mine.compare(&theirs))
                        .then(a.tier.cmp(&b.tier))
                        .then(a.place.cmp(&b.place));
                    key == Ordering::Less
                }
            };
            if better {
                winner = Some(i);
            }
        }
        winner
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::cluster::RunKey;
    use super::*;

    fn candidate(number: u32, queue: usize, priority: i32, started: i64) -> Candidate {
        Candidate {
            id: JobId { number, slot: number },
            queue,
            gpus: 1,
            priority,
            started,
            variant: Variant::WithinQueue,
            lca: None,
        }
    }

    #[test]
    fn candidates_in_kueues_order() {
        // The preemptor's queue is 0.
        let mut candidates = [
            candidate(0, 0, 0, 50),
            candidate(1, 1, 5, 10),
            candidate(2, 1, 0, 10),
            candidate(3, 2, 0, 30),
            candidate(4, 1, 0, 30),
        ];
        candidates.sort_by(ordering(0));
        let order: Vec<u32> = candidates.iter().map(|c| c.id.number).collect();
        // Other queues first; lower priority first; the most recently started first (3 and
        // 4 both at 30: trace order, Kueue's UID, breaks the tie); the own queue's last.
        assert_eq!(order, [3, 4, 2, 1, 0]);
    }

    #[test]
    fn the_clusters_index_keeps_one_queues_candidates_in_kueues_order() {
        // One queue's running jobs (the preemptor's queue is another): priorities, starts
        // and trace order mixed, ties on each key.
        let mut candidates = [
            candidate(5, 1, 10, 30),
            candidate(1, 1, 0, 30),
            candidate(4, 1, 10, 50),
            candidate(2, 1, 0, 30),
            candidate(3, 1, -5, 10),
            candidate(0, 1, 10, 50),
        ];
        let mut keys: Vec<RunKey> = candidates
            .iter()
            .map(|c| (Reverse(super::super::tier(c.priority)), Reverse(c.started), c.id))
            .collect();
        keys.sort();
        candidates.sort_by(ordering(0));
        let by_index: Vec<u32> = keys.iter().map(|&(_, _, id)| id.number).collect();
        let by_kueue: Vec<u32> = candidates.iter().map(|c| c.id.number).collect();
        assert_eq!(by_kueue, [3, 1, 2, 0, 4, 5]);
        assert_eq!(by_index, by_kueue);
    }
}
