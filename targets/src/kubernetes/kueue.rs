//! Kueue (`kueue.x-k8s.io/v1beta2`): per cluster, a ResourceFlavor for its GPUs, a Cohort
//! tree mirroring the projects (`root` at the top, holding unallocated GPUs as a shared
//! pool), a ClusterQueue per budgeted leaf whose `nominalQuota` is its guaranteed GPUs, a
//! LocalQueue per member namespace, a ClusterQueue and LocalQueues per contract's reserve
//! ([`RESERVE`]), a WorkloadPriorityClass per contract, and the controller `Configuration`
//! fragment that turns fair sharing on.

use std::collections::BTreeMap;

use allot_compiler::ir::{Cluster, KubernetesBinding, KubernetesScheduler, Model, WorkRule};
use allot_compiler::units::format_duration;
use serde::Serialize;
use serde_json::{Value, json};

use super::{
    Count, LABELS, MAX_NAME, Metadata, Node, Object, UNBUDGETED, bound, check_names, go_duration, quantity,
    tree, values, weight, yaml,
};
use crate::fidelity::{Note, Report, Row};
use crate::{Emitted, Target};

pub struct Kueue;

const API: &str = "kueue.x-k8s.io/v1beta2";
const ROOT: &str = "root";
/// A contract's reserve is ClusterQueue `root-reserve-<contract>` (no project's flattened
/// name starts with `root-`), and a LocalQueue of that name in each budget's namespace.
pub const RESERVE: &str = "root-reserve-";

impl Target for Kueue {
    fn name(&self) -> &'static str {
        "kueue"
    }

    fn emit(&self, model: &Model) -> Emitted {
        let violations = super::binding_names(model, KubernetesScheduler::Kueue, true);
        let mut emitted = Emitted { files: Vec::new(), violations };
        let reserves = reserves(model);
        for (cluster, binding) in bound(model, KubernetesScheduler::Kueue) {
            let nodes = tree(model, &cluster.name);
            let path = |name: &str| format!("{}/{name}", cluster.name);
            emitted.violations.extend(check_names(&path("clusterqueues.yaml"), &nodes, &[]));
            add(&mut emitted, path("resourceflavors.yaml"), &[flavor(binding)], Vec::new());
            let cohorts = cohorts(model, cluster, binding, &nodes);
            let problems =
                cohorts.iter().flat_map(|c| quota_rules(c, c.spec.parent_name, &c.spec.resource_groups));
            add(&mut emitted, path("cohorts.yaml"), &cohorts, problems.collect());
            let queues = cluster_queues(model, cluster, binding, &nodes, &reserves);
            let problems =
                queues.iter().flat_map(|q| quota_rules(q, Some(q.spec.cohort_name), &q.spec.resource_groups));
            add(&mut emitted, path("clusterqueues.yaml"), &queues, problems.collect());
            let local = local_queues(&nodes, &reserves);
            let problems = local.iter().filter_map(|q| name_rule(q.kind, q.metadata.name));
            add(&mut emitted, path("localqueues.yaml"), &local, problems.collect());
            let classes = priority_classes(model);
            let problems = classes.iter().filter_map(|c| name_rule(c.kind, c.metadata.name));
            add(&mut emitted, path("workloadpriorityclasses.yaml"), &classes, problems.collect());
            add(&mut emitted, path("kueue-configuration.yaml"), &[configuration()], Vec::new());
        }
        emitted
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// The objects allot writes for allot cluster `cluster` when Kueue is bound to it, as the
/// API server holds them: what a live Kueue is compared with (the controller's
/// `Configuration` is no API object, and is not among them). None when Kueue is not bound.
pub fn objects(model: &Model, cluster: &str) -> Vec<Value> {
    let Some((cluster, binding)) =
        bound(model, KubernetesScheduler::Kueue).into_iter().find(|(c, _)| c.name == cluster)
    else {
        return Vec::new();
    };
    let nodes = tree(model, &cluster.name);
    let reserves = reserves(model);
    let mut out = values(&[flavor(binding)]);
    out.extend(values(&cohorts(model, cluster, binding, &nodes)));
    out.extend(values(&cluster_queues(model, cluster, binding, &nodes, &reserves)));
    out.extend(values(&local_queues(&nodes, &reserves)));
    out.extend(values(&priority_classes(model)));
    out
}

/// The ClusterQueue allot writes for each contract that holds a reserve: (contract,
/// ClusterQueue), the queue of the contract's jobs whatever their budget.
pub fn reserve_queues(model: &Model) -> Vec<(String, String)> {
    let held = model.contracts.iter().filter(|c| c.reserve_gpus.is_some());
    held.map(|c| (c.name.clone(), format!("{RESERVE}{}", c.name))).collect()
}

/// The budget each ClusterQueue and Cohort allot writes for allot cluster `cluster` stands
/// for: the object's name, and the project's path.
pub fn queue_names(model: &Model, cluster: &str) -> Vec<(String, String)> {
    let nodes = tree(model, cluster);
    nodes.iter().flat_map(|n| n.flatten()).map(|n| (n.name.clone(), n.project.path.clone())).collect()
}

/// Adds the file of `objects`, with the `problems` found on them; no objects, no file.
fn add<T: Serialize>(emitted: &mut Emitted, path: String, objects: &[T], problems: Vec<String>) {
    if !objects.is_empty() {
        emitted.add(path, yaml(objects), problems);
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlavorSpec<'a> {
    node_labels: BTreeMap<&'a str, &'a str>,
}

fn flavor(binding: &KubernetesBinding) -> Object<'_, FlavorSpec<'_>> {
    let node_labels = binding.node_label.as_deref().and_then(|l| l.split_once('=')).into_iter().collect();
    Object::new(API, "ResourceFlavor", &binding.flavor, FlavorSpec { node_labels })
}

/// The quotas of a ClusterQueue or a Cohort: per flavor, per covered resource.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceGroup<'a> {
    covered_resources: Vec<&'a str>,
    flavors: Vec<FlavorQuotas<'a>>,
}

#[derive(Serialize)]
struct FlavorQuotas<'a> {
    name: &'a str,
    resources: Vec<ResourceQuota<'a>>,
}

