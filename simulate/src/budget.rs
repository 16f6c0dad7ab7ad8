//! The `budget` policy: the budget rule itself, the reference every target is measured
//! against. docs/verifier.md states it for users ("The budget rule"); this is the rule as the
//! simulator applies it.
//!
//! - **Entitlement**: each budget's share of the cluster now, by hierarchical water-filling
//!   of the budgets' demand (running and waiting GPUs); what the top-level shares leave goes
//!   to unbudgeted work ([`entitlement`](allot_verify::entitlement)). Every node of the tree has
//!   one: a project's is its sub-projects' (and own jobs') together.
//! - **Beyond**: a budget's running jobs in start order (then trace order); a job is
//!   *beyond* its budget when it, with the jobs that started before it, exceeds the
//!   budget's entitlement. A job that straddles the line is beyond: a budget covers a job
//!   only whole, as a waiting job may preempt only if its budget covers it whole (below).
//!   Otherwise one job larger than its budget's entitlement would be protected for as long
//!   as it runs: the squatting budgets are meant to end.
//! - **Preemptible**: a job beyond its budget, or of unbudgeted work, once its contract's
//!   minimum runtime has passed. A budget's jobs that its entitlement covers whole are never
//!   preempted.
//! - **Who may preempt**: a waiting job of a budget, when it does not fit, and only if, with
//!   it started and its victims stopped, its budget and every project above it run no more
//!   than their entitlements. Entitlements are real numbers and running GPUs whole ones: a
//!   budget entitled to 33.4 GPUs may preempt up to 33 running, and its jobs beyond 33 are
//!   beyond. Work no budget covers never preempts: it runs on idle GPUs.
//! - **Victims**: preemptible jobs, unbudgeted work first, then the budgets furthest beyond
//!   their entitlements (running GPUs minus entitlement), each budget's newest first, each
//!   taken only while every project above its budget whose running GPUs fall is still
//!   beyond its own entitlement (counting the waiting job in): a sub-project beyond its
//!   entitlement gives way to a sibling within the same parent, but to another project only
//!   while the parent is beyond the parent's. Taken until the job fits, then made minimal
//!   (no victim can be spared).
//! - **Reservation**: the first job that cannot start, and that asks for no more GPUs than
//!   its budget's entitlement (and every project's above it), holds the reservation that
//!   later jobs may not delay (EASY backfill). A job larger than its entitlement holds
//!   none: it could only ever run beyond its budget, on GPUs idle when it asks.
//!
//! What follows: budgets cannot take turns preempting each other. While demand is
//! unchanged the entitlements are fixed. Count the GPUs of the jobs within their budgets
//! (not beyond): a start never lowers it (a job's older jobs do not change), nor does a
//! stopped job beyond (newer jobs can only come within), and each preemption raises it by
//! the starting job's GPUs (its budget covers it whole). The count is bounded by the
//! cluster's GPUs, so at most that many GPUs start by preemption before demand changes, and
//! demand changes only when a job enters its queue or ends. `simulate/tests/simulate.rs`
//! checks each clause on generated traces.

use super::cluster::ClusterState;
use super::engine::{Engine, Rules, Start};
use super::jobs::{JobId, SimJob, Slots};
use super::passes::{self, Passes};

/// Running GPUs and entitlements closer than this are equal: entitlements come out of
/// floating-point water-filling, running GPUs are whole numbers.
const EPSILON: f64 = 1e-6;

pub(super) struct Budget;

impl Rules for Budget {
    /// A run is protected for its contract's minimum runtime (to its end when that is
    /// longer than its work).
    fn at_start(&self, _: &ClusterState, _: &SimJob, min_runtime: i64) -> Start {
        Start { floor: None, preemptible: min_runtime == 0, protected_for: min_runtime }
    }

    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        passes::schedule(self, engine, cluster, now);
    }
}

impl Passes for Budget {
    fn entitled(&self, cluster: &mut ClusterState, into: &mut Vec<f64>) {
        into.extend_from_slice(cluster.division.entitlement().allocations());
    }

    /// A budget with jobs waiting, not yet tried, that one more GPU keeps within its
    /// entitlement.
    fn may_preempt(&self, cluster: &ClusterState, tried: &[bool], _: u8, entitled: &[f64]) -> bool {
        let unbudgeted = cluster.budgets.unbudgeted.0;
        cluster.leaves.iter().any(|&l| {
            !tried[l]
                && l != unbudgeted
                && !cluster.by_size[l].is_empty()
                && cluster.running[l] + 1.0 <= entitled[l] + EPSILON
        })
    }

    /// Only a budget's job that its entitlement covers whole: with it, the budget runs no
    /// more than its entitlement. (The projects above may come within it by the victims.)
    fn may_try(&self, cluster: &ClusterState, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
        leaf != cluster.budgets.unbudgeted.0
            && cluster.running[leaf] + f64::from(gpus) <= entitled[leaf] + EPSILON
    }

