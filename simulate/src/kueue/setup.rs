//! The Kueue objects the `kueue` policy simulates, read from their JSON (as `kubectl get -o
//! yaml` or `allot build` writes them, converted from YAML): the Cohorts and ClusterQueues
//! as one tree of quota nodes, the LocalQueues, the WorkloadPriorityClasses, and from Kueue's
//! `Configuration` whether Fair Sharing and Admission Fair Sharing are on. The policy
//! simulates one resource, GPUs (its name, such as `nvidia.com/gpu`, is the caller's), in one
//! ResourceFlavor: the quotas of every other resource (cpu, memory) are not read, and a
//! second flavor with GPU quota is refused.
//!
//! Every rule here is Kueue's own (the file and function are cited where it comes from),
//! applied to the objects as they are, before the policy uses them: defaults as Kueue's CRDs
//! and controllers set them, and the checks of Kueue's webhooks that the quotas depend on. What
//! Kueue can do but the policy does not simulate is refused, naming the object: admission
//! checks, Topology-Aware Scheduling, stopped queues. Names are untrusted text: errors quote
//! them with `{:?}`, so no control character reaches a terminal.
//!
//! Objects are read as `kueue.x-k8s.io/v1beta2`, and as `kueue.x-k8s.io/v1beta1` where the
//! fields read are the same; the one difference that matters here is a ClusterQueue's
//! cohort, `spec.cohortName` in v1beta2 and `spec.cohort` in v1beta1 (Kueue:
//! apis/kueue/v1beta1/clusterqueue_conversion.go,
//! Convert_v1beta1_ClusterQueueSpec_To_v1beta2_ClusterQueueSpec).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use allot_compiler::escape;
use allot_compiler::units::parse_quantity;
use serde_json::Value;

use super::objects::{self, ObjectError, V1BETA1, V1BETA2, shown};

/// The most objects read in one setup.
pub const MAX_OBJECTS: usize = 100_000;

const CONFIG_V1BETA2: &str = "config.kueue.x-k8s.io/v1beta2";
const CONFIG_V1BETA1: &str = "config.kueue.x-k8s.io/v1beta1";

/// Kinds that carry nothing the policy reads, skipped: each acts only when a ClusterQueue or
/// a ResourceFlavor refers to it (admission checks, topologies), which is refused, or holds
/// what the policy does not model (namespaces' labels), as (API group, kind).
const SKIPPED: [(&str, &str); 6] = [
    ("", "Namespace"),
    ("kueue.x-k8s.io", "AdmissionCheck"),
    ("kueue.x-k8s.io", "ProvisioningRequestConfig"),
    ("kueue.x-k8s.io", "MultiKueueConfig"),
    ("kueue.x-k8s.io", "MultiKueueCluster"),
    ("kueue.x-k8s.io", "Topology"),
];

/// A Kueue setup as the policy takes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// The Cohorts and ClusterQueues, in the order of the objects, then the implicit cohorts
    /// (named by a `cohortName` or `parentName` but with no Cohort object) in the order they
    /// were first named. Parents need not come before their children.
    pub nodes: Vec<Node>,
    /// Each LocalQueue by (namespace, name).
    pub local_queues: BTreeMap<(String, String), LocalQueue>,
    /// Each WorkloadPriorityClass's `value`, by name.
    pub priority_classes: BTreeMap<String, i32>,
    /// Fair Sharing's preemption strategies, in order; `None`: Fair Sharing is off.
    pub fair_sharing: Option<Vec<Strategy>>,
    /// Admission Fair Sharing's settings; `None`: it is off.
    pub admission_fair_sharing: Option<AdmissionFairSharing>,
}

/// A Cohort or a ClusterQueue: a node of the quota tree, with its GPU quota in the one flavor.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// `metadata.name` (an implicit cohort: the name it is referred to by).
    pub name: String,
    /// A Cohort or a ClusterQueue.
    pub kind: Kind,
    /// The index in [`Setup::nodes`] of its Cohort (a ClusterQueue's `cohortName`, a
    /// Cohort's `parentName`); `None` for a root.
    pub parent: Option<usize>,
    /// `nominalQuota` of the GPU resource (0 when not set).
    pub nominal: u64,
    /// `borrowingLimit`: how far above its quota the subtree may borrow; `None`: unlimited.
    pub borrowing_limit: Option<u64>,
    /// `lendingLimit`: how much of its quota it lends; `None`: all of it.
    pub lending_limit: Option<u64>,
    /// `fairSharing.weight` (default 1).
    pub weight: f64,
    /// Whether its `resourceGroups` list the GPU resource (with a quota, 0 included). Kueue
    /// admits no workload asking for GPUs in a ClusterQueue that does not (file:
    /// pkg/scheduler/flavorassigner/flavorassigner.go, func: findFlavorForPodSets).
    pub covers: bool,
}

/// What a node is.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A Cohort, explicit or implicit (no quota, weight 1).
    Cohort,
    /// A ClusterQueue, with what it decides for its own workloads.
    ClusterQueue {
        /// `spec.preemption`.
        preemption: Preemption,
        /// `spec.queueingStrategy`.
        queueing: Queueing,
        /// Whether Admission Fair Sharing orders its queue: the Configuration turns it on and
        /// the ClusterQueue opts in (`admissionScope.admissionMode:
        /// UsageBasedAdmissionFairSharing`) (file:
        /// pkg/util/admissionfairsharing/admission_fair_sharing.go, func: ResourceWeights).
        afs: bool,
    },
}

/// A ClusterQueue's `spec.preemption`, every policy `Never` unless set (file:
/// apis/kueue/v1beta2/clusterqueue_types.go, type: ClusterQueuePreemption).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Preemption {
    /// `withinClusterQueue`.
    pub within_cluster_queue: WithinClusterQueue,
    /// `reclaimWithinCohort`.
    pub reclaim_within_cohort: ReclaimWithinCohort,
    /// `borrowWithinCohort`.
    pub borrow_within_cohort: BorrowWithinCohort,
}

/// `withinClusterQueue`: which of its own workloads a ClusterQueue's workload may preempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WithinClusterQueue {
    /// None of them (the default).
    #[default]
    Never,
    /// Those of lower priority.
    LowerPriority,
    /// Those of lower priority, or of equal priority queued later.
    LowerOrNewerEqualPriority,
}

/// `reclaimWithinCohort`: which workloads of other ClusterQueues that borrow it may preempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReclaimWithinCohort {
    /// None of them (the default).
    #[default]
    Never,
    /// Those of lower priority.
    LowerPriority,
    /// Any of them.
    Any,
}

/// `borrowWithinCohort`: whether it may preempt while it borrows itself, and up to which
/// priority of the workloads preempted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BorrowWithinCohort {
    /// It may not (the default).
    #[default]
    Never,
    /// It may, preempting workloads of lower priority.
    LowerPriority {
        /// `maxPriorityThreshold`: only workloads of at most this priority; `None`: any lower.
        max_priority_threshold: Option<i32>,
    },
}

/// `queueingStrategy` (default `BestEffortFIFO`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Queueing {
    /// `StrictFIFO`: a head that does not fit blocks the queue.
    StrictFifo,
    /// `BestEffortFIFO` (the default): a head that does not fit is set aside.
    #[default]
    BestEffortFifo,
}

/// A LocalQueue: the ClusterQueue it submits to, and its weight for Admission Fair Sharing.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalQueue {
    /// The index of its ClusterQueue in [`Setup::nodes`].
    pub cluster_queue: usize,
    /// `spec.fairSharing.weight` (default 1) (file:
    /// pkg/util/admissionfairsharing/admission_fair_sharing.go, func: LQWeightAsFloat64).
    pub weight: f64,
}

/// One of Fair Sharing's preemption strategies (file:
/// pkg/scheduler/preemption/fairsharing/strategy.go).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Preempt when the preemptor's share is at most the target's share after the preemption.
    LessThanOrEqualToFinalShare,
    /// Preempt when the preemptor's share is below the target's share before it.
    LessThanInitialShare,
}

/// Admission Fair Sharing's settings, in seconds (file:
/// apis/config/v1beta2/configuration_types.go, type: AdmissionFairSharing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionFairSharing {
    /// `usageHalfLifeTime` (0 when not set: usage is forgotten at once).
    pub half_life: f64,
    /// `usageSamplingInterval` (default 5 minutes).
    pub sampling_interval: f64,
    /// `resourceWeights` of the GPU resource (default 1).
    pub gpu_weight: f64,
}

