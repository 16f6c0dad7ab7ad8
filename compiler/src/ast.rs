//! The abstract syntax tree: the budget repository as lowered from KDL, every field with
//! its span, includes followed.
//!
//! Produced by `lower`, read by `check` and `normalize`. Values a file failed to give are
//! `None` here; `check` has reported them, and `normalize` only runs on a clean tree. The
//! closed sets of words the language knows ([`WorkRule`], the schedulers, [`CapacityMode`])
//! are defined here once; the normalised model ([`crate::ir`]) carries them on, serialised
//! as the files write them.

use serde::{Serialize, Serializer};

use crate::source::{Span, Spanned};

/// A word of the language serialises as the files write it (its `as_str`), so that the
/// JSON of the normalised model and the KDL spell it alike.
macro_rules! serialize_as_written {
    ($($word:ty),*) => {$(
        impl Serialize for $word {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    )*};
}

serialize_as_written!(KubernetesScheduler, YarnScheduler, CapacityMode, WorkRule);
use crate::units::{Instant, Seconds};

#[derive(Clone, Debug, Default)]
pub struct Budget {
    pub clusters: Vec<Cluster>,
    pub policy: Policy,
    pub contracts: Vec<Contract>,
    pub projects: Vec<Project>,
    pub expectations: Expectations,
    /// Where the entry file starts, for problems of the whole repository.
    pub origin: Option<Span>,
}

/// A percentage, 0 to 100.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Percent(pub f64);

impl Percent {
    pub fn fraction(self) -> f64 {
        self.0 / 100.0
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Share {
    /// A percentage of the parent.
    Percent(Percent),
    /// A weight, normalised among siblings.
    Weight(f64),
}

#[derive(Clone, Debug)]
pub struct Cluster {
    pub name: Spanned<String>,
    pub gpus: Option<Spanned<u64>>,
    pub gpu_type: Option<Spanned<String>>,
    pub gpus_per_node: Option<Spanned<u64>>,
    pub slurm: Option<SlurmBinding>,
    pub kubernetes: Option<KubernetesBinding>,
    pub yarn: Option<YarnBinding>,
    pub span: Span,
}

pub const DEFAULT_GPUS_PER_NODE: u64 = 8;

impl Cluster {
    pub fn gpus(&self) -> u64 {
        self.gpus.as_ref().map_or(0, |g| g.value)
    }

    pub fn gpus_per_node(&self) -> u64 {
        self.gpus_per_node.as_ref().map_or(DEFAULT_GPUS_PER_NODE, |g| g.value)
    }
}

#[derive(Clone, Debug)]
pub struct SlurmBinding {
    pub cluster: Option<Spanned<String>>,
    pub partition: Option<Spanned<String>>,
    /// The hostlist expression of the partition's nodes (`gpu[01-16]`), for `Nodes=`.
    pub nodes: Option<Spanned<String>>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KubernetesScheduler {
    Kueue,
    Kai,
    Volcano,
    Yunikorn,
}

impl KubernetesScheduler {
    pub const ALL: [KubernetesScheduler; 4] = [Self::Kueue, Self::Kai, Self::Volcano, Self::Yunikorn];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kueue => "kueue",
            Self::Kai => "kai",
            Self::Volcano => "volcano",
            Self::Yunikorn => "yunikorn",
        }
    }
}

#[derive(Clone, Debug)]
pub struct KubernetesBinding {
    pub schedulers: Vec<Spanned<KubernetesScheduler>>,
    pub flavor: Option<Spanned<String>>,
    pub resource: Option<Spanned<String>>,
    pub node_label: Option<Spanned<String>>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum YarnScheduler {
    Capacity,
    Fair,
}

impl YarnScheduler {
    pub const ALL: [YarnScheduler; 2] = [Self::Capacity, Self::Fair];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Capacity => "capacity",
            Self::Fair => "fair",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityMode {
    Percent,
    Absolute,
}

impl CapacityMode {
    pub const ALL: [CapacityMode; 2] = [Self::Percent, Self::Absolute];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Percent => "percent",
            Self::Absolute => "absolute",
        }
    }
}

#[derive(Clone, Debug)]
pub struct YarnBinding {
    pub schedulers: Vec<Spanned<YarnScheduler>>,
    pub resource: Option<Spanned<String>>,
    pub capacity_mode: Option<Spanned<CapacityMode>>,
    /// Memory (MiB) and vcores of one node: absolute capacities need them.
    pub node_memory_mb: Option<Spanned<u64>>,
    pub node_vcores: Option<Spanned<u64>>,
    pub span: Span,
}

/// What happens to work outside a budget, or beyond one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkRule {
    /// Runs on idle GPUs and may be preempted.
    Preemptible,
    /// Is not admitted.
    Deny,
}

impl WorkRule {
    pub const ALL: [WorkRule; 2] = [Self::Preemptible, Self::Deny];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preemptible => "preemptible",
            Self::Deny => "deny",
        }
    }
}

pub const DEFAULT_WINDOW: Seconds = 7 * 24 * 3600;

#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub window: Option<Spanned<Seconds>>,
    pub unbudgeted: Option<Spanned<WorkRule>>,
    pub overflow: Option<Spanned<WorkRule>>,
    pub overcommit: Option<Spanned<bool>>,
    /// The longest a grant may last.
    pub max_grant: Option<Spanned<Seconds>>,
    pub span: Option<Span>,
}

