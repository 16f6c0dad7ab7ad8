//! Where the jobs of a trace belong among the budgets, for the audit and the simulator
//! alike: each cluster's budgets as an entitlement [`Hierarchy`] (with a leaf of no share
//! for the work no budget covers), and the cluster, budget and contract that a job's names
//! lead to.

use std::collections::BTreeMap;

use allot_compiler::ir::{Cluster, Model, Project};

use crate::entitlement::{EntitlementError, Hierarchy, Node, NodeId};
use crate::trace::Job;

/// The budget of the work no budget covers.
const UNBUDGETED: &str = "(unbudgeted)";

/// Why a job has no place among the budgets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("names no cluster, and the budgets have several")]
    NoCluster,
    #[error("cluster `{0}` is not in the budgets")]
    UnknownCluster(String),
    /// Several allot clusters are bound to partitions of the job's Slurm cluster, and the
    /// job's partition is none of theirs.
    #[error(
        "Slurm cluster `{cluster}` holds several clusters of the budgets, on partitions {}, and the job {}",
        .partitions.join(", "),
        if .partition.is_empty() { "names no partition".to_string() } else { format!("is on partition `{}`", .partition) }
    )]
    NoPartition { cluster: String, partition: String, partitions: Vec<String> },
}

/// One cluster's budgets as an entitlement hierarchy.
pub(crate) struct ClusterBudgets {
    pub(crate) name: String,
    pub(crate) gpus: u64,
    pub(crate) hierarchy: Hierarchy,
    /// The project path of each node.
    pub(crate) paths: Vec<String>,
    /// The GPUs each node is guaranteed (the model's `guaranteed_gpus`; none for work
    /// without a budget).
    pub(crate) guaranteed: Vec<u64>,
    /// The node of the work no budget covers: a leaf with no share.
    pub(crate) unbudgeted: NodeId,
}

impl ClusterBudgets {
    fn new(model: &Model, cluster: &Cluster) -> Result<ClusterBudgets, EntitlementError> {
        let mut nodes = Vec::new();
        let mut paths = Vec::new();
        let mut guaranteed = Vec::new();
        fn add(
            projects: &[Project],
            cluster: &str,
            parent: Option<NodeId>,
            nodes: &mut Vec<Node>,
            paths: &mut Vec<String>,
            guaranteed: &mut Vec<u64>,
        ) {
            for p in projects {
                let Some(a) = p.clusters.get(cluster) else { continue };
                let id = NodeId(nodes.len());
                let mut node = Node::new(&p.path, parent, a.normalized_share.max(1e-12));
                if let Some(cap) = a.max_gpus {
                    node = node.with_cap(cap as f64);
                }
                nodes.push(node);
                paths.push(p.path.clone());
                guaranteed.push(a.guaranteed_gpus);
                add(&p.children, cluster, Some(id), nodes, paths, guaranteed);
            }
        }
        add(&model.projects, &cluster.name, None, &mut nodes, &mut paths, &mut guaranteed);
        // Work outside any budget has demand but no share: it is entitled to nothing.
        let unbudgeted = NodeId(nodes.len());
        nodes.push(Node::new(UNBUDGETED, None, 1e-12).with_cap(0.0));
        paths.push(UNBUDGETED.into());
        guaranteed.push(0);
        Ok(ClusterBudgets {
            name: cluster.name.clone(),
            gpus: cluster.gpus,
            hierarchy: Hierarchy::new(nodes)?,
            paths,
            guaranteed,
            unbudgeted,
        })
    }
}

/// Where a job goes: its cluster (an index of [`Budgets::clusters`]) and its budget's node
/// there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub(crate) cluster: usize,
    pub(crate) node: NodeId,
}

/// The model's budgets, cluster by cluster, and what the names of a trace lead to.
pub(crate) struct Budgets<'m> {
    /// In the model's order of clusters.
    pub(crate) clusters: Vec<ClusterBudgets>,
    model: &'m Model,
    by_path: BTreeMap<&'m str, &'m Project>,
    by_name: BTreeMap<&'m str, Vec<&'m Project>>,
    /// Each user's default project.
    defaults: BTreeMap<&'m str, &'m Project>,
}

