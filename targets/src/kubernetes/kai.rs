//! KAI Scheduler (`scheduling.run.ai/v2`): per cluster, a Queue per project with
//! `parentQueue`, GPU `quota` = guaranteed GPUs, `overQuotaWeight` = the share and an
//! explicit `limit`; contracts' minimum runtimes as `preemptMinRuntime` and
//! `reclaimMinRuntime`, splitting a leaf into one queue per contract where they differ; and
//! the SchedulingShard settings for the usage window.

use std::collections::{BTreeSet, HashMap, HashSet};

use allot_compiler::ir::{Contract, KubernetesScheduler, Model, Project, WorkRule};
use allot_compiler::normalize::apportion;
use allot_compiler::units::format_duration;
use serde_json::{Value, json};

use super::{Node, UNBUDGETED, bound, check_names, go_duration, object, tree, weight, yaml};
use crate::fidelity::{Report, Row};
use crate::{OutputFile, Target, Violation};

pub struct Kai;

const API: &str = "scheduling.run.ai/v2";

impl Target for Kai {
    fn name(&self) -> &'static str {
        "kai"
    }

    fn emit(&self, model: &Model) -> Vec<OutputFile> {
        let mut files = Vec::new();
        for (cluster, _) in bound(model, KubernetesScheduler::Kai) {
            let nodes = tree(model, &cluster.name);
            let mut queues = Vec::new();
            for node in nodes.iter().flat_map(|n| n.flatten()) {
                queues.extend(node_queues(model, node));
            }
            if model.policy.unbudgeted == WorkRule::Preemptible {
                queues.push(queue(UNBUDGETED, None, "work outside any budget", 0, 0, -1, None));
            }
            files.push(OutputFile { path: format!("{}/queues.yaml", cluster.name), contents: yaml(&queues) });
            files.push(OutputFile {
                path: format!("{}/schedulingshard.yaml", cluster.name),
                contents: yaml(&[scheduling_shard(model)]),
            });
        }
        files
    }

    fn validate(&self, model: &Model, files: &[OutputFile]) -> Vec<Violation> {
        let mut violations = super::binding_names(model, KubernetesScheduler::Kai, false);
        for (cluster, _) in bound(model, KubernetesScheduler::Kai) {
            let nodes = tree(model, &cluster.name);
            let extra: Vec<(String, &Project)> = nodes
                .iter()
                .flat_map(|n| n.flatten())
                .filter(|n| n.is_leaf())
                .flat_map(|n| contract_queues(model, n).into_iter().map(move |(name, _)| (name, n.project)))
                .collect();
            violations.extend(check_names(&format!("{}/queues.yaml", cluster.name), &nodes, &extra));
        }
        violations.extend(super::queue_file_violations(files, webhook_rules));
        violations
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// A Queue; `limit` -1 is no cap. cpu and memory are left unlimited and in quota, so that
/// the GPU quota alone decides (KAI reads an omitted limit as 0).
fn queue(
    name: &str,
    parent: Option<&str>,
    display: &str,
    quota: u64,
    weight: u64,
    limit: i64,
    min_runtime: Option<u64>,
) -> Value {
    let unlimited = json!({ "quota": -1, "overQuotaWeight": 1, "limit": -1 });
    let mut spec = json!({
        "displayName": display,
        "resources": {
            "gpu": { "quota": quota, "overQuotaWeight": number(weight), "limit": limit },
            "cpu": unlimited,
            "memory": unlimited,
        },
    });
    if let Some(parent) = parent {
        spec["parentQueue"] = json!(parent);
    }
    if let Some(seconds) = min_runtime {
        spec["preemptMinRuntime"] = json!(go_duration(seconds));
        spec["reclaimMinRuntime"] = json!(go_duration(seconds));
    }
    object(API, "Queue", name, spec)
}

/// A weight in thousandths as a plain number: `35`, `17.5`.
fn number(thousandths: u64) -> Value {
    if thousandths.is_multiple_of(1000) {
        json!(thousandths / 1000)
    } else {
        json!(thousandths as f64 / 1000.0)
    }
}

/// The contracts a project may use, grouped by minimum runtime: one queue each when they
/// differ (`<leaf>-<contract>`, named after the first contract of the group).
fn contract_queues<'m>(model: &'m Model, node: &Node<'_>) -> Vec<(String, &'m Contract)> {
    let contracts: Vec<&Contract> =
        model.contracts.iter().filter(|c| node.project.contracts.contains(&c.name)).collect();
    let runtimes: BTreeSet<u64> = contracts.iter().map(|c| c.min_runtime_seconds).collect();
    if runtimes.len() <= 1 {
        return Vec::new();
    }
    runtimes
        .iter()
        .filter_map(|r| contracts.iter().find(|c| c.min_runtime_seconds == *r))
        .map(|c| (format!("{}-{}", node.name, c.name), *c))
        .collect()
}

