//! Volcano (`scheduling.volcano.sh/v1beta1`): per cluster, a Queue per project with
//! `parent` (top-level projects under Volcano's `root`), `deserved` = guaranteed GPUs and
//! `capability` from max GPUs; the contracts' minimum runtimes become the pod annotation
//! the `cdp` plugin reads, documented in the fidelity report since a queue cannot hold them.

use std::collections::{HashMap, HashSet};

use allot_compiler::ir::{KubernetesScheduler, Model, WorkRule};
use allot_compiler::units::format_duration;
use serde_json::{Value, json};

use super::{Node, UNBUDGETED, bound, check_names, go_duration, object, tree, yaml};
use crate::fidelity::{Note, Report, Row};
use crate::{OutputFile, Target, Violation};

pub struct Volcano;

const API: &str = "scheduling.volcano.sh/v1beta1";
/// The depth Volcano's webhook allows by default (`--max-queue-depth`), root included.
pub const MAX_DEPTH: usize = 5;

impl Target for Volcano {
    fn name(&self) -> &'static str {
        "volcano"
    }

    fn emit(&self, model: &Model) -> Vec<OutputFile> {
        let mut files = Vec::new();
        for (cluster, binding) in bound(model, KubernetesScheduler::Volcano) {
            let nodes = tree(model, &cluster.name);
            let gpus = |n: u64| json!({ binding.resource.as_str(): n.to_string() });
            let mut queues: Vec<Value> = nodes
                .iter()
                .flat_map(|n| n.flatten())
                .map(|node| {
                    let mut spec = json!({
                        "parent": node.parent.as_deref().unwrap_or("root"),
                        "deserved": gpus(node.allocation.guaranteed_gpus),
                        "reclaimable": true,
                    });
                    if let Some(cap) = capability(model, node) {
                        spec["capability"] = gpus(cap);
                    }
                    object(API, "Queue", &node.name, spec)
                })
                .collect();
            if model.policy.unbudgeted == WorkRule::Preemptible {
                let spec = json!({ "parent": "root", "deserved": gpus(0), "reclaimable": true });
                queues.push(object(API, "Queue", UNBUDGETED, spec));
            }
            files.push(OutputFile { path: format!("{}/queues.yaml", cluster.name), contents: yaml(&queues) });
            files.push(OutputFile {
                path: format!("{}/volcano-scheduler-configmap.yaml", cluster.name),
                contents: yaml(&[scheduler_config()]),
            });
        }
        files
    }

    fn validate(&self, model: &Model, files: &[OutputFile]) -> Vec<Violation> {
        let mut violations = super::binding_names(model, KubernetesScheduler::Volcano, false);
        for (cluster, _) in bound(model, KubernetesScheduler::Volcano) {
            let path = format!("{}/queues.yaml", cluster.name);
            let nodes = tree(model, &cluster.name);
            violations.extend(check_names(&path, &nodes, &[]));
            for node in nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.depth + 1 > MAX_DEPTH) {
                violations.push(Violation::at(
                    &path,
                    format!(
                        "`{}` is {} levels below Volcano's root; its webhook allows {}",
                        node.project.path,
                        node.depth,
                        MAX_DEPTH - 1
                    ),
                    vec![node.project.source.clone()],
                ));
            }
        }
        violations.extend(super::queue_file_violations(files, webhook_rules));
        violations
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// The hard cap: max GPUs, or the guarantee when work beyond a budget is denied.
fn capability(model: &Model, node: &Node<'_>) -> Option<u64> {
    let guaranteed = node.allocation.guaranteed_gpus;
    match node.allocation.max_gpus {
        Some(max) => Some(max.max(guaranteed)),
        None if model.policy.overflow == WorkRule::Deny => Some(guaranteed),
        None => None,
    }
}

/// The scheduler configuration that makes the queues hierarchical and the contracts'
/// cool-down annotations effective.
fn scheduler_config() -> Value {
    let conf = "actions: \"enqueue, allocate, backfill, reclaim, preempt\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n  - name: cdp\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: capacity\n    enableHierarchy: true\n  - name: nodeorder\n";
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "volcano-scheduler-configmap", "namespace": "volcano-system", "labels": { "app.kubernetes.io/managed-by": "allot" } },
        "data": { "volcano-scheduler.conf": conf },
    })
}

