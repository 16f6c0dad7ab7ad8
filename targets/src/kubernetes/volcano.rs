//! Volcano (`scheduling.volcano.sh/v1beta1`): per cluster, a Queue per project with
//! `parent` (top-level projects under Volcano's `root`), `deserved` = guaranteed GPUs and
//! `capability` from max GPUs; the contracts' minimum runtimes become the pod annotation
//! the `cdp` plugin reads, documented in the fidelity report since a queue cannot hold them.

use std::collections::{HashMap, HashSet};

use allot_compiler::ir::{KubernetesScheduler, Model, WorkRule};
use allot_compiler::units::format_duration;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Gpus, Node, Object, UNBUDGETED, bound, check_names, go_duration, tree, yaml};
use crate::fidelity::{Note, Report, Row};
use crate::{Emitted, Target, Violation};

pub struct Volcano;

const API: &str = "scheduling.volcano.sh/v1beta1";
/// The depth Volcano's webhook allows by default (`--max-queue-depth`), root included.
pub const MAX_DEPTH: usize = 5;
/// Volcano's own top queue.
const ROOT: &str = "root";

impl Target for Volcano {
    fn name(&self) -> &'static str {
        "volcano"
    }

    fn emit(&self, model: &Model) -> Emitted {
        let violations = super::binding_names(model, KubernetesScheduler::Volcano, false);
        let mut emitted = Emitted { files: Vec::new(), violations };
        for (cluster, binding) in bound(model, KubernetesScheduler::Volcano) {
            let path = format!("{}/queues.yaml", cluster.name);
            let nodes = tree(model, &cluster.name);
            emitted.violations.extend(check_names(&path, &nodes, &[]));
            let flat: Vec<&Node<'_>> = nodes.iter().flat_map(|n| n.flatten()).collect();
            for node in flat.iter().filter(|n| n.depth + 1 > MAX_DEPTH) {
                emitted.violations.push(Violation::at(
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
            let gpus = |count: u64| Gpus { resource: &binding.resource, count };
            let mut queues: Vec<Queue<'_>> = flat
                .iter()
                .map(|node| {
                    let spec = QueueSpec {
                        capability: capability(model, node).map(gpus),
                        deserved: gpus(node.allocation.guaranteed_gpus),
                        parent: node.parent.as_deref().unwrap_or(ROOT),
                        reclaimable: true,
                    };
                    Object::new(API, "Queue", &node.name, spec)
                })
                .collect();
            if model.policy.unbudgeted == WorkRule::Preemptible {
                let spec = QueueSpec { capability: None, deserved: gpus(0), parent: ROOT, reclaimable: true };
                queues.push(Object::new(API, "Queue", UNBUDGETED, spec));
            }
            emitted.add(path, yaml(&queues), webhook_rules(&queues));
            emitted.add(
                format!("{}/volcano-scheduler-configmap.yaml", cluster.name),
                yaml(&[scheduler_config()]),
                Vec::new(),
            );
        }
        emitted
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// A Queue: `deserved` GPUs are lent while idle and reclaimed, `capability` caps them.
#[derive(Serialize)]
struct QueueSpec<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    capability: Option<Gpus<'a>>,
    deserved: Gpus<'a>,
    parent: &'a str,
    reclaimable: bool,
}

type Queue<'a> = Object<'a, QueueSpec<'a>>;

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

/// Volcano's queue webhook: deserved within capability, children's deserved within their
/// parent's, parents that exist, no self-parenting (its rules on quantities hold by
/// [`Gpus`]' type).
fn webhook_rules(queues: &[Queue<'_>]) -> Vec<String> {
    let mut problems = Vec::new();
    let names: HashSet<&str> = queues.iter().map(|q| q.metadata.name).collect();
    let mut children_deserved: HashMap<&str, u64> = HashMap::new();
    for q in queues {
        let sum = children_deserved.entry(q.spec.parent).or_default();
        *sum = sum.saturating_add(q.spec.deserved.count);
    }
    for q in queues {
        let (name, parent, deserved) = (q.metadata.name, q.spec.parent, q.spec.deserved.count);
        if parent == name {
            problems.push(format!("Queue {name}: a queue cannot be its own parent"));
        }
        if parent != ROOT && !names.contains(parent) {
            problems.push(format!("Queue {name}: parent {parent} does not exist"));
        }
        if let Some(cap) = q.spec.capability
            && deserved > cap.count
        {
            problems.push(format!("Queue {name}: deserved {deserved} is above capability {}", cap.count));
        }
        if let Some(&sum) = children_deserved.get(name)
            && sum > deserved
        {
            problems.push(format!("Queue {name}: children's deserved ({sum}) exceeds its own"));
        }
    }
    problems
}

fn fidelity(model: &Model) -> Report {
    let mut rows = vec![
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
    rows.extend(crate::fidelity::reserve_lost(
        model,
        "the budgets' `deserved` are shares of the other GPUs, so the reserved ones are in no queue's `deserved` and any queue may use them beyond it",
    ));
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