    fn victims(
        &self,
        engine: &Engine,
        cluster: &ClusterState,
        id: JobId,
        entitled: &[f64],
    ) -> Option<Vec<JobId>> {
        let job = &engine.jobs[id];
        let (leaf, gpus) = (job.leaf as usize, job.gpus);
        if !self.may_try(cluster, leaf, gpus, entitled) {
            return None;
        }
        let exchange = Exchange { cluster, jobs: &engine.jobs, entitled, leaf, gpus };
        let mut room = cluster.pool.room_for(gpus);
        let mut victims = Vec::new();
        let mut fits = false;
        for victim in candidates(engine, cluster, entitled, leaf) {
            victims.push(victim);
            if !exchange.projects_allow(&victims) {
                victims.pop();
                continue;
            }
            if room.give_back(&engine.jobs[victim].placement) {
                fits = true;
                break;
            }
        }
        if !fits {
            return None;
        }
        let allowed = |set: &[JobId]| exchange.projects_allow(set) && exchange.stays_within(set);
        let victims = engine.spare(&cluster.pool, gpus, victims, allowed);
        allowed(&victims).then_some(victims)
    }

    /// Only a job no larger than its budget's entitlement, and every project's above it: a
    /// larger one could only ever run beyond its budget.
    fn may_reserve(&self, cluster: &ClusterState, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
        cluster.path(leaf).all(|n| f64::from(gpus) <= entitled[n] + EPSILON)
    }
}

/// The preemptible running jobs in the order victims are taken: unbudgeted work's, newest
/// first; then those beyond their budgets, the budget furthest beyond its entitlement
/// first, each budget's newest first. `leaf`'s own are none of them (it is within its
/// entitlement).
fn candidates<'a>(
    engine: &'a Engine,
    cluster: &'a ClusterState,
    entitled: &'a [f64],
    leaf: usize,
) -> impl Iterator<Item = JobId> + 'a {
    let unbudgeted = cluster.budgets.unbudgeted.0;
    let mut over: Vec<(f64, usize)> = cluster
        .leaves
        .iter()
        .filter(|&&l| l != leaf && l != unbudgeted && !cluster.preemptible[l].is_empty())
        .map(|&l| (cluster.running[l] - entitled[l], l))
        .filter(|&(excess, _)| excess > EPSILON)
        .collect();
    over.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let budgets = over
        .into_iter()
        .flat_map(move |(_, l)| beyond(engine, cluster, entitled, l).filter(|&j| engine.jobs[j].preemptible));
    cluster.preemptible[unbudgeted].iter().rev().map(|&(_, j)| j).chain(budgets)
}

/// A budget's running jobs beyond its entitlement, newest first: those that, with the jobs
/// that started before them (by start, then trace order), exceed it.
fn beyond<'a>(
    engine: &'a Engine,
    cluster: &'a ClusterState,
    entitled: &'a [f64],
    leaf: usize,
) -> impl Iterator<Item = JobId> + 'a {
    // The GPUs of the jobs started after the one looked at.
    let mut newer = 0.0;
    cluster.started[leaf].iter().rev().map_while(move |&(_, id)| {
        let with_older = cluster.running[leaf] - newer;
        newer += f64::from(engine.jobs[id].gpus);
        (with_older > entitled[leaf] + EPSILON).then_some(id)
    })
}

/// A waiting job of `gpus` for `leaf` started in place of some running jobs, as the rule
/// judges it.
struct Exchange<'a> {
    cluster: &'a ClusterState<'a>,
    jobs: &'a Slots,
    entitled: &'a [f64],
    leaf: usize,
    gpus: u32,
}

impl Exchange<'_> {
    /// Whether `victims`, taken in this order, each leave every project above its budget
    /// whose running GPUs fall beyond its entitlement until the victim is taken (counting
    /// the waiting job in): a project falls below its entitlement only by its last job
    /// beyond it, as a budget does.
    fn projects_allow(&self, victims: &[JobId]) -> bool {
        let cluster = self.cluster;
        // How far each project has fallen so far (negative: risen).
        let mut fallen: Vec<(usize, f64)> =
            cluster.path(self.leaf).skip(1).map(|n| (n, -f64::from(self.gpus))).collect();
        for &victim in victims {
            let job = &self.jobs[victim];
            for node in cluster.path(job.leaf as usize).skip(1) {
                let i = match fallen.iter().position(|&(n, _)| n == node) {
                    Some(i) => i,
                    None => {
                        fallen.push((node, 0.0));
                        fallen.len() - 1
                    }
                };
                let before = fallen[i].1;
                let after = before + f64::from(job.gpus);
                if after > EPSILON && cluster.running[node] - before <= self.entitled[node] + EPSILON {
                    return false;
                }
                fallen[i].1 = after;
            }
        }
        true
    }

    /// Whether the waiting job's budget and every project above it run no more than their
    /// entitlements after the exchange.
    fn stays_within(&self, victims: &[JobId]) -> bool {
        let cluster = self.cluster;
        cluster.path(self.leaf).all(|node| {
            let freed: u32 = victims
                .iter()
                .map(|&v| &self.jobs[v])
                .filter(|job| cluster.path(job.leaf as usize).any(|n| n == node))
                .map(|job| job.gpus)
                .sum();
            cluster.running[node] + f64::from(self.gpus) - f64::from(freed) <= self.entitled[node] + EPSILON
        })
    }
}
