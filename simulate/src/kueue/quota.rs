//! The quota tree of a Kueue setup for one resource (GPUs, in one flavor), and Kueue's
//! arithmetic on it: each node's subtree quota and usage, what a ClusterQueue has available
//! now and could ever have, whether a node borrows, the height of the lowest subtree a
//! request fits in, the quota part of the decision whether a workload fits or may preempt,
//! and Fair Sharing's dominant resource share.
//!
//! The rules are Kueue's resource-node algebra (files: pkg/cache/scheduler/resource_node.go,
//! clusterqueue_snapshot.go, cohort_snapshot.go, fair_sharing.go;
//! pkg/scheduler/preemption/classical/hierarchical_preemption.go;
//! pkg/scheduler/flavorassigner/flavorassigner.go), for one flavor-resource, in whole GPUs.
//! Kueue's amounts are 64-bit integers, and so are these: quantities may be negative where
//! Kueue's are (what is available at an over-committed root), and sums saturate.
//!
//! It is built for a replay of millions of jobs: what does not depend on usage (subtree
//! quotas, the private part of each node, potential availability, heights) is computed once;
//! a change of usage and a query of availability walk one path to the root, O(depth), and
//! nothing allocates after construction.

use std::cmp::Ordering;

use super::setup::{BorrowWithinCohort, Kind, Node, Preemption, ReclaimWithinCohort};

/// The quota tree: per node of a [`Setup`](super::setup::Setup), at the same indices, its
/// quotas and usage of GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaTree {
    nodes: Vec<Entry>,
}

/// One node's quotas, fixed, and usage.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    parent: Option<usize>,
    cluster_queue: bool,
    /// Whether the GPU resource is in its subtree quota at all: its own quota lists it, or a
    /// child's does (Kueue keeps a flavor-resource in a cohort's subtree quota when any child
    /// has it, 0 included).
    covers: bool,
    nominal: i64,
    borrowing_limit: Option<i64>,
    subtree_quota: i64,
    local_quota: i64,
    potential: i64,
    height: u32,
    weight: f64,
    usage: i64,
}

/// The quota part of Kueue's decision for one workload's GPUs in its ClusterQueue (file:
/// pkg/scheduler/flavorassigner/flavorassigner.go, func: fitsResourceQuota), before its
/// preemption oracle searches for targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaFit {
    /// It fits in what is available now; `borrowing` is the height of the lowest subtree it
    /// fits in (0: within its ClusterQueue's quota), the classical order's first key.
    Fit { borrowing: u32 },
    /// It does not fit now, but preemption may make room: Kueue searches for targets.
    MayPreempt,
    /// It does not fit, and preemption is not tried.
    NoFit(NoFit),
}

/// Why a workload does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFit {
    /// Its ClusterQueue does not cover the GPU resource.
    Uncovered,
    /// It asks for more than its ClusterQueue could hold with nothing else running
    /// (Kueue's reason `ExceedsMaxQuota`): it will never fit.
    ExceedsMaxQuota,
    /// It must wait for GPUs to be freed (Kueue's reason `WaitingForQuota`).
    WaitingForQuota,
}

/// Fair Sharing's dominant resource share of a node, for one resource (file:
/// pkg/cache/scheduler/fair_sharing.go, type: DRS, func: dominantResourceShare).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Drs {
    /// Whether its usage (with the request) is above its subtree quota.
    pub borrowing: bool,
    /// What it borrows, in thousandths of what its parent could lend it (0 when nothing can
    /// be lent, even while borrowing).
    pub ratio: f64,
    /// Its `fairSharing.weight`.
    pub weight: f64,
}

impl Drs {
    /// Whether the share is 0 (Kueue's `IsZero`): not borrowing, or borrowing what cannot be
    /// lent.
    pub fn is_zero(&self) -> bool {
        self.ratio == 0.0
    }

    /// The share over the weight, unrounded (Kueue's `PreciseWeightedShare`): 0 when the
    /// share is 0, infinite for a weight of 0.
    pub fn weighted_share(&self) -> f64 {
        if self.is_zero() {
            0.0
        } else if self.weight == 0.0 {
            f64::INFINITY
        } else {
            self.ratio / self.weight
        }
    }

    fn zero_weight_borrows(&self) -> bool {
        self.weight == 0.0 && !self.is_zero()
    }

    /// Kueue's `CompareDRS`: less is served first and preempted last. Two nodes of weight 0
    /// that borrow compare by their shares; one of them is above any other node; otherwise
    /// the weighted shares compare, unrounded. No share is NaN (a ratio is computed only over
    /// something lendable, and a weight of 0 is handled apart).
    pub fn compare(&self, other: &Drs) -> Ordering {
        match (self.zero_weight_borrows(), other.zero_weight_borrows()) {
            (true, true) => self.ratio.partial_cmp(&other.ratio).unwrap_or(Ordering::Equal),
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => {
                self.weighted_share().partial_cmp(&other.weighted_share()).unwrap_or(Ordering::Equal)
            }
        }
    }
}

/// Whether a ClusterQueue may preempt in its cohort while it borrows (file:
/// pkg/scheduler/flavorassigner/flavorassigner.go, func: canPreemptWhileBorrowing):
/// `borrowWithinCohort` is not `Never`, or Fair Sharing is on and `reclaimWithinCohort` is
/// not `Never`.
pub fn can_preempt_while_borrowing(preemption: &Preemption, fair_sharing: bool) -> bool {
    preemption.borrow_within_cohort != BorrowWithinCohort::Never
        || (fair_sharing && preemption.reclaim_within_cohort != ReclaimWithinCohort::Never)
}

