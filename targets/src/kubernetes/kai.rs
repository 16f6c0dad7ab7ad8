//! KAI Scheduler (`scheduling.run.ai/v2`): per cluster, a Queue per project with
//! `parentQueue`, GPU `quota` = guaranteed GPUs, `overQuotaWeight` = the share and an
//! explicit `limit`; contracts' minimum runtimes as `preemptMinRuntime` and
//! `reclaimMinRuntime`, splitting a leaf into one queue per contract where they differ; and
//! the SchedulingShard settings for the usage window.

use std::collections::{BTreeSet, HashMap, HashSet};

use allot_compiler::ir::{Contract, KubernetesScheduler, Model, Project, WorkRule};
use allot_compiler::normalize::apportion;
use allot_compiler::units::format_duration;
use serde::{Serialize, Serializer};
use serde_json::{Value, json};

use super::{Node, Object, UNBUDGETED, bound, check_names, go_duration, tree, weight, yaml};
use crate::fidelity::{Report, Row};
use crate::{Emitted, Target};

pub struct Kai;

const API: &str = "scheduling.run.ai/v2";

impl Target for Kai {
    fn name(&self) -> &'static str {
        "kai"
    }

    fn emit(&self, model: &Model) -> Emitted {
        let violations = super::binding_names(model, KubernetesScheduler::Kai, false);
        let mut emitted = Emitted { files: Vec::new(), violations };
        for (cluster, _) in bound(model, KubernetesScheduler::Kai) {
            let path = format!("{}/queues.yaml", cluster.name);
            let nodes = tree(model, &cluster.name);
            let flat: Vec<&Node<'_>> = nodes.iter().flat_map(|n| n.flatten()).collect();
            let splits: Vec<Vec<(String, &Contract)>> = flat
                .iter()
                .map(|n| if n.is_leaf() { contract_queues(model, n) } else { Vec::new() })
                .collect();
            let extra: Vec<(&str, &Project)> = flat
                .iter()
                .zip(&splits)
                .flat_map(|(n, split)| split.iter().map(|(name, _)| (name.as_str(), n.project)))
                .collect();
            emitted.violations.extend(check_names(&path, &nodes, &extra));
            let mut queues: Vec<Queue<'_>> =
                flat.iter().zip(&splits).flat_map(|(n, split)| node_queues(model, n, split)).collect();
            if model.policy.unbudgeted == WorkRule::Preemptible {
                let gpu = Resource { limit: -1, over_quota_weight: Weight(0), quota: 0 };
                queues.push(queue(UNBUDGETED, None, "work outside any budget".into(), gpu, None));
            }
            emitted.add(path, yaml(&queues), webhook_rules(&queues));
            let shard = yaml(&[scheduling_shard(model)]);
            emitted.add(format!("{}/schedulingshard.yaml", cluster.name), shard, Vec::new());
        }
        emitted
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// A Queue; `limit` -1 is no cap. cpu and memory are left unlimited and in quota, so that
/// the GPU quota alone decides. Every resource carries its `limit`: KAI reads an omitted
/// one as 0.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueueSpec<'a> {
    display_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_queue: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preempt_min_runtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reclaim_min_runtime: Option<String>,
    resources: Resources,
}

type Queue<'a> = Object<'a, QueueSpec<'a>>;

#[derive(Serialize)]
struct Resources {
    cpu: Resource,
    gpu: Resource,
    memory: Resource,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Resource {
    limit: i64,
    over_quota_weight: Weight,
    quota: i64,
}

const UNLIMITED: Resource = Resource { limit: -1, over_quota_weight: Weight(1000), quota: -1 };

/// A weight in thousandths, written as a plain number: `35`, `17.5`.
struct Weight(u64);

impl Serialize for Weight {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.is_multiple_of(1000) {
            serializer.serialize_u64(self.0 / 1000)
        } else {
            serializer.serialize_f64(self.0 as f64 / 1000.0)
        }
    }
}

/// A count of GPUs as KAI's signed fields hold it.
fn signed(gpus: u64) -> i64 {
    i64::try_from(gpus).unwrap_or(i64::MAX)
}

fn queue<'a>(
    name: &'a str,
    parent: Option<&'a str>,
    display_name: String,
    gpu: Resource,
    min_runtime: Option<u64>,
) -> Queue<'a> {
    let spec = QueueSpec {
        display_name,
        parent_queue: parent,
        preempt_min_runtime: min_runtime.map(go_duration),
        reclaim_min_runtime: min_runtime.map(go_duration),
        resources: Resources { cpu: UNLIMITED, gpu, memory: UNLIMITED },
    };
    Object::new(API, "Queue", name, spec)
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

/// A node's queue, and when it is a leaf whose contracts protect differently, one queue
/// per contract under it.
fn node_queues<'a>(model: &Model, node: &'a Node<'_>, split: &'a [(String, &Contract)]) -> Vec<Queue<'a>> {
    let a = node.allocation;
    let limit = match a.max_gpus {
        Some(max) => signed(max.max(a.guaranteed_gpus)),
        None if model.policy.overflow == WorkRule::Deny => signed(a.guaranteed_gpus),
        None => -1,
    };
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
    let gpu = Resource { limit, over_quota_weight: Weight(weight(a)), quota: signed(a.guaranteed_gpus) };
    let mut out =
        vec![queue(&node.name, node.parent.as_deref(), node.project.path.clone(), gpu, min_runtime)];
    // Contract queues share the leaf's guarantee evenly and compete for the rest equally.
    let even = vec![1.0 / split.len().max(1) as f64; split.len()];
    let (quotas, _) = apportion(a.guaranteed_gpus, &even);
    for ((name, contract), quota) in split.iter().zip(quotas) {
        let display = format!("{} ({})", node.project.path, contract.name);
        let gpu = Resource { limit, over_quota_weight: Weight(1000), quota: signed(quota) };
        out.push(queue(name, Some(&node.name), display, gpu, Some(contract.min_runtime_seconds)));
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

/// KAI's webhook (its rule that resources be present with limits holds by [`Resource`]'s
/// type): children's GPU quotas within their parent's (a warning there, an error here),
/// and parents that exist.
fn webhook_rules(queues: &[Queue<'_>]) -> Vec<String> {
    let mut problems = Vec::new();
    let names: HashSet<&str> = queues.iter().map(|q| q.metadata.name).collect();
    let mut children_quota: HashMap<&str, i64> = HashMap::new();
    for q in queues {
        if let Some(parent) = q.spec.parent_queue {
            let sum = children_quota.entry(parent).or_default();
            *sum = sum.saturating_add(q.spec.resources.gpu.quota);
        }
    }
    for q in queues {
        let name = q.metadata.name;
        let quota = q.spec.resources.gpu.quota;
        if let Some(&sum) = children_quota.get(name)
            && quota >= 0
            && sum > quota
        {
            problems.push(format!("Queue {name}: children's GPU quotas ({sum}) exceed its own ({quota})"));
        }
        if let Some(parent) = q.spec.parent_queue
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
    rows.extend(crate::fidelity::reserve_lost(
        model,
        "the budgets' `quota` are shares of the other GPUs, so the reserved ones are in no queue's `quota` and any queue may use them beyond it",
    ));
    Report { scheduler: "KAI Scheduler", short_name: "KAI", rows, notes: Vec::new() }
}
