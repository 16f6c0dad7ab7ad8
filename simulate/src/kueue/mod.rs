//! The `kueue` policy: Kueue's admission and preemption (Kueue 0.17 and later, the
//! `v1beta2` API) simulated for one resource, GPUs, in one ResourceFlavor. [`objects`] is
//! the reader of what a ClusterQueue and a Cohort say of GPUs, shared with the live views
//! (allot-live) so that both read a cluster's objects alike; [`setup`] reads the Kueue objects (the quota tree of Cohorts and ClusterQueues, the LocalQueues, the
//! priority classes, Fair Sharing and Admission Fair Sharing from Kueue's `Configuration`);
//! [`quota`] is Kueue's quota arithmetic on that tree (availability, borrowing, the fit
//! decision, the dominant resource share); [`policy`] is the scheduling loop (queues, cycles,
//! the order of a cycle's entries, admission); [`preemption`] the search for victims,
//! classical and Fair Sharing's.
//!
//! Each allot cluster has a setup of its own, and each budget leaf of the cluster the
//! ClusterQueue its jobs are submitted to (a leaf project's, as `allot build` writes one per
//! leaf). A job's ClusterQueue is the one the trace's `queue` column names (a LocalQueue as
//! `NAMESPACE/NAME`, or a ClusterQueue's name), else its budget's; its run is its budget's
//! whatever queue it ran in. Jobs without a ClusterQueue (naming none the setup has, or of a
//! budget that none takes: an inner project's own jobs, as Kueue queues only at its leaves;
//! work no budget covers when no ClusterQueue is named for [`UNBUDGETED`]), or larger than
//! their ClusterQueue could ever hold, or on a cluster without a setup, are not replayed:
//! they are counted with the unplaceable jobs ([`Simulation::unplaceable`](super::Simulation)),
//! as Kueue would never admit them.
//!
//! Objects may change with time: [`ClusterObjects::later`] gives those in force from each
//! grant boundary on (as `allot build` writes them for the shares then), the same objects
//! with other quotas and Fair Sharing weights. At a boundary the cluster's quota tree becomes
//! the new one, with the GPUs running booked in it, and the cluster is scheduled (see
//! [`policy`]); a job is counted unplaceable only when no quota in force from its submission
//! on could hold it.
//!
//! A job's priority is the trace's `priority` column, else the value of the
//! WorkloadPriorityClass named as its contract (as `allot build` writes one per contract,
//! and jobs select theirs by the label `kueue.x-k8s.io/priority-class`); a contract without
//! one: 0 (Kueue's default priority; file: pkg/util/priority/priority.go, func: Priority).
//!
//! What is not modelled: admission checks, Topology-Aware Scheduling and stopped queues
//! (refused by [`setup`]); Admission Fair Sharing (a setup that turns it on for a
//! ClusterQueue is refused, "not simulated yet"); `waitForPodsReady` (its timeouts and
//! backoff: a simulated job starts the moment it is admitted); kube-scheduler's placement
//! of pods (an admitted job is placed on the cluster's nodes best fit, and a job Kueue's
//! quota would admit but the nodes cannot place is treated as not fitting); namespaces
//! (every job may use its ClusterQueue); the time between Kueue's cycles and the time
//! victims take to stop (see [`policy`]).

pub mod objects;
pub(super) mod policy;
pub(super) mod preemption;
pub(super) mod quota;
pub(super) mod setup;
pub mod workloads;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use self::objects::ObjectError;
use self::quota::QuotaTree;
use self::setup::{Kind, Setup};

pub(super) use self::policy::Rules;

/// The project path of the work no budget covers on a cluster, as the simulator names it:
/// pair it with a ClusterQueue (`allot build` writes `root-unbudgeted` when such work is
/// preemptible) to replay that work.
pub const UNBUDGETED: &str = "(unbudgeted)";

/// The Kueue setups of a model's clusters, as the `kueue` policy simulates them.
#[derive(Clone, Debug)]
pub struct Kueue {
    pub(super) clusters: BTreeMap<String, Queues>,
}

