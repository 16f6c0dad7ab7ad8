//! Victims that make room for a waiting job with the fewest GPUs taken: on one node for a
//! job that fits a node, on whole nodes for a larger one. The policy says which running jobs
//! may go and in which order ([`Search::class`]), and which sets it allows
//! ([`Search::allows`]); the search finds where room is cheapest.

use std::cmp::Reverse;

use super::cluster::ClusterState;
use super::jobs::{JobId, SimJob, Slots};

/// A victim as the search weighs it: its class (lower taken first), the GPUs it frees on the
/// node looked at, all its GPUs, its start.
#[derive(Clone, Copy)]
struct Candidate {
    class: u32,
    here: u32,
    gpus: u32,
    start: i64,
    id: JobId,
}

/// What a set of victims costs, compared lowest first: the furthest class it reaches into,
/// the GPUs it takes, then the newest set (the latest start of its oldest victim).
type Cost = (u32, u32, Reverse<(i64, JobId)>);

/// A search for victims to make room for `gpus` on `cluster`.
pub(super) struct Search<'a, C, A> {
    pub(super) cluster: &'a ClusterState<'a>,
    pub(super) jobs: &'a Slots,
    pub(super) gpus: u32,
    /// A running job's class among victims (lower first); `None`: it may not go.
    pub(super) class: C,
    /// Whether the policy lets a set of victims go together (checked as each is added).
    pub(super) allows: A,
    /// When `class` lets only preemptible runs go, by their leaf, and `allows` lets each
    /// leaf give no more than [`ByLeaf::gives`]: a node whose runs that may go cannot make
    /// the room is then not looked at. `None`: every node is.
    pub(super) by_leaf: Option<&'a ByLeaf>,
}

/// The classes of a policy that takes preemptible runs by their leaf.
pub(super) struct ByLeaf {
    /// Each leaf's class (`None`: its runs may not go).
    pub(super) class: Vec<Option<u32>>,
    /// The most GPUs each leaf's runs may give together.
    pub(super) gives: Vec<u32>,
}

