//! Where the jobs of a trace belong among the budgets, for the audit and the simulator
//! alike: each cluster's budgets as an entitlement [`Hierarchy`] (with a leaf of no share
//! for the work no budget covers), and the cluster, budget and contract that a job's names
//! lead to.

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
pub struct ClusterBudgets {
    pub name: String,
    pub gpus: u64,
    pub hierarchy: Hierarchy,
    /// The project path of each node.
    pub paths: Vec<String>,
    /// The GPUs each node is guaranteed (the model's `guaranteed_gpus`; none for work
    /// without a budget).
    pub guaranteed: Vec<u64>,
    /// The node of the work no budget covers: a leaf with what the top-level shares leave
    /// (no share when they leave nothing).
    pub unbudgeted: NodeId,
    /// Whether each node is an inner project's own leaf: the jobs charged to the project
    /// itself.
    is_own: Vec<bool>,
    /// The node of the jobs charged to each node's name (see [`ClusterBudgets::node_of`]).
    jobs_node: Names<String, Option<NodeId>>,
}

impl ClusterBudgets {
    fn new(model: &Model, cluster: &Cluster) -> Result<ClusterBudgets, EntitlementError> {
        let mut tree = Tree::default();
        let top = tree.add(&model.projects, &cluster.name, None);
        // What the top-level percentages leave belongs to the work no budget covers (as the
        // emitted queues say): its entitlement when it has demand, shared out among the
        // budgets when it has none. Without a rest that work has no share: it is entitled
        // to nothing.
        let rest = 1.0 - top;
        let unbudgeted = NodeId(tree.nodes.len());
        let node = if rest > SHARE_EPSILON {
            Node::new(UNBUDGETED, None, rest)
        } else {
            Node::new(UNBUDGETED, None, NO_SHARE).with_cap(0.0)
        };
        tree.push(node, UNBUDGETED.into(), 0);
        let hierarchy = Hierarchy::new(tree.nodes)?;
        // Each inner project's own leaf, and which nodes are such leaves.
        let mut own_leaf = vec![None; hierarchy.len()];
        let mut is_own = vec![false; hierarchy.len()];
        for &(own, project) in &tree.own {
            own_leaf[project.0] = Some(own);
            is_own[own.0] = true;
        }
        let mut jobs_node = Names::with_capacity_and_hasher(hierarchy.len(), Default::default());
        for (i, own) in own_leaf.into_iter().enumerate() {
            let id = NodeId(i);
            let Some(node) = hierarchy.node(id) else { continue };
            // The first node of a name, as a search in the nodes' order finds it.
            if !jobs_node.contains_key(&node.name) {
                let jobs = if hierarchy.is_leaf(id) { Some(id) } else { own };
                jobs_node.insert(node.name.clone(), jobs);
            }
        }
        Ok(ClusterBudgets {
            name: cluster.name.clone(),
            gpus: cluster.gpus,
            hierarchy,
            paths: tree.paths,
            guaranteed: tree.guaranteed,
            unbudgeted,
            is_own,
            jobs_node,
        })
    }

    /// The node of the jobs charged to the project at `path`: the project's own leaf, or
    /// the project when it is a leaf here.
    #[inline]
    pub fn node_of(&self, path: &str) -> Option<NodeId> {
        self.jobs_node.get(path).copied().flatten()
    }

    /// Whether `id` holds an inner project's own jobs (listed only when it has some).
    #[inline]
    pub fn is_own(&self, id: NodeId) -> bool {
        self.is_own.get(id.0).copied().unwrap_or(false)
    }
}

/// The weight of work without a share of its own: it is entitled only to what its
/// siblings leave.
const NO_SHARE: f64 = 1e-12;
/// Shares closer than this to their parent's whole leave no rest.
const SHARE_EPSILON: f64 = 1e-9;

/// The entitlement tree of one cluster as it is built.
#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
    paths: Vec<String>,
    guaranteed: Vec<u64>,
    /// (own leaf, its project) for every inner project.
    own: Vec<(NodeId, NodeId)>,
}

impl Tree {
    fn push(&mut self, node: Node, path: String, guaranteed: u64) -> NodeId {
        self.nodes.push(node);
        self.paths.push(path);
        self.guaranteed.push(guaranteed);
        NodeId(self.nodes.len() - 1)
    }

