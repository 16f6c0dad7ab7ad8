//! The budgets now: a live queue (the jobs a scheduler runs and holds pending at one moment,
//! as [`Job`]s: a running job has a start and no end, a pending one no start) measured
//! against the budgets. For every budget of every cluster: the GPUs running and pending,
//! what it is entitled to now (the cluster's GPUs divided among the budgets with demand, as
//! the audit divides them), whether it runs under, within or over that, and until when its
//! running jobs are protected by their contracts' minimum runtimes.

use allot_compiler::ir::Model;

use crate::budgets::{Budgets, JobError};
use crate::entitlement::{EntitlementError, NodeId};
use crate::trace::Job;

/// Where a budget stands against its entitlement now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// No job running or pending.
    Idle,
    /// Running fewer GPUs than it is entitled to (rounded to a whole GPU): its pending work
    /// is owed GPUs.
    Under,
    Within,
    /// Running more GPUs than it is entitled to: the work beyond is borrowed from budgets
    /// that are owed it.
    Over,
}

impl Standing {
    pub fn word(self) -> &'static str {
        match self {
            Standing::Idle => "idle",
            Standing::Under => "under",
            Standing::Within => "within",
            Standing::Over => "over",
        }
    }
}

/// One budget (a project on a cluster, an inner project's own jobs, or the work no budget
/// covers) now.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetNow {
    pub path: String,
    /// Levels below the cluster (0: a top-level project).
    pub depth: usize,
    /// Its fraction of the cluster: the product of the normalised shares down the tree.
    pub share: f64,
    pub guaranteed_gpus: u64,
    pub running_gpus: u64,
    pub running_jobs: usize,
    pub pending_gpus: u64,
    pub pending_jobs: usize,
    /// GPUs it is entitled to now, given every budget's demand (running and pending).
    pub entitled_gpus: f64,
    pub standing: Standing,
    /// Running GPUs still inside their contract's minimum runtime, and when the last of
    /// those protections ends.
    pub protected_gpus: u64,
    pub protected_until: Option<i64>,
    /// Its usage over the fair-share window against its share, as Slurm ranks it, when the
    /// caller read it.
    pub window: Option<WindowUsage>,
    /// Its quota and borrowing as Kueue holds them, when the caller read them.
    pub queue: Option<QueueNow>,
}

/// A budget's quota and borrowing as Kueue holds them now: its ClusterQueue's, or for an
/// inner budget, its Cohort's (which Kueue gives only a weighted share).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueNow {
    /// GPUs its admitted workloads reserve, and of them, borrowed beyond its quota.
    pub reserved_gpus: Option<u64>,
    pub borrowed_gpus: Option<u64>,
    /// Fair Sharing's weighted share (0: within its quota; higher: borrowing more for its
    /// weight, so preempted first and served last); `None` when Fair Sharing is off.
    pub weighted_share: Option<i64>,
}

/// A budget's usage over the scheduler's fair-share window against its share, as the
/// scheduler ranks it (Slurm: the Fair Tree figures of its account, as `sshare` shows them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowUsage {
    /// Its share among its siblings.
    pub norm_shares: f64,
    /// Its fraction of its siblings' usage.
    pub effective_usage: f64,
    /// Share over usage: above 1 it used less than its share (`None`: no usage at all).
    pub level_fs: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterNow {
    pub name: String,
    pub gpus: u64,
    /// In the budgets' order, parents before children.
    pub budgets: Vec<BudgetNow>,
}

/// The scheduler whose figures rank the budgets: Slurm's Fair Tree ([`WindowUsage`]) or
/// Kueue's queues ([`QueueNow`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ranking {
    #[default]
    FairTree,
    Kueue,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub now: i64,
    /// Whose figures the budgets carry (the caller adds them).
    pub ranking: Ranking,
    pub clusters: Vec<ClusterNow>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Budgets(#[from] EntitlementError),
    #[error("job {id}: {problem}")]
    Job { id: String, problem: JobError },
}

/// The cluster and budget path a job belongs to (see [`status`]).
pub fn budget_of(model: &Model, job: &Job) -> Result<(String, String), LiveError> {
    let budgets = Budgets::new(model)?;
    let at = budgets.assign(job).map_err(|problem| LiveError::Job { id: job.id.to_string(), problem })?;
    let cluster = &budgets.clusters[at.cluster];
    Ok((cluster.name.clone(), cluster.paths[at.node.0].clone()))
}

/// What each budget holds of a queue.
#[derive(Clone, Copy, Default)]
struct Held {
    running_gpus: u64,
    running_jobs: usize,
    pending_gpus: u64,
    pending_jobs: usize,
    protected_gpus: u64,
    protected_until: Option<i64>,
}

