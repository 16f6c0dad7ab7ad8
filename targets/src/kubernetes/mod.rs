//! The Kubernetes targets: Kueue, KAI Scheduler, Volcano and YuniKorn, one module each.
//! What they share lives here: the project tree of one cluster with the flattened object
//! names every scheduler needs (checked for length and collisions), canonical quantities,
//! the parts of objects, and the YAML writer.
//!
//! Each target builds its objects as typed structs, checks the scheduler's rules on them
//! (its webhook's, its configuration validator's), then writes them with [`yaml`]. The
//! structs declare their fields in the sorted order of their keys, the order allot has
//! always written. That the text reads back as exactly the objects checked is asserted by
//! [`yaml`] in debug builds and tested below on hostile strings.

pub mod drift;
pub mod kai;
pub mod kueue;
pub mod volcano;
pub mod yunikorn;

use std::collections::{BTreeMap, HashMap};

use allot_compiler::ir::{
    Allocation, Cluster, KubernetesBinding, KubernetesScheduler, Location, Model, Project,
};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::Violation;
use crate::fidelity::{RATIO_TOLERANCE, Row, percent_error, ratio_error};
use crate::text::{Named, Rule, refused};

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

/// Each namespace the budgets (the leaves of `nodes`) list, with the path of the budget that
/// lists it, in name order.
pub fn namespaces<'a>(nodes: &'a [Node<'_>]) -> BTreeMap<&'a str, &'a str> {
    let leaves = nodes.iter().flat_map(|n| n.flatten()).filter(|n| n.is_leaf());
    leaves
        .flat_map(|n| n.project.namespaces.iter().map(move |ns| (ns.as_str(), n.project.path.as_str())))
        .collect()
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
pub fn check_names(file: &str, nodes: &[Node<'_>], extra: &[(&str, &Project)]) -> Vec<Violation> {
    let mut seen: HashMap<&str, &Location> = HashMap::new();
    let mut violations = Vec::new();
    let all = nodes.iter().flat_map(|n| n.flatten()).map(|n| (n.name.as_str(), n.project));
    for (name, project) in all.chain(extra.iter().copied()) {
        if name.len() > MAX_NAME {
            violations.push(Violation::at(
                file,
                format!("`{name}` ({} characters) is longer than a label value may be ({MAX_NAME}); shorten the project names on this path", name.len()),
                vec![project.source.clone()],
            ));
        }
        if let Some(first) = seen.get(name) {
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

/// The label every object allot writes carries.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Labels {
    #[serde(rename = "app.kubernetes.io/managed-by")]
    managed_by: &'static str,
}

pub const LABELS: Labels = Labels { managed_by: "allot" };

/// The metadata of an object allot writes.
#[derive(Clone, Debug, Serialize)]
pub struct Metadata<'a> {
    pub labels: Labels,
    pub name: &'a str,
    /// Only namespaced objects have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<&'a str>,
}

/// An object of one of the schedulers' kinds, with its `spec`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Object<'a, S> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata<'a>,
    pub spec: S,
}

impl<'a, S> Object<'a, S> {
    /// A cluster-scoped object.
    pub fn new(api_version: &'static str, kind: &'static str, name: &'a str, spec: S) -> Object<'a, S> {
        Object { api_version, kind, metadata: Metadata { labels: LABELS, name, namespace: None }, spec }
    }
}

/// A whole number written as a string, as Kubernetes quantities are: `"8"`.
#[derive(Clone, Copy, Debug)]
pub struct Count(pub u64);

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// GPUs of one resource, as Volcano and YuniKorn write amounts: `{nvidia.com/gpu: "8"}`.
#[derive(Clone, Copy, Debug)]
pub struct Gpus<'a> {
    pub resource: &'a str,
    pub count: u64,
}

impl Serialize for Gpus<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.resource, &Count(self.count))?;
        map.end()
    }
}

