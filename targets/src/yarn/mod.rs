//! The YARN target: for each cluster bound to YARN, `yarn/<cluster>/` holds
//! `capacity-scheduler.xml` and `fair-scheduler.xml` (as the binding asks), the
//! `yarn-site.xml` fragment each needs, and `resource-types.xml`; `yarn/FIDELITY.md` says
//! what of the policy YARN cannot express.

mod capacity;
pub mod capacity_rules;
mod fair;
pub mod fair_rules;
pub mod queues;
pub mod xml;

use allot_compiler::ir::{CapacityMode, Cluster, Model, WorkRule, YarnBinding, YarnScheduler};
use allot_compiler::units::format_duration;

use allot_compiler::names;

use crate::fidelity::{Note, RATIO_TOLERANCE, Report, Row, percent_error, ratio_error};
use crate::text::{Named, Rule, refused};
use crate::{Emitted, Target};

pub struct Yarn;

/// Hadoop's own kill wait when a contract protects nothing.
const DEFAULT_KILL_WAIT_MS: u64 = 15_000;

fn bound(model: &Model) -> impl Iterator<Item = (&Cluster, &YarnBinding)> {
    model.clusters.iter().filter_map(|c| c.bindings.yarn.as_ref().map(|y| (c, y)))
}

/// The default contract's minimum runtime, in milliseconds: YARN's one global kill wait.
fn kill_wait_ms(model: &Model) -> u64 {
    let seconds = model.contracts.iter().find(|c| c.default).map_or(0, |c| c.min_runtime_seconds);
    if seconds == 0 { DEFAULT_KILL_WAIT_MS } else { seconds * 1000 }
}

impl Target for Yarn {
    fn name(&self) -> &'static str {
        "yarn"
    }

    fn emit(&self, model: &Model) -> Emitted {
        let mut violations = crate::text::model_names("", model);
        for (cluster, binding) in bound(model) {
            let named =
                Named { what: "a YARN resource", value: &binding.resource, source: Some(&cluster.source) };
            violations.extend(refused("", [(named, names::bad_yarn_resource as Rule)]));
        }
        let mut emitted = Emitted { files: Vec::new(), violations };
        for (cluster, binding) in bound(model) {
            let root = queues::tree(model, &cluster.name);
            let path = |name: &str| format!("{}/{name}", cluster.name);
            let kill_wait = kill_wait_ms(model);
            if binding.schedulers.contains(&YarnScheduler::Capacity) {
                let (properties, _) = capacity::properties(model, cluster, binding, &root);
                let problems = capacity_rules::validate(&properties.iter().cloned().collect(), false);
                let text = capacity::scheduler_xml(&cluster.name, &properties);
                emitted.add(path("capacity-scheduler.xml"), text, problems);
                let site = capacity::yarn_site(kill_wait, &binding.resource);
                emitted.add(path("yarn-site.capacity.xml"), site, Vec::new());
            }
            if binding.schedulers.contains(&YarnScheduler::Fair) {
                let allocations = fair::allocations(model, binding, &root);
                let problems = fair_rules::validate(&allocations);
                let text = fair::scheduler_xml(&cluster.name, &allocations);
                emitted.add(path("fair-scheduler.xml"), text, problems);
                let site = fair::yarn_site(kill_wait, &binding.resource);
                emitted.add(path("yarn-site.fair.xml"), site, Vec::new());
            }
            let properties = resource_types(&binding.resource);
            let problems = validate_resource_types(&properties);
            let comment = "allot: GPU resource type, for the ResourceManager and every NodeManager";
            let text = xml::write(&xml::configuration(&properties), Some(comment));
            emitted.add(path("resource-types.xml"), text, problems);
        }
        emitted
    }

    fn fidelity(&self, model: &Model) -> Report {
        fidelity(model)
    }
}

/// The properties of `resource-types.xml`: the GPU resource.
fn resource_types(resource: &str) -> Vec<(String, String)> {
    vec![("yarn.resource-types".to_string(), resource.to_string())]
}

