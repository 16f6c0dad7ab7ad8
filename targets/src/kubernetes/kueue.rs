//! Kueue (`kueue.x-k8s.io/v1beta2`): per cluster, a ResourceFlavor for its GPUs, a Cohort
//! tree mirroring the projects (`root` at the top, holding unallocated GPUs as a shared
//! pool), a ClusterQueue per budgeted leaf whose `nominalQuota` is its guaranteed GPUs, a
//! LocalQueue per member namespace, a WorkloadPriorityClass per contract, and the
//! controller `Configuration` fragment that turns fair sharing on.

use allot_compiler::ir::{Cluster, KubernetesBinding, KubernetesScheduler, Model, WorkRule};
use allot_compiler::units::format_duration;
use serde_json::{Value, json};

use super::{Node, UNBUDGETED, bound, check_names, go_duration, object, quantity, tree, weight, yaml};
use crate::fidelity::{Note, Report, Row};
use crate::{OutputFile, Target, Violation};

pub struct Kueue;

const API: &str = "kueue.x-k8s.io/v1beta2";
const ROOT: &str = "root";

impl Target for Kueue {
    fn name(&self) -> &'static str {
        "kueue"
    }

    fn emit(&self, model: &Model) -> Vec<OutputFile> {
        let mut files = Vec::new();
        for (cluster, binding) in bound(model, KubernetesScheduler::Kueue) {
            let nodes = tree(model, &cluster.name);
            let mut file = |name: &str, objects: Vec<Value>| {
                if !objects.is_empty() {
                    files.push(OutputFile {
                        path: format!("{}/{name}", cluster.name),
                        contents: yaml(&objects),
                    });
                }
            };
            file("resourceflavors.yaml", vec![flavor(binding)]);
            file("cohorts.yaml", cohorts(model, cluster, binding, &nodes));
            file("clusterqueues.yaml", cluster_queues(model, binding, &nodes));
            file("localqueues.yaml", local_queues(&nodes));
            file("workloadpriorityclasses.yaml", priority_classes(model));
            file("kueue-configuration.yaml", vec![configuration()]);
        }
        files
    }

    fn validate(&self, model: &Model, files: &[OutputFile]) -> Vec<Violation> {
        let mut violations = super::binding_names(model, KubernetesScheduler::Kueue, true);
        for (cluster, _) in bound(model, KubernetesScheduler::Kueue) {
            let path = format!("{}/clusterqueues.yaml", cluster.name);
            violations.extend(check_names(&path, &tree(model, &cluster.name), &[]));
        }
        for file in files {
            let problems = match super::parse(&file.contents) {
                Ok(objects) => objects.iter().flat_map(webhook_rules).collect(),
                Err(e) => vec![format!("does not parse: {e}")],
            };
            violations.extend(problems.into_iter().map(|m| Violation::new(&file.path, m)));
        }
        violations
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

fn flavor(binding: &KubernetesBinding) -> Value {
    let labels = match binding.node_label.as_deref().and_then(|l| l.split_once('=')) {
        Some((key, value)) => json!({ key: value }),
        None => json!({}),
    };
    object(API, "ResourceFlavor", &binding.flavor, json!({ "nodeLabels": labels }))
}

/// One resource group: the GPUs of the flavor, with a quota and an optional borrowing cap.
fn resources(binding: &KubernetesBinding, nominal: u64, borrowing_limit: Option<u64>) -> Value {
    let mut resource = json!({ "name": binding.resource, "nominalQuota": nominal.to_string() });
    if let Some(limit) = borrowing_limit {
        resource["borrowingLimit"] = json!(limit.to_string());
    }
    json!([{ "coveredResources": [binding.resource], "flavors": [{ "name": binding.flavor, "resources": [resource] }] }])
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

fn cohorts(model: &Model, cluster: &Cluster, binding: &KubernetesBinding, nodes: &[Node<'_>]) -> Vec<Value> {
    let mut root = json!({});
    if cluster.unallocated_gpus > 0 {
        root["resourceGroups"] = resources(binding, cluster.unallocated_gpus, None);
    }
    let mut out = vec![object(API, "Cohort", ROOT, root)];
    for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| !n.is_leaf()) {
        let spec = json!({
            "parentName": node.parent.as_deref().unwrap_or(ROOT),
            "fairSharing": { "weight": quantity(weight(node.allocation)) },
            "resourceGroups": resources(binding, node.allocation.unallocated_gpus, borrowing_limit(model, node)),
        });
        out.push(object(API, "Cohort", &node.name, spec));
    }
    out
}

fn cluster_queues(model: &Model, binding: &KubernetesBinding, nodes: &[Node<'_>]) -> Vec<Value> {
    let mut out = Vec::new();
    for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.is_leaf()) {
        let namespaces = &node.project.namespaces;
        let selector = if namespaces.is_empty() {
            json!({})
        } else {
            json!({ "matchExpressions": [{ "key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces }] })
        };
        let spec = json!({
            "cohortName": node.parent.as_deref().unwrap_or(ROOT),
            "namespaceSelector": selector,
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": resources(binding, node.allocation.guaranteed_gpus, borrowing_limit(model, node)),
            "fairSharing": { "weight": quantity(weight(node.allocation)) },
            "preemption": { "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority" },
        });
        out.push(object(API, "ClusterQueue", &node.name, spec));
    }
    if model.policy.unbudgeted == WorkRule::Preemptible {
        // Everything it runs is borrowed, so it is reclaimed first; weight 0 loses every tie.
        let spec = json!({
            "cohortName": ROOT,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": resources(binding, 0, None),
            "fairSharing": { "weight": "0" },
            "preemption": { "reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority" },
        });
        out.push(object(API, "ClusterQueue", UNBUDGETED, spec));
    }
    out
}

fn local_queues(nodes: &[Node<'_>]) -> Vec<Value> {
    let mut out = Vec::new();
    for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.is_leaf()) {
        for namespace in &node.project.namespaces {
            let mut queue = object(API, "LocalQueue", &node.name, json!({ "clusterQueue": node.name }));
            queue["metadata"]["namespace"] = json!(namespace);
            out.push(queue);
        }
    }
    out
}

/// One class per contract, ranked by the minimum runtime it protects (in minutes): the
/// closest Kueue has to a protected window is winning within a ClusterQueue.
fn priority_classes(model: &Model) -> Vec<Value> {
    model
        .contracts
        .iter()
        .map(|c| {
            let value = (c.min_runtime_seconds / 60).min(i32::MAX as u64);
            let max = c.max_runtime_seconds.map_or("unlimited".to_string(), go_duration);
            json!({
                "apiVersion": API,
                "kind": "WorkloadPriorityClass",
                "metadata": { "name": c.name, "labels": { "app.kubernetes.io/managed-by": "allot" } },
                "value": value,
                "description": format!(
                    "allot contract {}: minimum runtime {}, maximum runtime {max}, {}",
                    c.name,
                    go_duration(c.min_runtime_seconds),
                    if c.resumable { "resumable" } else { "not resumable" }
                ),
            })
        })
        .collect()
}

fn configuration() -> Value {
    json!({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": { "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"] },
    })
}

/// The rules Kueue's admission webhook adds to the CRD schemas.
fn webhook_rules(object: &Value) -> Vec<String> {
    let kind = object["kind"].as_str().unwrap_or("");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let spec = &object["spec"];
    let mut problems = Vec::new();
    if matches!(kind, "ClusterQueue" | "Cohort") {
        for group in spec["resourceGroups"].as_array().into_iter().flatten() {
            let covered = &group["coveredResources"];
            for flavor in group["flavors"].as_array().into_iter().flatten() {
                let names: Vec<&Value> =
                    flavor["resources"].as_array().into_iter().flatten().map(|r| &r["name"]).collect();
                if covered.as_array().is_none_or(|c| c.iter().collect::<Vec<_>>() != names) {
                    problems.push(format!(
                        "{kind} {name}: a flavor's resources must be the covered resources, in order"
                    ));
                }
                for resource in flavor["resources"].as_array().into_iter().flatten() {
                    let value = |key: &str| resource[key].as_str().and_then(|q| q.parse::<u64>().ok());
                    for key in ["nominalQuota", "borrowingLimit", "lendingLimit"] {
                        if !resource[key].is_null() && value(key).is_none() {
                            problems.push(format!("{kind} {name}: {key} must be a quantity of at least 0"));
                        }
                    }
                    if let (Some(lend), Some(nominal)) = (value("lendingLimit"), value("nominalQuota"))
                        && kind == "ClusterQueue"
                        && lend > nominal
                    {
                        problems.push(format!("{kind} {name}: lendingLimit above nominalQuota"));
                    }
                    let limited =
                        !resource["borrowingLimit"].is_null() || !resource["lendingLimit"].is_null();
                    if kind == "Cohort" && limited && spec["parentName"].is_null() {
                        problems.push(format!(
                            "Cohort {name}: borrowingLimit and lendingLimit need a parentName"
                        ));
                    }
                }
            }
        }
        let weight = spec["fairSharing"]["weight"].as_str().map(parse_quantity);
        if let Some(weight) = weight
            && !(weight == Some(0.0) || weight.is_some_and(|w| w > 1e-9))
        {
            problems.push(format!("{kind} {name}: fairSharing.weight must be 0 or above 1e-9"));
        }
    }
    if matches!(kind, "LocalQueue" | "WorkloadPriorityClass") && name.len() > super::MAX_NAME {
        problems.push(format!("{kind} {name}: longer than a label value (63 characters)"));
    }
    problems
}

fn parse_quantity(q: &str) -> Option<f64> {
    match q.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
        None => q.parse().ok(),
    }
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
            "no field: each contract is a WorkloadPriorityClass valued by its minimum runtime in minutes, which protects only against preemption inside a ClusterQueue",
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