impl<'m> Budgets<'m> {
    pub(crate) fn new(model: &'m Model) -> Result<Budgets<'m>, EntitlementError> {
        let clusters =
            model.clusters.iter().map(|c| ClusterBudgets::new(model, c)).collect::<Result<_, _>>()?;
        let mut budgets = Budgets {
            clusters,
            model,
            by_path: BTreeMap::new(),
            by_name: BTreeMap::new(),
            defaults: BTreeMap::new(),
        };
        fn walk<'m>(projects: &'m [Project], b: &mut Budgets<'m>) {
            for p in projects {
                b.by_path.insert(&p.path, p);
                b.by_name.entry(&p.name).or_default().push(p);
                for u in &p.users {
                    if u.default || !b.defaults.contains_key(u.name.as_str()) {
                        b.defaults.insert(&u.name, p);
                    }
                }
                walk(&p.children, b);
            }
        }
        walk(&model.projects, &mut budgets);
        Ok(budgets)
    }

    /// The job's cluster and budget: the leaf project it names (or its user's default), or
    /// the cluster's unbudgeted node when no leaf budget there covers it.
    pub(crate) fn assign(&self, job: &Job) -> Result<Assignment, JobError> {
        let cluster = self.cluster(job)?;
        // `cluster` indexes the model's clusters, and there is a book for each.
        let budgets = &self.clusters[cluster];
        let node =
            self.project(job).and_then(|p| budgets.hierarchy.find(&p.path)).unwrap_or(budgets.unbudgeted);
        Ok(Assignment { cluster, node })
    }

    /// The contract the job runs under: the one it names, else the default contract (empty
    /// when there is none).
    pub(crate) fn contract(&self, job: &Job) -> &'m str {
        let contracts = &self.model.contracts;
        match contracts.iter().find(|c| c.name == job.contract) {
            Some(named) => &named.name,
            None => contracts.iter().find(|c| c.default).map_or("", |c| c.name.as_str()),
        }
    }

    /// The leaf project of a job, `None` when no budget covers it.
    fn project(&self, job: &Job) -> Option<&'m Project> {
        let named = if job.project.is_empty() {
            self.defaults.get(job.user.as_str()).copied()
        } else {
            self.by_path.get(job.project.as_str()).copied().or_else(|| {
                match self.by_name.get(job.project.as_str()).map(Vec::as_slice) {
                    Some([only]) => Some(*only),
                    _ => None,
                }
            })
        };
        named.filter(|p| p.children.is_empty())
    }

    /// The index of the job's cluster among the model's: the one bound to the Slurm
    /// cluster it names (when several are bound to partitions of that Slurm cluster, the one
    /// on the job's partition), else the allot cluster it names; the only cluster when it
    /// names none.
    fn cluster(&self, job: &Job) -> Result<usize, JobError> {
        let clusters = &self.model.clusters;
        if job.cluster.is_empty() {
            return if clusters.len() == 1 { Ok(0) } else { Err(JobError::NoCluster) };
        }
        let bound = || {
            clusters.iter().enumerate().filter_map(|(i, c)| {
                c.bindings
                    .slurm
                    .as_ref()
                    .filter(|s| s.cluster == job.cluster)
                    .map(|s| (i, s.partition.as_str()))
            })
        };
        let on_partition = || bound().find(|&(_, partition)| partition == job.partition).map(|(i, _)| i);
        match bound().count() {
            0 => clusters
                .iter()
                .position(|c| c.name == job.cluster)
                .ok_or_else(|| JobError::UnknownCluster(job.cluster.clone())),
            1 => Ok(bound().next().map_or(0, |(i, _)| i)),
            _ => on_partition().filter(|_| !job.partition.is_empty()).ok_or_else(|| JobError::NoPartition {
                cluster: job.cluster.clone(),
                partition: job.partition.clone(),
                partitions: bound().map(|(_, p)| p.to_string()).collect(),
            }),
        }
    }
}
