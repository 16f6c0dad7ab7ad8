//! The `budget` policy: the budget rule itself, the reference every target is measured
//! against. docs/verifier.md states it for users ("The budget rule"); this is the rule as the
//! simulator applies it.
//!
//! - **Entitlement**: each budget's share of the cluster now, by hierarchical water-filling
//!   of the budgets' demand (running and waiting GPUs); what the top-level shares leave goes
//!   to unbudgeted work ([`entitlement`](allot_verify::entitlement)). Every node of the tree has
//!   one: a project's is its sub-projects' (and own jobs') together.
//! - **Covered**: a node's running GPUs in jobs no larger than its entitlement. A larger job
//!   could only ever run beyond it (it may not start by preemption, below), so it covers
//!   nothing: the squatting budgets are meant to end.
//! - **The amount kept**: a node's covered GPUs up to the whole GPUs of its entitlement
//!   (`floor`: a budget entitled to 3.33 keeps 3) are never taken. Any of its other jobs may
//!   go once past its contract's minimum runtime, in any order: an amount, not a set of
//!   jobs. A job that straddles the line (no larger than the entitlement, and the budget
//!   below it without the job) stays: taking it would only move a shortfall from one budget
//!   to another.
//! - **Who may preempt**: a waiting job of a budget, when it does not fit, and only if, with
//!   it started and its victims stopped, its budget and every project above it run no more
//!   than their entitlements. Work no budget covers never preempts: it runs on idle GPUs.
//! - **Victims**: unbudgeted work first, then the budgets furthest beyond their
//!   entitlements (running GPUs minus entitlement); within that order, the room made with
//!   the fewest GPUs taken: on one node for a job that fits a node, whole nodes (the
//!   cheapest to empty first) for a larger one; the newest jobs on ties. Every node of the
//!   tree whose covered GPUs fall keeps its amount (on the waiting job's own path, counting
//!   it in). Then made minimal (no victim can be spared).
//! - **Reservation**: the first job that cannot start, and that asks for no more GPUs than
//!   its budget's entitlement (and every project's above it), holds the reservation that
//!   later jobs may not delay (EASY backfill). A job larger than its entitlement holds
//!   none: it could only ever run beyond its budget, on GPUs idle when it asks.
//! - **Idle GPUs**: a pass walks the queue twice, first the jobs of contracts with a reserve
//!   and of budgets below their entitlements, then the others.
//! - **Reserves**: a contract's jobs within its reserve are never preempted; a job that
//!   starts leaving fewer GPUs free than the other reserves still hold runs on loan, and a
//!   job within its contract's reserve takes loans back at once, whatever its budget's
//!   standing ([`Holding`]).
//!
//! What follows: budgets cannot take turns preempting each other. While demand is
//! unchanged the entitlements are fixed. The potential is the budgets' summed *shortfall*:
//! for each leaf budget, the whole GPUs of its entitlement its covered GPUs fall short of.
//! A start on idle GPUs never raises it, nor does a protection ending; a preemption lowers
//! it by the starting job's GPUs (its budget was short by at least that many, and every
//! victim's budget keeps its amount, or loses only jobs that cover nothing). It is at most
//! the cluster's GPUs, so at most that many GPUs start by preemption before demand changes,
//! and demand changes only when a job enters its queue or ends. A loan taken back may leave
//! a budget short, but the GPUs reserves hold rise at each and never fall while demand holds:
//! with reserves, at most the cluster's GPUs and twice the reserves start by preemption.
//! `simulate/tests/simulate.rs` checks each clause, the potential included, on generated
//! traces.

use std::cell::RefCell;

use allot_verify::trace::Job;

use super::cluster::ClusterState;
use super::engine::{Admission, Engine, Rules, Start};
use super::jobs::{Holding, JobId, SimJob, Slots, Terms};
use super::passes::{self, Passes};
use super::victims::{ByLeaf, Search};

/// Running GPUs and entitlements closer than this are equal: entitlements come out of
/// floating-point water-filling, running GPUs are whole numbers.
const EPSILON: f64 = 1e-6;

pub(super) struct Budget;

impl Rules for Budget {
    /// Jobs of a contract with a reserve go first in the queue (tier 0), before every other
    /// job (tier 1).
    fn admit(&self, _: &Job, terms: Option<&Terms>) -> Admission {
        Admission { tier: u32::from(terms.is_none_or(|t| t.reserve == 0)), ..Admission::of(terms) }
    }

    /// A run is protected for its contract's minimum runtime (to its end when that is
    /// longer than its work). One within its contract's reserve is never preempted; one
    /// that leaves fewer GPUs free than the other reserves still hold runs on loan.
    fn at_start(&self, cluster: &ClusterState, job: &SimJob, min_runtime: i64) -> Start {
        let reserve = job.terms.map(|t| cluster.reserves[usize::from(t)]);
        if reserve.is_some_and(|r| r.holds(job.gpus)) {
            return Start { floor: None, preemptible: false, protected_for: 0, holding: Holding::Reserve };
        }
        // The pool has placed the job already: what it leaves free.
        let on_loan = cluster.pool.free_gpus < cluster.reserved_free(job.terms);
        Start {
            floor: None,
            preemptible: min_runtime == 0,
            protected_for: min_runtime,
            holding: if on_loan { Holding::Loan } else { Holding::Own },
        }
    }

    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        passes::schedule(self, engine, cluster, now);
    }
}

