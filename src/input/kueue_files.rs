//! A cluster's own Kueue objects and Kueue's controller `Configuration`, read from files for
//! `allot replay simulate --kueue-objects [CLUSTER=]DIR` and `--kueue-config FILE`: the
//! command line's side of the `kueue` policy when it simulates what a cluster runs rather
//! than what `allot build` writes (`simulation.rs` hands both to the verifier's `Kueue`).
//!
//! A folder is untrusted (a dump from a cluster, a pull request), so it is read within
//! bounds: its `.yaml`, `.yml` and `.json` files only (not its subfolders: a note says so),
//! each a regular file opened without following a symbolic link ([`crate::input::read`]), at most
//! [`MAX_FILES`] of them, [`MAX_FILE_BYTES`] each and [`MAX_TOTAL_BYTES`] together, parsed
//! with serde-saphyr's budget (JSON as the YAML it is) to at most [`MAX_NODES`] YAML nodes
//! in all. A file holds YAML documents, each an object or a Kubernetes `List` (`kind: List`
//! or `FooList`, with `items`), as `kubectl get -o yaml` prints them.
//!
//! Which objects the simulator is handed: every object of the API group `kueue.x-k8s.io`
//! but Workloads (the jobs come from the trace), and any object of the five kinds it reads
//! whatever its group (so that a wrong `apiVersion` is refused, naming the object, rather
//! than passed over); the verifier reads them or refuses them. Other objects (a
//! Namespace, a ConfigMap, Kueue's `Configuration` in the folder) carry nothing the
//! simulator reads: they are skipped, and a note on standard error counts them by kind.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use allot_compiler::escape;
use allot_compiler::ir::Model;
use serde_json::Value;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{Budget, MessageFormatter, Options, Spanned, UserMessageFormatter};

use crate::exit::Error;
use crate::input::read::{self, Links, ReadError};
use crate::output::plural;

/// The most `.yaml`, `.yml` and `.json` files read from one folder.
pub const MAX_FILES: usize = 1_000;

/// The largest file read (a `kubectl get -o yaml` of a ClusterQueue with its status is a few
/// kilobytes: this holds thousands of them).
pub const MAX_FILE_BYTES: u64 = 32 << 20;

/// The most bytes read from one folder, all its files together.
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;

/// The most YAML nodes (mappings, sequences, scalars) read from one folder, all its files
/// together (or from the Configuration's file): about 64 MiB of Kubernetes objects as
/// kubectl prints them, and at most a few hundred megabytes in memory whatever the input.
pub const MAX_NODES: usize = 4_000_000;

/// The most YAML documents in one file (the simulator reads at most 100,000 objects).
const MAX_DOCUMENTS: usize = 200_000;

/// Where Kueue's Helm chart keeps the Configuration in its ConfigMap.
const CONFIG_MAP_KEY: &str = "controller_manager_config.yaml";

/// The kinds the simulator reads.
const READ_KINDS: [&str; 5] =
    ["ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass"];

const KUEUE_GROUP: &str = "kueue.x-k8s.io";

/// Kueue's objects for one cluster, as `--kueue-objects [CLUSTER=]DIR` gives them.
#[derive(Clone, Debug)]
pub struct ObjectsArg {
    /// The allot cluster named, if any.
    pub cluster: Option<String>,
    pub dir: PathBuf,
    /// The argument as given, for messages.
    pub given: String,
}

/// `[CLUSTER=]DIR`: `CLUSTER=` when there is an `=` with a name before it and no path
/// separator in that name (a folder whose name holds an `=` is given as `./a=b`).
pub fn objects_arg(text: &str) -> Result<ObjectsArg, String> {
    if text.is_empty() {
        return Err("expected [CLUSTER=]DIR".into());
    }
    let (cluster, dir) = match text.split_once('=') {
        Some((cluster, dir)) if !cluster.is_empty() && !cluster.contains(['/', '\\']) => {
            if dir.is_empty() {
                return Err(format!("no folder after `{cluster}=`"));
            }
            (Some(cluster.to_string()), dir)
        }
        _ => (None, text),
    };
    Ok(ObjectsArg { cluster, dir: PathBuf::from(dir), given: text.to_string() })
}

