//! The `priority` policy: the old way, the baseline the budgets are compared with. A job
//! starts high priority, not preemptible, while its team's high-priority GPUs stay within
//! its guaranteed GPUs; beyond that it runs low, and a waiting high-priority job preempts
//! low ones at once (a minimal set, newest first). Jobs that would run high are served
//! first, then the others, each by the time they entered the queue. No run is protected by
//! its contract's minimum runtime.

use super::cluster::ClusterState;
use super::cluster::Ranking;
use super::engine::{Engine, Rules, Start};
use super::jobs::{Holding, JobId, SimJob};
use super::passes::{self, Passes};

pub(super) struct Priority;

impl Rules for Priority {
    fn ranking(&self) -> Ranking {
        Ranking::Flat
    }

    fn at_start(&self, cluster: &ClusterState, job: &SimJob, _: i64) -> Start {
        Start {
            floor: cluster.floor_room(job.leaf as usize, job.gpus).then_some(job.leaf),
            preemptible: true,
            protected_for: 0,
            holding: Holding::Own,
        }
    }

    fn schedule(&mut self, engine: &mut Engine, cluster: &mut ClusterState, now: i64) {
        passes::schedule(self, engine, cluster, now);
    }
}

/// The phase of the jobs that would run high.
const HIGH: u8 = 0;

impl Passes for Priority {
    fn phases(&self) -> u8 {
        2
    }

    fn in_phase(&self, cluster: &ClusterState, phase: u8, _: u32, leaf: usize, gpus: u32, _: &[f64]) -> bool {
        cluster.floor_room(leaf, gpus) == (phase == HIGH)
    }

    fn may_preempt(&self, cluster: &ClusterState, tried: &[bool], phase: u8, _: &[f64]) -> bool {
        phase == HIGH && cluster.leaves.iter().any(|&l| !tried[l] && !cluster.by_size[l].is_empty())
    }

    /// Low-priority running jobs, newest first, when the job would run at high priority.
    fn victims(&self, engine: &Engine, cluster: &ClusterState, id: JobId, _: &[f64]) -> Option<Vec<JobId>> {
        let job = &engine.jobs[id];
        if !cluster.floor_room(job.leaf as usize, job.gpus) {
            return None;
        }
        let mut low: Vec<(i64, JobId)> = cluster
            .leaves
            .iter()
            .flat_map(|&l| cluster.preemptible[l].iter().copied())
            .filter(|&(_, j)| engine.jobs[j].floor.is_none())
            .collect();
        low.sort_unstable_by(|a, b| b.cmp(a));
        let victims = engine.enough(&cluster.pool, job.gpus, low.into_iter().map(|(_, j)| j))?;
        Some(engine.spare(&cluster.pool, job.gpus, victims, |_| true))
    }
}