fn node_queues(model: &Model, node: &Node<'_>) -> Vec<Value> {
    let a = node.allocation;
    let limit = match a.max_gpus {
        Some(max) => max.max(a.guaranteed_gpus) as i64,
        None if model.policy.overflow == WorkRule::Deny => a.guaranteed_gpus as i64,
        None => -1,
    };
    let split = if node.is_leaf() { contract_queues(model, node) } else { Vec::new() };
    let min_runtime = if node.is_leaf() && split.is_empty() {
        model
            .contracts
            .iter()
            .filter(|c| node.project.contracts.contains(&c.name))
            .map(|c| c.min_runtime_seconds)
            .max()
    } else {
        None
    };
    let mut out = vec![queue(
        &node.name,
        node.parent.as_deref(),
        &node.project.path,
        a.guaranteed_gpus,
        weight(a),
        limit,
        min_runtime,
    )];
    // Contract queues share the leaf's guarantee evenly and compete for the rest equally.
    let even = vec![1.0 / split.len().max(1) as f64; split.len()];
    let (quotas, _) = apportion(a.guaranteed_gpus, &even);
    for ((name, contract), quota) in split.iter().zip(quotas) {
        let display = format!("{} ({})", node.project.path, contract.name);
        out.push(queue(
            name,
            Some(&node.name),
            &display,
            quota,
            1000,
            limit,
            Some(contract.min_runtime_seconds),
        ));
    }
    out
}

fn scheduling_shard(model: &Model) -> Value {
    let default = model.contracts.iter().find(|c| c.default).map_or(0, |c| c.min_runtime_seconds);
    json!({
        "apiVersion": "kai.scheduler/v1",
        "kind": "SchedulingShard",
        "metadata": { "name": "default", "labels": { "app.kubernetes.io/managed-by": "allot" } },
        "spec": {
            "kValue": 1.0,
            "usageDBConfig": {
                "clientType": "prometheus",
                "usageParams": { "windowSize": format_duration(model.policy.window_seconds), "windowType": "sliding" },
            },
            "minRuntime": { "preemptMinRuntime": go_duration(default), "reclaimMinRuntime": go_duration(default) },
            "plugins": { "minruntime": { "arguments": { "reclaimResolveMethod": "queue" } } },
        },
    })
}

/// KAI's webhook: resources present; and (a warning there, an error here) children's
/// quotas within their parent's.
fn webhook_rules(queues: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let gpu_quota = |q: &Value| q["spec"]["resources"]["gpu"]["quota"].as_i64().unwrap_or(0);
    let names: HashSet<&str> = queues.iter().filter_map(|q| q["metadata"]["name"].as_str()).collect();
    let mut children_of: HashMap<&str, Vec<&Value>> = HashMap::new();
    for q in queues {
        if let Some(parent) = q["spec"]["parentQueue"].as_str() {
            children_of.entry(parent).or_default().push(q);
        }
    }
    for q in queues {
        let name = q["metadata"]["name"].as_str().unwrap_or("");
        let resources = &q["spec"]["resources"];
        if resources.is_null() {
            problems.push(format!("Queue {name}: resources must be specified"));
        }
        for resource in ["gpu", "cpu", "memory"] {
            if resources[resource]["limit"].is_null() {
                problems.push(format!("Queue {name}: {resource}.limit is missing, which KAI reads as 0"));
            }
        }
        let children = children_of.get(name).map_or(&[][..], Vec::as_slice);
        let sum: i64 = children.iter().map(|c| gpu_quota(c)).sum();
        if !children.is_empty() && gpu_quota(q) >= 0 && sum > gpu_quota(q) {
            problems.push(format!(
                "Queue {name}: children's GPU quotas ({sum}) exceed its own ({})",
                gpu_quota(q)
            ));
        }
        if let Some(parent) = q["spec"]["parentQueue"].as_str()
            && !names.contains(parent)
        {
            problems.push(format!("Queue {name}: parent queue {parent} does not exist (KAI drops orphans)"));
        }
    }
    problems
}

fn fidelity(model: &Model) -> Report {
    let window = format_duration(model.policy.window_seconds);
    let mut rows = vec![
        Row::approximated(
            format!("fair share over a {window} window"),
            format!(
                "SchedulingShard `windowSize` {window} (sliding, Prometheus usage); history only reduces over-quota shares"
            ),
        ),
        Row::exact("shares", "GPU `quota` = guaranteed GPUs (whole), `overQuotaWeight` = the share")
            .qualified("to one GPU"),
    ];
    rows.extend(super::weight_row(model, KubernetesScheduler::Kai, "`overQuotaWeight`"));
    rows.extend([
        Row::exact("unallocated shares", "not given to any queue: over-quota for every queue"),
        Row::exact(
            format!("unbudgeted work ({})", model.policy.unbudgeted.as_str()),
            match model.policy.unbudgeted {
                WorkRule::Preemptible => {
                    "queue `root-unbudgeted`, quota 0, weight 0: only over-quota, preemptible"
                }
                WorkRule::Deny => "no queue takes it",
            },
        ),
        Row::exact(
            "work beyond a budget",
            "over-quota, for preemptible workloads only; `limit` from max GPUs",
        ),
        Row::approximated(
            "minimum runtime per contract",
            "`preemptMinRuntime`/`reclaimMinRuntime` per queue; a leaf whose contracts differ gets one queue per contract, sharing its quota evenly",
        ),
        Row::lost("maximum runtime", "not expressible on a queue"),
        Row::lost("resumable", "no field"),
        Row::lost("max GPUs per job", "not expressible on a queue"),
        Row::lost(
            "members",
            "jobs name their queue (`kai.scheduler/queue`); namespaces, users and groups do not bind to queues",
        ),
    ]);
    Report { scheduler: "KAI Scheduler", short_name: "KAI", rows, notes: Vec::new() }
}