/// What the `kueue` policy simulates instead of what `allot build` writes: clusters' own
/// objects, and Kueue's Configuration.
#[derive(Debug, Default)]
pub struct KueueFiles {
    /// Each allot cluster's objects, by cluster name.
    pub objects: BTreeMap<String, Folder>,
    /// Kueue's Configuration (`--kueue-config`) and how messages name it.
    pub configuration: Option<(String, Value)>,
    /// The notes said so far (a policy made for two revisions would say one twice).
    noted: RefCell<BTreeSet<String>>,
}

/// The objects of one folder, ready for the simulator.
#[derive(Debug)]
pub struct Folder {
    /// How messages name it: `--kueue-objects ARG`.
    pub label: String,
    pub objects: Vec<Value>,
    /// The names of its ClusterQueues.
    pub cluster_queues: BTreeSet<String>,
    /// The names of its Cohorts (the objects).
    pub cohorts: BTreeSet<String>,
}

impl KueueFiles {
    /// Says `note` on standard error, once.
    pub fn note(&self, note: &str) {
        if self.noted.borrow_mut().insert(note.to_string()) {
            eprintln!("note: {note}");
        }
    }

    /// Reads each `--kueue-objects` folder for the cluster of `model` it names, and the
    /// `--kueue-config` file; notes on what was passed over go to standard error.
    pub fn read(given: &[ObjectsArg], config: Option<&Path>, model: &Model) -> Result<KueueFiles, Error> {
        let mut files = KueueFiles::default();
        let clusters: Vec<&str> = model.clusters.iter().map(|c| c.name.as_str()).collect();
        let listed = || clusters.iter().map(|c| escape::line(c)).collect::<Vec<_>>().join(", ");
        for arg in given {
            let label = format!("--kueue-objects {}", escape::line(&arg.given));
            let cluster = match (&arg.cluster, clusters.as_slice()) {
                (Some(name), _) => {
                    if !clusters.contains(&name.as_str()) {
                        return Err(Error::failed(format!(
                            "{label}: the budgets have no cluster {} (their clusters: {})",
                            escape::line(name),
                            listed()
                        )));
                    }
                    name.clone()
                }
                (None, [only]) => only.to_string(),
                (None, _) => {
                    return Err(Error::failed(format!(
                        "{label}: the budgets have several clusters ({}): say which one the objects are for, as CLUSTER={}",
                        listed(),
                        escape::line(&arg.given)
                    )));
                }
            };
            if files.objects.contains_key(&cluster) {
                return Err(Error::failed(format!(
                    "{label}: cluster {} is given objects twice",
                    escape::line(&cluster)
                )));
            }
            let (folder, notes) =
                read_folder(&arg.dir, label.clone()).map_err(|e| Error::failed(format!("{label}: {e}")))?;
            for note in notes {
                files.note(&format!("{label}: {note}"));
            }
            files.objects.insert(cluster, folder);
        }
        if let Some(path) = config {
            let label = format!("--kueue-config {}", escape::line(&path.display().to_string()));
            let configuration =
                read_configuration(path).map_err(|e| Error::failed(format!("{label}: {e}")))?;
            files.configuration = Some((label, configuration));
        }
        Ok(files)
    }
}

