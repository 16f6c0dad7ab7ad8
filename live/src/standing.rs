//! The budgets now: a live queue (the jobs a scheduler runs and holds pending at one moment,
//! as [`Job`]s: a running job has a start and no end, a pending one no start) measured
//! against the budgets. For every budget of every cluster: the GPUs running and pending,
//! what it is entitled to now (the cluster's GPUs divided among the budgets with demand, as
//! the audit divides them), whether it runs under, within or over that, and until when its
//! running jobs are protected by their contracts' minimum runtimes; and on Slurm with allot's
//! floors, how many of its GPUs run in its floors (never preempted) and how many beyond them,
//! in the bound partition (preemptible once past their protection).

use std::borrow::Cow;

use allot_compiler::ir::Model;
use allot_verify::budgets::{Budgets, JobError};
use allot_verify::entitlement::{EntitlementError, NodeId};
use allot_verify::trace::Job;

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
    /// Its floors and the GPUs running in them and beyond them, when it or a budget below
    /// it has a floor (Slurm, with the floors the caller gave).
    pub floor: Option<FloorNow>,
}

/// A budget's floor on Slurm, or a contract's reserve, as the caller finds it in the
/// configuration allot writes (the library reads no scheduler's configuration): a partition
/// whose jobs are never preempted, capped at `gpus`, over the partition its cluster is bound
/// to, where every other job runs and is preempted by a job in a floor with room once past
/// its protection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloorPartition {
    /// The allot cluster, and whose partition it is.
    pub cluster: String,
    pub holder: Holder,
    /// Its partition's name, and the bound partition it lies over.
    pub partition: String,
    pub over: String,
    /// Its GPUs: the budget's guaranteed GPUs that none of its sub-projects is guaranteed.
    pub gpus: u64,
}

/// Whose partition a [`FloorPartition`] is: a budget's floor, or a contract's reserve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// A budget's floor: the budget's (project's) path.
    Budget(String),
    /// A contract's reserve, a partition of the highest tier for that contract's jobs:
    /// never preempted, counted in no budget's floor, its jobs placed on the bound
    /// partition as a floor's are.
    Contract(String),
}

impl FloorPartition {
    /// The path of the budget whose floor it is; `None` for a contract's reserve.
    pub fn budget(&self) -> Option<&str> {
        match &self.holder {
            Holder::Budget(path) => Some(path),
            Holder::Contract(_) => None,
        }
    }

    /// The contract whose reserve it is; `None` for a budget's floor.
    pub fn contract(&self) -> Option<&str> {
        match &self.holder {
            Holder::Contract(name) => Some(name),
            Holder::Budget(_) => None,
        }
    }
}

/// A budget's floors now: its own and those of the budgets below it (whose jobs it holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloorNow {
    /// The GPUs of those floors.
    pub gpus: u64,
    /// GPUs running in those floors now: never preempted.
    pub in_floor_gpus: u64,
    /// GPUs of its jobs running in the bound partition, beyond the floors: preemptible by a
    /// job in a floor with room once past their protection.
    pub over_gpus: u64,
}

/// The bound partition a job of `partition` (one partition, or the comma-separated list a
/// pending job may run in) runs over: the one a floor of the list lies over, or a partition
/// of the list that floors lie over; `None` when the list names neither.
pub fn home_partition<'f>(partition: &str, floors: &'f [FloorPartition]) -> Option<&'f str> {
    partition
        .split(',')
        .map(str::trim)
        .find_map(|p| floors.iter().find(|f| f.partition == p || f.over == p).map(|f| f.over.as_str()))
}

/// The job as the budgets place it: a job in a floor, or listing floors, on the bound
/// partition they lie over (the partition that binds its cluster).
pub fn placed<'j>(job: &'j Job, floors: &[FloorPartition]) -> Cow<'j, Job> {
    match home_partition(&job.partition, floors) {
        Some(home) if home != job.partition => Cow::Owned(Job { partition: home.into(), ..job.clone() }),
        _ => Cow::Borrowed(job),
    }
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

/// The cluster and budget path a job belongs to (see [`status`]; a job in or listing one
/// of `floors` is placed on the partition they lie over).
pub fn budget_of(model: &Model, job: &Job, floors: &[FloorPartition]) -> Result<(String, String), LiveError> {
    let budgets = Budgets::new(model)?;
    let at = budgets
        .assign(&placed(job, floors))
        .map_err(|problem| LiveError::Job { id: job.id.to_string(), problem })?;
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
    floor_gpus: u64,
    in_floor_gpus: u64,
    over_gpus: u64,
}

/// The budgets against the queue at `now`. Jobs that ended are not in a queue and are
/// passed over; a job whose cluster the budgets do not hold is an error naming it.
pub fn status<'j>(
    model: &Model,
    jobs: impl IntoIterator<Item = &'j Job>,
    now: i64,
) -> Result<Status, LiveError> {
    status_with_floors(model, jobs, now, &[])
}