impl Setup {
    /// The setup of the Kueue `objects` (each with `apiVersion`, `kind`, `metadata` and its
    /// fields), counting GPUs of `resource` (`nvidia.com/gpu`), under Kueue's controller
    /// `configuration` when there is one (none: Kueue's defaults, Fair Sharing and Admission
    /// Fair Sharing off). The first problem found is the error, naming its object.
    ///
    /// Kinds read: ClusterQueue, Cohort, ResourceFlavor, LocalQueue and
    /// WorkloadPriorityClass. Kinds that carry nothing the policy reads (`SKIPPED`:
    /// Namespace, AdmissionCheck, ProvisioningRequestConfig, MultiKueueConfig,
    /// MultiKueueCluster, Topology) are skipped; any other kind is an error ("the kueue policy
    /// cannot simulate a KIND"), a Workload too (jobs come from the trace).
    pub fn read(
        objects: &[Value],
        configuration: Option<&Value>,
        resource: &str,
    ) -> Result<Setup, ObjectError> {
        if objects.len() > MAX_OBJECTS {
            return Err(ObjectError {
                object: "objects".into(),
                problem: format!("{} objects, more than the {MAX_OBJECTS} read", objects.len()),
            });
        }
        let mut reader = Reader::new(resource);
        for (index, object) in objects.iter().enumerate() {
            reader.object(index, object)?;
        }
        let mut setup = reader.finish()?;
        if let Some(configuration) = configuration {
            read_configuration(configuration, resource, &mut setup)?;
        }
        if setup.admission_fair_sharing.is_none() {
            for node in &mut setup.nodes {
                if let Kind::ClusterQueue { afs, .. } = &mut node.kind {
                    *afs = false;
                }
            }
        }
        Ok(setup)
    }

    /// The index of the ClusterQueue `name` (a linear search, for tests).
    #[cfg(test)]
    pub fn cluster_queue(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name && matches!(n.kind, Kind::ClusterQueue { .. }))
    }

    /// The index of the Cohort `name`, explicit or implicit (a linear search, for tests).
    #[cfg(test)]
    pub fn cohort(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name && n.kind == Kind::Cohort)
    }

    /// What `later` (the objects of a later moment) changes beyond the quotas and Fair
    /// Sharing weights of its Cohorts and ClusterQueues, if anything: a node added, gone or
    /// moved, a ClusterQueue's preemption or queueing, the LocalQueues or the priority
    /// classes. The policy swaps quotas at a grant boundary and keeps everything else.
    pub fn other_than_quotas(&self, later: &Setup) -> Option<String> {
        if self.nodes.len() != later.nodes.len() {
            return Some("its Cohorts and ClusterQueues".into());
        }
        let moved = self
            .nodes
            .iter()
            .zip(&later.nodes)
            .find(|(a, b)| a.name != b.name || a.kind != b.kind || a.parent != b.parent);
        if let Some((node, _)) = moved {
            return Some(format!("the Cohort or ClusterQueue {:?}", node.name));
        }
        if self.local_queues != later.local_queues {
            return Some("its LocalQueues".into());
        }
        if self.priority_classes != later.priority_classes {
            return Some("its priority classes".into());
        }
        None
    }
}

/// The object a problem is about, described for an error: its kind, and its name quoted.
struct Subject(String);

impl Subject {
    fn fail(&self, problem: impl Into<String>) -> ObjectError {
        ObjectError { object: self.0.clone(), problem: problem.into() }
    }
}

/// A node read, its parent still a name.
struct Pending {
    node: Node,
    parent: Option<String>,
    subject: Subject,
}

/// The objects read so far.
struct Reader<'r> {
    resource: &'r str,
    nodes: Vec<Pending>,
    cohorts: HashMap<String, usize>,
    cluster_queues: HashMap<String, usize>,
    /// Every flavor a ClusterQueue names, with the first ClusterQueue naming it.
    flavors_named: BTreeMap<String, usize>,
    flavors: BTreeSet<String>,
    /// The flavor that carries GPUs, and the first object that gave it GPU quota.
    gpu_flavor: Option<(String, String)>,
    /// LocalQueues with their ClusterQueue's name, resolved at the end.
    local_queues: Vec<(Subject, (String, String), String, f64)>,
    priority_classes: BTreeMap<String, i32>,
}

impl<'r> Reader<'r> {
    fn new(resource: &'r str) -> Reader<'r> {
        Reader {
            resource,
            nodes: Vec::new(),
            cohorts: HashMap::new(),
            cluster_queues: HashMap::new(),
            flavors_named: BTreeMap::new(),
            flavors: BTreeSet::new(),
            gpu_flavor: None,
            local_queues: Vec::new(),
            priority_classes: BTreeMap::new(),
        }
    }

    fn object(&mut self, index: usize, o: &Value) -> Result<(), ObjectError> {
        let position = Subject(format!("object {index}"));
        let kind = text(o, "kind", &position)?.ok_or_else(|| position.fail("no kind"))?;
        let api = text(o, "apiVersion", &position)?.unwrap_or("");
        let group = api.rsplit_once('/').map_or("", |(group, _)| group);
        if SKIPPED.contains(&(group, kind)) {
            return Ok(());
        }
        let known = ["ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass"];
        let Some(&kind) = known.iter().find(|&&k| k == kind).filter(|_| group == "kueue.x-k8s.io") else {
            let named = Subject(format!("{} {}", escape::line(kind), described_name(o)));
            let problem = format!("the kueue policy cannot simulate a {}", escape::line(kind));
            return Err(named.fail(if kind == "Workload" && group == "kueue.x-k8s.io" {
                format!("{problem}: the jobs come from the trace")
            } else {
                problem
            }));
        };
        let metadata = &o["metadata"];
        let Some(name) = text(metadata, "name", &position)?.filter(|n| !n.is_empty()) else {
            return Err(Subject(format!("{kind} at {index}")).fail("no metadata.name"));
        };
        let subject = if kind == "LocalQueue" {
            let namespace = text(metadata, "namespace", &position)?.unwrap_or("");
            Subject(format!("{kind} {:?}", format!("{namespace}/{name}")))
        } else {
            Subject(format!("{kind} {name:?}"))
        };
        if api != V1BETA2 && api != V1BETA1 {
            return Err(
                subject.fail(format!("apiVersion {api:?} is not read (only {V1BETA2} and {V1BETA1})"))
            );
        }
        match kind {
            "ClusterQueue" => self.cluster_queue(o, name, subject),
            "Cohort" => self.cohort(o, name, subject),
            "ResourceFlavor" => self.flavor(o, name, &subject),
            "LocalQueue" => self.local_queue(o, name, subject),
            _ => self.priority_class(o, name, &subject),
        }
    }

    /// A ClusterQueue (file: apis/kueue/v1beta2/clusterqueue_types.go, type:
    /// ClusterQueueSpec; webhook: pkg/webhooks/clusterqueue_webhook.go, func:
    /// validateClusterQueueSpec).
    fn cluster_queue(&mut self, o: &Value, name: &str, subject: Subject) -> Result<(), ObjectError> {
        let spec = &o["spec"];
        let checks = !list(spec, "admissionChecks", &subject)?.is_empty()
            || !list(&spec["admissionChecksStrategy"], "admissionChecks", &subject)?.is_empty();
        if checks {
            return Err(subject.fail("admission checks are not simulated"));
        }
        stop_policy(spec, &subject)?;
        let cohort = objects::cohort_of(o).map_err(|p| subject.fail(p))?.map(str::to_string);
        let index = self.nodes.len();
        let quota = self.quota(spec, &subject, cohort.is_some(), true)?;
        for flavor in &quota.flavors {
            self.flavors_named.entry(flavor.clone()).or_insert(index);
        }
        let preemption = preemption(&spec["preemption"], &subject)?;
        let queueing = match text(spec, "queueingStrategy", &subject)? {
            None | Some("BestEffortFIFO") => Queueing::BestEffortFifo,
            Some("StrictFIFO") => Queueing::StrictFifo,
            Some(other) => return Err(subject.fail(format!("queueingStrategy {other:?} is not Kueue's"))),
        };
        let afs = match text(&spec["admissionScope"], "admissionMode", &subject)? {
            Some("UsageBasedAdmissionFairSharing") => true,
            None | Some("NoAdmissionFairSharing") => false,
            Some(other) => {
                return Err(subject.fail(format!("admissionScope.admissionMode {other:?} is not Kueue's")));
            }
        };
        if self.cluster_queues.insert(name.to_string(), index).is_some() {
            return Err(subject.fail("defined twice"));
        }
        let kind = Kind::ClusterQueue { preemption, queueing, afs };
        let node = quota.node(name, kind, weight(&spec["fairSharing"], &subject)?);
        self.nodes.push(Pending { node, parent: cohort, subject });
        Ok(())
    }

    /// A Cohort (file: apis/kueue/v1beta2/cohort_types.go, type: CohortSpec; webhook:
    /// pkg/webhooks/cohort_webhook.go, func: validateCohort).
    fn cohort(&mut self, o: &Value, name: &str, subject: Subject) -> Result<(), ObjectError> {
        let spec = &o["spec"];
        let parent = objects::parent_of(spec).map_err(|p| subject.fail(p))?.map(str::to_string);
        let quota = self.quota(spec, &subject, parent.is_some(), false)?;
        if self.cohorts.insert(name.to_string(), self.nodes.len()).is_some() {
            return Err(subject.fail("defined twice"));
        }
        let node = quota.node(name, Kind::Cohort, weight(&spec["fairSharing"], &subject)?);
        self.nodes.push(Pending { node, parent, subject });
        Ok(())
    }

    /// A ResourceFlavor; one for Topology-Aware Scheduling (`topologyName`) is refused.
    fn flavor(&mut self, o: &Value, name: &str, subject: &Subject) -> Result<(), ObjectError> {
        if let Some(topology) = text(&o["spec"], "topologyName", subject)? {
            return Err(subject
                .fail(format!("topologyName {topology:?}: Topology-Aware Scheduling is not simulated")));
        }
        if !self.flavors.insert(name.to_string()) {
            return Err(subject.fail("defined twice"));
        }
        Ok(())
    }

    fn local_queue(&mut self, o: &Value, name: &str, subject: Subject) -> Result<(), ObjectError> {
        let Some(namespace) = text(&o["metadata"], "namespace", &subject)?.filter(|n| !n.is_empty()) else {
            return Err(subject.fail("no metadata.namespace"));
        };
        let spec = &o["spec"];
        stop_policy(spec, &subject)?;
        let Some(cluster_queue) = text(spec, "clusterQueue", &subject)?.filter(|c| !c.is_empty()) else {
            return Err(subject.fail("no spec.clusterQueue"));
        };
        let weight = weight(&spec["fairSharing"], &subject)?;
        let key = (namespace.to_string(), name.to_string());
        self.local_queues.push((subject, key, cluster_queue.to_string(), weight));
        Ok(())
    }

    /// A WorkloadPriorityClass: its `value` (an int32, beside `metadata`: the object has no
    /// `spec`) (file: apis/kueue/v1beta2/workloadpriorityclass_types.go).
    fn priority_class(&mut self, o: &Value, name: &str, subject: &Subject) -> Result<(), ObjectError> {
        let value = o["value"]
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| subject.fail(format!("value {} is not a 32-bit integer", o["value"])))?;
        if self.priority_classes.insert(name.to_string(), value).is_some() {
            return Err(subject.fail("defined twice"));
        }
        Ok(())
    }