/// Resource type names: a letter first, then letters, digits, `.`, `_`, `-`, after an
/// optional `namespace/` prefix.
pub fn validate_resource_types(properties: &[(String, String)]) -> Vec<String> {
    let valid = |name: &str| {
        let (prefix, short) = name.rsplit_once('/').unwrap_or(("", name));
        let prefix_ok = prefix
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
            || prefix.is_empty();
        let mut chars = short.chars();
        prefix_ok
            && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    properties
        .iter()
        .filter(|(k, _)| k == "yarn.resource-types")
        .flat_map(|(_, v)| v.split(',').map(str::trim).map(str::to_string).collect::<Vec<_>>())
        .filter(|name| !valid(name))
        .map(|name| format!("`{name}` is not a valid resource type name"))
        .collect()
}

/// How far the capacities of sibling projects are from their shares: the worst relative
/// error of a sibling set, over every cluster bound to YARN.
fn capacity_loss(model: &Model) -> f64 {
    fn siblings(queue: &queues::Queue) -> f64 {
        let projects: Vec<&queues::Queue> =
            queue.children.iter().filter(|q| matches!(q.kind, queues::Kind::Project(_))).collect();
        let wanted: Vec<f64> = projects.iter().map(|q| q.fraction).collect();
        let carried: Vec<u64> = projects.iter().map(|q| q.capacity).collect();
        queue.children.iter().map(siblings).fold(ratio_error(&wanted, &carried), f64::max)
    }
    bound(model).map(|(c, _)| siblings(&queues::tree(model, &c.name))).fold(0.0, f64::max)
}

fn shares_row(model: &Model) -> Row {
    let native = "Capacity Scheduler: percentages of the parent with 3 decimals summing to 100.000 (absolute mode: whole GPUs); Fair Scheduler: the same numbers as weights";
    let loss = capacity_loss(model);
    if loss <= RATIO_TOLERANCE {
        Row::exact("shares", native).qualified("to 0.001 percentage point")
    } else {
        Row::approximated(
            "shares",
            format!("{native}: shares below 0.001 percentage point are carried as 0 or rounded"),
        )
        .qualified(format!("to 0.001 percentage point, the worst ratio off by {}", percent_error(loss)))
    }
}

/// What the budgets lose on YARN, with this model's numbers.
fn fidelity(model: &Model) -> Report {
    let kill_wait = kill_wait_ms(model) / 1000;
    let mut rows = vec![
        Row::lost(
            format!("fair share over a {} window", format_duration(model.policy.window_seconds)),
            "guarantees and fair shares are instantaneous: no usage history",
        ),
        shares_row(model),
        Row::exact(
            "unallocated shares",
            "a `_unallocated_*` queue nobody may submit to, whose capacity others borrow",
        ),
        Row::exact(
            format!("unbudgeted work ({})", model.policy.unbudgeted.as_str()),
            match model.policy.unbudgeted {
                WorkRule::Preemptible => {
                    "queue `_unbudgeted`, guaranteed the top-level rest, may use every idle GPU, preemptible"
                }
                WorkRule::Deny => {
                    "no queue takes it: the placement policy rejects applications that name no queue"
                }
            },
        ),
        Row::exact(
            format!("work beyond a budget ({})", model.policy.overflow.as_str()),
            match model.policy.overflow {
                WorkRule::Preemptible => {
                    "`maximum-capacity` 100% (or the project's max GPUs): borrowed capacity is reclaimed by preemption"
                }
                WorkRule::Deny => "`maximum-capacity` equals the guarantee: no borrowing",
            },
        ),
        Row::approximated(
            "minimum runtime per contract",
            format!(
                "one global kill wait: `max_wait_before_kill` / `waitTimeBeforeKill` = {} (the default contract's)",
                format_duration(kill_wait)
            ),
        ),
        Row::lost(
            "resumable",
            "preempted containers are killed; only the application's own retry brings them back",
        ),
        Row::approximated(
            "maximum runtime",
            "Capacity Scheduler: `maximum-application-lifetime` of each leaf = the longest its contracts allow; Fair Scheduler: none",
        ),
        Row::lost("max GPUs per job", "not expressible: a queue limits containers, not applications"),
        Row::exact(
            "members",
            "`acl_submit_applications` / `aclSubmitApps` of each leaf (users and groups; `yarn.acl.enable=true`); namespaces do not apply",
        ),
    ];

    let runtimes = model
        .contracts
        .iter()
        .map(|contract| {
            let wanted = contract.min_runtime_seconds;
            let effect = match wanted.cmp(&kill_wait) {
                std::cmp::Ordering::Less => "protected longer than asked: reclaim from it waits",
                std::cmp::Ordering::Equal => "as asked",
                std::cmp::Ordering::Greater => "protected for less than asked",
            };
            vec![
                contract.name.clone(),
                format_duration(wanted),
                format_duration(kill_wait),
                effect.to_string(),
            ]
        })
        .collect();
    let mut notes = vec![
        Note::Heading("Minimum runtime per contract".into()),
        Note::table(&["contract", "wanted", "on YARN", "effect"], runtimes),
    ];

    for (cluster, binding) in bound(model) {
        let root = queues::tree(model, &cluster.name);
        notes.push(Note::Heading(format!(
            "Cluster `{}` ({} GPUs, {} mode)",
            cluster.name,
            cluster.gpus,
            binding.capacity_mode.as_str()
        )));
        let mut items = Vec::new();
        if binding.schedulers.contains(&YarnScheduler::Capacity) {
            let (_, raised) = capacity::properties(model, cluster, binding, &root);
            items.extend(raised.into_iter().map(|note| format!("{note}.")));
        }
        let leaves: Vec<&queues::Queue> = root.descendants().into_iter().filter(|q| q.is_leaf()).collect();
        let mut names: Vec<&str> = leaves.iter().map(|q| q.name.as_str()).collect();
        names.sort();
        names.dedup();
        if names.len() < leaves.len() {
            items.push(
                "Some leaf queues share a name: ResourceManagers before 3.4 refuse that; 3.4 needs their full paths."
                    .into(),
            );
        }
        let mode = match binding.capacity_mode {
            CapacityMode::Percent => {
                "Percent mode gives each queue the same percentage of memory and vcores as of GPUs."
            }
            CapacityMode::Absolute => {
                "Absolute mode pins whole GPUs (and memory, vcores in proportion): rebuild when nodes change."
            }
        };
        items.push(mode.into());
        notes.push(Note::List(items));
    }
    rows.extend(crate::fidelity::reserve_lost(
        model,
        "the queues' percentages and weights are shares of the whole cluster, reserved GPUs included; in absolute mode the budgets' capacities are shares of the other GPUs, and the reserved ones go with what the budgets leave",
    ));
    Report { scheduler: "YARN", short_name: "YARN", rows, notes }
}