/// A count of GPUs as Kueue's 64-bit amounts.
fn amount(gpus: u64) -> i64 {
    i64::try_from(gpus).unwrap_or(i64::MAX)
}

impl QuotaTree {
    /// The tree of `nodes` (a setup's), with no usage. Subtree quotas, private parts and
    /// heights are summed from the leaves up, potential availability from the roots down.
    ///
    /// Panics when the parents do not form a forest of Cohorts over ClusterQueues (a parent
    /// out of range or a ClusterQueue, or a cycle), which a read setup never has.
    pub fn new(nodes: &[Node]) -> QuotaTree {
        let count = nodes.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); count];
        let mut roots = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            match node.parent {
                Some(parent) => {
                    assert!(nodes[parent].kind == Kind::Cohort, "the parent of node {index} is no Cohort");
                    children[parent].push(index);
                }
                None => roots.push(index),
            }
        }
        // Parents before children: a walk from the roots reaches every node once, unless
        // some are on a cycle.
        let mut order = Vec::with_capacity(count);
        let mut stack = roots;
        while let Some(index) = stack.pop() {
            order.push(index);
            stack.extend(&children[index]);
        }
        assert!(order.len() == count, "the Cohorts' parents make a cycle");

        let mut entries: Vec<Entry> = nodes
            .iter()
            .map(|node| Entry {
                parent: node.parent,
                cluster_queue: node.kind != Kind::Cohort,
                covers: node.covers,
                nominal: amount(node.nominal),
                borrowing_limit: node.borrowing_limit.map(amount),
                subtree_quota: amount(node.nominal),
                local_quota: 0,
                potential: 0,
                height: 0,
                weight: node.weight,
                usage: 0,
            })
            .collect();
        // Leaves up: a node is complete when its children are (file: resource_node.go, funcs:
        // updateCohortResourceNode, accumulateFromChild, localQuota; the height:
        // hierarchical_preemption.go, func: getNodeHeight).
        for &index in order.iter().rev() {
            let node = &nodes[index];
            let entry = &mut entries[index];
            entry.local_quota =
                node.lending_limit.map_or(0, |lending| (entry.subtree_quota - amount(lending)).max(0));
            let (lent, covers, height) =
                (entry.subtree_quota - entry.local_quota, entry.covers, entry.height);
            if let Some(parent) = node.parent {
                let parent = &mut entries[parent];
                parent.subtree_quota = parent.subtree_quota.saturating_add(lent);
                parent.covers |= covers;
                parent.height = parent.height.max(height + 1);
            }
        }
        // Roots down (file: resource_node.go, func: potentialAvailable).
        for &index in &order {
            let entry = &entries[index];
            let potential = match entry.parent {
                None => entry.subtree_quota,
                Some(parent) => {
                    let reach = entry.local_quota.saturating_add(entries[parent].potential);
                    match entry.borrowing_limit {
                        Some(limit) => reach.min(entry.subtree_quota.saturating_add(limit)),
                        None => reach,
                    }
                }
            };
            entries[index].potential = potential;
        }
        QuotaTree { nodes: entries }
    }

    /// A node's parent.
    pub fn parent(&self, node: usize) -> Option<usize> {
        self.nodes[node].parent
    }

    /// A node's borrowing limit, if it has one.
    pub fn borrowing_limit(&self, node: usize) -> Option<i64> {
        self.nodes[node].borrowing_limit
    }

    /// A node's own nominal quota.
    pub fn nominal(&self, node: usize) -> i64 {
        self.nodes[node].nominal
    }

    /// `SubtreeQuota`: a ClusterQueue's nominal quota; a Cohort's nominal quota and what each
    /// child lends it (its subtree quota less its private part), saturating (file:
    /// resource_node.go, funcs: updateClusterQueueResourceNode, accumulateFromChild).
    pub fn subtree_quota(&self, node: usize) -> i64 {
        self.nodes[node].subtree_quota
    }

    /// `localQuota`: the part of a node's subtree quota kept from its parent by its lending
    /// limit, `max(0, SubtreeQuota − lendingLimit)`; 0 without a lending limit (file:
    /// resource_node.go, func: localQuota).
    // Read by the tests (and by the fit arithmetic's own docs) only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn local_quota(&self, node: usize) -> i64 {
        self.nodes[node].local_quota
    }

    /// `Usage`: a ClusterQueue's GPUs in use; a Cohort's, what its children use beyond their
    /// private parts, `Σ max(0, Usage(child) − localQuota(child))` (file: resource_node.go,
    /// func: accumulateFromChild).
    pub fn usage(&self, node: usize) -> i64 {
        self.nodes[node].usage
    }

    /// `LocalAvailable`: what is left of a node's private part, `max(0, localQuota − Usage)`
    /// (file: resource_node.go, func: LocalAvailable).
    pub fn local_available(&self, node: usize) -> i64 {
        let entry = &self.nodes[node];
        (entry.local_quota - entry.usage).max(0)
    }

    /// The height of a node: the distance to its furthest leaf (a ClusterQueue and a Cohort
    /// without children: 0; a flat cohort: 1) (file: hierarchical_preemption.go, func:
    /// getNodeHeight).
    // Read by the tests (and by the fit arithmetic's own docs) only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn height(&self, node: usize) -> u32 {
        self.nodes[node].height
    }

    /// Adds `gpus` to a ClusterQueue's usage, and to each ancestor's what goes beyond the
    /// private part below it (file: resource_node.go, func: addUsage). O(depth).
    pub fn add(&mut self, cluster_queue: usize, gpus: u64) {
        let mut at = cluster_queue;
        let mut value = amount(gpus);
        loop {
            let entry = &mut self.nodes[at];
            let local_available = (entry.local_quota - entry.usage).max(0);
            entry.usage = entry.usage.saturating_add(value);
            match entry.parent {
                Some(parent) if value > local_available => {
                    value -= local_available;
                    at = parent;
                }
                _ => return,
            }
        }
    }

    /// Takes `gpus` from a ClusterQueue's usage, and from each ancestor's what the node held
    /// there (file: resource_node.go, func: removeUsage). O(depth). The GPUs must be in use.
    pub fn remove(&mut self, cluster_queue: usize, gpus: u64) {
        let mut at = cluster_queue;
        let mut value = amount(gpus);
        loop {
            let entry = &mut self.nodes[at];
            debug_assert!(value <= entry.usage, "{value} GPUs removed from a usage of {}", entry.usage);
            let held_in_parent = entry.usage - entry.local_quota;
            entry.usage -= value;
            match entry.parent {
                Some(parent) if held_in_parent > 0 => {
                    value = value.min(held_in_parent);
                    at = parent;
                }
                _ => return,
            }
        }
    }

    /// `available`: what a node could take now (file: resource_node.go, func: available). At
    /// a root, its subtree quota less its usage, negative when over-committed; below, what is
    /// left of its private part, plus what its parent has available, capped where it has a
    /// borrowing limit at what it lends the parent less what it uses there plus the limit.
    /// The cap applies at every level of the path. O(depth).
    pub fn available(&self, node: usize) -> i64 {
        // Kueue recurses from the node to the root and applies, on the way back down, at each
        // node n: x ↦ LocalAvailable(n) + min(cap(n), x). Such steps compose into one
        // x ↦ min(bound, x + offset), built on the way up, applied to the root's figure.
        let mut bound: Option<i64> = None;
        let mut offset: i64 = 0;
        let mut at = node;
        loop {
            let entry = &self.nodes[at];
            let Some(parent) = entry.parent else {
                let root = entry.subtree_quota.saturating_sub(entry.usage);
                let value = root.saturating_add(offset);
                return bound.map_or(value, |bound| bound.min(value));
            };
            let local_available = (entry.local_quota - entry.usage).max(0);
            if let Some(limit) = entry.borrowing_limit {
                let lent = entry.subtree_quota - entry.local_quota;
                let used_in_parent = (entry.usage - entry.local_quota).max(0);
                let cap = lent.saturating_sub(used_in_parent).saturating_add(limit);
                let step_bound = local_available.saturating_add(cap).saturating_add(offset);
                bound = Some(bound.map_or(step_bound, |bound| bound.min(step_bound)));
            }
            offset = offset.saturating_add(local_available);
            at = parent;
        }
    }

    /// What a ClusterQueue has available now: [`available`](Self::available), not below 0
    /// (file: clusterqueue_snapshot.go, func: Available).
    pub fn cq_available(&self, cluster_queue: usize) -> i64 {
        self.available(cluster_queue).max(0)
    }

    /// `potentialAvailable`: what a node could take with nothing in use: a root's subtree
    /// quota; below, its private part plus its parent's, capped at its subtree quota plus its
    /// borrowing limit (file: resource_node.go, func: potentialAvailable). Computed once.
    // Read by the tests (and by the fit arithmetic's own docs) only.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn potential_available(&self, node: usize) -> i64 {
        self.nodes[node].potential
    }

    /// `BorrowingWith`: whether `gpus` more would take a node above its subtree quota (a
    /// ClusterQueue: its nominal quota) (files: clusterqueue_snapshot.go and
    /// cohort_snapshot.go, func: BorrowingWith).
    pub fn borrowing_with(&self, node: usize, gpus: u64) -> bool {
        self.borrows_with(node, amount(gpus))
    }

    fn borrows_with(&self, node: usize, value: i64) -> bool {
        let entry = &self.nodes[node];
        entry.subtree_quota < entry.usage.saturating_add(value)
    }

    /// Whether a node uses no more than its subtree quota (file: resource_node.go, func:
    /// IsWithinNominalInResources).
    pub fn within_nominal(&self, node: usize) -> bool {
        let entry = &self.nodes[node];
        entry.usage <= entry.subtree_quota
    }

    /// The height of the lowest subtree that `gpus` more fit in without it borrowing, and
    /// whether that subtree has a parent (Kueue's `mayReclaimInHierarchy`) (file:
    /// hierarchical_preemption.go, func: FindHeightOfLowestSubtreeThatFits). A ClusterQueue
    /// that does not borrow with them, or has no cohort: (0, whether it has a cohort). Else
    /// each ancestor is tried in turn with what is left once the private parts below it are
    /// used; none fits: (the root's height, false). O(depth).
    pub fn lowest_subtree_that_fits(&self, cluster_queue: usize, gpus: u64) -> (u32, bool) {
        let entry = &self.nodes[cluster_queue];
        let Some(mut at) = entry.parent.filter(|_| self.borrowing_with(cluster_queue, gpus)) else {
            return (0, entry.parent.is_some());
        };
        let mut remaining = amount(gpus).saturating_sub(self.local_available(cluster_queue));
        loop {
            let ancestor = &self.nodes[at];
            if !self.borrows_with(at, remaining) {
                return (ancestor.height, ancestor.parent.is_some());
            }
            remaining = remaining.saturating_sub(self.local_available(at));
            match ancestor.parent {
                Some(parent) => at = parent,
                None => return (ancestor.height, false),
            }
        }
    }

    /// Whether `gpus` for one workload fit in a ClusterQueue now, may fit by preempting, or
    /// do not (file: flavorassigner.go, func: fitsResourceQuota): more than it could ever hold
    /// does not fit; what is available fits, at the borrowing level of
    /// [`lowest_subtree_that_fits`](Self::lowest_subtree_that_fits); otherwise preemption is
    /// tried if the request is within its nominal quota, or a subtree below the root could
    /// hold it, or its policies let it preempt while borrowing
    /// ([`can_preempt_while_borrowing`]). A ClusterQueue that does not cover the GPU
    /// resource holds no GPUs (file: flavorassigner.go, func: findFlavorForPodSets).
    pub fn fit(
        &self,
        cluster_queue: usize,
        gpus: u64,
        preemption: &Preemption,
        fair_sharing: bool,
    ) -> QuotaFit {
        let entry = &self.nodes[cluster_queue];
        let value = amount(gpus);
        if value > 0 && !entry.covers {
            return QuotaFit::NoFit(NoFit::Uncovered);
        }
        if value > entry.potential {
            return QuotaFit::NoFit(NoFit::ExceedsMaxQuota);
        }
        let (borrowing, may_reclaim_in_hierarchy) = self.lowest_subtree_that_fits(cluster_queue, gpus);
        if value <= self.cq_available(cluster_queue) {
            return QuotaFit::Fit { borrowing };
        }
        if value <= entry.nominal
            || may_reclaim_in_hierarchy
            || can_preempt_while_borrowing(preemption, fair_sharing)
        {
            QuotaFit::MayPreempt
        } else {
            QuotaFit::NoFit(NoFit::WaitingForQuota)
        }
    }

    /// A node's dominant resource share with `extra` GPUs more in use (file: fair_sharing.go,
    /// func: dominantResourceShare): a node without a parent, or whose subtree has no GPU
    /// quota, has share 0 and does not borrow; otherwise it borrows what its usage and
    /// `extra` exceed its subtree quota by, and its share is that in thousandths of what its
    /// parent could lend it, [`potential_available`](Self::potential_available) of the
    /// parent (0 when that is 0) (func: calculateLendable). O(1).
    pub fn drs(&self, node: usize, extra: u64) -> Drs {
        let entry = &self.nodes[node];
        let mut drs = Drs { borrowing: false, ratio: 0.0, weight: entry.weight };
        let Some(parent) = entry.parent.filter(|_| entry.covers) else {
            return drs;
        };
        let borrowed = amount(extra).saturating_add(entry.usage).saturating_sub(entry.subtree_quota);
        if borrowed > 0 {
            drs.borrowing = true;
            let lendable = self.nodes[parent].potential;
            if lendable > 0 {
                drs.ratio = borrowed as f64 * 1000.0 / lendable as f64;
            }
        }
        drs
    }

    /// Whether a node is a ClusterQueue.
    pub fn is_cluster_queue(&self, node: usize) -> bool {
        self.nodes[node].cluster_queue
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::setup::{Queueing, WithinClusterQueue};
    use super::*;

    fn cohort(name: &str, parent: Option<usize>, nominal: u64) -> Node {
        Node {
            name: name.into(),
            kind: Kind::Cohort,
            parent,
            nominal,
            borrowing_limit: None,
            lending_limit: None,
            weight: 1.0,
            covers: true,
        }
    }

    fn queue(name: &str, parent: Option<usize>, nominal: u64) -> Node {
        let kind = Kind::ClusterQueue {
            preemption: Preemption::default(),
            queueing: Queueing::BestEffortFifo,
            afs: false,
        };
        Node { kind, ..cohort(name, parent, nominal) }
    }

    const NEVER: Preemption = Preemption {
        within_cluster_queue: WithinClusterQueue::Never,
        reclaim_within_cohort: ReclaimWithinCohort::Never,
        borrow_within_cohort: BorrowWithinCohort::Never,
    };

    /// A flat cohort `c` (index 0, no quota of its own) with queues a, b, c of 4, 4 and 0.
    fn flat() -> Vec<Node> {
        vec![
            cohort("cohort", None, 0),
            queue("a", Some(0), 4),
            queue("b", Some(0), 4),
            queue("c", Some(0), 0),
        ]
    }

    #[test]
    fn a_flat_cohort_shares_all_its_free_gpus() {
        let mut tree = QuotaTree::new(&flat());
        // SubtreeQuota(cohort) = 0 + (4 − 0) + (4 − 0) + (0 − 0) = 8: without lending limits
        // nothing is private.
        assert_eq!((tree.subtree_quota(0), tree.subtree_quota(1), tree.local_quota(1)), (8, 4, 0));
        // Nothing in use: each queue could take the whole cohort.
        assert_eq!([1, 2, 3].map(|q| tree.cq_available(q)), [8, 8, 8]);
        assert_eq!([0, 1, 2, 3].map(|n| tree.potential_available(n)), [8, 8, 8, 8]);
        tree.add(1, 6);
        tree.add(2, 1);
        // Usage(cohort) = max(0, 6 − 0) + max(0, 1 − 0) + 0 = 7; available(cohort) = 8 − 7 = 1.
        // Each queue: LocalAvailable 0 + 1 = 1, Kueue's Σ nominal − Σ usage.
        assert_eq!(tree.usage(0), 7);
        assert_eq!([0, 1, 2, 3].map(|n| tree.available(n)), [1, 1, 1, 1]);
        // a borrows (4 < 6), b does not (1 ≤ 4) but would with 4 more (4 < 1 + 4).
        assert_eq!(
            (tree.borrowing_with(1, 0), tree.borrowing_with(2, 0), tree.borrowing_with(2, 4)),
            (true, false, true)
        );
        assert_eq!(
            (tree.within_nominal(1), tree.within_nominal(2), tree.within_nominal(0)),
            (false, true, true)
        );
        // Over-committed (quota taken away, say): the root goes negative, a queue stays at 0.
        tree.add(3, 2);
        assert_eq!((tree.available(0), tree.available(3), tree.cq_available(3)), (-1, -1, 0));
        assert!(!tree.within_nominal(0));
        tree.remove(3, 2);
        tree.remove(1, 6);
        tree.remove(2, 1);
        assert_eq!([0, 1, 2, 3].map(|n| tree.usage(n)), [0, 0, 0, 0]);
    }

    #[test]
    fn heights_and_the_lowest_subtree_that_fits_in_a_flat_cohort() {
        let mut tree = QuotaTree::new(&flat());
        assert_eq!([0, 1].map(|n| tree.height(n)), [1, 0]);
        tree.add(1, 6);
        tree.add(2, 1);
        // b with 1: 4 < 1 + 1 is false, no borrowing: (0, b has a cohort).
        assert_eq!(tree.lowest_subtree_that_fits(2, 1), (0, true));
        // a with 1: a borrows (4 < 7); remaining 1 − LocalAvailable(a) 0 = 1; the cohort does
        // not borrow with it (8 < 7 + 1 is false): the cohort, height 1, the root.
        assert_eq!(tree.lowest_subtree_that_fits(1, 1), (1, false));
        // c with 2: the cohort borrows too (8 < 9): nothing fits, the root's height.
        assert_eq!(tree.lowest_subtree_that_fits(3, 2), (1, false));
        // A queue without a cohort never borrows in a subtree.
        let alone = QuotaTree::new(&[queue("alone", None, 2)]);
        assert_eq!(alone.lowest_subtree_that_fits(0, 5), (0, false));
    }

    #[test]
    fn the_fit_decision() {
        let mut tree = QuotaTree::new(&flat());
        tree.add(1, 6);
        tree.add(2, 1);
        // 1 GPU is available to each queue.
        assert_eq!(tree.fit(1, 1, &NEVER, false), QuotaFit::Fit { borrowing: 1 });
        assert_eq!(tree.fit(2, 1, &NEVER, false), QuotaFit::Fit { borrowing: 0 });
        // 9 > potential 8: never.
        assert_eq!(tree.fit(3, 9, &NEVER, false), QuotaFit::NoFit(NoFit::ExceedsMaxQuota));
        // c asks 2: not available; 2 > nominal 0; the lowest fitting subtree is the root (no
        // parent); its policies are Never: no preemption.
        assert_eq!(tree.fit(3, 2, &NEVER, false), QuotaFit::NoFit(NoFit::WaitingForQuota));
        // borrowWithinCohort lets it preempt while borrowing.
        let borrow = Preemption {
            reclaim_within_cohort: ReclaimWithinCohort::Any,
            borrow_within_cohort: BorrowWithinCohort::LowerPriority { max_priority_threshold: None },
            ..NEVER
        };
        assert_eq!(tree.fit(3, 2, &borrow, false), QuotaFit::MayPreempt);
        // So does reclaimWithinCohort under Fair Sharing, and only under it.
        let reclaim = Preemption { reclaim_within_cohort: ReclaimWithinCohort::Any, ..NEVER };
        assert_eq!(tree.fit(3, 2, &reclaim, false), QuotaFit::NoFit(NoFit::WaitingForQuota));
        assert_eq!(tree.fit(3, 2, &reclaim, true), QuotaFit::MayPreempt);
        // b asks 3: not available (1), but 3 ≤ its nominal 4: preemption is tried.
        assert_eq!(tree.fit(2, 3, &NEVER, false), QuotaFit::MayPreempt);
        // A queue that does not cover GPUs holds none, but asking for none fits.
        let mut nodes = flat();
        nodes[3].covers = false;
        let tree = QuotaTree::new(&nodes);
        assert_eq!(tree.fit(3, 1, &NEVER, false), QuotaFit::NoFit(NoFit::Uncovered));
        assert_eq!(tree.fit(3, 0, &NEVER, false), QuotaFit::Fit { borrowing: 0 });
    }

    #[test]
    fn a_borrowing_limit_caps_what_a_queue_takes_from_its_cohort() {
        let mut nodes = flat();
        nodes[1].borrowing_limit = Some(2);
        let mut tree = QuotaTree::new(&nodes);
        // The limit changes no subtree quota: 8. potential(a) = min(4 + 2, 0 + 8) = 6.
        assert_eq!(
            (tree.subtree_quota(0), tree.potential_available(1), tree.potential_available(2)),
            (8, 6, 8)
        );
        assert_eq!(tree.fit(1, 7, &NEVER, false), QuotaFit::NoFit(NoFit::ExceedsMaxQuota));
        tree.add(1, 3);
        // available(cohort) = 8 − 3 = 5. a's cap: lent (4 − 0) − used there (3 − 0) + 2 = 3,
        // N − U + BL; available(a) = 0 + min(3, 5) = 3. b has no limit: 5.
        assert_eq!((tree.available(0), tree.available(1), tree.available(2)), (5, 3, 5));
        tree.add(2, 4);
        // The cohort has 1 left: now that binds, not the limit: min(3, 1) = 1.
        assert_eq!((tree.available(0), tree.available(1)), (1, 1));
    }

    #[test]
    fn a_lending_limit_keeps_part_of_a_queues_quota_private() {
        let mut nodes = flat();
        nodes[1].lending_limit = Some(1);
        let mut tree = QuotaTree::new(&nodes);
        // a keeps N − LL = 4 − 1 = 3 to itself: localQuota(a) = 3, and lends only 1:
        // SubtreeQuota(cohort) = (4 − 3) + 4 + 0 = 5.
        assert_eq!((tree.local_quota(1), tree.subtree_quota(0)), (3, 5));
        // potential(a) = 3 + 5 = 8; b and c reach only the cohort's 5.
        assert_eq!([1, 2, 3].map(|q| tree.potential_available(q)), [8, 5, 5]);
        // 2 in a: within its private 3, nothing reaches the cohort.
        tree.add(1, 2);
        assert_eq!(tree.usage(0), 0);
        // available(a) = LocalAvailable 3 − 2 = 1, plus the cohort's 5 = 6; b still has 5.
        assert_eq!((tree.available(1), tree.available(2)), (6, 5));
        // 2 more in a (4): LocalAvailable was 1, so 2 − 1 = 1 goes to the cohort. Usage above
        // N − LL consumes cohort capacity: b now has 4.
        tree.add(1, 2);
        assert_eq!((tree.usage(0), tree.available(2)), (1, 4));
        // b takes 4: the cohort is full (5 − 5 = 0), and a has no private GPU left: 0.
        tree.add(2, 4);
        assert_eq!((tree.usage(0), tree.available(0), tree.available(1)), (5, 0, 0));
        // a frees 3: it held 4 − 3 = 1 in the cohort, so the cohort loses min(3, 1) = 1.
        tree.remove(1, 3);
        assert_eq!((tree.usage(1), tree.usage(0)), (1, 4));
        // available(a) = (3 − 1) + (5 − 4) = 3.
        assert_eq!(tree.available(1), 3);
    }

    /// root (2) ─┬─ inner (2, borrowing limit 3) ─┬─ a (3)
    ///           │                                └─ b (1)
    ///           └─ c (4)
    fn two_levels() -> Vec<Node> {
        let mut inner = cohort("inner", Some(0), 2);
        inner.borrowing_limit = Some(3);
        vec![
            cohort("root", None, 2),
            inner,
            queue("a", Some(1), 3),
            queue("b", Some(1), 1),
            queue("c", Some(0), 4),
        ]
    }

    #[test]
    fn a_two_level_tree() {
        let mut tree = QuotaTree::new(&two_levels());
        // SubtreeQuota(inner) = 2 + 3 + 1 = 6; SubtreeQuota(root) = 2 + 6 + 4 = 12.
        assert_eq!([0, 1].map(|n| tree.subtree_quota(n)), [12, 6]);
        assert_eq!([0, 1, 2, 3, 4].map(|n| tree.height(n)), [2, 1, 0, 0, 0]);
        // potential(inner) = min(6 + 3, 0 + 12) = 9: its subtree may hold 9 of the 12.
        // potential(a) = potential(b) = 0 + 9; potential(c) = 0 + 12.
        assert_eq!([0, 1, 2, 3, 4].map(|n| tree.potential_available(n)), [12, 9, 9, 9, 12]);
        tree.add(2, 5);
        tree.add(3, 1);
        tree.add(4, 2);
        // Usage(inner) = 5 + 1 = 6; Usage(root) = 6 + 2 = 8; available(root) = 12 − 8 = 4.
        assert_eq!([0, 1].map(|n| tree.usage(n)), [8, 6]);
        // inner's cap: lent 6 − used 6 + 3 = 3 < 4: available(inner) = 0 + 3, and so a's.
        assert_eq!([0, 1, 2, 3].map(|n| tree.available(n)), [4, 3, 3, 3]);
        // c has no limit on the way: 4.
        assert_eq!(tree.available(4), 4);
        // c takes 3 more (5): the root has 1 left, below inner's cap: min(3, 1) = 1.
        tree.add(4, 3);
        assert_eq!([0, 1, 2].map(|n| tree.available(n)), [1, 1, 1]);
        tree.remove(4, 3);
        // a asks 1: a borrows (3 < 6); inner borrows with it (6 < 7); the root does not
        // (12 < 9 is false): height 2, the root.
        assert_eq!(tree.lowest_subtree_that_fits(2, 1), (2, false));
        assert_eq!(tree.fit(2, 1, &NEVER, false), QuotaFit::Fit { borrowing: 2 });
        // With b idle, inner fits a's 1 (6 < 5 + 1 is false): height 1, below the root, so
        // Kueue may reclaim in the hierarchy.
        tree.remove(3, 1);
        assert_eq!(tree.lowest_subtree_that_fits(2, 1), (1, true));
        // Usage(inner) = 5, Usage(root) = 5 + 2 = 7: available(root) = 5, inner's cap
        // 6 − 5 + 3 = 4, so available(a) = 0 + min(4, 5) = 4. a asks 4: it fits, but inner
        // borrows with it (6 < 5 + 4) and the root does not (12 < 7 + 4 is false): height 2.
        assert_eq!(tree.available(2), 4);
        assert_eq!(tree.fit(2, 4, &NEVER, false), QuotaFit::Fit { borrowing: 2 });
        // a asks 5: more than available, 5 > nominal 3, and only the root could hold it
        // (inner: 6 < 5 + 5): no preemption with policies Never.
        assert_eq!(tree.lowest_subtree_that_fits(2, 5), (2, false));
        assert_eq!(tree.fit(2, 5, &NEVER, false), QuotaFit::NoFit(NoFit::WaitingForQuota));
        // With c using 8 (4 above its quota), a asks 1: available(root) = 12 − (5 + 8) = −1
        // (inner holds 5 in it, c 8): nothing; inner could hold it (6 < 5 + 1 is false), so
        // preemption may reclaim from c.
        tree.add(4, 6);
        assert_eq!((tree.available(0), tree.cq_available(2)), (-1, 0));
        assert_eq!(tree.fit(2, 1, &NEVER, false), QuotaFit::MayPreempt);
    }

    #[test]
    fn the_dominant_resource_share() {
        // A flat cohort of 6 with a (2, weight 1), b (2, weight 2), z (0, weight 0):
        // SubtreeQuota = 6 + 2 + 2 + 0 = 10, all of it lendable to each queue.
        let mut nodes = vec![
            cohort("cohort", None, 6),
            queue("a", Some(0), 2),
            queue("b", Some(0), 2),
            queue("z", Some(0), 0),
        ];
        nodes[2].weight = 2.0;
        nodes[3].weight = 0.0;
        nodes.push(Node { weight: 0.0, ..queue("z2", Some(0), 0) });
        let mut tree = QuotaTree::new(&nodes);
        tree.add(1, 5);
        tree.add(2, 5);
        // a borrows 5 − 2 = 3 of 10: 300 thousandths, weighted 300 / 1 = 300.
        let a = tree.drs(1, 0);
        assert_eq!((a.borrowing, a.ratio, a.weight, a.weighted_share()), (true, 300.0, 1.0, 300.0));
        // b borrows as much, but weighs twice: 300 / 2 = 150, served before a.
        let b = tree.drs(2, 0);
        assert_eq!((b.ratio, b.weighted_share()), (300.0, 150.0));
        assert_eq!(
            (b.compare(&a), a.compare(&b), a.compare(&a)),
            (Ordering::Less, Ordering::Greater, Ordering::Equal)
        );
        // With its next 2 GPUs, b would borrow 5: 500 / 2 = 250, still below a.
        assert_eq!(tree.drs(2, 2).weighted_share(), 250.0);
        // z borrows nothing: share 0, whatever its weight.
        let z = tree.drs(3, 0);
        assert_eq!((z.borrowing, z.is_zero(), z.weighted_share()), (false, true, 0.0));
        assert_eq!(z.compare(&b), Ordering::Less);
        // With 1 GPU, z would borrow 1: 100 thousandths over weight 0: infinite, above all.
        let z1 = tree.drs(3, 1);
        assert_eq!((z1.ratio, z1.weighted_share()), (100.0, f64::INFINITY));
        assert_eq!((z1.compare(&a), a.compare(&z1)), (Ordering::Greater, Ordering::Less));
        // Two zero-weight borrowers compare by their shares: 100 < 200.
        let z2 = tree.drs(4, 2);
        assert_eq!((z1.compare(&z2), z2.compare(&z1)), (Ordering::Less, Ordering::Greater));
        // The root: share 0, not borrowing, though over its quota.
        tree.add(3, 1);
        assert_eq!(tree.drs(0, 0), Drs { borrowing: false, ratio: 0.0, weight: 1.0 });
    }

    #[test]
    fn the_share_is_of_what_the_parent_could_lend() {
        let mut tree = QuotaTree::new(&two_levels());
        tree.add(2, 5);
        // a borrows 5 − 3 = 2 of potential(inner) = 9: 2000 / 9 thousandths.
        assert_eq!(tree.drs(2, 0).ratio, 2000.0 / 9.0);
        // inner borrows 5 − 6 < 0: nothing; with 3 more (8): 2 of potential(root) = 12.
        assert!(!tree.drs(1, 0).borrowing);
        assert_eq!(tree.drs(1, 3).ratio, 2000.0 / 12.0);
        // Nothing to lend: borrowing, but share 0.
        let tree = QuotaTree::new(&[cohort("empty", None, 0), queue("q", Some(0), 0)]);
        let drs = tree.drs(1, 1);
        assert_eq!((drs.borrowing, drs.is_zero()), (true, true));
        // A queue without a cohort never borrows.
        let alone = QuotaTree::new(&[queue("alone", None, 1)]);
        assert!(!alone.drs(0, 5).borrowing);
    }

    #[test]
    fn children_may_come_before_their_parents() {
        // The flat cohort again, listed leaves first.
        let nodes = vec![
            queue("a", Some(3), 4),
            queue("b", Some(3), 4),
            queue("c", Some(3), 0),
            cohort("cohort", None, 0),
        ];
        let mut tree = QuotaTree::new(&nodes);
        tree.add(0, 6);
        assert_eq!((tree.subtree_quota(3), tree.usage(3), tree.available(2), tree.height(3)), (8, 6, 2, 1));
    }

    // The property: on random trees (parents in any order), random additions and removals
    // keep every Cohort's usage equal to its definition recomputed from the ClusterQueues',
    // `available` equal to Kueue's recursion, and never above `potential_available`.

    /// A random node: whether a ClusterQueue, which earlier Cohort is its parent (or none),
    /// nominal quota, borrowing and lending limits.
    type Spec = (bool, usize, u64, Option<u64>, Option<u64>);

    fn tree_nodes(specs: &[Spec], order: &[usize]) -> Vec<Node> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut cohorts = Vec::new();
        for (i, &(is_queue, parent, nominal, borrowing, lending)) in specs.iter().enumerate() {
            let parent = (parent % (cohorts.len() + 1)).checked_sub(1).map(|p| cohorts[p]);
            let mut node = if is_queue {
                queue(&format!("q{i}"), parent, nominal)
            } else {
                cohort(&format!("c{i}"), parent, nominal)
            };
            // Limits only with a parent; a ClusterQueue lends at most its quota.
            node.borrowing_limit = borrowing.filter(|_| parent.is_some());
            node.lending_limit =
                lending.filter(|_| parent.is_some()).map(|l| if is_queue { l.min(nominal) } else { l });
            if !is_queue {
                cohorts.push(i);
            }
            nodes.push(node);
        }
        // Node i moves to order[i].
        let mut moved = nodes.clone();
        for (i, mut node) in nodes.into_iter().enumerate() {
            node.parent = node.parent.map(|p| order[p]);
            moved[order[i]] = node;
        }
        moved
    }

    /// Usage by definition: a ClusterQueue's own; a Cohort's, its children's beyond their
    /// private parts.
    fn usage_by_definition(tree: &QuotaTree, nodes: &[Node], own: &[i64], node: usize) -> i64 {
        if tree.is_cluster_queue(node) {
            return own[node];
        }
        (0..nodes.len())
            .filter(|&c| nodes[c].parent == Some(node))
            .map(|c| (usage_by_definition(tree, nodes, own, c) - tree.local_quota(c)).max(0))
            .sum()
    }

    /// Kueue's `available`, recursively, as resource_node.go writes it.
    fn available_by_recursion(tree: &QuotaTree, nodes: &[Node], node: usize) -> i64 {
        let Some(parent) = nodes[node].parent else {
            return tree.subtree_quota(node) - tree.usage(node);
        };
        let mut from_parent = available_by_recursion(tree, nodes, parent);
        if let Some(limit) = nodes[node].borrowing_limit {
            let lq = tree.local_quota(node);
            let stored = tree.subtree_quota(node) - lq;
            let used = (tree.usage(node) - lq).max(0);
            from_parent = from_parent.min(stored - used + limit as i64);
        }
        tree.local_available(node) + from_parent
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (any::<bool>(), 0usize..8, 0u64..8, proptest::option::of(0u64..6), proptest::option::of(0u64..8))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn usage_and_availability_stay_consistent(
            (specs, order) in proptest::collection::vec(spec(), 1..12).prop_flat_map(|specs| {
                let n = specs.len();
                (Just(specs), Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
            }),
            operations in proptest::collection::vec((any::<bool>(), 0usize..64, 0u64..10), 0..60),
        ) {
            let nodes = tree_nodes(&specs, &order);
            let mut tree = QuotaTree::new(&nodes);
            let queues: Vec<usize> = (0..nodes.len()).filter(|&n| tree.is_cluster_queue(n)).collect();
            let mut own = vec![0i64; nodes.len()];
            for (adds, pick, gpus) in operations {
                let Some(&q) = queues.get(pick % queues.len().max(1)) else { break };
                if adds {
                    tree.add(q, gpus);
                    own[q] += gpus as i64;
                } else {
                    let gpus = gpus.min(own[q] as u64);
                    tree.remove(q, gpus);
                    own[q] -= gpus as i64;
                }
                for n in 0..nodes.len() {
                    prop_assert_eq!(tree.usage(n), usage_by_definition(&tree, &nodes, &own, n), "usage of {}", n);
                    prop_assert_eq!(tree.available(n), available_by_recursion(&tree, &nodes, n), "available of {}", n);
                    prop_assert!(tree.available(n) <= tree.potential_available(n));
                }
                for &q in &queues {
                    prop_assert!(tree.cq_available(q) <= tree.potential_available(q).max(0));
                }
            }
        }
    }
}
