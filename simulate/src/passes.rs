//! Scheduling in passes, as the budget and priority policies schedule: at an instant whose
//! events changed a cluster, pass after pass over the waiting jobs until no further pass
//! could change anything, so GPUs a preemption freed never sit idle while a job that may
//! use them waits. A policy that schedules so implements [`Passes`]: the order of its
//! phases, who may preempt whom, who holds the reservation.
//!
//! In a pass each job starts if it fits (within its budgets' `max-gpus`, and, once a job
//! holds the reservation, without delaying it), else, for the first such job of each
//! budget, by a preemption if the policy allows one. The first job that cannot start, that
//! no allowed preemption starts and that the policy lets reserve holds the reservation
//! (EASY backfill, as Slurm's backfill scheduler): the earliest time it fits given the
//! running jobs' expected ends, on the nodes it would take then. Every later job starts now
//! only if it fits without delaying that reservation: it ends, by its time limit, before
//! the reservation, or it leaves the reserved GPUs free.

use super::cluster::{ClusterState, Reservation};
use super::engine::{Engine, Rules};
use super::jobs::JobId;
use super::queue::{Cursor, Head};

/// What a policy that schedules in passes decides.
pub(super) trait Passes: Rules + Sized {
    /// Each tree node's entitlement now, as the passes of an instant read it (none when the
    /// policy reads none). Demand (each budget's running and waiting GPUs) stays as it is
    /// through starts and preemptions, and so do the entitlements.
    fn entitled(&self, cluster: &mut ClusterState, into: &mut Vec<f64>) {
        let _ = (cluster, into);
    }

    /// How many phases a pass walks the queue in, each over the jobs [`Passes::in_phase`]
    /// lets in.
    fn phases(&self) -> u8 {
        1
    }

    /// Whether a job of `tier` and `gpus` for `leaf` belongs to `phase`. What is out of its phase stays out
    /// as the pass goes on (jobs start, none ends).
    fn in_phase(
        &self,
        cluster: &ClusterState,
        phase: u8,
        tier: u32,
        leaf: usize,
        gpus: u32,
        entitled: &[f64],
    ) -> bool {
        let _ = (cluster, phase, tier, leaf, gpus, entitled);
        true
    }

    /// Whether a job not yet looked at could still start by a preemption in this pass, when
    /// nothing is free: `tried` says which budgets have had their try.
    fn may_preempt(&self, cluster: &ClusterState, tried: &[bool], phase: u8, entitled: &[f64]) -> bool;

    /// Whether a job of `tier` and `gpus` for `leaf` that does not fit may try a preemption: a budget's
    /// one try in a pass is not spent on a job the policy would never let preempt. What may
    /// not stays so as the pass goes on.
    fn may_try(&self, cluster: &ClusterState, tier: u32, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
        let _ = (cluster, tier, leaf, gpus, entitled);
        true
    }

    /// The running jobs to preempt so that `id` starts, as the policy allows, each needed;
    /// `None`: no preemption may start it.
    fn victims(
        &self,
        engine: &Engine,
        cluster: &ClusterState,
        id: JobId,
        entitled: &[f64],
    ) -> Option<Vec<JobId>>;

    /// Whether a job of `gpus` for `leaf` that cannot start may hold the reservation. What
    /// may not stays so as the pass goes on.
    fn may_reserve(&self, cluster: &ClusterState, leaf: usize, gpus: u32, entitled: &[f64]) -> bool {
        let _ = (cluster, leaf, gpus, entitled);
        true
    }
}

/// Schedules a cluster at `now`, pass after pass until no further pass could change
/// anything.
pub(super) fn schedule<P: Passes>(rules: &P, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
    let mut entitled = std::mem::take(&mut cluster.entitled);
    entitled.clear();
    rules.entitled(cluster, &mut entitled);
    while pass(rules, engine, cluster, &entitled, now) {}
    cluster.entitled = entitled;
}

/// One pass over the waiting jobs in the policy's order. Whether a next pass could change
/// more: a preemption was made, or a job started after one was held back. (When every start
/// came before the first job held back, a next pass would find the jobs held back as this
/// one left them.)
fn pass<P: Passes>(
    rules: &P,
    engine: &mut Engine,
    cluster: &mut ClusterState,
    entitled: &[f64],
    now: i64,
) -> bool {
    cluster.rank(now);
    // The walk's buffers, kept from pass to pass.
    let (mut tried, mut heads) = std::mem::take(&mut engine.buffers);
    tried.clear();
    tried.resize(cluster.by_size.len(), false);
    let mut holder: Option<JobId> = None;
    let mut reservation: Option<Reservation> = None;
    // A job was held back: it did not start, and its phase and limits were not why.
    let mut held = false;
    let mut again = false;
    'phases: for phase in 0..rules.phases() {
        let mut cursor = Cursor::new(&mut heads);
        while let Some(head) = cursor.next(cluster) {
            if cluster.pool.free_gpus == 0 && !rules.may_preempt(cluster, &tried, phase, entitled) {
                break;
            }
            // The job itself is read only if it may start: most heads are dropped.
            let Head(tier, _, _, id, leaf, gpus, _) = head;
            // Dropping a group (not following it) skips the rest of its jobs, all of the
            // same budget and size, for this pass; each condition only grows stricter as
            // the pass goes on (jobs start, none ends), so none of them could start:
            // - the phase is not theirs;
            // - they would take a budget beyond its `max-gpus` (running GPUs only grow);
            // - they fit nowhere now (free GPUs only shrink), their budget has had its try
            //   at a preemption or they may not try, and a job already holds the
            //   reservation or they may not hold it.
            if !rules.in_phase(cluster, phase, tier, leaf, gpus, entitled)
                || !cluster.within_limits(leaf, gpus)
            {
                continue;
            }
            let fits = cluster.pool.fits(gpus);
            if !fits
                && (tried[leaf] || !rules.may_try(cluster, tier, leaf, gpus, entitled))
                && (holder.is_some() || !rules.may_reserve(cluster, leaf, gpus, entitled))
            {
                continue;
            }
            cursor.follow(cluster, head);
            if fits {
                let limit = engine.jobs[id].limit();
                let placement = match holder {
                    None => cluster.pool.place(gpus),
                    Some(holder) => {
                        let reserved =
                            reservation.get_or_insert_with(|| cluster.reserve(&engine.jobs, holder));
                        if now.saturating_add(limit) <= reserved.at {
                            cluster.pool.place(gpus)
                        } else {
                            cluster.pool.place_within(gpus, &mut reserved.spare)
                        }
                    }
                };
                if let Some(placement) = placement {
                    engine.start(rules, cluster, id, placement, now);
                    again |= held;
                    continue;
                }
            }
            held = true;
            if !tried[leaf] && (fits || rules.may_try(cluster, tier, leaf, gpus, entitled)) {
                tried[leaf] = true;
                if !fits && let Some(victims) = rules.victims(engine, cluster, id, entitled) {
                    engine.preempt(rules, cluster, id, victims, now);
                    // The running jobs changed: a new pass, with a new reservation.
                    again = true;
                    break 'phases;
                }
            }
            if holder.is_none() && rules.may_reserve(cluster, leaf, gpus, entitled) {
                holder = Some(id);
            }
        }
    }
    engine.buffers = (tried, heads);
    again
}