/// [`status`] on Slurm with allot's floors: each budget with a floor (its own, or a budget's
/// below it) also gets the GPUs of its floors, those running in them, and those of its jobs
/// running beyond them in the bound partition ([`FloorNow`]). A floor of a cluster or budget
/// the model does not hold is passed over.
pub fn status_with_floors<'j>(
    model: &Model,
    jobs: impl IntoIterator<Item = &'j Job>,
    now: i64,
    floors: &[FloorPartition],
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
    // Each floor's cluster and the node of its budget (the project itself, an inner one's
    // too: its floor holds the jobs of the budgets below it).
    let floor_nodes: Vec<(&FloorPartition, usize, usize)> = floors
        .iter()
        .filter_map(|f| {
            let budget = f.budget()?;
            let cluster = budgets.clusters.iter().position(|c| c.name == f.cluster)?;
            let node = budgets.clusters[cluster].paths.iter().position(|p| p == budget)?;
            Some((f, cluster, node))
        })
        .collect();
    for &(f, cluster, node) in &floor_nodes {
        held[cluster][node].floor_gpus += f.gpus;
    }
    for job in jobs.into_iter().filter(|j| j.end.is_none()) {
        let at = budgets
            .assign(&placed(job, floors))
            .map_err(|problem| LiveError::Job { id: job.id.to_string(), problem })?;
        let gpus = u64::from(job.gpus);
        if job.start.is_some() {
            // A running job runs in one partition: a floor, or the bound partition beyond them.
            let mut on_cluster = floor_nodes.iter().filter(|(_, cluster, _)| *cluster == at.cluster);
            if let Some(&(_, _, node)) = on_cluster.clone().find(|(f, ..)| f.partition == job.partition) {
                held[at.cluster][node].in_floor_gpus += gpus;
            } else if on_cluster.any(|(f, ..)| f.over == job.partition) {
                held[at.cluster][at.node.0].over_gpus += gpus;
            }
        }
        let h = &mut held[at.cluster][at.node.0];
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
                up.floor_gpus += child.floor_gpus;
                up.in_floor_gpus += child.in_floor_gpus;
                up.over_gpus += child.over_gpus;
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
                    floor: (h.floor_gpus > 0).then_some(FloorNow {
                        gpus: h.floor_gpus,
                        in_floor_gpus: h.in_floor_gpus,
                        over_gpus: h.over_gpus,
                    }),
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

    /// A floor of `gpus` for `budget` on cluster `cluster`'s partition `over`.
    fn floor(cluster: &str, budget: &str, over: &str, gpus: u64) -> FloorPartition {
        let account = budget.rsplit('/').next().unwrap();
        FloorPartition {
            cluster: cluster.into(),
            holder: Holder::Budget(budget.into()),
            partition: format!("{over}-floor-{account}"),
            over: over.into(),
            gpus,
        }
    }

    fn on(partition: &str, job: Job) -> Job {
        Job { cluster: "s".into(), partition: partition.into(), ..job }
    }

    #[test]
    fn the_gpus_in_each_floor_and_beyond_it_are_counted_by_hand() {
        // 8 GPUs bound to Slurm partition gpu; a and b guarantee 4 each: a floor of 4 each.
        let model = model(
            "cluster c gpus=8 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=s partition=gpu\n}\n\
             contract batch min-runtime=\"1h\" default=#true\n\
             project a share=\"50%\"\nproject b share=\"50%\"\n",
        );
        let floors = [floor("c", "a", "gpu", 4), floor("c", "b", "gpu", 4)];
        let jobs = [
            // b runs 4 GPUs in its floor and 2 beyond it, in gpu.
            on("gpu-floor-b", job("1", "b", 3, Some(0), "batch")),
            on("gpu-floor-b", job("2", "b", 1, Some(100), "batch")),
            on("gpu", job("3", "b", 2, Some(500), "batch")),
            // a waits for 2, in its floor or gpu (squeue lists them in no set order).
            on("gpu,gpu-floor-a", job("4", "a", 2, None, "batch")),
        ];
        let now = status_with_floors(&model, &jobs, 1_000, &floors).unwrap();
        let by = |path: &str| now.clusters[0].budgets.iter().find(|b| b.path == path).unwrap().clone();
        assert_eq!(by("b").floor, Some(FloorNow { gpus: 4, in_floor_gpus: 4, over_gpus: 2 }));
        assert_eq!(by("a").floor, Some(FloorNow { gpus: 4, in_floor_gpus: 0, over_gpus: 0 }));
        // The rest as without floors: b runs 6, a waits for 2.
        assert_eq!((by("b").running_gpus, by("a").pending_gpus), (6, 2));
        // Without floors, none.
        let plain = status(&model, &jobs, 1_000);
        assert!(plain.is_ok_and(|s| s.clusters[0].budgets.iter().all(|b| b.floor.is_none())));
    }

    #[test]
    fn a_job_in_a_reserve_is_placed_on_its_bound_partition_and_counts_in_no_floor() {
        // Two allot clusters on one Slurm cluster (a job is placed by its partition); on
        // main, floors of 3 for a and b and a reserve of 2 for debug over gpu.
        let model = model(
            "cluster main gpus=8 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=s partition=gpu nodes=\"g1\"\n}\n\
             cluster small gpus=4 gpu-type=l40s gpus-per-node=4 {\n    slurm cluster=s partition=l40s nodes=\"l1\"\n}\n\
             contract debug min-runtime=\"0s\" reserve=2\ncontract batch min-runtime=\"1h\" default=#true\n\
             project a share=\"50%\"\nproject b share=\"50%\"\n",
        );
        let reserve = FloorPartition {
            cluster: "main".into(),
            holder: Holder::Contract("debug".into()),
            partition: "gpu-reserve-debug".into(),
            over: "gpu".into(),
            gpus: 2,
        };
        let floors = [floor("main", "a", "gpu", 3), floor("main", "b", "gpu", 3), reserve];
        let jobs = [
            on("gpu-reserve-debug", job("1", "b", 1, Some(0), "debug")),
            on("gpu-floor-b", job("2", "b", 3, Some(0), "batch")),
            on("gpu-reserve-debug,gpu-floor-a,gpu", job("3", "a", 1, None, "debug")),
        ];
        assert_eq!(home_partition("gpu-reserve-debug", &floors), Some("gpu"));
        assert_eq!(budget_of(&model, &jobs[0], &floors).unwrap(), ("main".into(), "b".into()));
        assert_eq!(budget_of(&model, &jobs[2], &floors).unwrap(), ("main".into(), "a".into()));
        let now = status_with_floors(&model, &jobs, 1_000, &floors).unwrap();
        let by = |path: &str| now.clusters[0].budgets.iter().find(|b| b.path == path).unwrap().clone();
        // b runs 4 GPUs: 3 in its floor, 1 in the reserve (neither in its floor nor beyond).
        assert_eq!(by("b").running_gpus, 4);
        assert_eq!(by("b").floor, Some(FloorNow { gpus: 3, in_floor_gpus: 3, over_gpus: 0 }));
        assert_eq!(by("a").floor, Some(FloorNow { gpus: 3, in_floor_gpus: 0, over_gpus: 0 }));
        assert_eq!(by("a").pending_gpus, 1);
    }

    #[test]
    fn an_inner_budget_holds_its_floor_and_those_below_it_and_floors_place_jobs() {
        // Two allot clusters on one Slurm cluster: a job is placed by its partition, and a
        // job in a floor (or listing one) by the bound partition the floor lies over.
        let model = model(
            "cluster main gpus=8 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=s partition=gpu nodes=\"g1\"\n}\n\
             cluster small gpus=4 gpu-type=l40s gpus-per-node=4 {\n    slurm cluster=s partition=l40s nodes=\"l1\"\n}\n\
             contract batch min-runtime=\"1h\" default=#true\n\
             project a share=\"50%\"\nproject b share=\"50%\" {\n    project b1 share=1\n    project b2 share=1\n}\n",
        );
        // On main: a 4; b1 and b2 2 each, b none of its own. On small, no floors.
        let floors =
            [floor("main", "a", "gpu", 4), floor("main", "b/b1", "gpu", 2), floor("main", "b/b2", "gpu", 2)];
        let jobs = [
            on("gpu-floor-b1", job("1", "b1", 2, Some(0), "batch")),
            on("gpu-floor-b2", job("2", "b2", 1, Some(0), "batch")),
            on("gpu", job("3", "b2", 2, Some(0), "batch")),
            on("gpu-floor-b1,gpu", job("4", "b1", 1, None, "batch")),
            on("l40s", job("5", "b1", 4, Some(0), "batch")),
        ];
        assert_eq!(home_partition("gpu-floor-b1,gpu", &floors), Some("gpu"));
        assert_eq!(home_partition("l40s", &floors), None);
        assert_eq!(budget_of(&model, &jobs[0], &floors).unwrap(), ("main".into(), "b/b1".into()));
        let error = budget_of(&model, &jobs[0], &[]).unwrap_err().to_string();
        assert!(error.contains("is on partition `gpu-floor-b1`"), "{error}");
        let status = status_with_floors(&model, &jobs, 1_000, &floors).unwrap();
        let by = |cluster: usize, path: &str| {
            status.clusters[cluster].budgets.iter().find(|b| b.path == path).unwrap().clone()
        };
        let floor = |gpus, in_floor_gpus, over_gpus| Some(FloorNow { gpus, in_floor_gpus, over_gpus });
        // b holds b1's and b2's floors: 2 + 2 GPUs, 2 + 1 in use, b2's 2 beyond them.
        assert_eq!(
            [by(0, "a").floor, by(0, "b").floor, by(0, "b/b1").floor, by(0, "b/b2").floor],
            [floor(4, 0, 0), floor(4, 3, 2), floor(2, 2, 0), floor(2, 1, 2)]
        );
        assert_eq!((by(0, "b/b1").pending_gpus, by(0, "b").running_gpus), (1, 5));
        // small has no floors: b1's job there counts on small, with no floor figures.
        assert_eq!((by(1, "b/b1").running_gpus, by(1, "b/b1").floor), (4, None));
    }
}