/// Quotas in whole GPUs: the webhook's rule that they be quantities of at least 0 holds by
/// the type.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceQuota<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    borrowing_limit: Option<Count>,
    name: &'a str,
    nominal_quota: Count,
}

/// A weight in thousandths ([`quantity`]): 0 or at least 0.001, as the webhook requires (0
/// or above 1e-9).
#[derive(Serialize)]
struct FairSharing {
    weight: String,
}

fn fair_sharing(thousandths: u64) -> FairSharing {
    FairSharing { weight: quantity(thousandths) }
}

/// One resource group: the GPUs of the flavor, with a quota and an optional borrowing cap.
fn resources(
    binding: &KubernetesBinding,
    nominal: u64,
    borrowing_limit: Option<u64>,
) -> Vec<ResourceGroup<'_>> {
    let resource = ResourceQuota {
        borrowing_limit: borrowing_limit.map(Count),
        name: &binding.resource,
        nominal_quota: Count(nominal),
    };
    vec![ResourceGroup {
        covered_resources: vec![&binding.resource],
        flavors: vec![FlavorQuotas { name: &binding.flavor, resources: vec![resource] }],
    }]
}

/// How far above its guarantee a node may go: up to its cap, or nowhere when work beyond
/// a budget is denied; `None`: as far as the cohort lends.
fn borrowing_limit(model: &Model, node: &Node<'_>) -> Option<u64> {
    let guaranteed = node.allocation.guaranteed_gpus;
    match node.allocation.max_gpus {
        Some(max) => Some(max.saturating_sub(guaranteed)),
        None if model.policy.overflow == WorkRule::Deny => Some(0),
        None => None,
    }
}

/// A Cohort: `root` has no parent, no weight, and resources only for the GPUs no project
/// is guaranteed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CohortSpec<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    fair_sharing: Option<FairSharing>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resource_groups: Vec<ResourceGroup<'a>>,
}

type Cohort<'a> = Object<'a, CohortSpec<'a>>;

fn cohorts<'a>(
    model: &Model,
    cluster: &Cluster,
    binding: &'a KubernetesBinding,
    nodes: &'a [Node<'_>],
) -> Vec<Cohort<'a>> {
    let pool = if cluster.unallocated_gpus > 0 {
        resources(binding, cluster.unallocated_gpus, None)
    } else {
        Vec::new()
    };
    let root = CohortSpec { fair_sharing: None, parent_name: None, resource_groups: pool };
    let mut out = vec![Object::new(API, "Cohort", ROOT, root)];
    for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| !n.is_leaf()) {
        let spec = CohortSpec {
            fair_sharing: Some(fair_sharing(weight(node.allocation))),
            parent_name: Some(node.parent.as_deref().unwrap_or(ROOT)),
            resource_groups: resources(
                binding,
                node.allocation.unallocated_gpus,
                borrowing_limit(model, node),
            ),
        };
        out.push(Object::new(API, "Cohort", &node.name, spec));
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterQueueSpec<'a> {
    cohort_name: &'a str,
    fair_sharing: FairSharing,
    namespace_selector: NamespaceSelector<'a>,
    preemption: Preemption,
    queueing_strategy: &'static str,
    resource_groups: Vec<ResourceGroup<'a>>,
}

