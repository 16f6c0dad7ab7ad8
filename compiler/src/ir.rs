//! The intermediate representation: the normalised budget of one repository, the
//! [`Model`] that `normalize` makes of a checked [`crate::ast`] tree and that every target,
//! the diff and the verifier read. Names and numbers only, no spans: a [`Location`] says
//! where each item was written.
//!
//! This is also the JSON `allot export` writes; its schema ([`json_schema`]) is
//! `schema/allot.schema.json`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

pub use crate::ast::{CapacityMode, KubernetesScheduler, WorkRule, YarnScheduler};
use crate::units::{Instant, format_instant};

/// The normalised budget of one repository.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Model {
    pub clusters: Vec<Cluster>,
    pub policy: Policy,
    pub contracts: Vec<Contract>,
    /// The top-level projects, each with its subtree.
    pub projects: Vec<Project>,
    pub expectations: Expectations,
    /// When grants make the shares change: the model in force before the first grant
    /// boundary (from `i64::MIN`) and from each boundary on, each without a timeline of
    /// its own. Filled for replays over time (`Compilation::over_time`), else empty, as it
    /// is without grants; not exported.
    #[serde(skip)]
    #[schemars(skip)]
    pub timeline: Vec<(Instant, Model)>,
}

impl Model {
    /// Every project by path, with its parent.
    pub fn projects_by_path(&self) -> BTreeMap<String, (&Project, Option<&Project>)> {
        fn go<'m>(
            projects: &'m [Project],
            parent: Option<&'m Project>,
            out: &mut BTreeMap<String, (&'m Project, Option<&'m Project>)>,
        ) {
            for p in projects {
                out.insert(p.path.clone(), (p, parent));
                go(&p.children, Some(p), out);
            }
        }
        let mut out = BTreeMap::new();
        go(&self.projects, None, &mut out);
        out
    }
}

/// A pool of GPUs.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Cluster {
    pub name: String,
    pub gpus: u64,
    pub gpu_type: String,
    pub gpus_per_node: u64,
    /// GPUs neither a top-level project is guaranteed nor a contract's reserve holds: they
    /// run preemptible work.
    pub unallocated_gpus: u64,
    pub bindings: Bindings,
    pub source: Location,
}

/// The targets a cluster is bound to; absent: not emitted for that target.
#[derive(Clone, Debug, Default, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Bindings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmBinding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesBinding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yarn: Option<YarnBinding>,
}

#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct SlurmBinding {
    pub cluster: String,
    pub partition: String,
    /// The bound partition's nodes as a Slurm hostlist (`gpu[01-16]`), for the floor partitions' `Nodes=`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
}

#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct KubernetesBinding {
    /// Some of `kueue`, `kai`, `volcano`, `yunikorn`, in that order.
    #[schemars(with = "Vec<String>")]
    pub schedulers: Vec<KubernetesScheduler>,
    pub flavor: String,
    pub resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_label: Option<String>,
}

#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct YarnBinding {
    /// Some of `capacity`, `fair`, in that order.
    #[schemars(with = "Vec<String>")]
    pub schedulers: Vec<YarnScheduler>,
    pub resource: String,
    /// `percent` or `absolute`.
    #[schemars(with = "String")]
    pub capacity_mode: CapacityMode,
    /// Memory of one node, in MiB (required in absolute mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_memory_mb: Option<u64>,
    /// Vcores of one node (required in absolute mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_vcores: Option<u64>,
}

#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Policy {
    /// The fair-share window, in seconds.
    pub window_seconds: u64,
    /// The longest a grant may last, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_grant_seconds: Option<u64>,
    /// `preemptible` or `deny`: work outside any budget.
    #[schemars(with = "String")]
    pub unbudgeted: WorkRule,
    /// `preemptible` or `deny`: work beyond a budget.
    #[schemars(with = "String")]
    pub overflow: WorkRule,
    pub overcommit: bool,
}

/// A job class.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Contract {
    pub name: String,
    /// The protected window, in seconds.
    pub min_runtime_seconds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_runtime_seconds: Option<u64>,
    pub resumable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpus: Option<u64>,
    /// GPUs of each cluster held for this contract's jobs: other work may borrow them, and
    /// a job of this contract takes them back at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_gpus: Option<u64>,
    pub default: bool,
    pub source: Location,
}

