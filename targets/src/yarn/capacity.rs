//! `capacity-scheduler.xml` and its `yarn-site.xml` fragment: the queue tree as Capacity
//! Scheduler properties, percent (children sum to exactly 100.000) or absolute (whole GPUs).

use allot_compiler::ir::{CapacityMode, Cluster, Model, WorkRule, YarnBinding};

use super::queues::{Kind, Queue, WHOLE};
use super::xml;

const PREFIX: &str = "yarn.scheduler.capacity.";
pub const DOMINANT_RESOURCE_CALCULATOR: &str =
    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator";

/// The file's properties, and what had to give (caps below a guarantee were raised to it).
pub fn properties(
    model: &Model,
    cluster: &Cluster,
    binding: &YarnBinding,
    root: &Queue,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut writer = Properties { list: Vec::new(), notes: Vec::new() };
    writer.set("resource-calculator", DOMINANT_RESOURCE_CALCULATOR.into());
    let absolute = binding.capacity_mode == CapacityMode::Absolute;
    let resources = Resources::of(cluster, binding);
    let elastic = model.policy.overflow == WorkRule::Preemptible;
    writer.queue(root, &resources, absolute, elastic, Bounds::ROOT);
    (writer.list, writer.notes)
}

/// The file of `cluster`'s [`properties`].
pub fn scheduler_xml(cluster: &str, properties: &[(String, String)]) -> String {
    let comment = format!("allot: Capacity Scheduler queues of cluster {cluster}; do not edit by hand");
    xml::write(&xml::configuration(properties), Some(&comment))
}

/// The fraction of the cluster a queue is guaranteed and may reach.
#[derive(Clone, Copy)]
struct Bounds {
    capacity: f64,
    maximum: f64,
    /// The same in whole GPUs.
    gpus: u64,
    max_gpus: u64,
}

impl Bounds {
    const ROOT: Bounds = Bounds { capacity: 1.0, maximum: 1.0, gpus: 0, max_gpus: 0 };
}

/// Per GPU: the memory and vcores a queue's absolute capacity carries with it.
struct Resources {
    gpus: u64,
    gpu_name: String,
    memory_per_gpu: f64,
    vcores_per_gpu: f64,
}

impl Resources {
    fn of(cluster: &Cluster, binding: &YarnBinding) -> Resources {
        let per_node = cluster.gpus_per_node.max(1) as f64;
        Resources {
            gpus: cluster.gpus,
            gpu_name: binding.resource.clone(),
            memory_per_gpu: binding.node_memory_mb.unwrap_or(0) as f64 / per_node,
            vcores_per_gpu: binding.node_vcores.unwrap_or(0) as f64 / per_node,
        }
    }

    /// `[memory=M,vcores=V,yarn.io/gpu=G]`: memory and vcores in proportion, rounded down
    /// so that children never sum above their parent.
    fn vector(&self, gpus: u64) -> String {
        let memory = (gpus as f64 * self.memory_per_gpu).floor() as u64;
        let vcores = (gpus as f64 * self.vcores_per_gpu).floor() as u64;
        format!("[memory={memory},vcores={vcores},{}={gpus}]", self.gpu_name)
    }
}

struct Properties {
    list: Vec<(String, String)>,
    notes: Vec<String>,
}

impl Properties {
    fn set(&mut self, key: &str, value: String) {
        self.list.push((format!("{PREFIX}{key}"), value));
    }