/// Volcano's queue webhook: quantities, deserved within capability, children's deserved
/// within their parent's, parents that exist, no self-parenting.
fn webhook_rules(queues: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let amount = |q: &Value, field: &str| -> Option<u64> {
        let map = q["spec"][field].as_object()?;
        Some(map.values().filter_map(|v| v.as_str()?.parse::<u64>().ok()).sum())
    };
    let names: HashSet<&str> = queues.iter().filter_map(|q| q["metadata"]["name"].as_str()).collect();
    let mut children_of: HashMap<&str, Vec<&Value>> = HashMap::new();
    for q in queues {
        if let Some(parent) = q["spec"]["parent"].as_str() {
            children_of.entry(parent).or_default().push(q);
        }
    }
    for q in queues {
        let name = q["metadata"]["name"].as_str().unwrap_or("");
        let parent = q["spec"]["parent"].as_str().unwrap_or("root");
        if parent == name {
            problems.push(format!("Queue {name}: a queue cannot be its own parent"));
        }
        if parent != "root" && !names.contains(parent) {
            problems.push(format!("Queue {name}: parent {parent} does not exist"));
        }
        if let (Some(deserved), Some(cap)) = (amount(q, "deserved"), amount(q, "capability"))
            && deserved > cap
        {
            problems.push(format!("Queue {name}: deserved {deserved} is above capability {cap}"));
        }
        let children = children_of.get(name).map_or(&[][..], Vec::as_slice);
        let sum: u64 = children.iter().filter_map(|c| amount(c, "deserved")).sum();
        if !children.is_empty() && sum > amount(q, "deserved").unwrap_or(0) {
            problems.push(format!("Queue {name}: children's deserved ({sum}) exceeds its own"));
        }
    }
    problems
}

fn fidelity(model: &Model) -> Report {
    let rows = vec![
        Row::lost(
            format!("fair share over a {} window", format_duration(model.policy.window_seconds)),
            "the capacity plugin shares by current allocation",
        ),
        Row::exact(
            "shares",
            "`deserved` = guaranteed GPUs (whole); idle `deserved` is lent and reclaimed (`reclaimable: true`); no `guarantee`, which would reserve GPUs even when idle",
        )
        .qualified("to one GPU"),
        Row::lost(
            "weights for idle GPUs",
            "not with hierarchical queues (the `weight` of the proportion plugin is flat)",
        ),
        Row::exact(
            format!("unbudgeted work ({})", model.policy.unbudgeted.as_str()),
            match model.policy.unbudgeted {
                WorkRule::Preemptible => "queue `root-unbudgeted` with `deserved` 0: all it runs is reclaimable",
                WorkRule::Deny => "no queue takes it",
            },
        ),
        Row::exact("work beyond a budget", "above `deserved`, reclaimable; `capability` from max GPUs"),
        Row::approximated(
            "minimum runtime per contract",
            "per pod: annotation `volcano.sh/cooldown-time` read by the `cdp` plugin (enabled in the ConfigMap); a queue cannot hold it",
        )
        .caveat("jobs must carry the annotation"),
        Row::lost("maximum runtime", "not expressible on a queue"),
        Row::lost("resumable", "no field"),
        Row::lost("max GPUs per job", "not expressible on a queue"),
        Row::lost("members", "jobs name their queue; namespaces, users and groups do not bind to queues"),
    ];
    let annotations = model
        .contracts
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                format!("`volcano.sh/cooldown-time: \"{}\"`", go_duration(c.min_runtime_seconds)),
            ]
        })
        .collect();
    Report {
        scheduler: "Volcano",
        short_name: "Volcano",
        rows,
        notes: vec![
            Note::Heading("Contract annotations".into()),
            Note::Paragraph("Jobs set `scheduling.volcano.sh/queue-name` (pods) or `spec.queue` (Volcano Jobs) to their project, and per contract:".into()),
            Note::table(&["contract", "pod annotation"], annotations),
        ],
    }
}
