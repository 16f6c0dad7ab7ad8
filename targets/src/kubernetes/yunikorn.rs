//! Apache YuniKorn: per cluster, the `queues.yaml` policy in ConfigMap `yunikorn-configs`:
//! the project tree as nested queues under `root`, `guaranteed` = guaranteed GPUs, `max`
//! from max GPUs, fair application sorting in leaves, submit ACLs from members.

use allot_compiler::ir::{KubernetesScheduler, Model, WorkRule};
use allot_compiler::units::format_duration;
use serde_json::{Value, json};

use super::{Node, bound, tree, yaml};
use crate::fidelity::{Note, Report, Row};
use crate::{OutputFile, Target, Violation};

pub struct YuniKorn;

/// YuniKorn allows `_` in queue names, so allot's own queue cannot meet a project's.
const UNBUDGETED: &str = "_unbudgeted";

impl Target for YuniKorn {
    fn name(&self) -> &'static str {
        "yunikorn"
    }

    fn emit(&self, model: &Model) -> Vec<OutputFile> {
        let mut files = Vec::new();
        for (cluster, binding) in bound(model, KubernetesScheduler::Yunikorn) {
            let nodes = tree(model, &cluster.name);
            let gpus = |n: u64| json!({ binding.resource.as_str(): n.to_string() });
            let mut queues: Vec<Value> = nodes.iter().map(|n| queue(model, n, &gpus)).collect();
            let mut placement = vec![json!({ "name": "provided", "create": false })];
            if model.policy.unbudgeted == WorkRule::Preemptible {
                queues.push(json!({
                    "name": UNBUDGETED,
                    "submitacl": "*",
                    "resources": { "guaranteed": gpus(cluster.unallocated_gpus) },
                    "properties": { "application.sort.policy": "fair" },
                }));
                placement
                    .push(json!({ "name": "fixed", "value": format!("root.{UNBUDGETED}"), "create": false }));
            }
            let policy = json!({
                "partitions": [{
                    "name": "default",
                    "placementrules": placement,
                    "preemption": { "enabled": true },
                    "queues": [{ "name": "root", "queues": queues }],
                }],
            });
            let document = serde_saphyr::to_string(&policy).unwrap_or_default();
            let config_map = json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": { "name": "yunikorn-configs", "labels": { "app.kubernetes.io/managed-by": "allot" } },
                "data": { "queues.yaml": document },
            });
            files.push(OutputFile {
                path: format!("{}/yunikorn-configs.yaml", cluster.name),
                contents: yaml(&[config_map]),
            });
        }
        files
    }

    fn validate(&self, model: &Model, files: &[OutputFile]) -> Vec<Violation> {
        let mut violations = super::binding_names(model, KubernetesScheduler::Yunikorn, false);
        for file in files {
            let config_maps = match super::parse(&file.contents) {
                Ok(config_maps) => config_maps,
                Err(e) => {
                    violations.push(Violation::new(&file.path, format!("does not parse: {e}")));
                    continue;
                }
            };
            for config_map in config_maps {
                let policy = config_map["data"]["queues.yaml"].as_str().unwrap_or("");
                let problems = match super::parse_one(policy) {
                    Ok(policy) => validate_policy(&policy),
                    Err(e) => vec![format!("queues.yaml does not parse: {e}")],
                };
                violations.extend(problems.into_iter().map(|m| Violation::new(&file.path, m)));
            }
        }
        violations
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

fn queue(model: &Model, node: &Node<'_>, gpus: &dyn Fn(u64) -> Value) -> Value {
    let a = node.allocation;
    let mut resources = json!({ "guaranteed": gpus(a.guaranteed_gpus) });
    let max = match a.max_gpus {
        Some(max) => Some(max.max(a.guaranteed_gpus)),
        None if model.policy.overflow == WorkRule::Deny => Some(a.guaranteed_gpus),
        None => None,
    };
    if let Some(max) = max {
        resources["max"] = gpus(max);
    }
    let mut queue = json!({ "name": node.project.name, "resources": resources });
    if node.is_leaf() {
        queue["properties"] = json!({ "application.sort.policy": "fair" });
        let (users, groups) = (&node.project.users, &node.project.groups);
        queue["submitacl"] = if users.is_empty() && groups.is_empty() {
            json!("*")
        } else {
            let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
            json!(format!("{} {}", names.join(","), groups.join(",")))
        };
    } else {
        queue["parent"] = json!(true);
        queue["queues"] = node.children.iter().map(|c| self::queue(model, c, gpus)).collect();
    }
    queue
}

/// The rules of YuniKorn's configuration validator.
pub fn validate_policy(policy: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for partition in policy["partitions"].as_array().into_iter().flatten() {
        let queues = partition["queues"].as_array().cloned().unwrap_or_default();
        if queues.len() != 1 || queues[0]["name"].as_str().map(str::to_lowercase).as_deref() != Some("root") {
            problems.push("the single top queue must be root".into());
        }
        if let Some(root) = queues.first() {
            if !root["resources"].is_null() {
                problems.push("root must not have resources".into());
            }
            check_queue(root, "root", &mut problems);
        }
    }
    problems
}

fn amount(queue: &Value, kind: &str) -> Option<u64> {
    let map = queue["resources"][kind].as_object()?;
    Some(map.values().filter_map(|v| v.as_str().and_then(|s| s.parse::<u64>().ok()).or(v.as_u64())).sum())
}

fn check_queue(queue: &Value, path: &str, problems: &mut Vec<String>) {
    let name = queue["name"].as_str().unwrap_or("");
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_:#/@-".contains(c));
    if !valid {
        problems.push(format!("{path}: invalid queue name `{name}`"));
    }
    if let (Some(g), Some(m)) = (amount(queue, "guaranteed"), amount(queue, "max"))
        && g > m
    {
        problems.push(format!("{path}: guaranteed {g} is above max {m}"));
    }
    let children = queue["queues"].as_array().cloned().unwrap_or_default();
    let mut names = std::collections::BTreeSet::new();
    for child in &children {
        let child_name = child["name"].as_str().unwrap_or("").to_lowercase();
        if !names.insert(child_name.clone()) {
            problems.push(format!("{path}: two children named `{child_name}` (names compare without case)"));
        }
        if let (Some(cm), Some(pm)) = (amount(child, "max"), amount(queue, "max"))
            && cm > pm
        {
            problems.push(format!("{path}.{child_name}: max {cm} is above its parent's {pm}"));
        }
    }
    let sum: u64 = children.iter().filter_map(|c| amount(c, "guaranteed")).sum();
    if path != "root" {
        for (kind, limit) in [("guaranteed", amount(queue, "guaranteed")), ("max", amount(queue, "max"))] {
            if let Some(limit) = limit
                && sum > limit
            {
                problems.push(format!("{path}: children's guaranteed ({sum}) exceeds its {kind} ({limit})"));
            }
        }
    }
    for child in &children {
        check_queue(child, &format!("{path}.{}", child["name"].as_str().unwrap_or("")), problems);
    }
}

fn fidelity(model: &Model) -> Report {
    let rows = vec![
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
