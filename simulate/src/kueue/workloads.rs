//! The workloads a trace makes in Kueue: each job the `kueue` policy replays, with the
//! ClusterQueue and priority the policy gives it and the work it does, for a replay of the
//! same jobs through Kueue's own scheduler (the Kueue oracle, `tests/kueue-oracle`, which
//! docs/verifier.md describes). The jobs, their queues and priorities are the policy's own,
//! found by the same code ([`Rules::queue`](super::Rules)); only the schedule is left to the
//! replay.

use std::sync::Arc;

use allot_compiler::ir::Model;
use allot_verify::audit::AuditError;
use allot_verify::budgets::{Assignment, Budgets};
use allot_verify::trace::{Job, TraceError};

use super::{Kueue, Rules, priority};
use crate::cluster::ClusterState;
use crate::decay::{Decay, Usage};
use crate::engine::{Admission, Queued, Rules as _};
use crate::jobs::Terms;

/// A job as Kueue would be handed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub id: String,
    pub project: String,
    pub user: String,
    pub cluster: String,
    /// Its contract's name, empty for none.
    pub contract: String,
    pub gpus: u32,
    /// When it enters its queue: its eligibility, else its submission.
    pub submit: i64,
    /// Seconds of work, cut at its contract's maximum runtime.
    pub work: i64,
    /// Whether a preempted run's work is kept (its contract's `resumable`), else the job
    /// starts over.
    pub resumable: bool,
    pub cluster_queue: String,
    pub priority: i32,
}

/// Jobs of the trace that give no workload, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Left {
    /// No runtime in the trace.
    pub not_replayed: usize,
    /// Never placeable under the policy (see [`Simulation::unplaceable`](crate::Simulation)).
    pub unplaceable: usize,
}

/// Hands `on_workload` the workload of each job of `jobs` (in submit order) that the `kueue`
/// policy would replay, in that order. The budgets and objects are those before the
/// model's first grant boundary. The errors are the simulation's: a job no cluster takes,
/// jobs out of order.
pub fn workloads(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    kueue: Arc<Kueue>,
    on_workload: &mut dyn FnMut(&Workload),
) -> Result<Left, AuditError> {
    let (budgets, _) = Budgets::over_time(model)?;
    let mut rules = Rules::new(kueue.clone());
    let contracts = Terms::of(model);
    let decay = Decay::new(1.0, 1);
    let clusters: Vec<ClusterState> = budgets
        .clusters
        .iter()
        .zip(&model.clusters)
        .map(|(b, c)| {
            let usage = Usage::new(b.hierarchy.len(), decay);
            let reserves = contracts.iter().map(|t| t.reserve);
            ClusterState::new(b, c.gpus_per_node, usage, rules.ranking(), rules.by_lane(), reserves)
        })
        .collect();
    let mut left = Left::default();
    let mut last = None;
    for job in jobs {
        let job = job.map_err(AuditError::Trace)?;
        if let Some(previous) = last
            && job.submit < previous
        {
            return Err(AuditError::NotSorted { id: job.id.into(), submit: job.submit, previous });
        }
        last = Some(job.submit);
        let recorded = job.start.zip(job.end).map(|(start, end)| end - start);
        let Some(work) = job.duration.or(recorded) else {
            left.not_replayed += 1;
            continue;
        };
        let Assignment { cluster, node: leaf } =
            budgets.assign(&job).map_err(|error| AuditError::Job { id: job.id.to_string(), error })?;
        let state = &clusters[cluster];
        if u64::from(job.gpus) > state.most_gpus(leaf.0) {
            left.unplaceable += 1;
            continue;
        }
        let contract = budgets.contract(&job);
        let terms = contracts.iter().find(|t| *t.name == *contract);
        let Admission { max_runtime, .. } = rules.admit(&job, terms);
        let Some(Queued { tier, lane }) = rules.queue(state, leaf.0, &job, contract, 0) else {
            left.unplaceable += 1;
            continue;
        };
        let queues = &kueue.clusters[&*state.name];
        on_workload(&Workload {
            id: job.id.to_string(),
            project: state.paths[leaf.0].to_string(),
            user: job.user.to_string(),
            cluster: state.name.to_string(),
            contract: contract.to_string(),
            gpus: job.gpus,
            submit: job.eligible.map_or(job.submit, |e| e.max(job.submit)),
            work: work.min(max_runtime),
            resumable: terms.is_some_and(|t| t.resumable),
            cluster_queue: queues.setup.nodes[lane as usize].name.clone(),
            priority: priority(tier),
        });
    }
    Ok(left)
}
