//! `fair-scheduler.xml` and its `yarn-site.xml` fragment: the queue tree as Fair
//! Scheduler queues, weighted by share, `drf` everywhere so that GPUs count.

use allot_compiler::ir::{Model, WorkRule, YarnBinding};

use super::capacity::{submitters, thousandths};
use super::queues::{Kind, Queue, UNBUDGETED};
use super::xml::{self, Element};

/// Seconds a queue below its fair share waits before it may preempt.
pub const PREEMPTION_TIMEOUT_SECONDS: u64 = 60;

/// The allocation file's elements: defaults, the queue tree, the placement policy.
pub fn allocations(model: &Model, binding: &YarnBinding, root: &Queue) -> Element {
    let elastic = model.policy.overflow == WorkRule::Preemptible;
    let placement = Element::new("queuePlacementPolicy")
        .child(Element::new("rule").attribute("name", "specified").attribute("create", "false"));
    let placement = if model.policy.unbudgeted == WorkRule::Preemptible {
        placement.child(
            Element::new("rule")
                .attribute("name", "default")
                .attribute("queue", format!("root.{UNBUDGETED}")),
        )
    } else {
        placement.child(Element::new("rule").attribute("name", "reject"))
    };
    Element::new("allocations")
        .child(Element::text("defaultQueueSchedulingPolicy", "drf"))
        .child(Element::text("defaultFairSharePreemptionThreshold", "1.0"))
        .child(Element::text("defaultFairSharePreemptionTimeout", PREEMPTION_TIMEOUT_SECONDS.to_string()))
        .child(Element::text("defaultMinSharePreemptionTimeout", PREEMPTION_TIMEOUT_SECONDS.to_string()))
        .child(queue(root, binding, elastic))
        .child(placement)
}

/// The file of `cluster`'s [`allocations`].
pub fn scheduler_xml(cluster: &str, allocations: &Element) -> String {
    let comment = format!("allot: Fair Scheduler queues of cluster {cluster}; do not edit by hand");
    xml::write(allocations, Some(&comment))
}

fn queue(queue: &Queue, binding: &YarnBinding, elastic: bool) -> Element {
    let mut element = Element::new("queue").attribute("name", queue.name.as_str());
    if queue.kind != Kind::Root {
        element = element.child(Element::text("weight", thousandths(queue.capacity)));
    }
    element = element.child(Element::text("schedulingPolicy", "drf"));
    let max_gpus = match (&queue.kind, queue.max_gpus) {
        (Kind::Unallocated, _) => Some(queue.guaranteed_gpus),
        (_, Some(max)) => Some(max.max(queue.guaranteed_gpus)),
        (Kind::Project(_), None) if !elastic => Some(queue.guaranteed_gpus),
        _ => None,
    };
    if let Some(max) = max_gpus {
        element = element.child(Element::text("maxResources", format!("{}={max}", binding.resource)));
    }
    let acl = match &queue.kind {
        Kind::Root | Kind::Unallocated => Some(" ".to_string()),
        Kind::Unbudgeted => Some("*".to_string()),
        Kind::Project(_) if queue.is_leaf() => Some(submitters(queue)),
        Kind::Project(_) => None,
    };
    if let Some(acl) = acl {
        element = element.child(Element::text("aclSubmitApps", acl));
    }
    queue.children.iter().fold(element, |e, child| e.child(self::queue(child, binding, elastic)))
}

pub fn yarn_site(min_runtime_ms: u64, gpu_resource: &str) -> String {
    let properties: Vec<(String, String)> = [
        (
            "yarn.resourcemanager.scheduler.class",
            "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair.FairScheduler",
        ),
        ("yarn.scheduler.fair.allocation.file", "fair-scheduler.xml"),
        ("yarn.scheduler.fair.preemption", "true"),
        ("yarn.scheduler.fair.waitTimeBeforeKill", &min_runtime_ms.to_string()),
        ("yarn.scheduler.fair.allow-undeclared-pools", "false"),
        ("yarn.acl.enable", "true"),
        ("yarn.nodemanager.resource-plugins", gpu_resource),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let comment = "allot: yarn-site.xml properties for the Fair Scheduler file beside this one; merge them into yarn-site.xml";
    xml::write(&xml::configuration(&properties), Some(comment))
}
