//! The Kubernetes targets: Kueue, KAI Scheduler, Volcano and YuniKorn, one module each.
//! What they share lives here: the project tree of one cluster with the flattened object
//! names every scheduler needs (checked for length and collisions), canonical quantities,
//! and the YAML writer.

pub mod kai;
pub mod kueue;
pub mod volcano;
pub mod yunikorn;

use std::collections::BTreeMap;

use allot_compiler::ir::{
    Allocation, Cluster, KubernetesBinding, KubernetesScheduler, Location, Model, Project,
};
use serde_json::Value;

use crate::fidelity::{RATIO_TOLERANCE, Row, percent_error, ratio_error};
use crate::text::{Named, Rule, refused};
use crate::{OutputFile, Violation};

/// The longest name a label value (`kueue.x-k8s.io/queue-name`, `kai.scheduler/queue`)
/// may carry.
pub use allot_compiler::names::MAX_NAME_LEN as MAX_NAME;

/// Names allot gives its own objects start with `root-`: no project can be named `root`,
/// so no flattened project name starts that way.
pub const UNBUDGETED: &str = "root-unbudgeted";

/// The clusters bound to one Kubernetes scheduler.
pub fn bound(model: &Model, scheduler: KubernetesScheduler) -> Vec<(&Cluster, &KubernetesBinding)> {
    model
        .clusters
        .iter()
        .filter_map(|c| c.bindings.kubernetes.as_ref().map(|k| (c, k)))
        .filter(|(_, k)| k.schedulers.contains(&scheduler))
        .collect()
}

/// A project on one cluster, with the cluster-wide name its objects carry.
#[derive(Clone, Debug)]
pub struct Node<'m> {
    pub project: &'m Project,
    pub allocation: &'m Allocation,
    /// `olmo-eval-benchmarks` for `olmo/eval/benchmarks`.
    pub name: String,
    pub parent: Option<String>,
    /// 1 for top-level projects.
    pub depth: usize,
    pub children: Vec<Node<'m>>,
}

impl Node<'_> {
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// This node and every node below it, parents first.
    pub fn flatten(&self) -> Vec<&Node<'_>> {
        let mut out = vec![self];
        for child in &self.children {
            out.extend(child.flatten());
        }
        out
    }
}

/// The projects that may use `cluster`, as a forest of named nodes.
pub fn tree<'m>(model: &'m Model, cluster: &str) -> Vec<Node<'m>> {
    fn go<'m>(projects: &'m [Project], cluster: &str, parent: Option<&str>, depth: usize) -> Vec<Node<'m>> {
        projects
            .iter()
            .filter_map(|project| {
                let allocation = project.clusters.get(cluster)?;
                let name = project.path.replace('/', "-");
                let children = go(&project.children, cluster, Some(&name), depth + 1);
                Some(Node { project, allocation, name, parent: parent.map(str::to_string), depth, children })
            })
            .collect()
    }
    go(&model.projects, cluster, None, 1)
}