#[derive(Clone, Debug)]
pub struct Contract {
    pub name: Spanned<String>,
    pub min_runtime: Option<Spanned<Seconds>>,
    pub max_runtime: Option<Spanned<Seconds>>,
    pub resumable: Option<Spanned<bool>>,
    pub max_gpus: Option<Spanned<u64>>,
    pub reserve: Option<Spanned<u64>>,
    pub default: Option<Spanned<bool>>,
    pub span: Span,
}

impl Contract {
    pub fn is_default(&self) -> bool {
        self.default.as_ref().is_some_and(|d| d.value)
    }
}

#[derive(Clone, Debug)]
pub struct Project {
    pub name: Spanned<String>,
    pub share: Option<Spanned<Share>>,
    pub max_gpus: Option<Spanned<u64>>,
    /// The children's percentages may sum over 100%.
    pub overcommit: Option<Spanned<bool>>,
    pub users: Vec<Member>,
    pub groups: Vec<Spanned<String>>,
    pub namespaces: Vec<Spanned<String>>,
    pub owners: Vec<Spanned<String>>,
    /// The clusters the project may use; `None`: all of its parent's.
    pub clusters: Option<Vec<Spanned<String>>>,
    /// The contracts its jobs may use; `None`: all.
    pub contracts: Option<Vec<Spanned<String>>>,
    pub overrides: Vec<ClusterOverride>,
    pub grants: Vec<Grant>,
    pub children: Vec<Project>,
    pub span: Span,
}

impl Project {
    pub fn override_for(&self, cluster: &str) -> Option<&ClusterOverride> {
        self.overrides.iter().find(|o| o.cluster.value == cluster)
    }

    /// The share on one cluster: the override if there is one, else the project's share.
    pub fn share_on(&self, cluster: &str) -> Option<&Spanned<Share>> {
        self.override_for(cluster).and_then(|o| o.share.as_ref()).or(self.share.as_ref())
    }

    /// The GPU cap on one cluster: the override if there is one, else the project's.
    pub fn max_gpus_on(&self, cluster: &str) -> Option<&Spanned<u64>> {
        self.override_for(cluster).and_then(|o| o.max_gpus.as_ref()).or(self.max_gpus.as_ref())
    }

    pub fn may_use(&self, cluster: &str) -> bool {
        self.clusters.as_ref().is_none_or(|cs| cs.iter().any(|c| c.value == cluster))
    }

    /// Those of `clusters` the project may use, its `ancestors` allowing.
    pub fn usable<'c>(&self, ancestors: &[&Project], clusters: &[&'c str]) -> Vec<&'c str> {
        clusters
            .iter()
            .copied()
            .filter(|c| self.may_use(c) && ancestors.iter().all(|a| a.may_use(c)))
            .collect()
    }
}

#[derive(Clone, Debug)]
pub struct Member {
    pub name: Spanned<String>,
    /// This project is the user's default.
    pub default: bool,
}

#[derive(Clone, Debug)]
pub struct ClusterOverride {
    pub cluster: Spanned<String>,
    pub share: Option<Spanned<Share>>,
    pub max_gpus: Option<Spanned<u64>>,
    pub span: Span,
}

/// Extra share for a while: `grant share="+10%" until="2027-02-01" reason="..."`.
#[derive(Clone, Debug)]
pub struct Grant {
    pub amount: Option<Spanned<GrantAmount>>,
    /// When it starts; `None`: in force until `until`.
    pub from: Option<Spanned<Instant>>,
    /// When it ends (the first moment it is no longer in force).
    pub until: Option<Spanned<Instant>>,
    pub reason: Option<Spanned<String>>,
    /// The one cluster it applies on; `None`: every cluster the project may use.
    pub cluster: Option<Spanned<String>>,
    pub span: Span,
}

impl Grant {
    /// In force at `at`: started (or no start) and not yet ended.
    pub fn in_force(&self, at: Instant) -> bool {
        self.from.as_ref().is_none_or(|f| f.value <= at) && self.until.as_ref().is_some_and(|u| at < u.value)
    }

    /// Applies on `cluster`.
    pub fn on(&self, cluster: &str) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.value == cluster)
    }
}

/// What a grant adds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GrantAmount {
    /// Percentage points of the parent (`share="+10%"`).
    Share(Percent),
    /// GPUs more guaranteed (`guaranteed-gpus=16`), as a share of the parent's GPUs.
    Gpus(u64),
}

#[derive(Clone, Debug, Default)]
pub struct Expectations {
    pub delivered_per_budget: Option<Spanned<Percent>>,
    pub delivered_overall: Option<Spanned<Percent>>,
    pub waits: Vec<WaitExpectation>,
}

#[derive(Clone, Debug)]
pub struct WaitExpectation {
    pub contract: Option<Spanned<String>>,
    pub p50: Option<Spanned<Seconds>>,
    pub p90: Option<Spanned<Seconds>>,
    pub p99: Option<Spanned<Seconds>>,
    pub span: Span,
}

/// Visits every project, parents before children, with its path of ancestors.
pub fn walk<'a>(projects: &'a [Project], visit: &mut impl FnMut(&[&'a Project], &'a Project)) {
    fn go<'a>(
        ancestors: &mut Vec<&'a Project>,
        projects: &'a [Project],
        visit: &mut impl FnMut(&[&'a Project], &'a Project),
    ) {
        for project in projects {
            visit(ancestors, project);
            ancestors.push(project);
            go(ancestors, &project.children, visit);
            ancestors.pop();
        }
    }
    go(&mut Vec::new(), projects, visit);
}