impl PartialEq for Kueue {
    /// Two policies are the same when their setups and queues are (the quota trees follow).
    fn eq(&self, other: &Kueue) -> bool {
        self.clusters.len() == other.clusters.len()
            && self.clusters.iter().zip(&other.clusters).all(|((a, x), (b, y))| {
                a == b
                    && x.setup == y.setup
                    && x.by_path == y.by_path
                    && x.by_contract == y.by_contract
                    && x.later == y.later
            })
    }
}

/// One allot cluster's Kueue objects, as the caller has them (the command line: from
/// `allot_targets::kubernetes::kueue::objects` and `queue_names`).
#[derive(Clone, Copy, Debug)]
pub struct ClusterObjects<'a> {
    /// The allot cluster's name.
    pub cluster: &'a str,
    /// The Kueue objects (see [`Setup::read`] for the kinds read).
    pub objects: &'a [Value],
    /// Kueue's controller `Configuration`, when there is one.
    pub configuration: Option<&'a Value>,
    /// The GPU resource's name, such as `nvidia.com/gpu`.
    pub resource: &'a str,
    /// (ClusterQueue or Cohort name, project path) for each budget: the ClusterQueue a
    /// leaf's jobs go to. A Cohort stands for an inner project, whose own jobs Kueue cannot
    /// queue. [`UNBUDGETED`] names the work no budget covers.
    pub queues: &'a [(String, String)],
    /// (contract, ClusterQueue name) for each contract whose jobs go to a ClusterQueue of
    /// its own, whatever their budget: a contract's reserve (`allot build` writes
    /// `root-reserve-<contract>`). A pair whose ClusterQueue is not among the objects is
    /// left out.
    pub contracts: &'a [(String, String)],
    /// The objects in force from each later moment on (grants starting and ending), in
    /// order: the same Cohorts, ClusterQueues, LocalQueues and priority classes, their
    /// quotas and Fair Sharing weights changed. Empty: the objects hold all along.
    pub later: &'a [(i64, Vec<Value>)],
}

/// One cluster's setup, its quota tree (with no usage: what a ClusterQueue could ever hold),
/// and the ClusterQueue of each project path and of each name a job's `queue` may give.
#[derive(Clone, Debug)]
pub(super) struct Queues {
    pub(super) setup: Setup,
    pub(super) tree: QuotaTree,
    /// Each project path's ClusterQueue (an index of the setup's nodes).
    pub(super) by_path: BTreeMap<String, usize>,
    /// The ClusterQueue of each contract whose jobs go to one of its own.
    pub(super) by_contract: BTreeMap<String, usize>,
    /// The ClusterQueue each name a job's `queue` may give stands for: a ClusterQueue's
    /// name (one without a `/`), or a LocalQueue's `NAMESPACE/NAME`.
    by_queue: HashMap<String, usize>,
    /// The quota tree (with no usage) in force from each later moment on, in order.
    pub(super) later: Vec<(i64, QuotaTree)>,
}

impl Queues {
    /// The priority of a job under `contract`: its priority class's value, 0 without one.
    pub(super) fn priority(&self, contract: &str) -> i32 {
        self.setup.priority_classes.get(contract).copied().unwrap_or(0)
    }

    /// The ClusterQueue a trace's `queue` names: a LocalQueue's (`NAMESPACE/NAME`), or one
    /// by its name.
    pub(super) fn cluster_queue(&self, queue: &str) -> Option<usize> {
        self.by_queue.get(queue).copied()
    }

    /// The quota trees (with no usage) in force at some moment from `at` on: the one in
    /// force at `at`, then each later one.
    pub(super) fn trees_from(&self, at: i64) -> impl Iterator<Item = &QuotaTree> {
        let first_later = self.later.partition_point(|(from, _)| *from <= at);
        let in_force = match first_later {
            0 => &self.tree,
            n => &self.later[n - 1].1,
        };
        std::iter::once(in_force).chain(self.later[first_later..].iter().map(|(_, tree)| tree))
    }
}