/// The budgets against the queue at `now`. Jobs that ended are not in a queue and are
/// passed over; a job whose cluster the budgets do not hold is an error naming it.
pub fn status<'j>(
    model: &Model,
    jobs: impl IntoIterator<Item = &'j Job>,
    now: i64,
) -> Result<Status, LiveError> {
    let budgets = Budgets::new(model)?;
    let mut held: Vec<Vec<Held>> =
        budgets.clusters.iter().map(|c| vec![Held::default(); c.hierarchy.len()]).collect();
    // A job's protection: its contract's minimum runtime (the default contract's when it
    // names none); a QOS that is no contract (`preemptible`, Slurm's `normal`) protects nothing.
    let min_runtime = |job: &Job| {
        let contract = if job.contract.is_empty() { budgets.contract(job) } else { job.contract.as_str() };
        model.contracts.iter().find(|c| c.name == contract).map_or(0, |c| c.min_runtime_seconds)
    };
    for job in jobs.into_iter().filter(|j| j.end.is_none()) {
        let at = budgets.assign(job).map_err(|problem| LiveError::Job { id: job.id.to_string(), problem })?;
        let h = &mut held[at.cluster][at.node.0];
        let gpus = u64::from(job.gpus);
        match job.start {
            Some(start) => {
                h.running_gpus += gpus;
                h.running_jobs += 1;
                let protected = start.saturating_add(i64::try_from(min_runtime(job)).unwrap_or(i64::MAX));
                if protected > now {
                    h.protected_gpus += gpus;
                    h.protected_until = h.protected_until.max(Some(protected));
                }
            }
            None => {
                h.pending_gpus += gpus;
                h.pending_jobs += 1;
            }
        }
    }
    let mut clusters = Vec::new();
    for (cluster, mut held) in budgets.clusters.iter().zip(held) {
        let hierarchy = &cluster.hierarchy;
        let demand: Vec<f64> = (0..hierarchy.len())
            .map(|i| {
                let h = held[i];
                if hierarchy.is_leaf(NodeId(i)) { (h.running_gpus + h.pending_gpus) as f64 } else { 0.0 }
            })
            .collect();
        let entitlement = hierarchy.allocate(cluster.gpus as f64, &demand)?;
        // Parents hold their subtree's jobs: the nodes come parents first, so children are
        // added to them from the last node up.
        let parent = |i: usize| hierarchy.node(NodeId(i)).and_then(|n| n.parent);
        for i in (0..held.len()).rev() {
            if let Some(p) = parent(i) {
                let child = held[i];
                let up = &mut held[p.0];
                up.running_gpus += child.running_gpus;
                up.running_jobs += child.running_jobs;
                up.pending_gpus += child.pending_gpus;
                up.pending_jobs += child.pending_jobs;
                up.protected_gpus += child.protected_gpus;
                up.protected_until = up.protected_until.max(child.protected_until);
            }
        }
        let total_weight = |siblings: &[NodeId]| -> f64 {
            siblings.iter().filter_map(|s| hierarchy.node(*s)).map(|n| n.weight).sum()
        };
        let mut share = vec![1.0; held.len()];
        let mut depth = vec![0; held.len()];
        for i in 0..held.len() {
            let Some(node) = hierarchy.node(NodeId(i)) else { continue };
            let (siblings, above, level) = match node.parent {
                Some(p) => (hierarchy.children(p), share[p.0], depth[p.0] + 1),
                None => (hierarchy.roots(), 1.0, 0),
            };
            let total = total_weight(siblings);
            share[i] = if total > 0.0 { above * node.weight / total } else { 0.0 };
            depth[i] = level;
        }
        let budgets = (0..held.len())
            .filter(|&i| {
                let id = NodeId(i);
                // An inner project's own jobs, and the work no budget covers, only when they
                // have some.
                let listed_always = !cluster.is_own(id) && id != cluster.unbudgeted;
                listed_always || held[i].running_jobs + held[i].pending_jobs > 0
            })
            .map(|i| {
                let h = held[i];
                let entitled = entitlement.allocation(NodeId(i));
                let whole = entitled.round() as u64;
                let standing = if h.running_jobs + h.pending_jobs == 0 {
                    Standing::Idle
                } else if h.running_gpus > whole {
                    Standing::Over
                } else if h.running_gpus < whole {
                    Standing::Under
                } else {
                    Standing::Within
                };
                BudgetNow {
                    path: cluster.paths[i].clone(),
                    depth: depth[i],
                    share: share[i],
                    guaranteed_gpus: cluster.guaranteed[i],
                    running_gpus: h.running_gpus,
                    running_jobs: h.running_jobs,
                    pending_gpus: h.pending_gpus,
                    pending_jobs: h.pending_jobs,
                    entitled_gpus: entitled,
                    standing,
                    protected_gpus: h.protected_gpus,
                    protected_until: h.protected_until,
                    window: None,
                    queue: None,
                }
            })
            .collect();
        clusters.push(ClusterNow { name: cluster.name.clone(), gpus: cluster.gpus, budgets });
    }
    Ok(Status { now, ranking: Ranking::default(), clusters })
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_compiler::test_support::model;

    fn job(id: &str, project: &str, gpus: u32, start: Option<i64>, contract: &str) -> Job {
        Job {
            id: id.into(),
            project: project.into(),
            gpus,
            submit: 0,
            start,
            contract: contract.into(),
            ..Job::default()
        }
    }

    #[test]
    fn a_queue_is_measured_against_the_budgets_by_hand() {
        // 10 GPUs; a 50%, b 30% (its sub-projects b1 and b2 1:1), c 20%.
        let model = model(
            "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
             contract batch min-runtime=\"1h\" default=#true\ncontract debug min-runtime=\"0s\"\n\
             project a share=\"50%\"\nproject b share=\"30%\" {\n    project b1 share=1\n    project b2 share=1\n}\n\
             project c share=\"20%\"\n",
        );
        let now = 1_000;
        let jobs = [
            // a runs 8 GPUs (started at 0 under batch: protected until 3,600) and waits for 2.
            job("1", "a", 8, Some(0), "batch"),
            job("2", "a", 2, None, "batch"),
            // b1 runs 2 under debug (no protection) and waits for 4; b2 has nothing.
            job("3", "b1", 2, Some(500), "debug"),
            job("4", "b1", 4, None, "debug"),
            // b2 runs 1 GPU under `preemptible`, which is no contract: unprotected.
            job("6", "b2", 1, Some(900), "preemptible"),
            // c is idle; a finished job is passed over.
            Job { end: Some(900), ..job("5", "c", 4, Some(0), "batch") },
        ];
        let status = status(&model, &jobs, now).unwrap();
        let budgets = &status.clusters[0].budgets;
        let names: Vec<&str> = budgets.iter().map(|b| b.path.as_str()).collect();
        assert_eq!(names, ["a", "b", "b/b1", "b/b2", "c"], "the unbudgeted work has no job: not listed");
        let by = |path: &str| budgets.iter().find(|b| b.path == path).unwrap();
        // Demand: a 10, b1 6, b2 1, c 0. Water-filling 10 GPUs over a 50 and b 30 (c has no
        // demand): a gets 10 x 50/80 = 6.25, b 3.75, both below their demand. In b, b2 asks
        // 1 of its fair 1.875 and gets it; b1 takes the other 2.75.
        assert!((by("a").entitled_gpus - 6.25).abs() < 1e-9);
        assert!((by("b").entitled_gpus - 3.75).abs() < 1e-9);
        assert!((by("b/b1").entitled_gpus - 2.75).abs() < 1e-9);
        assert!((by("b/b2").entitled_gpus - 1.0).abs() < 1e-9);
        assert_eq!(by("c").entitled_gpus, 0.0);
        // a runs 8 > 6 (6.25 rounded): over; b runs 3 < 4 (3.75 rounded): under; b1 runs
        // 2 < 3 (2.75 rounded): under; b2 runs its 1: within; c idle.
        assert_eq!(
            [by("a").standing, by("b").standing, by("b/b1").standing, by("b/b2").standing, by("c").standing],
            [Standing::Over, Standing::Under, Standing::Under, Standing::Within, Standing::Idle]
        );
        assert_eq!((by("a").running_gpus, by("a").pending_gpus, by("a").running_jobs), (8, 2, 1));
        assert_eq!(
            (by("b").running_gpus, by("b").pending_gpus, by("b").pending_jobs),
            (3, 4, 1),
            "b holds b1's and b2's"
        );
        // Protection: a's job until 0 + 1h; b1's debug job and b2's preemptible one have none.
        assert_eq!((by("a").protected_gpus, by("a").protected_until), (8, Some(3_600)));
        assert_eq!((by("b").protected_gpus, by("b").protected_until), (0, None));
        // Shares: a 0.5, b 0.3, b1 0.15.
        assert!((by("b/b1").share - 0.15).abs() < 1e-12 && (by("a").share - 0.5).abs() < 1e-12);
        // Guaranteed: a 5 of 10; b's 3 split 1.5 : 1.5, the remainder to the first.
        assert_eq!(
            (by("a").guaranteed_gpus, by("b/b1").guaranteed_gpus, by("b/b2").guaranteed_gpus),
            (5, 2, 1)
        );
        assert_eq!(by("b/b1").depth, 1);
    }

    #[test]
    fn a_job_of_a_cluster_the_budgets_do_not_hold_is_named() {
        let model = model(
            "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\ncontract batch min-runtime=\"1h\" default=#true\nproject a share=1\n",
        );
        let stray = Job { cluster: "elsewhere".into(), ..job("9", "a", 1, None, "") };
        let error = status(&model, &[stray], 0).unwrap_err().to_string();
        assert!(error.starts_with("job 9: cluster `elsewhere`"), "{error}");
    }
}