/// The objects of the folder `dir`, and notes on what was passed over.
fn read_folder(dir: &Path, label: String) -> Result<(Folder, Vec<String>), String> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err("no such folder".into()),
        Err(e) => return Err(e.to_string()),
        Ok(m) if !m.is_dir() => return Err("not a folder (give the folder that holds the files)".into()),
        Ok(_) => {}
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        entries.push((entry.file_name(), entry.file_type().map_err(|e| e.to_string())?));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut files, mut folders, mut others) = (Vec::new(), Vec::new(), Vec::new());
    for (name, kind) in entries {
        let shown = escape::line(&name.to_string_lossy());
        let path = dir.join(&name);
        let wanted = path
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| ["yaml", "yml", "json"].iter().any(|e| x.eq_ignore_ascii_case(e)));
        if kind.is_dir() {
            folders.push(format!("{shown}/"));
        } else if wanted {
            files.push((path, shown));
        } else {
            others.push(shown);
        }
    }
    let mut notes = Vec::new();
    if !others.is_empty() {
        notes.push(format!(
            "passed over {} not named .yaml, .yml or .json: {}",
            plural(others.len(), "file"),
            first_few(&others)
        ));
    }
    if !folders.is_empty() {
        notes.push(format!(
            "passed over {} (subfolders are not read): {}",
            plural(folders.len(), "folder"),
            first_few(&folders)
        ));
    }
    if files.is_empty() {
        let why = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
        return Err(format!("no .yaml, .yml or .json file in the folder{why}"));
    }
    if files.len() > MAX_FILES {
        return Err(format!("{} .yaml, .yml and .json files; allot reads at most {MAX_FILES}", files.len()));
    }
    // The sizes first, so that no file is parsed when the folder is too large.
    let sizes: u64 =
        files.iter().filter_map(|(path, _)| std::fs::symlink_metadata(path).ok()).map(|m| m.len()).sum();
    if sizes > MAX_TOTAL_BYTES {
        return Err(too_large());
    }
    let mut reader = Reader::default();
    let mut total = 0u64;
    for (path, shown) in &files {
        let bytes = read::read_regular(path, MAX_FILE_BYTES, Links::Refuse).map_err(|e| match e {
            ReadError::NotRegular("a symbolic link") => {
                format!("{shown}: is a symbolic link; allot reads only the folder's regular files (copy the file in)")
            }
            e => format!("{shown}: {e}"),
        })?;
        total += bytes.len() as u64;
        // Files that grew since.
        if total > MAX_TOTAL_BYTES {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes).map_err(|_| format!("{shown}: {}", ReadError::NotText))?;
        for document in reader.documents(&text).map_err(|e| format!("{shown}: {e}"))? {
            reader.take(document).map_err(|e| format!("{shown}: {e}"))?;
        }
    }
    notes.extend(reader.skipped_note());
    if reader.objects.is_empty() {
        let why = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
        return Err(format!("no Kueue object in its files{why}"));
    }
    let Reader { objects, cluster_queues, cohorts, .. } = reader;
    Ok((Folder { label, objects, cluster_queues, cohorts }, notes))
}

/// Why a folder is not read: more bytes than [`MAX_TOTAL_BYTES`].
fn too_large() -> String {
    format!(
        "its files hold more than {}; allot reads at most that much from a folder",
        read::bytes(MAX_TOTAL_BYTES)
    )
}

/// Documents parsed, and the objects taken from them so far.
#[derive(Default)]
struct Reader {
    /// YAML nodes read so far, against [`MAX_NODES`].
    nodes: usize,
    objects: Vec<Value>,
    cluster_queues: BTreeSet<String>,
    cohorts: BTreeSet<String>,
    /// Objects passed over, by kind (as `group/kind` beyond the core group).
    skipped: BTreeMap<String, usize>,
}

impl Reader {
    /// The documents of `text` (empty ones left out), each with where it starts.
    fn documents(&mut self, text: &str) -> Result<Vec<Spanned<Value>>, String> {
        let documents = parse(text, MAX_NODES - self.nodes)?;
        self.nodes += documents.iter().map(|d| nodes(&d.value)).sum::<usize>();
        if self.nodes > MAX_NODES {
            return Err(format!("more than {MAX_NODES} YAML nodes in all; allot reads at most that many"));
        }
        Ok(documents)
    }

    /// The objects of one document: itself, or a List's items.
    fn take(&mut self, document: Spanned<Value>) -> Result<(), String> {
        let at = format!("the document at line {}", document.referenced.line());
        let Value::Object(mut object) = document.value else {
            return Err(format!("{at} is not an object (a mapping with apiVersion and kind)"));
        };
        let Some(kind) = object.get("kind").and_then(Value::as_str).map(str::to_string) else {
            return Err(format!("{at} has no kind"));
        };
        let list =
            kind == "List" || (kind.ends_with("List") && object.get("items").is_some_and(Value::is_array));
        if !list {
            return self.object(Value::Object(object), &at);
        }
        let items = match object.remove("items") {
            Some(Value::Array(items)) => items,
            Some(Value::Null) | None => Vec::new(),
            Some(_) => return Err(format!("{at}: a {} whose items are not a list", shown(&kind))),
        };
        // The API server's own lists (`ClusterQueueList`) leave out each item's kind.
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        let api = object.get("apiVersion").cloned();
        for (i, mut item) in items.into_iter().enumerate() {
            let at = format!("item {} of the {} at line {}", i + 1, shown(&kind), document.referenced.line());
            if let (Value::Object(fields), Some(item_kind)) = (&mut item, item_kind) {
                fields.entry("kind").or_insert_with(|| Value::String(item_kind.to_string()));
                if let Some(api) = &api {
                    fields.entry("apiVersion").or_insert_with(|| api.clone());
                }
            }
            self.object(item, &at)?;
        }
        Ok(())
    }

