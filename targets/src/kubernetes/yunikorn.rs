//! Apache YuniKorn: per cluster, the `queues.yaml` policy in ConfigMap `yunikorn-configs`:
//! the project tree as nested queues under `root`, `guaranteed` = guaranteed GPUs, `max`
//! from max GPUs, fair application sorting in leaves, submit ACLs from members.

use std::collections::BTreeSet;

use allot_compiler::ir::{KubernetesScheduler, Model, WorkRule};
use allot_compiler::units::format_duration;
use serde::Serialize;
use serde_json::json;

use super::{Gpus, LABELS, Node, bound, tree, yaml};
use crate::fidelity::{Note, Report, Row};
use crate::{Emitted, Target};

pub struct YuniKorn;

/// YuniKorn allows `_` in queue names, so allot's own queue cannot meet a project's.
const UNBUDGETED: &str = "_unbudgeted";

impl Target for YuniKorn {
    fn name(&self) -> &'static str {
        "yunikorn"
    }

    fn emit(&self, model: &Model) -> Emitted {
        let violations = super::binding_names(model, KubernetesScheduler::Yunikorn, false);
        let mut emitted = Emitted { files: Vec::new(), violations };
        for (cluster, binding) in bound(model, KubernetesScheduler::Yunikorn) {
            let nodes = tree(model, &cluster.name);
            let gpus = |count: u64| Gpus { resource: &binding.resource, count };
            let mut queues: Vec<Queue<'_>> = nodes.iter().map(|n| queue(model, n, &gpus)).collect();
            let mut placementrules = vec![PlacementRule { create: false, name: "provided", value: None }];
            if model.policy.unbudgeted == WorkRule::Preemptible {
                queues.push(Queue {
                    name: UNBUDGETED,
                    properties: Some(FAIR),
                    resources: Some(Resources { guaranteed: gpus(cluster.unallocated_gpus), max: None }),
                    submitacl: Some("*".into()),
                    ..Queue::default()
                });
                placementrules.push(PlacementRule {
                    create: false,
                    name: "fixed",
                    value: Some(format!("root.{UNBUDGETED}")),
                });
            }
            let root = Queue { name: "root", queues: Some(queues), ..Queue::default() };
            let policy = Policy {
                partitions: vec![Partition {
                    name: "default",
                    placementrules,
                    preemption: Preemption { enabled: true },
                    queues: vec![root],
                }],
            };
            let config_map = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": "yunikorn-configs", "labels": LABELS },
                "data": { "queues.yaml": yaml(std::slice::from_ref(&policy)) },
            });
            let path = format!("{}/yunikorn-configs.yaml", cluster.name);
            emitted.add(path, yaml(&[config_map]), policy_rules(&policy));
        }
        emitted
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// The `queues.yaml` policy.
#[derive(Serialize)]
struct Policy<'a> {
    partitions: Vec<Partition<'a>>,
}

#[derive(Serialize)]
struct Partition<'a> {
    name: &'static str,
    placementrules: Vec<PlacementRule>,
    preemption: Preemption,
    queues: Vec<Queue<'a>>,
}

#[derive(Serialize)]
struct PlacementRule {
    create: bool,
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
}

#[derive(Serialize)]
struct Preemption {
    enabled: bool,
}

/// A queue: `parent` and `queues` for parents, `properties` and `submitacl` for leaves.
#[derive(Default, Serialize)]
struct Queue<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<Properties>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queues: Option<Vec<Queue<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<Resources<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    submitacl: Option<String>,
}

#[derive(Clone, Copy, Serialize)]
struct Properties {
    #[serde(rename = "application.sort.policy")]
    sort_policy: &'static str,
}

/// Applications of a leaf share it fairly.
const FAIR: Properties = Properties { sort_policy: "fair" };

#[derive(Serialize)]
struct Resources<'a> {
    guaranteed: Gpus<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<Gpus<'a>>,
}

fn queue<'a>(model: &Model, node: &'a Node<'_>, gpus: &dyn Fn(u64) -> Gpus<'a>) -> Queue<'a> {
    let a = node.allocation;
    let max = match a.max_gpus {
        Some(max) => Some(max.max(a.guaranteed_gpus)),
        None if model.policy.overflow == WorkRule::Deny => Some(a.guaranteed_gpus),
        None => None,
    };
    let resources = Some(Resources { guaranteed: gpus(a.guaranteed_gpus), max: max.map(gpus) });
    let name = node.project.name.as_str();
    if node.is_leaf() {
        let (users, groups) = (&node.project.users, &node.project.groups);
        let submitacl = if users.is_empty() && groups.is_empty() {
            "*".to_string()
        } else {
            let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
            format!("{} {}", names.join(","), groups.join(","))
        };
        Queue { name, properties: Some(FAIR), resources, submitacl: Some(submitacl), ..Queue::default() }
    } else {
        let children = node.children.iter().map(|c| self::queue(model, c, gpus)).collect();
        Queue { name, parent: Some(true), queues: Some(children), resources, ..Queue::default() }
    }
}