    /// The GPU quota in `spec.resourceGroups` of a ClusterQueue or a Cohort, checked as Kueue's
    /// CRD and webhook check it (file: pkg/webhooks/clusterqueue_webhook.go, funcs:
    /// validateResourceGroups, validateFlavorQuotas, validateLimit, validateLendingLimit): each
    /// flavor's resources are its group's covered resources in order, no resource or flavor
    /// twice, quantities not negative, limits only with a parent (`has_parent`), and for a
    /// ClusterQueue (`cluster_queue`) a lending limit no more than the nominal quota (Kueue
    /// does not ask it of a Cohort, whose subtree may lend more than its own quota).
    fn quota(
        &mut self,
        spec: &Value,
        subject: &Subject,
        has_parent: bool,
        cluster_queue: bool,
    ) -> Result<Quota, ObjectError> {
        let resource = self.resource;
        let mut quota = Quota::default();
        let (mut covered_seen, mut flavors_seen) = (BTreeSet::new(), BTreeSet::new());
        for group in list(spec, "resourceGroups", subject)? {
            let covered = list(group, "coveredResources", subject)?
                .iter()
                .map(|r| {
                    r.as_str().ok_or_else(|| subject.fail(format!("covered resource {r} is not a name")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            for r in &covered {
                if !covered_seen.insert(*r) {
                    return Err(subject.fail(format!("resource {r:?} is covered twice")));
                }
            }
            for flavor in list(group, "flavors", subject)? {
                let Some(name) = text(flavor, "name", subject)?.filter(|n| !n.is_empty()) else {
                    return Err(subject.fail("a flavor has no name"));
                };
                if !flavors_seen.insert(name) {
                    return Err(subject.fail(format!("flavor {name:?} is listed twice")));
                }
                quota.flavors.push(name.to_string());
                let resources = list(flavor, "resources", subject)?;
                let names = resources.iter().map(|r| r["name"].as_str());
                if !names.eq(covered.iter().map(|c| Some(*c))) {
                    return Err(subject.fail(format!(
                        "the resources of flavor {name:?} must be its group's coveredResources, in order"
                    )));
                }
            }
        }
        // The GPU quota itself, read as the live views read it.
        for q in objects::gpu_quotas(spec, resource).map_err(|p| subject.fail(p))? {
            self.gpu_flavor(q.flavor, subject)?;
            quota.covers = true;
            quota.nominal = q.nominal;
            quota.borrowing_limit = q.borrowing_limit;
            quota.lending_limit = q.lending_limit;
        }
        let parent = if cluster_queue { "a cohortName" } else { "a parentName" };
        if !has_parent && quota.borrowing_limit.is_some() {
            return Err(subject.fail(format!("a borrowingLimit needs {parent} to borrow from")));
        }
        if !has_parent && quota.lending_limit.is_some() {
            return Err(subject.fail(format!("a lendingLimit needs {parent} to lend to")));
        }
        if let Some(lending) = quota.lending_limit.filter(|&l| cluster_queue && l > quota.nominal) {
            return Err(subject.fail(format!(
                "lendingLimit {lending} of {resource:?} is above its nominalQuota {}",
                quota.nominal
            )));
        }
        Ok(quota)
    }

    /// Notes that flavor `name` carries GPUs in the object `subject`: one flavor may.
    fn gpu_flavor(&mut self, name: &str, subject: &Subject) -> Result<(), ObjectError> {
        match &self.gpu_flavor {
            None => self.gpu_flavor = Some((name.to_string(), subject.0.clone())),
            Some((first, _)) if first == name => {}
            Some((first, at)) => {
                return Err(subject.fail(format!(
                    "flavor {name:?} has quota for {:?}, and so does flavor {first:?} (in {at}): the kueue policy simulates one ResourceFlavor for GPUs",
                    self.resource
                )));
            }
        }
        Ok(())
    }

    /// The setup: parents resolved (implicit cohorts made), no cycle, every flavor a
    /// ClusterQueue names read, every LocalQueue's ClusterQueue read.
    fn finish(mut self) -> Result<Setup, ObjectError> {
        // A cohortName or parentName that names no Cohort object is an implicit cohort,
        // without quota (file: pkg/cache/hierarchy/manager.go, funcs: UpdateClusterQueueEdge,
        // UpdateCohortEdge, getOrCreateCohort). It has no parent of its own.
        for i in 0..self.nodes.len() {
            let Some(parent) = self.nodes[i].parent.clone() else { continue };
            let index = match self.cohorts.get(&parent) {
                Some(&index) => index,
                None => {
                    let index = self.nodes.len();
                    self.cohorts.insert(parent.clone(), index);
                    let node = Node {
                        name: parent.clone(),
                        kind: Kind::Cohort,
                        parent: None,
                        nominal: 0,
                        borrowing_limit: None,
                        lending_limit: None,
                        weight: 1.0,
                        covers: false,
                    };
                    self.nodes.push(Pending {
                        node,
                        parent: None,
                        subject: Subject(format!("Cohort {parent:?}")),
                    });
                    index
                }
            };
            self.nodes[i].node.parent = Some(index);
        }
        check_cycles(&self.nodes)?;
        // Kueue holds a ClusterQueue that names a missing flavor inactive (file:
        // pkg/cache/scheduler/clusterqueue.go, func: updateQueueStatus, missingFlavors).
        if let Some((flavor, &at)) = self.flavors_named.iter().find(|(f, _)| !self.flavors.contains(*f)) {
            return Err(self.nodes[at].subject.fail(format!(
                "flavor {flavor:?} names no ResourceFlavor (Kueue holds such a ClusterQueue inactive)"
            )));
        }
        let mut local_queues = BTreeMap::new();
        for (subject, key, cluster_queue, weight) in self.local_queues {
            let Some(&index) = self.cluster_queues.get(&cluster_queue) else {
                return Err(subject.fail(format!("clusterQueue {cluster_queue:?} names no ClusterQueue")));
            };
            if local_queues.insert(key, LocalQueue { cluster_queue: index, weight }).is_some() {
                return Err(subject.fail("defined twice"));
            }
        }
        Ok(Setup {
            nodes: self.nodes.into_iter().map(|p| p.node).collect(),
            local_queues,
            priority_classes: self.priority_classes,
            fair_sharing: None,
            admission_fair_sharing: None,
        })
    }
}

/// A node's GPU quota, as read.
#[derive(Default)]
struct Quota {
    nominal: u64,
    borrowing_limit: Option<u64>,
    lending_limit: Option<u64>,
    covers: bool,
    /// Every flavor named, for every resource.
    flavors: Vec<String>,
}

impl Quota {
    /// The node of a ClusterQueue or Cohort `name` of this quota (its parent set later).
    fn node(&self, name: &str, kind: Kind, weight: f64) -> Node {
        Node {
            name: name.to_string(),
            kind,
            parent: None,
            nominal: self.nominal,
            borrowing_limit: self.borrowing_limit,
            lending_limit: self.lending_limit,
            weight,
            covers: self.covers,
        }
    }
}

/// Refuses a cycle of Cohorts' parents, naming it; Kueue holds the ClusterQueues under one
/// inactive (file: pkg/cache/hierarchy/cycle.go, func: HasCycle). Each node is walked once.
fn check_cycles(nodes: &[Pending]) -> Result<(), ObjectError> {
    // 0: not seen, 1: on the walk now, 2: done (no cycle above it).
    let mut state = vec![0u8; nodes.len()];
    let mut walk: Vec<usize> = Vec::new();
    for start in 0..nodes.len() {
        let mut at = Some(start);
        while let Some(i) = at {
            match state[i] {
                2 => break,
                1 => {
                    let from = walk.iter().position(|&w| w == i).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        walk[from..].iter().map(|&w| format!("{:?}", nodes[w].node.name)).collect();
                    cycle.push(format!("{:?}", nodes[i].node.name));
                    return Err(nodes[i]
                        .subject
                        .fail(format!("its parentName makes a cycle: {}", cycle.join(" -> "))));
                }
                _ => {
                    state[i] = 1;
                    walk.push(i);
                    at = nodes[i].node.parent;
                }
            }
        }
        for &w in &walk {
            state[w] = 2;
        }
        walk.clear();
    }
    Ok(())
}

/// `stopPolicy` `None` (or unset). A held or draining queue is refused rather than simulated
/// as inactive: a setup taken with a queue stopped is a moment's state, not a policy.
fn stop_policy(spec: &Value, subject: &Subject) -> Result<(), ObjectError> {
    match text(spec, "stopPolicy", subject)? {
        None | Some("None") => Ok(()),
        Some(policy) => {
            Err(subject
                .fail(format!("stopPolicy {policy:?}: a stopped queue is not simulated (set it to None)")))
        }
    }
}

/// `spec.preemption`, with Kueue's defaults (`Never`) and its rule that `borrowWithinCohort`
/// needs `reclaimWithinCohort` (CRD rule on ClusterQueuePreemption; webhook:
/// pkg/webhooks/clusterqueue_webhook.go, func: validatePreemption).
fn preemption(p: &Value, subject: &Subject) -> Result<Preemption, ObjectError> {
    let bad = |field: &str, value: &str| subject.fail(format!("preemption.{field} {value:?} is not Kueue's"));
    let within_cluster_queue = match text(p, "withinClusterQueue", subject)? {
        None | Some("Never") => WithinClusterQueue::Never,
        Some("LowerPriority") => WithinClusterQueue::LowerPriority,
        Some("LowerOrNewerEqualPriority") => WithinClusterQueue::LowerOrNewerEqualPriority,
        Some(other) => return Err(bad("withinClusterQueue", other)),
    };
    let reclaim_within_cohort = match text(p, "reclaimWithinCohort", subject)? {
        None | Some("Never") => ReclaimWithinCohort::Never,
        Some("LowerPriority") => ReclaimWithinCohort::LowerPriority,
        Some("Any") => ReclaimWithinCohort::Any,
        Some(other) => return Err(bad("reclaimWithinCohort", other)),
    };
    let borrow = &p["borrowWithinCohort"];
    let borrow_within_cohort = match text(borrow, "policy", subject)? {
        None | Some("Never") => BorrowWithinCohort::Never,
        Some("LowerPriority") => {
            let threshold = &borrow["maxPriorityThreshold"];
            let max_priority_threshold = match threshold {
                Value::Null => None,
                v => Some(v.as_i64().and_then(|v| i32::try_from(v).ok()).ok_or_else(|| {
                    subject
                        .fail(format!("borrowWithinCohort.maxPriorityThreshold {v} is not a 32-bit integer"))
                })?),
            };
            BorrowWithinCohort::LowerPriority { max_priority_threshold }
        }
        Some(other) => return Err(bad("borrowWithinCohort.policy", other)),
    };
    if reclaim_within_cohort == ReclaimWithinCohort::Never
        && borrow_within_cohort != BorrowWithinCohort::Never
    {
        return Err(subject.fail("borrowWithinCohort needs reclaimWithinCohort other than Never"));
    }
    Ok(Preemption { within_cluster_queue, reclaim_within_cohort, borrow_within_cohort })
}

/// `fairSharing.weight`: a quantity (`1`, `"35"`, `"17500m"`, `"0.5"`), default 1; 0 or
/// above 10^-9 (file: pkg/webhooks/common.go, func: validateFairSharing; the value as
/// pkg/cache/scheduler/fair_sharing.go, func: parseFairWeight, takes it).
fn weight(fair_sharing: &Value, subject: &Subject) -> Result<f64, ObjectError> {
    let v = &fair_sharing["weight"];
    let nanos = match v {
        Value::Null => return Ok(1.0),
        Value::Number(n) => {
            n.as_f64().filter(|f| f.is_finite() && f.abs() < 1e18).map(|f| (f * 1e9).round() as i128)
        }
        Value::String(s) => parse_quantity(s),
        _ => None,
    }
    .ok_or_else(|| subject.fail(format!("fairSharing.weight {v} is not a quantity")))?;
    if nanos < 0 {
        return Err(subject.fail(format!("fairSharing.weight {v} is negative")));
    }
    if nanos == 1 {
        return Err(subject.fail(format!("fairSharing.weight {v}: when not 0, a weight must be above 10^-9")));
    }
    Ok(nanos as f64 / 1e9)
}

/// Kueue's controller `Configuration` (`config.kueue.x-k8s.io/v1beta2`, or v1beta1): Fair
/// Sharing and Admission Fair Sharing.
///
/// Fair Sharing is on when `fairSharing` is there (v1beta1: with `enable: true`; file:
/// apis/config/v1beta1/configuration_conversion.go, func:
/// Convert_v1beta1_Configuration_To_v1beta2_Configuration). Its `preemptionStrategies` must
/// be one of Kueue's three lists (file: pkg/config/validation.go, func: validateFairSharing);
/// none or an empty list takes Kueue's runtime fallback, both strategies (file:
/// pkg/scheduler/preemption/preemption.go, func: parseStrategies), which v1beta1 defaults to,
/// though the v1beta2 validation would refuse an empty list.
///
/// Admission Fair Sharing is on when `admissionFairSharing` is there (and Kueue's gate
/// `AdmissionFairSharing`, on by default since 0.15, is assumed on): `usageHalfLifeTime`
/// (unset: 0), `usageSamplingInterval` (unset or 0: 5 minutes), both Go durations, and
/// `resourceWeights` of the GPU resource (default 1) (files: apis/config/v1beta2/defaults.go,
/// func: SetDefaults_Configuration; pkg/config/validation.go, func:
/// validateAdmissionFairSharing).
fn read_configuration(c: &Value, resource: &str, setup: &mut Setup) -> Result<(), ObjectError> {
    let subject = Subject("Configuration".into());
    let api = text(c, "apiVersion", &subject)?.unwrap_or("");
    let kind = text(c, "kind", &subject)?.unwrap_or("");
    if kind != "Configuration" || ![CONFIG_V1BETA2, CONFIG_V1BETA1].contains(&api) {
        return Err(subject.fail(format!(
            "{} {}: not a Kueue Configuration ({CONFIG_V1BETA2} or {CONFIG_V1BETA1})",
            escape::line(api),
            escape::line(kind)
        )));
    }
    let fair = &c["fairSharing"];
    let on = if api == CONFIG_V1BETA1 { fair["enable"] == true } else { !fair.is_null() };
    if on {
        let named =
            list(fair, "preemptionStrategies", &subject)?
                .iter()
                .map(|s| match s.as_str() {
                    Some("LessThanOrEqualToFinalShare") => Ok(Strategy::LessThanOrEqualToFinalShare),
                    Some("LessThanInitialShare") => Ok(Strategy::LessThanInitialShare),
                    _ => Err(subject
                        .fail(format!("fairSharing.preemptionStrategies: {} is not Kueue's", shown(s)))),
                })
                .collect::<Result<Vec<_>, _>>()?;
        use Strategy::{LessThanInitialShare as Initial, LessThanOrEqualToFinalShare as Final};
        let strategies = match named.as_slice() {
            [] => vec![Final, Initial],
            [Final] | [Initial] | [Final, Initial] => named,
            _ => {
                return Err(subject.fail(
                    "fairSharing.preemptionStrategies must be [LessThanOrEqualToFinalShare], [LessThanInitialShare] or [LessThanOrEqualToFinalShare, LessThanInitialShare]",
                ));
            }
        };
        setup.fair_sharing = Some(strategies);
    }
    let afs = &c["admissionFairSharing"];
    if !afs.is_null() {
        let duration =
            |field: &str| -> Result<f64, ObjectError> {
                match &afs[field] {
                    Value::Null => Ok(0.0),
                    Value::String(s) => go_duration(s).ok_or_else(|| {
                        subject.fail(format!(
                            "admissionFairSharing.{field} {s:?} is not a duration (such as \"168h\")"
                        ))
                    }),
                    other => Err(subject
                        .fail(format!("admissionFairSharing.{field} {} is not a duration", shown(other)))),
                }
            };
        let half_life = duration("usageHalfLifeTime")?;
        let interval = duration("usageSamplingInterval")?;
        let sampling_interval = if interval == 0.0 { 300.0 } else { interval };
        if half_life < 0.0 || sampling_interval < 0.0 {
            return Err(subject.fail("admissionFairSharing: a duration is negative"));
        }
        let gpu_weight = match &afs["resourceWeights"][resource] {
            Value::Null => 1.0,
            w => w.as_f64().filter(|w| *w >= 0.0).ok_or_else(|| {
                subject.fail(format!(
                    "admissionFairSharing.resourceWeights of {resource:?}: {w} is not a weight of at least 0"
                ))
            })?,
        };
        setup.admission_fair_sharing =
            Some(AdmissionFairSharing { half_life, sampling_interval, gpu_weight });
    }
    Ok(())
}

/// A Go duration (`"168h"`, `"30m"`, `"1h30m"`, `"5m0s"`, `"1.5h"`, `"300ms"`, `"0"`) in
/// seconds, as Go's `time.ParseDuration` reads it (units ns, us, µs, ms, s, m, h; a sign;
/// decimal fractions); `None` when it is not one, or is beyond Go's 292 years.
fn go_duration(text: &str) -> Option<f64> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0.0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        seconds += number.parse::<f64>().ok()? * scale;
        rest = after;
    }
    // Go holds durations in nanoseconds in an int64.
    (seconds <= i64::MAX as f64 / 1e9).then_some(if negative { -seconds } else { seconds })
}

/// The text at `field` of `v` ([`objects::text`]), an error naming `subject`.
fn text<'v>(v: &'v Value, field: &str, subject: &Subject) -> Result<Option<&'v str>, ObjectError> {
    objects::text(v, field).map_err(|p| subject.fail(p))
}