type ClusterQueue<'a> = Object<'a, ClusterQueueSpec<'a>>;

/// The namespaces a ClusterQueue admits from; none: every namespace.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceSelector<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    match_expressions: Vec<MatchExpression<'a>>,
}

#[derive(Serialize)]
struct MatchExpression<'a> {
    key: &'static str,
    operator: &'static str,
    values: Vec<&'a str>,
}

/// No ClusterQueue preempts its own workloads. With Fair Sharing and `reclaimWithinCohort:
/// Any`, Kueue's own scheduler preempts in circles when a ClusterQueue may take its own
/// lower-priority workloads to borrow: another queue within its quota reclaims at once what
/// it took, and it takes again (measured by replaying traces through Kueue's scheduler:
/// docs/kueue.md, "What the objects deliver").
const WITHIN_CLUSTER_QUEUE: &str = "Never";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Preemption {
    reclaim_within_cohort: &'static str,
    within_cluster_queue: &'static str,
}

fn cluster_queues<'a>(
    model: &Model,
    cluster: &Cluster,
    binding: &'a KubernetesBinding,
    nodes: &'a [Node<'_>],
    reserves: &'a [Reserve],
) -> Vec<ClusterQueue<'a>> {
    let mut out = Vec::new();
    for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.is_leaf()) {
        let namespaces = &node.project.namespaces;
        let match_expressions = if namespaces.is_empty() {
            Vec::new()
        } else {
            vec![in_namespaces(namespaces.iter().map(String::as_str).collect())]
        };
        let spec = ClusterQueueSpec {
            cohort_name: node.parent.as_deref().unwrap_or(ROOT),
            fair_sharing: fair_sharing(weight(node.allocation)),
            namespace_selector: NamespaceSelector { match_expressions },
            preemption: Preemption {
                reclaim_within_cohort: "Any",
                within_cluster_queue: WITHIN_CLUSTER_QUEUE,
            },
            queueing_strategy: "BestEffortFIFO",
            resource_groups: resources(
                binding,
                node.allocation.guaranteed_gpus,
                borrowing_limit(model, node),
            ),
        };
        out.push(Object::new(API, "ClusterQueue", &node.name, spec));
    }
    for reserve in reserves {
        // Its quota is lent to the cohort while idle and reclaimed at once for the
        // contract's jobs. Beyond it they borrow as work beyond a budget does, weighted by
        // the reserve's part of the cluster: small, so they borrow last and go first.
        let spec = ClusterQueueSpec {
            cohort_name: ROOT,
            fair_sharing: fair_sharing((reserve.gpus * 100_000).checked_div(cluster.gpus).unwrap_or(0)),
            namespace_selector: NamespaceSelector { match_expressions: budget_namespaces(nodes) },
            preemption: Preemption {
                reclaim_within_cohort: "Any",
                within_cluster_queue: WITHIN_CLUSTER_QUEUE,
            },
            queueing_strategy: "BestEffortFIFO",
            resource_groups: resources(
                binding,
                reserve.gpus,
                (model.policy.overflow == WorkRule::Deny).then_some(0),
            ),
        };
        out.push(Object::new(API, "ClusterQueue", &reserve.queue, spec));
    }
    if model.policy.unbudgeted == WorkRule::Preemptible {
        // Everything it runs is borrowed, so it is reclaimed first; weight 0 loses every tie.
        let spec = ClusterQueueSpec {
            cohort_name: ROOT,
            fair_sharing: fair_sharing(0),
            namespace_selector: NamespaceSelector { match_expressions: Vec::new() },
            preemption: Preemption {
                reclaim_within_cohort: "Never",
                within_cluster_queue: WITHIN_CLUSTER_QUEUE,
            },
            queueing_strategy: "BestEffortFIFO",
            resource_groups: resources(binding, 0, None),
        };
        out.push(Object::new(API, "ClusterQueue", UNBUDGETED, spec));
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LocalQueueSpec<'a> {
    cluster_queue: &'a str,
}