impl Queue<'_> {
    fn guaranteed(&self) -> Option<u64> {
        self.resources.as_ref().map(|r| r.guaranteed.count)
    }

    fn max(&self) -> Option<u64> {
        self.resources.as_ref()?.max.map(|m| m.count)
    }
}

/// The rules of YuniKorn's configuration validator.
fn policy_rules(policy: &Policy<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    for partition in &policy.partitions {
        let queues = &partition.queues;
        if queues.len() != 1 || !queues[0].name.eq_ignore_ascii_case("root") {
            problems.push("the single top queue must be root".into());
        }
        if let Some(root) = queues.first() {
            if root.resources.is_some() {
                problems.push("root must not have resources".into());
            }
            check_queue(root, "root", &mut problems);
        }
    }
    problems
}

fn check_queue(queue: &Queue<'_>, path: &str, problems: &mut Vec<String>) {
    let name = queue.name;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_:#/@-".contains(c));
    if !valid {
        problems.push(format!("{path}: invalid queue name `{name}`"));
    }
    if let (Some(g), Some(m)) = (queue.guaranteed(), queue.max())
        && g > m
    {
        problems.push(format!("{path}: guaranteed {g} is above max {m}"));
    }
    let children = queue.queues.as_deref().unwrap_or_default();
    let mut names = BTreeSet::new();
    for child in children {
        let child_name = child.name.to_lowercase();
        if !names.insert(child_name.clone()) {
            problems.push(format!("{path}: two children named `{child_name}` (names compare without case)"));
        }
        if let (Some(cm), Some(pm)) = (child.max(), queue.max())
            && cm > pm
        {
            problems.push(format!("{path}.{child_name}: max {cm} is above its parent's {pm}"));
        }
    }
    let sum: u64 = children.iter().filter_map(|c| c.guaranteed()).fold(0, u64::saturating_add);
    if path != "root" {
        for (kind, limit) in [("guaranteed", queue.guaranteed()), ("max", queue.max())] {
            if let Some(limit) = limit
                && sum > limit
            {
                problems.push(format!("{path}: children's guaranteed ({sum}) exceeds its {kind} ({limit})"));
            }
        }
    }
    for child in children {
        check_queue(child, &format!("{path}.{}", child.name), problems);
    }
}

fn fidelity(model: &Model) -> Report {
    let mut rows = vec![
        Row::lost(
            format!("fair share over a {} window", format_duration(model.policy.window_seconds)),
            "fairness uses current allocation",
        ),
        Row::exact(
            "shares",
            "`guaranteed` = guaranteed GPUs (whole); parents sort children by allocated/guaranteed, so it is also the weight",
        )
        .qualified("to one GPU"),
        Row::exact(
            format!("unbudgeted work ({})", model.policy.unbudgeted.as_str()),
            match model.policy.unbudgeted {
                WorkRule::Preemptible => {
                    "queue `root._unbudgeted` (guaranteed the top-level rest), the fallback placement"
                }
                WorkRule::Deny => "placement only into the queue a job names",
            },
        ),
        Row::exact("work beyond a budget", "usage above `guaranteed`, preemptible; `max` from max GPUs"),
        Row::lost("minimum runtime per contract", "none: YuniKorn preempts the newest allocations first"),
        Row::lost("maximum runtime", "not expressible on a queue"),
        Row::lost("resumable", "no field"),
        Row::lost("max GPUs per job", "not expressible on a queue"),
        Row::exact(
            "members",
            "`submitacl` of each leaf from users and groups (`*` when none); namespaces do not apply",
        )
        .qualified("for users and groups"),
    ];
    rows.extend(crate::fidelity::reserve_lost(
        model,
        "the budgets' `guaranteed` are shares of the other GPUs, so the reserved ones are in no queue's `guaranteed` and any queue may use them beyond it",
    ));
    Report {
        scheduler: "YuniKorn",
        short_name: "YuniKorn",
        rows,
        notes: vec![Note::Paragraph(
            "Jobs name their queue with the label `yunikorn.apache.org/queue: root.<project path with dots>`."
                .into(),
        )],
    }
}
