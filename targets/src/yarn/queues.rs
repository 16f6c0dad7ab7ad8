//! The queue tree YARN gets for one cluster: the projects that may use the cluster, plus
//! the queues allot adds where a parent's shares leave capacity unallocated, and for
//! unbudgeted work. Both the Capacity and the Fair Scheduler files are written from it.

use allot_compiler::ir::{Allocation, Model, Project, WorkRule};
use allot_compiler::normalize::apportion;

/// The queues allot adds start with `_`, which no project name (a DNS-1123 label) has.
pub const UNBUDGETED: &str = "_unbudgeted";

/// The unallocated queue under `parent_path` (`root.a.b` -> `_unallocated_a_b`): leaf
/// names stay unique, as older ResourceManagers require.
pub fn unallocated_name(parent_path: &str) -> String {
    let below_root: Vec<&str> = parent_path.split('.').skip(1).collect();
    if below_root.is_empty() {
        "_unallocated".into()
    } else {
        format!("_unallocated_{}", below_root.join("_"))
    }
}

/// Percent of the parent in thousandths: 100.000% is 100000.
pub const WHOLE: u64 = 100_000;

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Root,
    /// A project of the tree (its path in the tree, for messages).
    Project(String),
    /// Capacity no child is guaranteed: nobody submits here, so others may borrow it.
    Unallocated,
    /// Where work outside any budget runs, preemptible.
    Unbudgeted,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    pub name: String,
    /// `root.a.b`
    pub path: String,
    pub kind: Kind,
    /// Its fraction of the parent, 0 to 1.
    pub fraction: f64,
    /// Its percentage of the parent in thousandths; siblings sum to exactly [`WHOLE`].
    pub capacity: u64,
    pub guaranteed_gpus: u64,
    /// The cap on GPUs, the parent's cap included.
    pub max_gpus: Option<u64>,
    /// Who may submit: users and groups; both empty means anyone.
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// The longest run any of its contracts allows, in seconds; `None`: unlimited.
    pub max_runtime_seconds: Option<u64>,
    pub children: Vec<Queue>,
}

impl Queue {
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// Every queue below this one, parents before children.
    pub fn descendants(&self) -> Vec<&Queue> {
        let mut out = Vec::new();
        for child in &self.children {
            out.push(child);
            out.extend(child.descendants());
        }
        out
    }
}

/// The `root` queue of `cluster`, which must be in the model.
pub fn tree(model: &Model, cluster: &str) -> Queue {
    let gpus = model.clusters.iter().find(|c| c.name == cluster).map_or(0, |c| c.gpus);
    let unbudgeted = model.policy.unbudgeted == WorkRule::Preemptible;
    let mut root = Queue {
        name: "root".into(),
        path: "root".into(),
        kind: Kind::Root,
        fraction: 1.0,
        capacity: WHOLE,
        guaranteed_gpus: gpus,
        max_gpus: None,
        users: Vec::new(),
        groups: Vec::new(),
        max_runtime_seconds: None,
        children: Vec::new(),
    };
    root.children = children(model, cluster, &model.projects, &root, unbudgeted);
    root
}

fn children(model: &Model, cluster: &str, projects: &[Project], parent: &Queue, top: bool) -> Vec<Queue> {
    let present: Vec<(&Project, &Allocation)> =
        projects.iter().filter_map(|p| p.clusters.get(cluster).map(|a| (p, a))).collect();
    if present.is_empty() {
        return Vec::new();
    }
    let fractions: Vec<f64> = present.iter().map(|(_, a)| a.normalized_share).collect();
    let (capacities, rest) = apportion(WHOLE, &fractions);
    let rest_gpus =
        parent.guaranteed_gpus.saturating_sub(present.iter().map(|(_, a)| a.guaranteed_gpus).sum::<u64>());
    let mut queues: Vec<Queue> = present
        .iter()
        .zip(capacities)
        .map(|((project, allocation), capacity)| {
            let mut queue = Queue {
                name: project.name.clone(),
                path: format!("{}.{}", parent.path, project.name),
                kind: Kind::Project(project.path.clone()),
                fraction: allocation.normalized_share,
                capacity,
                guaranteed_gpus: allocation.guaranteed_gpus,
                max_gpus: allocation.max_gpus,
                users: project.users.iter().map(|u| u.name.clone()).collect(),
                groups: project.groups.clone(),
                max_runtime_seconds: max_runtime(model, &project.contracts),
                children: Vec::new(),
            };
            queue.children = children(model, cluster, &project.children, &queue, false);
            queue
        })
        .collect();
    // The rest: unbudgeted work at the top (when the policy lets it run), else unallocated.
    let rest_fraction = (1.0 - fractions.iter().sum::<f64>()).max(0.0);
    if top || rest > 0 {
        let (kind, name) = if top {
            (Kind::Unbudgeted, UNBUDGETED.into())
        } else {
            (Kind::Unallocated, unallocated_name(&parent.path))
        };
        queues.push(Queue {
            name: name.clone(),
            path: format!("{}.{name}", parent.path),
            kind,
            fraction: rest_fraction,
            capacity: rest,
            guaranteed_gpus: rest_gpus,
            max_gpus: None,
            users: Vec::new(),
            groups: Vec::new(),
            max_runtime_seconds: None,
            children: Vec::new(),
        });
    }
    queues
}

/// The longest maximum runtime among `contracts`; `None` when one of them is unlimited.
fn max_runtime(model: &Model, contracts: &[String]) -> Option<u64> {
    let limits: Vec<Option<u64>> = model
        .contracts
        .iter()
        .filter(|c| contracts.contains(&c.name))
        .map(|c| c.max_runtime_seconds)
        .collect();
    if limits.is_empty() || limits.contains(&None) {
        return None;
    }
    limits.into_iter().flatten().max()
}
