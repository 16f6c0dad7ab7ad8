//! A cluster's queue as the policies walk it: each budget's waiting jobs grouped by size,
//! merged across budgets by rank.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;

use super::cluster::ClusterState;
use super::jobs::JobId;

/// The waiting jobs of a cluster in the policy's order, merged from the budgets' queues by
/// (tier, rank of the budget, time entered, trace order). Each queue is read by job size (one
/// group per budget and size, each in queue order), so that a pass can drop a whole group
/// none of whose jobs can start in it; a group is read from where the last job taken from
/// it stood, so starts during the walk do not disturb it. A budget's groups join the merge
/// only when the walk reaches its rank: a pass that ends early reads no further.
pub(super) struct Cursor<'h> {
    heads: &'h mut BinaryHeap<Reverse<Head>>,
    /// How many budgets, in rank order, have joined.
    joined: usize,
}

/// The next job of one group: (tier, rank, time entered, job, leaf, GPUs, lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Head(pub u32, pub u32, pub i64, pub JobId, pub usize, pub u32, pub u32);

impl<'h> Cursor<'h> {
    /// A cursor over a cluster's queues by the ranks [`ClusterState::rank`] brought up to
    /// date, in `heads` (emptied).
    pub(super) fn new(heads: &'h mut BinaryHeap<Reverse<Head>>) -> Cursor<'h> {
        heads.clear();
        Cursor { heads, joined: 0 }
    }

    /// The next job; its group goes on only when [`Cursor::follow`] says so.
    pub(super) fn next(&mut self, cluster: &ClusterState) -> Option<Head> {
        // Every budget that could have a job before the next one joins before it is taken
        // (tied budgets merge their jobs): its jobs of the first tier are ranked no later.
        while let Some(&(rank, leaf)) = cluster.ranked.get(self.joined)
            && self.heads.peek().is_none_or(|Reverse(head)| (0, rank) <= (head.0, head.1))
        {
            for group in &cluster.by_size[leaf] {
                let (entered, id) = group.first;
                self.heads.push(Reverse(Head(group.tier, rank, entered, id, leaf, group.gpus, group.lane)));
            }
            self.joined += 1;
        }
        self.heads.pop().map(|Reverse(head)| head)
    }

    /// Goes on with the group of `head` after it.
    pub(super) fn follow(&mut self, cluster: &ClusterState, head: Head) {
        let Head(tier, rank, entered, id, leaf, gpus, lane) = head;
        let Some(group) = cluster.group(leaf, tier, lane, gpus) else { return };
        let after = (Bound::Excluded((entered, id)), Bound::Unbounded);
        if let Some(&(entered, id)) = group.jobs.range(after).next() {
            self.heads.push(Reverse(Head(tier, rank, entered, id, leaf, gpus, lane)));
        }
    }
}