/// A contract's reserve: its ClusterQueue's and LocalQueues' name, and its GPUs.
struct Reserve {
    queue: String,
    gpus: u64,
}

fn reserves(model: &Model) -> Vec<Reserve> {
    let gpus = model.contracts.iter().filter_map(|c| c.reserve_gpus);
    reserve_queues(model).into_iter().zip(gpus).map(|((_, queue), gpus)| Reserve { queue, gpus }).collect()
}

/// The namespaces of the budgets' ClusterQueues, as a selector: none when a budget takes
/// every namespace.
fn budget_namespaces<'a>(nodes: &'a [Node<'_>]) -> Vec<MatchExpression<'a>> {
    let mut leaves = nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.is_leaf());
    if leaves.any(|n| n.project.namespaces.is_empty()) {
        return Vec::new();
    }
    vec![in_namespaces(super::namespaces(nodes).into_keys().collect())]
}

fn in_namespaces(values: Vec<&str>) -> MatchExpression<'_> {
    MatchExpression { key: "kubernetes.io/metadata.name", operator: "In", values }
}

/// A LocalQueue per budget and namespace, then per reserve and namespace of any budget.
fn local_queues<'a>(nodes: &'a [Node<'_>], reserves: &'a [Reserve]) -> Vec<Object<'a, LocalQueueSpec<'a>>> {
    let mut out = Vec::new();
    for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.is_leaf()) {
        for namespace in &node.project.namespaces {
            let metadata = Metadata { labels: LABELS, name: &node.name, namespace: Some(namespace) };
            let spec = LocalQueueSpec { cluster_queue: &node.name };
            out.push(Object { api_version: API, kind: "LocalQueue", metadata, spec });
        }
    }
    let namespaces = super::namespaces(nodes);
    for reserve in reserves {
        for &namespace in namespaces.keys() {
            let metadata = Metadata { labels: LABELS, name: &reserve.queue, namespace: Some(namespace) };
            let spec = LocalQueueSpec { cluster_queue: &reserve.queue };
            out.push(Object { api_version: API, kind: "LocalQueue", metadata, spec });
        }
    }
    out
}

/// A WorkloadPriorityClass, which has no `spec`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PriorityClass<'a> {
    api_version: &'static str,
    description: String,
    kind: &'static str,
    metadata: Metadata<'a>,
    value: u64,
}

/// One class per contract, ranked by the minimum runtime it protects (in minutes): the
/// closest Kueue has to a protected window is winning within a ClusterQueue.
fn priority_classes(model: &Model) -> Vec<PriorityClass<'_>> {
    model
        .contracts
        .iter()
        .map(|c| {
            let max = c.max_runtime_seconds.map_or("unlimited".to_string(), go_duration);
            PriorityClass {
                api_version: API,
                description: format!(
                    "allot contract {}: minimum runtime {}, maximum runtime {max}, {}",
                    c.name,
                    go_duration(c.min_runtime_seconds),
                    if c.resumable { "resumable" } else { "not resumable" }
                ),
                kind: "WorkloadPriorityClass",
                metadata: Metadata { labels: LABELS, name: &c.name, namespace: None },
                value: (c.min_runtime_seconds / 60).min(i32::MAX as u64),
            }
        })
        .collect()
}

/// The controller `Configuration` fragment allot writes (`kueue-configuration.yaml`): Fair
/// Sharing on, with both preemption strategies.
pub fn configuration() -> Value {
    json!({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": { "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"] },
    })
}

/// The rules Kueue's admission webhook adds to the CRD schemas, on the quotas of a
/// ClusterQueue or a Cohort: each flavor's resources are the covered resources, in order,
/// and a borrowing limit needs a cohort to borrow from (the ClusterQueue's cohort, the
/// Cohort's parent). Its rules on quantities hold by the types: quotas are [`Count`]s,
/// weights 0 or at least 0.001 ([`FairSharing`]); allot sets no `lendingLimit`.
fn quota_rules<S>(object: &Object<'_, S>, parent: Option<&str>, groups: &[ResourceGroup<'_>]) -> Vec<String> {
    let (kind, name) = (object.kind, object.metadata.name);
    let mut problems = Vec::new();
    for group in groups {
        for flavor in &group.flavors {
            if !flavor.resources.iter().map(|r| r.name).eq(group.covered_resources.iter().copied()) {
                problems.push(format!(
                    "{kind} {name}: a flavor's resources must be the covered resources, in order"
                ));
            }
            if parent.is_none() && flavor.resources.iter().any(|r| r.borrowing_limit.is_some()) {
                problems.push(format!("{kind} {name}: a borrowingLimit needs a cohort to borrow from"));
            }
        }
    }
    problems
}