impl<C: Fn(&SimJob) -> Option<u32>, A: Fn(&[JobId]) -> bool> Search<'_, C, A> {
    /// Victims enough for the job (not yet made minimal), if any set the policy allows
    /// makes room.
    pub(super) fn run(&self) -> Option<Vec<JobId>> {
        if self.gpus <= self.cluster.pool.per_node { self.on_one_node() } else { self.on_whole_nodes() }
    }

    /// The nodes where victims could free `room` GPUs (each node's own need), in order:
    /// all of them, or under [`Search::by_leaf`] those whose runs that may go hold that many.
    fn nodes(&self, room: impl Fn(usize) -> u32) -> impl Iterator<Item = usize> {
        let here = &self.cluster.preemptible_here;
        let by_leaf = self.by_leaf;
        (0..self.cluster.pool.capacity.len()).filter(move |&node| {
            by_leaf.is_none_or(|by_leaf| {
                let may_go = here[node].iter().filter(|&&(leaf, _)| by_leaf.class[leaf as usize].is_some());
                may_go.map(|&(leaf, gpus)| gpus.min(by_leaf.gives[leaf as usize])).sum::<u32>() >= room(node)
            })
        })
    }

    /// The running jobs on `node` that may be victims, into `out` (emptied first).
    fn candidates(&self, node: usize, out: &mut Vec<Candidate>) {
        out.clear();
        out.extend(self.cluster.on_node[node].iter().filter_map(|&id| {
            let job = &self.jobs[id];
            let class = (self.class)(job)?;
            let here = job.placement.iter().filter(|&&(n, _)| n as usize == node).map(|&(_, g)| g).sum();
            Some(Candidate { class, here, gpus: job.gpus, start: job.started.expect("running"), id })
        }));
    }

    /// On the one node where room is made at the least [`Cost`]. On each node, class by
    /// class, the smallest victim that completes the room, else the one freeing the most
    /// there (the newest among equals), while the policy allows it.
    fn on_one_node(&self) -> Option<Vec<JobId>> {
        let pool = &self.cluster.pool;
        let mut best: Option<(Cost, Vec<JobId>)> = None;
        let mut chosen: Vec<JobId> = Vec::new();
        let (mut candidates, mut order) = (Vec::new(), Vec::new());
        for node in self.nodes(|node| self.gpus.saturating_sub(pool.free[node])) {
            if pool.capacity[node] < self.gpus {
                continue;
            }
            let mut need = self.gpus.saturating_sub(pool.free[node]);
            self.candidates(node, &mut candidates);
            if candidates.iter().map(|c| c.here).sum::<u32>() < need {
                continue;
            }
            candidates.sort_by_key(|c| c.class);
            chosen.clear();
            let (mut class_reached, mut taken) = (0, 0);
            let mut oldest = (i64::MAX, JobId { number: u32::MAX, slot: u32::MAX });
            while need > 0 {
                let Some(class) = candidates.first().map(|c| c.class) else { break };
                let in_class = candidates.iter().take_while(|c| c.class == class).count();
                // The smallest that completes the room (the newest among equals), then the
                // others by the most freed here: the first the policy allows.
                order.clear();
                order.extend(0..in_class);
                order.sort_by_key(|&i| {
                    let c = &candidates[i];
                    let short = c.here < need;
                    (short, Reverse(if short { c.here } else { 0 }), c.gpus, Reverse((c.start, c.id)))
                });
                let pick = order.iter().copied().find(|&i| {
                    chosen.push(candidates[i].id);
                    let allowed = (self.allows)(&chosen);
                    chosen.pop();
                    allowed
                });
                let Some(i) = pick else {
                    candidates.drain(..in_class);
                    continue;
                };
                let c = candidates.remove(i);
                chosen.push(c.id);
                need = need.saturating_sub(c.here);
                class_reached = class_reached.max(c.class);
                taken += c.gpus;
                oldest = oldest.min((c.start, c.id));
            }
            if need > 0 {
                continue;
            }
            let cost = (class_reached, taken, Reverse(oldest));
            if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                best = Some((cost, chosen.clone()));
            }
        }
        best.map(|(_, chosen)| chosen)
    }

    /// Whole nodes, the cheapest to empty first (by [`Cost`]), each node's jobs all victims
    /// the policy allows, until idle nodes hold the job.
    fn on_whole_nodes(&self) -> Option<Vec<JobId>> {
        let pool = &self.cluster.pool;
        let mut nodes: Vec<(Cost, Vec<JobId>)> = self
            .nodes(|node| pool.capacity[node] - pool.free[node])
            .filter(|&node| pool.free[node] < pool.capacity[node])
            .filter_map(|node| {
                let mut candidates = Vec::new();
                self.candidates(node, &mut candidates);
                let occupied = pool.capacity[node] - pool.free[node];
                if candidates.iter().map(|c| c.here).sum::<u32>() < occupied {
                    return None;
                }
                let class = candidates.iter().map(|c| c.class).max().unwrap_or(0);
                let oldest = candidates.iter().map(|c| (c.start, c.id)).min()?;
                Some(((class, occupied, Reverse(oldest)), candidates.into_iter().map(|c| c.id).collect()))
            })
            .collect();
        nodes.sort_by_key(|(cost, _)| *cost);
        let mut room = pool.room_for(self.gpus);
        let mut victims: Vec<JobId> = Vec::new();
        for (_, jobs) in nodes {
            let before = victims.len();
            for job in jobs {
                if !victims[..before].contains(&job) {
                    victims.push(job);
                }
            }
            if !(self.allows)(&victims) {
                victims.truncate(before);
                continue;
            }
            let mut fits = false;
            for &victim in &victims[before..] {
                fits |= room.give_back(&self.jobs[victim].placement);
            }
            if fits {
                return Some(victims);
            }
        }
        None
    }
}