impl Passes for Budget {
    fn entitled(&self, cluster: &mut ClusterState, into: &mut Vec<f64>) {
        into.extend_from_slice(cluster.division.entitlement().allocations());
    }

    /// Two phases: first the jobs of contracts with a reserve (tier 0) and those of budgets
    /// below their entitlements (by a GPU at least), then the others. Idle GPUs go to the
    /// budgets short of their entitlements first; work beyond takes what is left, and does
    /// not start on GPUs that a job of a budget short of its entitlement, behind it in the
    /// queue, would take back in the same instant.
    fn phases(&self) -> u8 {
        2
    }

    fn in_phase(
        &self,
        cluster: &ClusterState,
        phase: u8,
        tier: u32,
        leaf: usize,
        _: u32,
        entitled: &[f64],
    ) -> bool {
        (tier == 0 || covers(cluster, leaf, 1, entitled)) == (phase == 0)
    }

    /// A budget with jobs waiting, not yet tried, that one more GPU keeps within its
    /// entitlement (in the first phase: the others hold no such budget's jobs); or a loan a
    /// reserve with room could take back.
    fn may_preempt(&self, cluster: &ClusterState, tried: &[bool], phase: u8, entitled: &[f64]) -> bool {
        (cluster.on_loan > 0 && cluster.reserve_room())
            || phase == 0
                && cluster
                    .leaves
                    .iter()
                    .any(|&l| !tried[l] && !cluster.by_size[l].is_empty() && covers(cluster, l, 1, entitled))
    }

    /// A job of a contract with a reserve (tier 0) may try to take a loan back. Otherwise
    /// only a budget's job that its entitlement covers whole: with it, the budget runs no
    /// more than its entitlement. (The projects above may come within it by the victims.)
    fn may_try(&self, cluster: &ClusterState, tier: u32, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
        (tier == 0 && cluster.on_loan > 0) || covers(cluster, leaf, gpus, entitled)
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
        // A job within its contract's reserve takes loans back, whatever its budget's standing.
        let short = cluster.short_of(gpus);
        if job.terms.is_some_and(|t| cluster.reserves[usize::from(t)].holds(gpus)) && cluster.on_loan >= short
        {
            let loans = Search {
                cluster,
                jobs: &engine.jobs,
                gpus,
                class: |job: &SimJob| (job.holding == Holding::Loan).then_some(0),
                allows: |_: &[JobId]| true,
                by_leaf: None,
            };
            if let Some(victims) = loans.run() {
                return Some(engine.spare(&cluster.pool, gpus, victims, |_| true));
            }
        }
        if !covers(cluster, leaf, gpus, entitled) {
            return None;
        }
        let classes = classes(cluster, entitled, leaf, short)?;
        let exchange = Exchange::new(cluster, &engine.jobs, entitled, leaf, gpus);
        let search = Search {
            cluster,
            jobs: &engine.jobs,
            gpus,
            // Past its protection, and not within its contract's reserve.
            class: |job: &SimJob| classes.class[job.leaf as usize].filter(|_| job.preemptible),
            allows: |set: &[JobId]| exchange.allows(set),
            by_leaf: Some(&classes),
        };
        let allowed = |set: &[JobId]| exchange.allows(set) && exchange.stays_within(set);
        let victims = engine.spare(&cluster.pool, gpus, search.run()?, allowed);
        allowed(&victims).then_some(victims)
    }

    /// Only a job no larger than its budget's entitlement, and every project's above it: a
    /// larger one could only ever run beyond its budget.
    fn may_reserve(&self, cluster: &ClusterState, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
        cluster.path(leaf).all(|n| f64::from(gpus) <= entitled[n] + EPSILON)
    }
}

/// Whether `leaf` is a budget whose entitlement covers `gpus` more running GPUs.
fn covers(cluster: &ClusterState, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
    leaf != cluster.budgets.unbudgeted.0
        && cluster.running[leaf] + f64::from(gpus) <= entitled[leaf] + EPSILON
}

/// The whole GPUs an entitlement covers: a budget entitled to 3.33 keeps 3 running.
fn whole(entitlement: f64) -> f64 {
    (entitlement + EPSILON).floor()
}