/// A priority as a tier of the simulator's queues, which serve tier 0 first: the highest
/// priority first, every `i32` a tier of its own.
pub(super) fn tier(priority: i32) -> u32 {
    (i64::from(i32::MAX) - i64::from(priority)) as u32
}

/// The priority of a [`tier`].
pub(super) fn priority(tier: u32) -> i32 {
    (i64::from(i32::MAX) - i64::from(tier)) as i32
}

impl Kueue {
    /// The policy for the clusters given, each with its objects read by [`Setup::read`].
    /// The first problem is the error, naming its object or pair: a cluster given twice; a
    /// pair that names neither a ClusterQueue nor a Cohort, or a project path given two ClusterQueues;
    /// Admission Fair Sharing on for a ClusterQueue (not simulated yet).
    pub fn new<'a>(clusters: impl IntoIterator<Item = ClusterObjects<'a>>) -> Result<Kueue, ObjectError> {
        let mut out = BTreeMap::new();
        for given in clusters {
            let fail =
                |problem: String| ObjectError { object: format!("cluster {:?}", given.cluster), problem };
            let setup = Setup::read(given.objects, given.configuration, given.resource)?;
            if let Some(node) =
                setup.nodes.iter().find(|n| matches!(n.kind, Kind::ClusterQueue { afs: true, .. }))
            {
                return Err(ObjectError {
                    object: format!("ClusterQueue {:?}", node.name),
                    problem: "Admission Fair Sharing (admissionScope UsageBasedAdmissionFairSharing) is not simulated yet".into(),
                });
            }
            // The nodes by name, read once (a ClusterQueue and a Cohort may share one).
            let mut queues = HashMap::new();
            let mut cohorts = HashSet::new();
            for (i, node) in setup.nodes.iter().enumerate() {
                match node.kind {
                    Kind::ClusterQueue { .. } => queues.insert(node.name.as_str(), i).is_none(),
                    Kind::Cohort => cohorts.insert(node.name.as_str()),
                };
            }
            let mut by_path = BTreeMap::new();
            for (name, path) in given.queues {
                let node = match (queues.get(name.as_str()), cohorts.contains(name.as_str())) {
                    (Some(&queue), _) => Some(queue),
                    (None, true) => None,
                    (None, false) => {
                        return Err(fail(format!(
                            "{name:?} (for project {path:?}) names no ClusterQueue or Cohort"
                        )));
                    }
                };
                if let Some(node) = node
                    && by_path.insert(path.clone(), node).is_some()
                {
                    return Err(fail(format!("project {path:?} is given two ClusterQueues")));
                }
            }
            let by_contract = given
                .contracts
                .iter()
                .filter_map(|(contract, name)| Some((contract.clone(), *queues.get(name.as_str())?)))
                .collect();
            let locals = setup
                .local_queues
                .iter()
                .map(|((namespace, name), local)| (format!("{namespace}/{name}"), local.cluster_queue));
            // A name with a `/` is a LocalQueue's (a ClusterQueue's is a Kubernetes name).
            let by_queue = queues
                .into_iter()
                .filter(|(name, _)| !name.contains('/'))
                .map(|(name, node)| (name.to_string(), node))
                .chain(locals)
                .collect();
            let tree = QuotaTree::new(&setup.nodes);
            let mut later = Vec::with_capacity(given.later.len());
            for (from, objects) in given.later {
                let then = Setup::read(objects, given.configuration, given.resource)?;
                if let Some(what) = setup.other_than_quotas(&then) {
                    return Err(fail(format!(
                        "its objects from {} change {what}, not only quotas and weights",
                        allot_compiler::units::format_instant(*from)
                    )));
                }
                if later.last().is_some_and(|(previous, _)| previous >= from) {
                    return Err(fail("its later objects are not in time order".into()));
                }
                later.push((*from, QuotaTree::new(&then.nodes)));
            }
            let queues = Queues { setup, tree, by_path, by_contract, by_queue, later };
            if out.insert(given.cluster.to_string(), queues).is_some() {
                return Err(fail("given twice".into()));
            }
        }
        Ok(Kueue { clusters: out })
    }
}