/// Flattened names too long for a label, or taken twice; `extra` are names the target adds
/// for a project (KAI's per-contract queues), with the project they come from.
pub fn check_names(file: &str, nodes: &[Node<'_>], extra: &[(String, &Project)]) -> Vec<Violation> {
    let mut seen: BTreeMap<String, &Location> = BTreeMap::new();
    let mut violations = Vec::new();
    let all = nodes.iter().flat_map(|n| n.flatten()).map(|n| (n.name.clone(), n.project));
    for (name, project) in all.chain(extra.iter().map(|(n, p)| (n.clone(), *p))) {
        if name.len() > MAX_NAME {
            violations.push(Violation::at(
                file,
                format!("`{name}` ({} characters) is longer than a label value may be ({MAX_NAME}); shorten the project names on this path", name.len()),
                vec![project.source.clone()],
            ));
        }
        if let Some(first) = seen.get(&name) {
            violations.push(Violation::at(
                file,
                format!("two projects flatten to the same object name `{name}`; rename one"),
                vec![(*first).clone(), project.source.clone()],
            ));
        } else {
            seen.insert(name, &project.source);
        }
    }
    violations
}

/// The names a Kubernetes scheduler's files carry, by the rules of
/// [`allot_compiler::names`]: the model's names, each bound cluster's resource, and for
/// Kueue (`flavor_and_label`) the ResourceFlavor's name and node label.
pub fn binding_names(
    model: &Model,
    scheduler: KubernetesScheduler,
    flavor_and_label: bool,
) -> Vec<Violation> {
    let mut out = crate::text::model_names("", model);
    for (cluster, binding) in bound(model, scheduler) {
        let at = Some(&cluster.source);
        let mut names: Vec<(Named, Rule)> = vec![(
            Named { what: "a Kubernetes resource", value: &binding.resource, source: at },
            allot_compiler::names::bad_kubernetes_resource,
        )];
        if flavor_and_label {
            names.push((
                Named { what: "a Kueue flavor", value: &binding.flavor, source: at },
                allot_compiler::names::bad_subdomain,
            ));
            if let Some(label) = &binding.node_label {
                names.push((
                    Named { what: "a node label", value: label, source: at },
                    allot_compiler::names::bad_node_label,
                ));
            }
        }
        out.extend(refused("", names));
    }
    out
}

/// How far the [`weight`]s of sibling nodes are from their shares: the worst relative
/// error over every sibling set of the clusters bound to `scheduler`.
pub fn weight_loss(model: &Model, scheduler: KubernetesScheduler) -> f64 {
    fn siblings(nodes: &[Node<'_>]) -> f64 {
        let wanted: Vec<f64> = nodes.iter().map(|n| n.allocation.normalized_share).collect();
        let carried: Vec<u64> = nodes.iter().map(|n| weight(n.allocation)).collect();
        nodes.iter().map(|n| siblings(&n.children)).fold(ratio_error(&wanted, &carried), f64::max)
    }
    bound(model, scheduler).iter().map(|(c, _)| siblings(&tree(model, &c.name))).fold(0.0, f64::max)
}

/// The row for weights among siblings, when they lose more than [`RATIO_TOLERANCE`].
pub fn weight_row(model: &Model, scheduler: KubernetesScheduler, field: &str) -> Option<Row> {
    let loss = weight_loss(model, scheduler);
    (loss > RATIO_TOLERANCE).then(|| {
        Row::approximated(
            "weights among siblings",
            format!("{field} in thousandths of a percentage point of the parent: shares below that are carried as 0 or rounded"),
        )
        .qualified(format!("the worst ratio off by {}", percent_error(loss)))
    })
}

/// A quantity in thousandths, written as the API server writes it back: `35`, `17500m`.
pub fn quantity(thousandths: u64) -> String {
    if thousandths.is_multiple_of(1000) {
        (thousandths / 1000).to_string()
    } else {
        format!("{thousandths}m")
    }
}

/// A project's share of its parent, in thousandths of a percent point: `35%` is 35000.
pub fn weight(allocation: &Allocation) -> u64 {
    (allocation.normalized_share * 100_000.0).round() as u64
}

/// A duration as Go's `time.ParseDuration` reads it (no days): `168h`, `1h30m`, `0s`.
pub fn go_duration(seconds: u64) -> String {
    if seconds == 0 {
        return "0s".into();
    }
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    let mut out = String::new();
    for (value, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    out
}

/// Objects as one multi-document YAML file (keys sorted, strings quoted where YAML 1.1
/// would read them as something else).
pub fn yaml(objects: &[Value]) -> String {
    // Serialising JSON values cannot fail.
    serde_saphyr::to_string_multiple(objects).unwrap_or_default()
}

/// The limits of a parse of YAML that allot wrote itself: far beyond what any budget
/// repository yields (the YAML library's defaults, 250,000 nodes and 1,024 documents, are
/// met by a tree of 50,000 projects), and still bounded.
fn own_output() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: 100_000_000,
            max_events: 400_000_000,
            max_documents: 10_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
    }
}

/// The objects of a multi-document YAML file that allot wrote, or why it does not parse.
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    serde_saphyr::from_multiple_with_options(text, own_output()).map_err(|e| e.to_string())
}

/// One YAML document that allot wrote (a ConfigMap's embedded file), or why it does not
/// parse.
pub fn parse_one(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str_with_options(text, own_output()).map_err(|e| e.to_string())
}

/// What a scheduler's admission `rules` would reject in each emitted `queues.yaml`.
pub fn queue_file_violations(files: &[OutputFile], rules: fn(&[Value]) -> Vec<String>) -> Vec<Violation> {
    files
        .iter()
        .filter(|f| f.path.ends_with("/queues.yaml"))
        .flat_map(|file| {
            let problems = match parse(&file.contents) {
                Ok(objects) => rules(&objects),
                Err(e) => vec![format!("does not parse: {e}")],
            };
            problems.into_iter().map(|m| Violation::new(&file.path, m))
        })
        .collect()
}

/// A cluster-scoped object.
pub fn object(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    serde_json::json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": { "name": name, "labels": { "app.kubernetes.io/managed-by": "allot" } },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_durations_are_canonical() {
        assert_eq!(quantity(35_000), "35");
        assert_eq!(quantity(17_500), "17500m");
        assert_eq!(quantity(0), "0");
        assert_eq!(go_duration(604_800), "168h");
        assert_eq!(go_duration(5_400), "1h30m");
        assert_eq!(go_duration(90), "1m30s");
    }

    #[test]
    fn large_outputs_parse_and_broken_ones_are_violations() {
        // 300,000 nodes and 2,000 documents: beyond the YAML library's default limits
        // (250,000 and 1,024), where the read-back once came out empty and checked nothing.
        let objects: Vec<Value> = (0..2_000)
            .map(|i| serde_json::json!({ "name": format!("q{i}"), "items": vec![i; 148] }))
            .collect();
        assert_eq!(parse(&yaml(&objects)).map(|o| o.len()), Ok(2_000));
        let broken = OutputFile { path: "c/queues.yaml".into(), contents: "a: [1, 2\n".into() };
        let violations = queue_file_violations(&[broken], |_| Vec::new());
        assert_eq!(violations.len(), 1);
        assert!(violations[0].message.contains("does not parse"), "{:?}", violations[0]);
    }
}