/// The list at `field` of `v` ([`objects::list`]), an error naming `subject`.
fn list<'v>(v: &'v Value, field: &str, subject: &Subject) -> Result<&'v [Value], ObjectError> {
    objects::list(v, field).map_err(|p| subject.fail(p))
}

/// `metadata.name` quoted for an error, or a mark that there is none.
fn described_name(o: &Value) -> String {
    match o["metadata"]["name"].as_str() {
        Some(name) => format!("{name:?}"),
        None => "(no name)".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_value_an_error_shows_is_cut_and_its_controls_made_visible() {
        // 200 characters of text: its JSON (202 with the quotes) cut after 80, the escape
        // character (written by serde_json as \u001b, already visible) and a bidi override
        // (written as itself) made visible.
        let long = Value::String("x".repeat(200));
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), 81, "{cut}");
        assert!(cut.ends_with('…') && cut.starts_with("\"xxx"), "{cut}");
        let hostile = shown(&json!(["\u{1b}[31m", "\u{202e}"]));
        assert!(!hostile.contains('\u{1b}') && !hostile.contains('\u{202e}'), "{hostile:?}");
    }

    const GPU: &str = "nvidia.com/gpu";

    fn flavor(name: &str) -> Value {
        json!({"apiVersion": V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}})
    }

    /// The resource groups of a quota: cpu (ignored) and GPUs in one flavor.
    fn groups(flavor: &str, gpus: Value) -> Value {
        json!([{
            "coveredResources": ["cpu", GPU],
            "flavors": [{"name": flavor, "resources": [
                {"name": "cpu", "nominalQuota": "64"},
                {"name": GPU, "nominalQuota": gpus},
            ]}],
        }])
    }

    fn cluster_queue(name: &str, cohort: Option<&str>, gpus: u64) -> Value {
        let mut spec = json!({"resourceGroups": groups("gpu", json!(gpus))});
        if let Some(cohort) = cohort {
            spec["cohortName"] = json!(cohort);
        }
        json!({"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
    }

    fn cohort(name: &str, parent: Option<&str>) -> Value {
        let mut spec = json!({});
        if let Some(parent) = parent {
            spec["parentName"] = json!(parent);
        }
        json!({"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    }

    fn local_queue(namespace: &str, name: &str, cluster_queue: &str) -> Value {
        json!({
            "apiVersion": V1BETA2, "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        })
    }

    fn read(objects: &[Value]) -> Result<Setup, ObjectError> {
        Setup::read(objects, None, GPU)
    }

    /// The error of reading `objects`, as shown.
    fn error(objects: &[Value]) -> String {
        read(objects).expect_err("the objects are refused").to_string()
    }

    fn with_config(configuration: Value) -> Result<Setup, ObjectError> {
        Setup::read(&[flavor("gpu"), cluster_queue("a", None, 4)], Some(&configuration), GPU)
    }

    #[test]
    fn a_minimal_setup_with_every_default() {
        let wpc = json!({"apiVersion": V1BETA2, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 100});
        let setup = read(&[
            flavor("gpu"),
            cohort("root", None),
            cluster_queue("a", Some("root"), 4),
            // "shared" names no Cohort object: an implicit cohort.
            cluster_queue("b", Some("shared"), 2),
            local_queue("team-a", "main", "a"),
            wpc,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
        ])
        .unwrap();
        let queue = Kind::ClusterQueue {
            preemption: Preemption::default(),
            queueing: Queueing::BestEffortFifo,
            afs: false,
        };
        let node = |name: &str, kind: &Kind, parent, nominal, covers| Node {
            name: name.into(),
            kind: kind.clone(),
            parent,
            nominal,
            borrowing_limit: None,
            lending_limit: None,
            weight: 1.0,
            covers,
        };
        assert_eq!(
            setup.nodes,
            vec![
                node("root", &Kind::Cohort, None, 0, false),
                node("a", &queue, Some(0), 4, true),
                node("b", &queue, Some(3), 2, true),
                node("shared", &Kind::Cohort, None, 0, false),
            ]
        );
        let Kind::ClusterQueue { preemption, .. } = &setup.nodes[1].kind else { panic!("a ClusterQueue") };
        assert_eq!(preemption.within_cluster_queue, WithinClusterQueue::Never);
        assert_eq!(preemption.reclaim_within_cohort, ReclaimWithinCohort::Never);
        assert_eq!(preemption.borrow_within_cohort, BorrowWithinCohort::Never);
        assert_eq!(
            setup.local_queues,
            BTreeMap::from([(
                ("team-a".into(), "main".into()),
                LocalQueue { cluster_queue: 1, weight: 1.0 }
            )])
        );
        assert_eq!(setup.priority_classes, BTreeMap::from([("high".into(), 100)]));
        assert_eq!((&setup.fair_sharing, &setup.admission_fair_sharing), (&None, &None));
        assert_eq!(
            (setup.cluster_queue("b"), setup.cohort("shared"), setup.cohort("b")),
            (Some(2), Some(3), None)
        );
    }

    #[test]
    fn every_field_set() {
        let mut q = cluster_queue("a", Some("inner"), 8);
        q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1] =
            json!({"name": GPU, "nominalQuota": "8", "borrowingLimit": 4, "lendingLimit": "2"});
        q["spec"]["preemption"] = json!({
            "withinClusterQueue": "LowerOrNewerEqualPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -5},
        });
        q["spec"]["queueingStrategy"] = json!("StrictFIFO");
        q["spec"]["fairSharing"] = json!({"weight": "17500m"});
        q["spec"]["admissionScope"] = json!({"admissionMode": "UsageBasedAdmissionFairSharing"});
        let mut inner = cohort("inner", Some("root"));
        inner["spec"]["resourceGroups"] = groups("gpu", json!(2));
        inner["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["borrowingLimit"] = json!(3);
        // A Cohort may lend more than its own quota: its subtree's quota counts too.
        inner["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["lendingLimit"] = json!(6);
        inner["spec"]["fairSharing"] = json!({"weight": 35});
        let mut b = cluster_queue("b", Some("inner"), 0);
        b["spec"]["fairSharing"] = json!({"weight": "0.5"});
        b["spec"]["preemption"] = json!({"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}});
        let mut zero = cluster_queue("z", Some("inner"), 0);
        zero["spec"]["fairSharing"] = json!({"weight": "0"});
        let mut lq = local_queue("ns", "q", "a");
        lq["spec"]["fairSharing"] = json!({"weight": "2"});
        let objects = [q, inner, flavor("gpu"), b, zero, lq];

        let afs = json!({"apiVersion": CONFIG_V1BETA2, "kind": "Configuration", "admissionFairSharing": {"usageHalfLifeTime": "168h"}});
        let setup = Setup::read(&objects, Some(&afs), GPU).unwrap();
        let a = &setup.nodes[0];
        assert_eq!(
            (a.nominal, a.borrowing_limit, a.lending_limit, a.weight, a.parent),
            (8, Some(4), Some(2), 17.5, Some(1))
        );
        let Kind::ClusterQueue { preemption, queueing, afs } = a.kind else { panic!("a ClusterQueue") };
        assert_eq!(
            preemption,
            Preemption {
                within_cluster_queue: WithinClusterQueue::LowerOrNewerEqualPriority,
                reclaim_within_cohort: ReclaimWithinCohort::Any,
                borrow_within_cohort: BorrowWithinCohort::LowerPriority { max_priority_threshold: Some(-5) },
            }
        );
        assert_eq!((queueing, afs), (Queueing::StrictFifo, true));
        let inner = &setup.nodes[1];
        assert_eq!(
            (inner.nominal, inner.borrowing_limit, inner.lending_limit, inner.weight),
            (2, Some(3), Some(6), 35.0)
        );
        assert_eq!(inner.parent, setup.cohort("root"));
        assert_eq!((setup.nodes[2].weight, setup.nodes[3].weight), (0.5, 0.0));
        assert_eq!(
            setup.nodes[2].kind,
            Kind::ClusterQueue {
                preemption: Preemption {
                    within_cluster_queue: WithinClusterQueue::Never,
                    reclaim_within_cohort: ReclaimWithinCohort::LowerPriority,
                    borrow_within_cohort: BorrowWithinCohort::LowerPriority { max_priority_threshold: None },
                },
                queueing: Queueing::BestEffortFifo,
                afs: false,
            }
        );
        assert_eq!(setup.local_queues[&("ns".into(), "q".into())].weight, 2.0);

        // Without the Configuration's admissionFairSharing, the opt-in does nothing.
        let Kind::ClusterQueue { afs, .. } = read(&objects).unwrap().nodes[0].kind else {
            panic!("a ClusterQueue")
        };
        assert!(!afs);
    }

    #[test]
    fn gpu_quantities_as_kubernetes_writes_them() {
        for (quantity, gpus) in
            [(json!(8), 8), (json!("8"), 8), (json!("8000m"), 8), (json!("2k"), 2000), (json!(3.0), 3)]
        {
            let setup = read(&[
                flavor("gpu"),
                json!({
                    "apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "a"},
                    "spec": {"resourceGroups": groups("gpu", quantity.clone())},
                }),
            ])
            .unwrap();
            assert_eq!(setup.nodes[0].nominal, gpus, "{quantity}");
        }
        let bad = |quantity: Value| {
            let q = json!({"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "a"},
                "spec": {"resourceGroups": groups("gpu", quantity)}});
            error(&[flavor("gpu"), q])
        };
        assert_eq!(
            bad(json!("1500m")),
            "ClusterQueue \"a\": nominalQuota of \"nvidia.com/gpu\" in flavor \"gpu\": \"1500m\" is a fractional GPU quantity; GPUs are whole"
        );
        assert!(bad(json!(2.5)).ends_with("2.5 is a fractional GPU quantity; GPUs are whole"));
        assert!(bad(json!("-1")).ends_with("\"-1\" is negative"));
        assert!(bad(json!("eight")).ends_with("\"eight\" is not a Kubernetes quantity"));
        assert!(bad(json!(true)).ends_with("true is not a quantity"));
        assert!(bad(json!("2E")).ends_with("is more than the 1000000000000 GPUs the policy counts"));
    }

    #[test]
    fn a_queue_without_gpus_covers_none() {
        let q = json!({"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "cpu-only"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}]}});
        let setup = read(&[flavor("default"), q]).unwrap();
        assert_eq!((setup.nodes[0].nominal, setup.nodes[0].covers), (0, false));
    }

    #[test]
    fn v1beta1_objects() {
        // v1beta1 names a ClusterQueue's cohort `cohort`, and lists admission checks plainly.
        let q = json!({"apiVersion": V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "a"},
            "spec": {"cohort": "team", "resourceGroups": groups("gpu", json!(4))}});
        let mut f = flavor("gpu");
        f["apiVersion"] = json!(V1BETA1);
        let setup = read(&[f.clone(), q.clone()]).unwrap();
        assert_eq!((setup.nodes[0].parent, setup.cohort("team")), (Some(1), Some(1)));
        let mut checked = q;
        checked["spec"]["admissionChecks"] = json!(["prov"]);
        assert_eq!(error(&[f, checked]), "ClusterQueue \"a\": admission checks are not simulated");
        let mut alpha = cohort("old", None);
        alpha["apiVersion"] = json!("kueue.x-k8s.io/v1alpha1");
        assert_eq!(
            error(&[alpha]),
            "Cohort \"old\": apiVersion \"kueue.x-k8s.io/v1alpha1\" is not read (only kueue.x-k8s.io/v1beta2 and kueue.x-k8s.io/v1beta1)"
        );
    }

    #[test]
    fn a_second_gpu_flavor_is_refused() {
        let mut other = cluster_queue("b", Some("c"), 2);
        other["spec"]["resourceGroups"] = groups("h100", json!(2));
        assert_eq!(
            error(&[flavor("gpu"), flavor("h100"), cluster_queue("a", Some("c"), 4), other]),
            "ClusterQueue \"b\": flavor \"h100\" has quota for \"nvidia.com/gpu\", and so does flavor \"gpu\" (in ClusterQueue \"a\"): the kueue policy simulates one ResourceFlavor for GPUs"
        );
        // Two flavors in one queue (a quota of 0 counts: workloads could borrow there).
        let two = json!({"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "a"},
        "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": 4}]},
            {"name": "spot", "resources": [{"name": GPU, "nominalQuota": 0}]},
        ]}]}});
        assert!(
            error(&[flavor("gpu"), flavor("spot"), two])
                .starts_with("ClusterQueue \"a\": flavor \"spot\" has quota")
        );
        // A second flavor of another resource is fine.
        let cpu = json!({"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": "cpu"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}});
        assert!(read(&[flavor("gpu"), flavor("default"), cluster_queue("a", None, 4), cpu]).is_ok());
    }

    #[test]
    fn what_is_not_simulated_is_refused() {
        let mut tas = flavor("gpu");
        tas["spec"]["topologyName"] = json!("default");
        assert_eq!(
            error(&[tas]),
            "ResourceFlavor \"gpu\": topologyName \"default\": Topology-Aware Scheduling is not simulated"
        );
        let mut checked = cluster_queue("a", None, 4);
        checked["spec"]["admissionChecksStrategy"] = json!({"admissionChecks": [{"name": "prov"}]});
        assert_eq!(
            error(&[flavor("gpu"), checked.clone()]),
            "ClusterQueue \"a\": admission checks are not simulated"
        );
        // An empty strategy checks nothing.
        checked["spec"]["admissionChecksStrategy"] = json!({"admissionChecks": []});
        assert!(read(&[flavor("gpu"), checked]).is_ok());
        let mut held = cluster_queue("a", None, 4);
        held["spec"]["stopPolicy"] = json!("HoldAndDrain");
        assert_eq!(
            error(&[flavor("gpu"), held.clone()]),
            "ClusterQueue \"a\": stopPolicy \"HoldAndDrain\": a stopped queue is not simulated (set it to None)"
        );
        held["spec"]["stopPolicy"] = json!("None");
        assert!(read(&[flavor("gpu"), held]).is_ok());
        let mut lq = local_queue("ns", "q", "a");
        lq["spec"]["stopPolicy"] = json!("Hold");
        assert!(
            error(&[flavor("gpu"), cluster_queue("a", None, 1), lq])
                .starts_with("LocalQueue \"ns/q\": stopPolicy \"Hold\"")
        );
    }

    #[test]
    fn unknown_kinds_are_refused_and_empty_ones_skipped() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "x"}});
        assert_eq!(error(&[deployment]), "Deployment \"web\": the kueue policy cannot simulate a Deployment");
        let workload = json!({"apiVersion": V1BETA2, "kind": "Workload", "metadata": {"name": "job-1"}});
        assert_eq!(
            error(&[workload]),
            "Workload \"job-1\": the kueue policy cannot simulate a Workload: the jobs come from the trace"
        );
        // A ClusterQueue of another API group is not Kueue's.
        let mut foreign = cluster_queue("a", None, 1);
        foreign["apiVersion"] = json!("example.com/v1");
        assert_eq!(error(&[foreign]), "ClusterQueue \"a\": the kueue policy cannot simulate a ClusterQueue");
        let skipped = [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
            json!({"apiVersion": V1BETA2, "kind": "AdmissionCheck", "metadata": {"name": "a"}}),
            json!({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Topology", "metadata": {"name": "a"}}),
        ];
        assert_eq!(read(&skipped).unwrap().nodes, vec![]);
        assert_eq!(error(&[json!({"metadata": {"name": "a"}})]), "object 0: no kind");
    }

    #[test]
    fn limits_follow_kueues_webhook() {
        let limit = |name: &str, field: &str, value: u64, nominal: u64, cohort: Option<&str>| {
            let mut q = cluster_queue(name, cohort, nominal);
            q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1][field] = json!(value);
            q
        };
        assert_eq!(
            error(&[flavor("gpu"), limit("a", "borrowingLimit", 2, 4, None)]),
            "ClusterQueue \"a\": a borrowingLimit needs a cohortName to borrow from"
        );
        assert_eq!(
            error(&[flavor("gpu"), limit("a", "lendingLimit", 2, 4, None)]),
            "ClusterQueue \"a\": a lendingLimit needs a cohortName to lend to"
        );
        assert_eq!(
            error(&[flavor("gpu"), limit("a", "lendingLimit", 6, 4, Some("c"))]),
            "ClusterQueue \"a\": lendingLimit 6 of \"nvidia.com/gpu\" is above its nominalQuota 4"
        );
        assert!(read(&[flavor("gpu"), limit("a", "lendingLimit", 4, 4, Some("c"))]).is_ok());
        let mut root = cohort("root", None);
        root["spec"]["resourceGroups"] = groups("gpu", json!(4));
        root["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["borrowingLimit"] = json!(1);
        assert_eq!(
            error(&[flavor("gpu"), root]),
            "Cohort \"root\": a borrowingLimit needs a parentName to borrow from"
        );
        let mut q = cluster_queue("a", Some("c"), 4);
        q["spec"]["preemption"] = json!({"borrowWithinCohort": {"policy": "LowerPriority"}});
        assert_eq!(
            error(&[flavor("gpu"), q.clone()]),
            "ClusterQueue \"a\": borrowWithinCohort needs reclaimWithinCohort other than Never"
        );
        q["spec"]["preemption"] = json!({"withinClusterQueue": "Always"});
        assert_eq!(
            error(&[flavor("gpu"), q]),
            "ClusterQueue \"a\": preemption.withinClusterQueue \"Always\" is not Kueue's"
        );
        let mut q = cluster_queue("a", None, 4);
        q["spec"]["fairSharing"] = json!({"weight": "1n"});
        assert!(error(&[flavor("gpu"), q.clone()]).ends_with("when not 0, a weight must be above 10^-9"));
        q["spec"]["fairSharing"] = json!({"weight": -1});
        assert_eq!(error(&[flavor("gpu"), q]), "ClusterQueue \"a\": fairSharing.weight -1 is negative");
    }

    #[test]
    fn resource_groups_are_checked() {
        let mut q = cluster_queue("a", None, 4);
        q["spec"]["resourceGroups"][0]["coveredResources"] = json!([GPU, "cpu"]);
        assert_eq!(
            error(&[flavor("gpu"), q]),
            "ClusterQueue \"a\": the resources of flavor \"gpu\" must be its group's coveredResources, in order"
        );
        let mut q = cluster_queue("a", None, 4);
        let group = q["spec"]["resourceGroups"][0].clone();
        q["spec"]["resourceGroups"] = json!([group.clone(), group]);
        assert_eq!(error(&[flavor("gpu"), q]), "ClusterQueue \"a\": resource \"cpu\" is covered twice");
        let mut q = cluster_queue("a", None, 4);
        q["spec"]["resourceGroups"] = json!("many");
        assert_eq!(error(&[flavor("gpu"), q]), "ClusterQueue \"a\": resourceGroups \"many\" is not a list");
    }

    #[test]
    fn references_must_resolve() {
        assert_eq!(
            error(&[flavor("gpu"), cluster_queue("a", None, 4), local_queue("ns", "q", "b")]),
            "LocalQueue \"ns/q\": clusterQueue \"b\" names no ClusterQueue"
        );
        // A Cohort is no ClusterQueue.
        assert!(
            error(&[flavor("gpu"), cohort("b", None), local_queue("ns", "q", "b")])
                .ends_with("names no ClusterQueue")
        );
        assert_eq!(
            error(&[cluster_queue("a", None, 4)]),
            "ClusterQueue \"a\": flavor \"gpu\" names no ResourceFlavor (Kueue holds such a ClusterQueue inactive)"
        );
        assert_eq!(error(&[flavor("gpu"), flavor("gpu")]), "ResourceFlavor \"gpu\": defined twice");
        assert_eq!(error(&[cohort("c", None), cohort("c", None)]), "Cohort \"c\": defined twice");
        assert_eq!(
            error(&[
                flavor("gpu"),
                cluster_queue("a", None, 4),
                local_queue("ns", "q", "a"),
                local_queue("ns", "q", "a")
            ]),
            "LocalQueue \"ns/q\": defined twice"
        );
        let mut lq = local_queue("ns", "q", "a");
        lq["metadata"] = json!({"name": "q"});
        assert_eq!(error(&[lq]), "LocalQueue \"/q\": no metadata.namespace");
        // A Cohort's parentName that names no Cohort is an implicit cohort too.
        let setup = read(&[cohort("child", Some("top"))]).unwrap();
        assert_eq!((setup.nodes[0].parent, setup.cohort("top")), (Some(1), Some(1)));
    }

    #[test]
    fn cohort_cycles_are_refused() {
        assert_eq!(
            error(&[cohort("a", Some("b")), cohort("b", Some("c")), cohort("c", Some("a"))]),
            "Cohort \"a\": its parentName makes a cycle: \"a\" -> \"b\" -> \"c\" -> \"a\""
        );
        assert_eq!(
            error(&[cohort("self", Some("self"))]),
            "Cohort \"self\": its parentName makes a cycle: \"self\" -> \"self\""
        );
        // A ClusterQueue under a cycle names the cycle's Cohort, not itself.
        let message = error(&[
            flavor("gpu"),
            cluster_queue("q", Some("x"), 1),
            cohort("x", Some("y")),
            cohort("y", Some("x")),
        ]);
        assert_eq!(message, "Cohort \"x\": its parentName makes a cycle: \"x\" -> \"y\" -> \"x\"");
        // A diamond is no cycle.
        assert!(read(&[cohort("a", Some("r")), cohort("b", Some("r")), cohort("r", None)]).is_ok());
    }

    #[test]
    fn too_many_objects() {
        let objects = vec![json!({}); MAX_OBJECTS + 1];
        assert_eq!(error(&objects), "objects: 100001 objects, more than the 100000 read");
    }

    #[test]
    fn names_cannot_reach_the_terminal() {
        let message = error(&[cluster_queue("a\u{1b}[2J\u{202e}", None, 4)]);
        assert!(message.starts_with("ClusterQueue \"a\\u{1b}[2J\\u{202e}\": "), "{message}");
        let message =
            error(&[json!({"apiVersion": "x/v1", "kind": "Evil\u{7}", "metadata": {"name": "n\r"}})]);
        assert_eq!(message, "Evil\\u{7} \"n\\r\": the kueue policy cannot simulate a Evil\\u{7}");
        assert!(!message.chars().any(char::is_control));
    }

    #[test]
    fn priority_classes() {
        let class = |name: &str, value: Value| json!({"apiVersion": V1BETA2, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value});
        let setup = read(&[class("low", json!(-10)), class("high", json!(1_000_000))]).unwrap();
        assert_eq!(setup.priority_classes, BTreeMap::from([("high".into(), 1_000_000), ("low".into(), -10)]));
        assert_eq!(
            error(&[class("huge", json!(1u64 << 40))]),
            "WorkloadPriorityClass \"huge\": value 1099511627776 is not a 32-bit integer"
        );
        assert!(error(&[class("none", Value::Null)]).ends_with("value null is not a 32-bit integer"));
    }

    #[test]
    fn configurations() {
        use Strategy::{LessThanInitialShare as Initial, LessThanOrEqualToFinalShare as Final};
        let v2 = |body: Value| {
            let mut c = json!({"apiVersion": CONFIG_V1BETA2, "kind": "Configuration"});
            c.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
            with_config(c)
        };
        let fair = |body: Value| v2(body).unwrap().fair_sharing;
        // No Configuration, or one without the fields: both off.
        let setup = read(&[flavor("gpu")]).unwrap();
        assert_eq!((&setup.fair_sharing, &setup.admission_fair_sharing), (&None, &None));
        let setup = v2(json!({})).unwrap();
        assert_eq!((&setup.fair_sharing, &setup.admission_fair_sharing), (&None, &None));
        assert_eq!(fair(json!({"fairSharing": null})), None);
        // Present: on; no list or an empty one: the runtime's fallback, both.
        assert_eq!(fair(json!({"fairSharing": {}})), Some(vec![Final, Initial]));
        assert_eq!(fair(json!({"fairSharing": {"preemptionStrategies": []}})), Some(vec![Final, Initial]));
        assert_eq!(
            fair(json!({"fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}})),
            Some(vec![Initial])
        );
        assert_eq!(
            fair(json!({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}})),
            Some(vec![Final])
        );
        assert_eq!(
            fair(
                json!({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}})
            ),
            Some(vec![Final, Initial])
        );
        for bad in [
            json!(["LessThanInitialShare", "LessThanOrEqualToFinalShare"]),
            json!(["LessThanInitialShare", "LessThanInitialShare"]),
        ] {
            let message = v2(json!({"fairSharing": {"preemptionStrategies": bad}})).unwrap_err().to_string();
            assert!(
                message.starts_with("Configuration: fairSharing.preemptionStrategies must be"),
                "{message}"
            );
        }
        assert_eq!(
            v2(json!({"fairSharing": {"preemptionStrategies": ["Fairest"]}})).unwrap_err().to_string(),
            "Configuration: fairSharing.preemptionStrategies: \"Fairest\" is not Kueue's"
        );
        // v1beta1: `enable` decides; enabled without strategies defaults to both.
        let v1 = |fair: Value| {
            with_config(json!({"apiVersion": CONFIG_V1BETA1, "kind": "Configuration", "fairSharing": fair}))
                .unwrap()
                .fair_sharing
        };
        assert_eq!(v1(json!({"enable": false, "preemptionStrategies": ["LessThanInitialShare"]})), None);
        assert_eq!(v1(json!({"preemptionStrategies": ["LessThanInitialShare"]})), None);
        assert_eq!(v1(json!({"enable": true})), Some(vec![Final, Initial]));
        assert_eq!(
            v1(json!({"enable": true, "preemptionStrategies": ["LessThanInitialShare"]})),
            Some(vec![Initial])
        );
        // Admission Fair Sharing.
        let afs = |body: Value| {
            v2(json!({ "admissionFairSharing": body })).map(|s| s.admission_fair_sharing.unwrap())
        };
        let settings = |half_life, sampling_interval, gpu_weight| AdmissionFairSharing {
            half_life,
            sampling_interval,
            gpu_weight,
        };
        assert_eq!(afs(json!({"usageHalfLifeTime": "168h"})), Ok(settings(604_800.0, 300.0, 1.0)));
        assert_eq!(
            afs(
                json!({"usageHalfLifeTime": "30m", "usageSamplingInterval": "1m30s", "resourceWeights": {GPU: 2.5, "cpu": 0}})
            ),
            Ok(settings(1800.0, 90.0, 2.5))
        );
        assert_eq!(afs(json!({})), Ok(settings(0.0, 300.0, 1.0)));
        assert_eq!(
            afs(json!({"usageHalfLifeTime": "0", "usageSamplingInterval": "0s"})),
            Ok(settings(0.0, 300.0, 1.0))
        );
        assert_eq!(
            afs(json!({"usageHalfLifeTime": "-1h"})).unwrap_err().to_string(),
            "Configuration: admissionFairSharing: a duration is negative"
        );
        assert_eq!(
            afs(json!({"usageHalfLifeTime": "7d"})).unwrap_err().to_string(),
            "Configuration: admissionFairSharing.usageHalfLifeTime \"7d\" is not a duration (such as \"168h\")"
        );
        assert!(afs(json!({"resourceWeights": {GPU: -1}})).is_err());
        // Not a Configuration.
        let message = with_config(json!({"apiVersion": "v1", "kind": "ConfigMap"})).unwrap_err().to_string();
        assert_eq!(
            message,
            "Configuration: v1 ConfigMap: not a Kueue Configuration (config.kueue.x-k8s.io/v1beta2 or config.kueue.x-k8s.io/v1beta1)"
        );
    }

    #[test]
    fn go_durations() {
        for (text, seconds) in [
            ("168h", 604_800.0),
            ("30m", 1800.0),
            ("1h30m", 5400.0),
            ("5m0s", 300.0),
            ("1.5h", 5400.0),
            (".5m", 30.0),
            ("300ms", 0.3),
            ("1500us", 0.0015),
            ("1\u{b5}s", 1e-6),
            ("0", 0.0),
            ("0s", 0.0),
            ("+2s", 2.0),
            ("-2s", -2.0),
        ] {
            let got = go_duration(text).unwrap_or_else(|| panic!("{text} is a duration"));
            assert!((got - seconds).abs() < 1e-12, "{text}: {got}");
        }
        for bad in ["", "-", "8", "h", "1d", "1.2.3s", ".s", "1h 30m", "3000000h"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
    }
}