/// Objects as one multi-document YAML file, strings quoted where YAML 1.1 would read them
/// as something else. The text reads back as exactly the objects: debug builds assert it
/// on every file (so every test that emits one checks it), and the tests below try hostile
/// strings and large files.
pub fn yaml<T: Serialize>(objects: &[T]) -> String {
    // Serialising objects whose keys are strings cannot fail.
    let text = serde_saphyr::to_string_multiple(objects).unwrap_or_default();
    debug_assert_eq!(
        read_back(&text),
        Ok(values(objects)),
        "the YAML does not read back as written:\n{text}"
    );
    text
}

/// The objects as JSON values, as the API server sees them.
pub fn values<T: Serialize>(objects: &[T]) -> Vec<Value> {
    objects.iter().map(|o| serde_json::to_value(o).unwrap_or_default()).collect()
}

/// The objects of a multi-document YAML file that allot wrote, or why it does not parse.
/// The limits are far beyond what any budget repository yields (the YAML library's
/// defaults, 250,000 nodes and 1,024 documents, are met by a tree of 50,000 projects),
/// and still bounded.
fn read_back(text: &str) -> Result<Vec<Value>, String> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: 100_000_000,
            max_events: 400_000_000,
            max_documents: 10_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
    };
    serde_saphyr::from_multiple_with_options(text, options).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
    fn large_outputs_read_back_whole() {
        // 300,000 nodes and 2,000 documents: beyond the YAML library's default limits
        // (250,000 and 1,024), where reading allot's own files once came out empty.
        let objects: Vec<Value> = (0..2_000)
            .map(|i| serde_json::json!({ "name": format!("q{i}"), "items": vec![i; 148] }))
            .collect();
        assert_eq!(read_back(&yaml(&objects)), Ok(values(&objects)));
    }

    /// Text that YAML reads as something else than a string unless it is quoted, or that
    /// holds YAML's syntax, blanks, line breaks, controls and characters beyond ASCII.
    fn hostile_text() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "yes",
            "No",
            "on",
            "OFF",
            "y",
            "n",
            "true",
            "null",
            "Null",
            "~",
            "0755",
            "0o17",
            "0x1f",
            "1.0",
            "1e3",
            "-1",
            "+1",
            ".inf",
            "-.nan",
            "2024-01-01",
            "12:30:00",
            "- x",
            "-",
            "# x",
            "a: b",
            "a #b",
            ":",
            "? x",
            "'",
            "\"",
            "*a",
            "&a",
            "!t",
            "!!str",
            "%YAML",
            "@x",
            "`x",
            "|",
            ">",
            "---",
            "...",
            "{",
            "}",
            "[",
            "]",
            ",",
            "<<",
            "=",
            " ",
            "\t",
            "\n",
            "\r\n",
            "\\",
            "\u{0}",
            "\u{1b}",
            "\u{7f}",
            "\u{85}",
            "\u{a0}",
            "\u{2028}",
            "\u{feff}",
            "é",
            "日本",
            "🙂",
            "x",
        ]);
        prop::collection::vec(pieces, 0..4).prop_map(|pieces| pieces.concat())
    }

    /// Numbers as allot writes them: whole, negative, in thousandths.
    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (0..u64::from(u32::MAX)).prop_map(|t| Value::from(t as f64 / 1000.0)),
        ]
    }

    fn hostile_value() -> impl Strategy<Value = Value> {
        let leaf =
            prop_oneof![hostile_text().prop_map(Value::from), number(), any::<bool>().prop_map(Value::from)];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(hostile_text(), inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn hostile_values_read_back_as_written(objects in prop::collection::vec(hostile_value(), 1..4)) {
            prop_assert_eq!(read_back(&yaml(&objects)), Ok(values(&objects)));
        }

        #[test]
        fn objects_with_hostile_names_read_back_as_written(
            name in hostile_text(),
            resource in hostile_text(),
            count in any::<u64>(),
        ) {
            let objects = [Object::new("v1", "Queue", &name, Gpus { resource: &resource, count })];
            prop_assert_eq!(read_back(&yaml(&objects)), Ok(values(&objects)));
        }
    }
}