    fn queue(&mut self, queue: &Queue, resources: &Resources, absolute: bool, elastic: bool, parent: Bounds) {
        let path = &queue.path;
        let bounds = if queue.kind == Kind::Root {
            Bounds { capacity: 1.0, maximum: 1.0, gpus: resources.gpus, max_gpus: resources.gpus }
        } else {
            let bounds = self.bounds(queue, resources, elastic, parent);
            if absolute {
                self.set(&format!("{path}.capacity"), resources.vector(bounds.gpus));
                self.set(&format!("{path}.maximum-capacity"), resources.vector(bounds.max_gpus));
            } else {
                self.set(&format!("{path}.capacity"), thousandths(queue.capacity));
                let maximum = (bounds.maximum / parent.maximum * WHOLE as f64).round() as u64;
                self.set(
                    &format!("{path}.maximum-capacity"),
                    thousandths(maximum.clamp(queue.capacity, WHOLE)),
                );
            }
            bounds
        };
        self.set(&format!("{path}.state"), "RUNNING".into());
        let acl = match &queue.kind {
            Kind::Root | Kind::Unallocated => " ".to_string(),
            Kind::Unbudgeted => "*".to_string(),
            Kind::Project(_) if !queue.is_leaf() => String::new(),
            Kind::Project(_) => submitters(queue),
        };
        if !acl.is_empty() {
            self.set(&format!("{path}.acl_submit_applications"), acl);
        }
        if queue.is_leaf() {
            self.set(&format!("{path}.ordering-policy"), "fair".into());
            // One user may use the queue's whole elastic range, not just its guarantee.
            self.set(&format!("{path}.user-limit-factor"), "-1".into());
            if let Some(seconds) = queue.max_runtime_seconds {
                self.set(&format!("{path}.maximum-application-lifetime"), seconds.to_string());
            }
        } else {
            let names: Vec<&str> = queue.children.iter().map(|c| c.name.as_str()).collect();
            self.set(&format!("{path}.queues"), names.join(","));
            for child in &queue.children {
                self.queue(child, resources, absolute, elastic, bounds);
            }
        }
    }

    /// What a queue is guaranteed and may reach, as fractions of the cluster and in GPUs.
    fn bounds(&mut self, queue: &Queue, resources: &Resources, elastic: bool, parent: Bounds) -> Bounds {
        let cluster_gpus = resources.gpus.max(1) as f64;
        let capacity = parent.capacity * queue.capacity as f64 / WHOLE as f64;
        let reach = match (&queue.kind, queue.max_gpus) {
            (Kind::Unallocated, _) => queue.guaranteed_gpus,
            (_, Some(max)) => max,
            (Kind::Unbudgeted, None) => resources.gpus,
            (_, None) if elastic => resources.gpus,
            (_, None) => queue.guaranteed_gpus,
        };
        let mut max_gpus = reach.min(parent.max_gpus);
        if max_gpus < queue.guaranteed_gpus {
            if let Kind::Project(project) = &queue.kind {
                self.notes.push(format!(
                    "`{project}` is capped at {max_gpus} GPUs but guaranteed {}; its maximum was raised to its guarantee",
                    queue.guaranteed_gpus
                ));
            }
            max_gpus = queue.guaranteed_gpus;
        }
        let maximum = (max_gpus as f64 / cluster_gpus).clamp(capacity, parent.maximum);
        Bounds { capacity, maximum, gpus: queue.guaranteed_gpus, max_gpus }
    }
}

/// `12500` -> `12.500`
pub fn thousandths(value: u64) -> String {
    format!("{}.{:03}", value / 1000, value % 1000)
}

/// `alice,bob ml-staff`, or `*` when the project names no members.
pub fn submitters(queue: &Queue) -> String {
    if queue.users.is_empty() && queue.groups.is_empty() {
        "*".into()
    } else {
        format!("{} {}", queue.users.join(","), queue.groups.join(","))
    }
}

/// The ResourceManager settings that go with the file.
pub fn yarn_site(min_runtime_ms: u64, gpu_resource: &str) -> String {
    let properties: Vec<(String, String)> = [
        ("yarn.resourcemanager.scheduler.class", "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler"),
        ("yarn.resourcemanager.scheduler.monitor.enable", "true"),
        ("yarn.resourcemanager.scheduler.monitor.policies", "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity.ProportionalCapacityPreemptionPolicy"),
        ("yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill", &min_runtime_ms.to_string()),
        ("yarn.acl.enable", "true"),
        ("yarn.nodemanager.resource-plugins", gpu_resource),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let comment = "allot: yarn-site.xml properties for the Capacity Scheduler file beside this one; merge them into yarn-site.xml";
    xml::write(&xml::configuration(&properties), Some(comment))
}