/// The webhook's rule on the names of LocalQueues and WorkloadPriorityClasses: they travel
/// in labels.
fn name_rule(kind: &str, name: &str) -> Option<String> {
    (name.len() > MAX_NAME).then(|| format!("{kind} {name}: longer than a label value (63 characters)"))
}

fn fidelity(model: &Model) -> Report {
    let mut rows = vec![
        Row::lost(
            format!("fair share over a {} window", format_duration(model.policy.window_seconds)),
            "Fair Sharing compares current borrowing, not usage history",
        ),
        Row::exact(
            "shares",
            "`nominalQuota` = guaranteed GPUs (whole, largest remainder), `fairSharing.weight` = the share",
        )
        .qualified("to one GPU"),
    ];
    rows.extend(super::weight_row(model, KubernetesScheduler::Kueue, "`fairSharing.weight`"));
    rows.extend([
        Row::exact(
            "unallocated shares",
            "`nominalQuota` of the parent's Cohort: a pool every member borrows from",
        ),
        Row::exact(
            format!("unbudgeted work ({})", model.policy.unbudgeted.as_str()),
            match model.policy.unbudgeted {
                WorkRule::Preemptible => {
                    "ClusterQueue `root-unbudgeted`: quota 0 (all borrowed, reclaimed first), weight 0, any namespace"
                }
                WorkRule::Deny => "no ClusterQueue takes it",
            },
        ),
        Row::exact(
            format!("work beyond a budget ({})", model.policy.overflow.as_str()),
            format!(
                "borrowing from the cohort{}; `reclaimWithinCohort: Any` takes guarantees back",
                match model.policy.overflow {
                    WorkRule::Preemptible => ", capped by `borrowingLimit` where max GPUs are set",
                    WorkRule::Deny => ", forbidden (`borrowingLimit: 0`)",
                }
            ),
        ),
        Row::approximated(
            "minimum runtime per contract",
            "no field: each contract is a WorkloadPriorityClass valued by its minimum runtime in minutes, which orders a queue's waiting workloads and has reclaim take shorter contracts first; no ClusterQueue preempts its own workloads (`withinClusterQueue: Never`)",
        ),
        Row::lost(
            "maximum runtime",
            "not set on queues; jobs may carry `kueue.x-k8s.io/max-exec-time-seconds`",
        )
        .qualified("on the queues"),
        Row::lost("resumable", "evicted workloads are requeued; keeping progress is the job's own"),
        Row::lost("max GPUs per job", "not expressible on a queue"),
        Row::exact(
            "members",
            "namespaces: `namespaceSelector` and a LocalQueue per namespace; users and groups do not apply",
        )
        .qualified("for namespaces"),
    ]);
    let classes = model
        .contracts
        .iter()
        .map(|c| {
            vec![c.name.clone(), go_duration(c.min_runtime_seconds), (c.min_runtime_seconds / 60).to_string()]
        })
        .collect();
    rows.extend(crate::fidelity::reserves(model).map(|held| {
        Row::approximated(
            "reserve per contract",
            format!("{held}: ClusterQueue `{RESERVE}<contract>` in Cohort `root` with `nominalQuota` = the reserve, and a LocalQueue of that name in each budget's namespace; the budgets' quotas share the other GPUs. Its idle quota is lent to the cohort and taken back at once (`reclaimWithinCohort: Any`); beyond it, the contract's jobs borrow as work beyond a budget does, with the weight of the reserve's part of the cluster. A queue cannot be tied to a priority class: whatever a job sent to the reserve's LocalQueue runs under, it runs there, and its GPUs are not counted against its budget's ClusterQueue"),
        )
        .qualified("by queue label, not contract")
    }));
    Report {
        scheduler: "Kueue",
        short_name: "Kueue",
        rows,
        notes: vec![
            Note::Heading("Contracts as priority classes".into()),
            Note::table(&["contract", "minimum runtime", "WorkloadPriorityClass value"], classes),
            Note::Paragraph("Jobs select their queue with the label `kueue.x-k8s.io/queue-name: <project>` and their contract with `kueue.x-k8s.io/priority-class: <contract>`.".into()),
        ],
    }
}