    /// One object: handed to the simulator, or passed over (see the module's doc).
    fn object(&mut self, object: Value, at: &str) -> Result<(), String> {
        if !object.is_object() {
            return Err(format!("{at} is not an object (a mapping with apiVersion and kind)"));
        }
        let Some(kind) = object["kind"].as_str() else { return Err(format!("{at} has no kind")) };
        let Some(api) = object["apiVersion"].as_str() else {
            return Err(format!("{at} ({}) has no apiVersion", shown(kind)));
        };
        let group = api.rsplit_once('/').map_or("", |(group, _)| group);
        let read = (group == KUEUE_GROUP && kind != "Workload") || READ_KINDS.contains(&kind);
        if !read {
            let key = if group.is_empty() { kind.to_string() } else { format!("{group}/{kind}") };
            *self.skipped.entry(key).or_default() += 1;
            return Ok(());
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        match kind {
            "ClusterQueue" => self.cluster_queues.insert(name),
            "Cohort" => self.cohorts.insert(name),
            _ => false,
        };
        self.objects.push(object);
        Ok(())
    }

    /// The note on the objects passed over, if any.
    fn skipped_note(&self) -> Option<String> {
        if self.skipped.is_empty() {
            return None;
        }
        let total: usize = self.skipped.values().sum();
        let kinds: Vec<String> = self
            .skipped
            .iter()
            .map(|(kind, n)| if *n == 1 { shown(kind) } else { format!("{n} {}", shown(kind)) })
            .collect();
        let mut note = format!(
            "passed over {} the kueue policy does not read: {}",
            plural(total, "object"),
            first_few(&kinds)
        );
        if self.skipped.contains_key(&format!("{KUEUE_GROUP}/Workload")) {
            note.push_str(" (Workloads: the jobs come from the trace)");
        }
        if self.skipped.contains_key("config.kueue.x-k8s.io/Configuration") {
            note.push_str(" (Kueue's Configuration is read from --kueue-config FILE)");
        }
        Some(note)
    }
}

/// Kueue's controller Configuration in the file at `path`: the one document there, or the
/// one a ConfigMap holds under `data."controller_manager_config.yaml"` (as Kueue's Helm
/// chart installs it). The simulator checks it is a Configuration.
fn read_configuration(path: &Path) -> Result<Value, String> {
    let text = read::read_text(path, MAX_FILE_BYTES).map_err(|e| e.to_string())?;
    let value = one_document(&text)?;
    if value["kind"] != "ConfigMap" {
        return Ok(value);
    }
    match &value["data"][CONFIG_MAP_KEY] {
        Value::String(inner) => {
            one_document(inner).map_err(|e| format!("the ConfigMap's {CONFIG_MAP_KEY}: {e}"))
        }
        _ => Err(format!(
            "a ConfigMap without data.{CONFIG_MAP_KEY} (where Kueue's Helm chart keeps the Configuration)"
        )),
    }
}

/// The one document of `text`.
fn one_document(text: &str) -> Result<Value, String> {
    let mut documents = parse(text, MAX_NODES)?;
    match documents.len() {
        1 => Ok(documents.remove(0).value),
        0 => Err("no document".into()),
        n => Err(format!("{n} documents; one Configuration expected")),
    }
}

/// The YAML documents of `text`, at most `max_nodes` nodes in all, empty documents left out.
/// A parse error says where (`line 3, column 7: ...`), without quoting the input.
fn parse(text: &str, max_nodes: usize) -> Result<Vec<Spanned<Value>>, String> {
    let mut budget = Budget::default();
    budget.max_nodes = max_nodes;
    budget.max_events = max_nodes.saturating_mul(2).max(budget.max_events);
    budget.max_documents = MAX_DOCUMENTS;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    serde_saphyr::from_multiple_with_options::<Spanned<Value>>(text, options).map_err(|e| {
        let e = e.without_snippet();
        let message = match e {
            serde_saphyr::Error::Budget { breach: BudgetBreach::Nodes { .. }, .. } => {
                format!("more than {MAX_NODES} YAML nodes in all; allot reads at most that many")
            }
            e => escape::line(&UserMessageFormatter.format_message(e)),
        };
        match e.location() {
            Some(at) => format!("line {}, column {}: {message}", at.line(), at.column()),
            None => message,
        }
    })
}

/// The nodes of `value` (itself, and every value inside it).
fn nodes(value: &Value) -> usize {
    let mut stack = vec![value];
    let mut n = 0;
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => {
                // A key is a node too.
                n += fields.len();
                stack.extend(fields.values());
            }
            _ => {}
        }
    }
    n
}