/// The order in which each leaf's running jobs are taken as victims (lower first), `None`
/// for a leaf whose jobs are not taken, and the most GPUs each may give: unbudgeted work's first (0), then the budgets
/// beyond their entitlements, furthest beyond first (running GPUs minus entitlement; ties
/// by their order in the tree). `leaf`'s own are none of them (it is within its
/// entitlement). `None` when the leaves cannot give `short` GPUs, the least that must be
/// freed (a quick bound: each budget gives at most its preemptible
/// GPUs, and at most its running GPUs above its entitlement's whole ones unless one of its
/// preemptible jobs may be larger than its entitlement; unbudgeted work without limit).
fn classes(cluster: &ClusterState, entitled: &[f64], leaf: usize, short: u64) -> Option<ByLeaf> {
    let unbudgeted = cluster.budgets.unbudgeted.0;
    let mut over: Vec<(f64, usize)> = cluster
        .leaves
        .iter()
        .filter(|&&l| l != leaf && l != unbudgeted && cluster.preemptible_gpus[l] > 0)
        .map(|&l| (cluster.running[l] - entitled[l], l))
        .filter(|&(excess, _)| excess > EPSILON)
        .collect();
    let unbudgeted_gives = cluster.preemptible_gpus[unbudgeted] > 0;
    let may_give = |l: usize| {
        let preemptible = cluster.preemptible_gpus[l] as f64;
        if preemptible > entitled[l] + EPSILON {
            preemptible
        } else {
            preemptible.min(cluster.running[l] - whole(entitled[l]))
        }
    };
    let most =
        over.iter().map(|&(_, l)| may_give(l)).sum::<f64>() + cluster.preemptible_gpus[unbudgeted] as f64;
    if most + EPSILON < short as f64 || (over.is_empty() && !unbudgeted_gives) {
        return None;
    }
    over.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut by_leaf =
        ByLeaf { class: vec![None; cluster.running.len()], gives: vec![0; cluster.running.len()] };
    if unbudgeted_gives {
        by_leaf.class[unbudgeted] = Some(0);
        by_leaf.gives[unbudgeted] = u32::MAX;
    }
    for (place, (_, l)) in over.into_iter().enumerate() {
        by_leaf.class[l] = Some(place as u32 + 1);
        // Whole GPUs (a budget's running GPUs and its whole entitlement are whole).
        by_leaf.gives[l] = (may_give(l) + EPSILON).floor().min(f64::from(u32::MAX)) as u32;
    }
    Some(by_leaf)
}
/// A waiting job of `gpus` for `leaf` started in place of some running jobs, as the rule
/// judges it.
struct Exchange<'a> {
    cluster: &'a ClusterState<'a>,
    jobs: &'a Slots,
    entitled: &'a [f64],
    leaf: usize,
    gpus: u32,
    /// Each node's covered GPUs as far as read (see [`Exchange::covered`]).
    covered: RefCell<Vec<(usize, f64)>>,
    /// [`Exchange::allows_all`]'s buffer, kept from call to call.
    freed: RefCell<Vec<(usize, f64)>>,
}

impl<'a> Exchange<'a> {
    fn new(
        cluster: &'a ClusterState<'a>,
        jobs: &'a Slots,
        entitled: &'a [f64],
        leaf: usize,
        gpus: u32,
    ) -> Self {
        Exchange {
            cluster,
            jobs,
            entitled,
            leaf,
            gpus,
            covered: RefCell::new(Vec::new()),
            freed: RefCell::new(Vec::new()),
        }
    }

    /// A tree node's *covered* GPUs: those of its subtree's running jobs that are no
    /// larger than its entitlement (a larger job could only ever run beyond it).
    fn covered(&self, node: usize) -> f64 {
        if let Some(&(_, covered)) = self.covered.borrow().iter().find(|&&(n, _)| n == node) {
            return covered;
        }
        let cluster = self.cluster;
        let limit = self.entitled[node] + EPSILON;
        let oversized: u32 = cluster
            .leaves
            .iter()
            .filter(|&&l| cluster.path(l).any(|n| n == node))
            .flat_map(|&l| &cluster.started[l])
            .map(|&(_, j)| self.jobs[j].gpus)
            .filter(|&g| f64::from(g) > limit)
            .sum();
        let covered = cluster.running[node] - f64::from(oversized);
        self.covered.borrow_mut().push((node, covered));
        covered
    }

    /// Whether the rule lets `victims` go together: every tree node whose covered GPUs
    /// fall in the exchange (the waiting job counted in on its own path) keeps them at or
    /// above its entitlement. A victim larger than a node's entitlement takes nothing
    /// covered from it; unbudgeted work gives without limit.
    fn allows(&self, victims: &[JobId]) -> bool {
        self.allows_all(victims.iter().copied())
    }

    /// [`Exchange::allows`] of victims as they come.
    fn allows_all(&self, victims: impl Iterator<Item = JobId>) -> bool {
        let cluster = self.cluster;
        let unbudgeted = cluster.budgets.unbudgeted.0;
        // Per node touched: the covered GPUs freed (in jobs no larger than its entitlement).
        let mut freed = self.freed.borrow_mut();
        freed.clear();
        for victim in victims {
            let job = &self.jobs[victim];
            let gpus = f64::from(job.gpus);
            for node in cluster.path(job.leaf as usize).filter(|&n| n != unbudgeted) {
                if gpus > self.entitled[node] + EPSILON {
                    continue;
                }
                match freed.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, covered)) => *covered += gpus,
                    None => freed.push((node, gpus)),
                }
            }
        }
        freed.iter().all(|&(node, covered)| {
            let gain = if cluster.path(self.leaf).any(|n| n == node) { f64::from(self.gpus) } else { 0.0 };
            covered <= gain + EPSILON || self.covered(node) + gain - covered >= whole(self.entitled[node])
        })
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