    /// Adds the projects present on `cluster` under `parent`, each with its subtree;
    /// returns the sum of their normalised shares.
    fn add(&mut self, projects: &[Project], cluster: &str, parent: Option<NodeId>) -> f64 {
        let mut shares = 0.0;
        for p in projects {
            let Some(a) = p.clusters.get(cluster) else { continue };
            shares += a.normalized_share;
            let mut node = Node::new(&p.path, parent, a.normalized_share.max(NO_SHARE));
            if let Some(cap) = a.max_gpus {
                node = node.with_cap(cap as f64);
            }
            let id = self.push(node, p.path.clone(), a.guaranteed_gpus);
            let before = self.nodes.len();
            self.add(&p.children, cluster, Some(id));
            if self.nodes.len() > before {
                // Its own jobs are a sibling of its sub-projects, as an account's users are
                // siblings of its sub-accounts in Slurm, with no share of their own (Slurm
                // gives each user a Fairshare of 1 beside the sub-accounts' shares).
                let path = own_path(&p.path);
                let own = self.push(Node::new(&path, Some(id), NO_SHARE), path, 0);
                self.own.push((own, id));
            }
        }
        shares
    }
}

/// The name of an inner project's own jobs in the figures.
fn own_path(path: &str) -> String {
    format!("{path} (own jobs)")
}

/// Maps keyed by the budgets' names, looked up with a trace's names once or twice a job,
/// with a hash made for short keys (rustc's). The keys are the budgets' names, which a trace
/// cannot add to, so a trace cannot crowd them.
type Names<K, V> = rustc_hash::FxHashMap<K, V>;

/// Where a job goes: its cluster (an index of [`Budgets::clusters`]) and its budget's node
/// there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub cluster: usize,
    pub node: NodeId,
}

/// The model's budgets, cluster by cluster, and what the names of a trace lead to.
pub struct Budgets<'m> {
    /// In the model's order of clusters.
    pub clusters: Vec<ClusterBudgets>,
    model: &'m Model,
    by_path: Names<&'m str, &'m Project>,
    by_name: Names<&'m str, Vec<&'m Project>>,
    /// Each user's default project.
    defaults: Names<&'m str, &'m Project>,
}

/// The budgets over time: those in force first, and those from each later moment on (when
/// grants start and end: the model's timeline), each of the same projects.
pub type Periods<'m> = (Budgets<'m>, Vec<(i64, Budgets<'m>)>);

impl<'m> Budgets<'m> {
    /// The budgets over time of a model: before its first grant boundary, then from each
    /// one on; without grants, the model's alone.
    pub fn over_time(model: &'m Model) -> Result<Periods<'m>, EntitlementError> {
        let mut periods = model.timeline.iter().map(|(from, m)| Ok((*from, Budgets::new(m)?)));
        let first = match periods.next() {
            Some(first) => first?.1,
            None => Budgets::new(model)?,
        };
        Ok((first, periods.collect::<Result<_, EntitlementError>>()?))
    }

    pub fn new(model: &'m Model) -> Result<Budgets<'m>, EntitlementError> {
        let clusters =
            model.clusters.iter().map(|c| ClusterBudgets::new(model, c)).collect::<Result<_, _>>()?;
        let mut budgets = Budgets {
            clusters,
            model,
            by_path: Names::default(),
            by_name: Names::default(),
            defaults: Names::default(),
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

    /// The job's cluster and budget: the project it names (or its user's default; an inner
    /// project's own jobs leaf), or the cluster's unbudgeted node when no budget there
    /// covers it.
    pub fn assign(&self, job: &Job) -> Result<Assignment, JobError> {
        let cluster = self.cluster(job)?;
        // `cluster` indexes the model's clusters, and there is a book for each.
        let budgets = &self.clusters[cluster];
        let node = self.project(job).and_then(|p| budgets.node_of(&p.path)).unwrap_or(budgets.unbudgeted);
        Ok(Assignment { cluster, node })
    }

    /// The contract the job runs under: the one it names, else the default contract (empty
    /// when there is none).
    pub fn contract(&self, job: &Job) -> &'m str {
        let contracts = &self.model.contracts;
        match contracts.iter().find(|c| c.name == job.contract) {
            Some(named) => &named.name,
            None => contracts.iter().find(|c| c.default).map_or("", |c| c.name.as_str()),
        }
    }

    /// The project of a job, `None` when no budget covers it.
    fn project(&self, job: &Job) -> Option<&'m Project> {
        if job.project.is_empty() {
            return self.defaults.get(job.user.as_str()).copied();
        }
        self.by_path.get(job.project.as_str()).copied().or_else(|| {
            match self.by_name.get(job.project.as_str()).map(Vec::as_slice) {
                Some([only]) => Some(*only),
                _ => None,
            }
        })
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
                .ok_or_else(|| JobError::UnknownCluster(job.cluster.to_string())),
            1 => Ok(bound().next().map_or(0, |(i, _)| i)),
            _ => on_partition().filter(|_| !job.partition.is_empty()).ok_or_else(|| JobError::NoPartition {
                cluster: job.cluster.to_string(),
                partition: job.partition.to_string(),
                partitions: bound().map(|(_, p)| p.to_string()).collect(),
            }),
        }
    }
}