/// A name from the files, as messages show it: control characters visible, at most 80
/// characters.
fn shown(text: &str) -> String {
    let visible = escape::line(text);
    match visible.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &visible[..cut]),
        None => visible,
    }
}

/// The first few of `names`, and how many more.
pub fn first_few(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut out = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_named_before_an_equals_sign_without_a_path_separator() {
        let arg = |text: &str| objects_arg(text).map(|a| (a.cluster, a.dir.display().to_string()));
        assert_eq!(arg("c=dump"), Ok((Some("c".into()), "dump".into())));
        assert_eq!(arg("dump"), Ok((None, "dump".into())));
        assert_eq!(arg("c=a=b"), Ok((Some("c".into()), "a=b".into())));
        assert_eq!(arg("./a=b"), Ok((None, "./a=b".into())));
        assert_eq!(arg("=dump"), Ok((None, "=dump".into())));
        assert_eq!(arg("c="), Err("no folder after `c=`".into()));
        assert_eq!(arg(""), Err("expected [CLUSTER=]DIR".into()));
    }

    #[test]
    fn lists_are_opened_and_objects_of_other_kinds_passed_over() {
        let mut reader = Reader::default();
        // As the API server lists them: the items without their kind and apiVersion.
        let text = r#"{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueueList",
            "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: Cohort, metadata: {name: pool}}
- {apiVersion: kueue.x-k8s.io/v1beta2, kind: Workload, metadata: {name: w, namespace: team-a}}
- {apiVersion: v1, kind: Namespace, metadata: {name: team-b}}
---
# an empty document
"#;
        for document in reader.documents(text).unwrap() {
            reader.take(document).unwrap();
        }
        let kinds: Vec<(&str, &str)> = reader
            .objects
            .iter()
            .map(|o| (o["kind"].as_str().unwrap(), o["apiVersion"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("ClusterQueue", "kueue.x-k8s.io/v1beta2"),
                ("ClusterQueue", "kueue.x-k8s.io/v1beta2"),
                ("Cohort", "kueue.x-k8s.io/v1beta2")
            ]
        );
        assert_eq!(reader.cluster_queues, BTreeSet::from(["a".to_string(), "b".to_string()]));
        assert_eq!(reader.cohorts, BTreeSet::from(["pool".to_string()]));
        assert_eq!(
            reader.skipped_note().unwrap(),
            "passed over 3 objects the kueue policy does not read: 2 Namespace, kueue.x-k8s.io/Workload \
             (Workloads: the jobs come from the trace)"
        );
        // A ClusterQueue whatever its group, for the simulator to refuse by name.
        let mut reader = Reader::default();
        for document in reader.documents("apiVersion: kueue.k8s.io/v1\nkind: ClusterQueue\n").unwrap() {
            reader.take(document).unwrap();
        }
        assert_eq!(reader.objects.len(), 1);
        let error = |text: &str| {
            let mut reader = Reader::default();
            reader.documents(text).and_then(|d| d.into_iter().try_for_each(|d| reader.take(d))).unwrap_err()
        };
        assert_eq!(error("\n\nkind: Cohort\n"), "the document at line 3 (Cohort) has no apiVersion");
        assert_eq!(
            error("kind: List\nitems: [3]\n"),
            "item 1 of the List at line 1 is not an object (a mapping with apiVersion and kind)"
        );
        assert_eq!(
            error("kind: List\nitems: {}\n"),
            "the document at line 1: a List whose items are not a list"
        );
    }

    #[test]
    fn every_value_and_key_is_a_node() {
        assert_eq!(nodes(&serde_json::json!({"a": [1, 2], "b": {}})), 7);
        assert_eq!(shown(&"x".repeat(81)), format!("{}...", "x".repeat(80)));
        assert_eq!(shown("a\u{1b}b"), "a\\u{1b}b");
    }
}