/// A share as written: a percentage of the parent or a weight among siblings.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ShareSpec {
    Percent(f64),
    Weight(f64),
}

/// A project and its subtree.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Project {
    pub name: String,
    /// Names from the top, joined by `/`.
    pub path: String,
    pub share: ShareSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpus: Option<u64>,
    pub users: Vec<User>,
    pub groups: Vec<String>,
    pub namespaces: Vec<String>,
    pub owners: Vec<String>,
    /// The contracts its jobs may use: its own `contracts`, else its parent's.
    pub contracts: Vec<String>,
    /// Its allocation on each cluster it may use, by cluster name, at the model's moment.
    pub clusters: BTreeMap<String, Allocation>,
    /// Its grants as written, in force or not at the model's moment.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub grants: Vec<Grant>,
    pub source: Location,
    pub children: Vec<Project>,
}

/// Extra share for a while.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Grant {
    pub amount: GrantAmount,
    /// When it starts (a date, or an RFC 3339 time in UTC); absent: in force until `until`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "some_instant")]
    #[schemars(with = "Option<String>")]
    pub from: Option<Instant>,
    /// When it ends: the first moment it is no longer in force.
    #[serde(serialize_with = "instant")]
    #[schemars(with = "String")]
    pub until: Instant,
    pub reason: String,
    /// The one cluster it applies on; absent: every cluster the project may use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    pub source: Location,
}

impl Grant {
    /// In force at `at`: started (or no start) and not yet ended.
    pub fn in_force(&self, at: Instant) -> bool {
        self.from.is_none_or(|f| f <= at) && at < self.until
    }
}

/// What a grant adds: percentage points of the parent, or GPUs guaranteed on a cluster.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum GrantAmount {
    SharePercent(f64),
    GuaranteedGpus(u64),
}

impl std::fmt::Display for GrantAmount {
    /// `+10%`, `+16 GPUs`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SharePercent(p) => write!(f, "+{}%", (p * 1e6).round() / 1e6),
            Self::GuaranteedGpus(1) => f.write_str("+1 GPU"),
            Self::GuaranteedGpus(n) => write!(f, "+{n} GPUs"),
        }
    }
}

fn instant<S: serde::Serializer>(at: &Instant, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_instant(*at))
}

fn some_instant<S: serde::Serializer>(at: &Option<Instant>, serializer: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => instant(at, serializer),
        None => serializer.serialize_none(),
    }
}

#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct User {
    pub name: String,
    /// This project is the user's default.
    pub default: bool,
}

/// A project's part of one cluster.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Allocation {
    /// The share as written on this cluster (an `on` override, or the project's own).
    pub share: ShareSpec,
    /// Its fraction of its parent, 0 to 1.
    pub normalized_share: f64,
    /// Its fraction of the cluster: the product of normalised shares along its path.
    pub effective_share: f64,
    /// Its part of the cluster's GPUs that no contract's reserve holds.
    pub guaranteed_gpus: u64,
    /// Of `guaranteed_gpus`, what no child is guaranteed (0 for a leaf).
    pub unallocated_gpus: u64,
    /// What grants in force add to `normalized_share` (0 to 1); absent: none.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub granted_share: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gpus: Option<u64>,
}

#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct Expectations {
    /// Every budget receives at least this fraction (0 to 1) of its entitled GPU-hours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_per_budget: Option<f64>,
    /// All budgets together receive at least this fraction of their entitled GPU-hours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_overall: Option<f64>,
    pub waits: Vec<WaitExpectation>,
}

/// The longest wait, in seconds, at some percentiles of one contract's jobs.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub struct WaitExpectation {
    pub contract: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p90_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_seconds: Option<u64>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Where something was written.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub struct Location {
    /// The file's path inside the repository.
    pub file: String,
    pub line: usize,
    pub column: usize,
}

/// `file:line:column`.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// The JSON Schema of [`Model`], as `allot schema` prints it.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(Model).to_value()
}
