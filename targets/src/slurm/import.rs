//! `allot import slurm`: a live association tree as a budget repository, so that a site
//! can adopt allot without retyping its tree. Building the result and planning against the
//! same dump shows no changes (but for what KDL cannot say, listed in the header).
//!
//! The repository is one file, `allot.kdl`, when it fits in one (at most
//! [`MAX_FILE_BYTES`]); a larger tree (thousands of accounts) is split: `allot.kdl` keeps
//! the cluster, the rules and the contracts, and includes one file per top-level account,
//! `projects/NAME.kdl`. Each file is built as KDL documents through the `kdl` crate, which
//! writes (and quotes) every name and value; names allot's rules refuse stop the import with
//! the dump's line, and the result is compiled again and compared with the tree before it
//! is returned.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use allot_compiler::lower::{MAX_FILES, MAX_PROJECT_DEPTH};
use allot_compiler::names::unportable;
use allot_compiler::source::ENTRY_FILE;
use allot_compiler::syntax::MAX_FILE_BYTES;
use allot_compiler::{MemoryLoader, compile};
use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};

use allot_compiler::names::PREEMPTIBLE_QOS;

use super::slurm_name_problem;
use super::tree::{Account, PARENT_FAIRSHARE, Tree, User, desired};

pub struct Options {
    pub gpus: u64,
    pub gpu_type: String,
    pub gpus_per_node: u64,
}

/// The files of the tree's budget repository, as (path in the repository, text), the entry
/// file ([`ENTRY_FILE`]) first; or why there can be none: each problem a line of text that starts
/// with the dump's line where there is one.
pub fn to_repository(tree: &Tree, options: &Options) -> Result<Vec<(String, String)>, Vec<String>> {
    repository(tree, options, MAX_FILE_BYTES)
}

/// [`to_repository`], with files of at most `max_bytes`.
fn repository(
    tree: &Tree,
    options: &Options,
    max_bytes: usize,
) -> Result<Vec<(String, String)>, Vec<String>> {
    let problems = refused(tree, options);
    if !problems.is_empty() {
        return Err(problems);
    }
    let parts = write(tree, options);
    // Formatting changes a file's size little: one far too large is not formatted whole.
    let whole = (parts.len() <= max_bytes)
        .then(|| format(&parts.header, parts.setup.iter().chain(parts.projects.iter().map(|(_, p)| p))))
        .transpose()?
        .filter(|text| text.len() <= max_bytes);
    let files = match whole {
        Some(text) => vec![(ENTRY_FILE.to_string(), text)],
        None => split(&parts)?,
    };
    let too_large: Vec<String> = files
        .iter()
        .filter(|(_, text)| text.len() > max_bytes)
        .map(|(path, text)| {
            format!("{path} would be {} bytes, more than the {max_bytes} allot reads in one file", text.len())
        })
        .collect();
    if !too_large.is_empty() {
        return Err(too_large);
    }
    reads_back(&files, tree)?;
    Ok(files)
}

/// A repository too large for one file: the entry file includes a file per top-level
/// account, `projects/NAME.kdl`.
fn split(parts: &Parts) -> Result<Vec<(String, String)>, Vec<String>> {
    if parts.projects.len() >= MAX_FILES {
        return Err(vec![format!(
            "the budgets are more than one file holds, and their {} top-level accounts are more than the {} files a repository may have besides {ENTRY_FILE}",
            parts.projects.len(),
            MAX_FILES - 1
        )]);
    }
    let paths: Vec<String> = parts.projects.iter().map(|(name, _)| format!("projects/{name}.kdl")).collect();
    let includes = document(paths.iter().map(|path| node("include", [arg(path.as_str())]))).to_string();
    let mut files =
        vec![(ENTRY_FILE.to_string(), format(&parts.header, parts.setup.iter().chain([&includes]))?)];
    for (path, (_, project)) in paths.into_iter().zip(&parts.projects) {
        let text = format("", [project])?;
        files.push((path, text));
    }
    Ok(files)
}

/// A file of a header and parts (KDL documents), joined by blank lines, in the layout `allot
/// fmt` gives it.
fn format<'p>(header: &str, parts: impl IntoIterator<Item = &'p String>) -> Result<String, Vec<String>> {
    let body: Vec<&str> = parts.into_iter().map(String::as_str).collect();
    let text = if header.is_empty() { body.join("\n") } else { format!("{header}\n{}", body.join("\n")) };
    allot_compiler::format::format(&text)
        .map_err(|e| vec![format!("the imported budgets do not read back: {e}")])
}

/// What stops the import: names allot cannot carry (with the dump's line), a tree deeper
/// than the budgets may nest, a GPU limit above the cluster's GPUs.
fn refused(tree: &Tree, options: &Options) -> Vec<String> {
    let at = |line: Option<usize>| line.map_or(String::new(), |l| format!("line {l}: "));
    let mut problems = Vec::new();
    if let Some(why) = name_problem(&tree.cluster) {
        problems.push(format!(
            "{}cluster {:?} cannot be an allot cluster: {why}",
            at(tree.cluster_line),
            tree.cluster
        ));
    }
    for a in &tree.accounts {
        if let Some(why) = name_problem(&a.name) {
            problems.push(format!("{}account {:?} cannot be an allot project: {why}", at(a.line), a.name));
        }
    }
    let mut qos_lines: BTreeMap<&str, Option<usize>> = BTreeMap::new();
    for a in &tree.accounts {
        for q in a.qos.iter().chain(&a.default_qos) {
            qos_lines.entry(q.as_str()).or_insert(a.line);
        }
    }
    for (q, line) in qos_lines.into_iter().filter(|(q, _)| *q != PREEMPTIBLE_QOS) {
        if let Some(why) = name_problem(q) {
            problems.push(format!("{}QOS {q:?} cannot be an allot contract: {why}", at(line)));
        }
    }
    for u in &tree.users {
        if let Some(why) = slurm_name_problem(&u.name) {
            problems.push(format!("{}user {:?} cannot be an allot user: {why}", at(u.line), u.name));
        }
    }
    let depths = depths(tree);
    if let Some(a) =
        tree.accounts.iter().find(|a| depths.get(a.name.as_str()).is_some_and(|d| *d > MAX_PROJECT_DEPTH))
    {
        problems.push(format!(
            "{}account {:?} is {} levels deep; budgets nest at most {MAX_PROJECT_DEPTH} projects",
            at(a.line),
            a.name,
            depths.get(a.name.as_str()).copied().unwrap_or(0)
        ));
    }
    if let Some(a) = tree.accounts.iter().filter(|a| a.grp_gpus.is_some()).max_by_key(|a| a.grp_gpus)
        && a.grp_gpus > Some(options.gpus)
    {
        problems.push(format!(
            "{}account {} is limited to {} GPUs, more than --gpus {}",
            at(a.line),
            a.name,
            a.grp_gpus.unwrap_or(0),
            options.gpus
        ));
    }
    problems
}

/// Why a name cannot be a cluster, project or contract: allot's rules of names, and `root`.
fn name_problem(name: &str) -> Option<&'static str> {
    if name == "root" { Some("`root` is reserved") } else { unportable(name) }
}

/// Each account's depth (1 for a top account), in one pass over the accounts, parents first.
fn depths(tree: &Tree) -> HashMap<&str, usize> {
    let mut depths: HashMap<&str, usize> = HashMap::with_capacity(tree.accounts.len());
    for a in &tree.accounts {
        let depth = depths.get(a.parent.as_str()).map_or(1, |d| d + 1);
        depths.insert(&a.name, depth);
    }
    depths
}

/// The accounts under each parent, and the users of each account, in the tree's order.
struct Index<'a> {
    children: HashMap<&'a str, Vec<&'a Account>>,
    users: HashMap<&'a str, Vec<&'a User>>,
    associations: HashMap<&'a str, usize>,
}

impl<'a> Index<'a> {
    fn new(tree: &'a Tree) -> Index<'a> {
        let mut index =
            Index { children: HashMap::new(), users: HashMap::new(), associations: HashMap::new() };
        for a in &tree.accounts {
            index.children.entry(&a.parent).or_default().push(a);
        }
        for u in &tree.users {
            index.users.entry(&u.account).or_default().push(u);
            *index.associations.entry(&u.name).or_default() += 1;
        }
        index
    }

    fn children(&self, parent: &str) -> &[&'a Account] {
        self.children.get(parent).map_or(&[], Vec::as_slice)
    }
}

fn node(name: &str, entries: impl IntoIterator<Item = KdlEntry>) -> KdlNode {
    let mut node = KdlNode::new(name);
    for entry in entries {
        node.push(entry);
    }
    node
}

fn arg(value: impl Into<KdlValue>) -> KdlEntry {
    KdlEntry::new(value)
}

fn prop(key: &str, value: impl Into<KdlValue>) -> KdlEntry {
    KdlEntry::new_prop(key, value)
}

fn int(value: u64) -> KdlValue {
    KdlValue::Integer(i128::from(value))
}

fn document(nodes: impl IntoIterator<Item = KdlNode>) -> KdlDocument {
    let mut doc = KdlDocument::new();
    doc.nodes_mut().extend(nodes);
    doc
}

/// The parts of the imported budgets, each a KDL document of its own.
struct Parts {
    /// `//` comments: where the budgets come from, and what KDL cannot say of the tree.
    header: String,
    /// The cluster, then the rules and contracts.
    setup: [String; 2],
    /// Each top-level account's project, by the account's name.
    projects: Vec<(String, String)>,
}

impl Parts {
    /// The bytes of all the parts.
    fn len(&self) -> usize {
        self.header.len()
            + self.setup.iter().map(String::len).sum::<usize>()
            + self.projects.iter().map(|(_, p)| p.len()).sum::<usize>()
    }
}

/// The budgets of the tree, in parts: a header of notes, then the cluster, the rules and
/// contracts, and each top project.
fn write(tree: &Tree, options: &Options) -> Parts {
    let index = Index::new(tree);
    let mut notes = Vec::new();
    let qos: BTreeSet<&str> = tree
        .accounts
        .iter()
        .flat_map(|a| a.qos.iter().map(String::as_str))
        .filter(|q| *q != PREEMPTIBLE_QOS)
        .collect();
    let preemptible = tree.accounts.iter().any(|a| a.qos.iter().any(|q| q == PREEMPTIBLE_QOS));
    let default = most_common_default(tree)
        .or_else(|| qos.first().map(|q| q.to_string()))
        .unwrap_or_else(|| "normal".into());

    let mut cluster = node(
        "cluster",
        [
            arg(tree.cluster.as_str()),
            prop("gpus", int(options.gpus)),
            prop("gpu-type", options.gpu_type.as_str()),
            prop("gpus-per-node", int(options.gpus_per_node)),
        ],
    );
    cluster.ensure_children().nodes_mut().push(node("slurm", [prop("cluster", tree.cluster.as_str())]));

    let rule = if preemptible { "preemptible" } else { "deny" };
    for account in tree.accounts.iter().filter(|a| preemptible && !a.qos.iter().any(|q| q == PREEMPTIBLE_QOS))
    {
        notes.push(format!(
            "account {} lacks QOS {PREEMPTIBLE_QOS}, which allot gives every account under this policy",
            account.name
        ));
    }
    let mut rules = vec![node("policy", [prop("unbudgeted", rule), prop("overflow", rule)])];
    let mut contracts: Vec<&str> = qos.iter().copied().collect();
    if !contracts.contains(&default.as_str()) {
        contracts.push(&default);
    }
    for name in contracts {
        let mut contract = node("contract", [arg(name), prop("min-runtime", "0s")]);
        if name == default {
            contract.push(prop("default", true));
        }
        rules.push(contract);
    }
    notes.push(
        "contracts are the QOS the accounts use; give them their minimum runtime and limits".to_string(),
    );
    for u in index.users.get("root").into_iter().flatten().filter(|u| u.name != "root") {
        notes.push(format!("user {} is in Slurm's root account, which is no project: not imported", u.name));
    }
    let projects = index
        .children("root")
        .iter()
        .map(|account| {
            (account.name.clone(), document([project(&index, account, &[], &mut notes)]).to_string())
        })
        .collect();
    let header: Vec<String> =
        std::iter::once(format!("Imported from Slurm cluster {} by `allot import slurm`.", tree.cluster))
            .chain(notes.iter().map(|n| format!("- {n}")))
            .map(|line| format!("// {}\n", comment(&line)))
            .collect();
    Parts {
        header: header.concat(),
        setup: [document([cluster]).to_string(), document(rules).to_string()],
        projects,
    }
}

/// A note as the text of a `//` comment: nothing that would end the line. (The names in
/// notes passed allot's rules already; this holds whatever a note says.)
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') { '?' } else { c })
        .collect()
}

fn most_common_default(tree: &Tree) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for d in tree.accounts.iter().filter_map(|a| a.default_qos.as_deref()) {
        *counts.entry(d).or_default() += 1;
    }
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(q, _)| q.to_string())
}

/// An account and its subtree as a `project` node. Recursive: [`refused`] bounds the depth
/// to the budgets' own limit first.
fn project(index: &Index, account: &Account, parent_qos: &[String], notes: &mut Vec<String>) -> KdlNode {
    let share = if account.fairshare == PARENT_FAIRSHARE {
        notes.push(format!(
            "account {} has Fairshare=parent, which allot cannot say: imported as 1",
            account.name
        ));
        1
    } else {
        account.fairshare.max(1)
    };
    if account.fairshare == 0 {
        notes.push(format!("account {} has Fairshare=0, which allot refuses: imported as 1", account.name));
    }
    let mut out = node("project", [arg(account.name.as_str()), prop("share", int(share))]);
    if let Some(gpus) = account.grp_gpus {
        out.push(prop("max-gpus", int(gpus)));
    }
    let mut children = Vec::new();
    let own_qos: Vec<String> = account.qos.iter().filter(|q| *q != PREEMPTIBLE_QOS).cloned().collect();
    if own_qos != parent_qos && !own_qos.is_empty() {
        children.push(node("contracts", own_qos.iter().map(|q| arg(q.as_str()))));
    }
    let users = index.users.get(account.name.as_str()).map_or(&[][..], Vec::as_slice);
    let in_several = |u: &User| index.associations.get(u.name.as_str()).is_some_and(|n| *n > 1);
    let (defaults, others): (Vec<&User>, Vec<&User>) = users
        .iter()
        .partition(|u| u.default_account.as_deref() == Some(account.name.as_str()) && in_several(u));
    for u in users.iter().filter(|u| u.fairshare != 1) {
        let value =
            if u.fairshare == PARENT_FAIRSHARE { "parent".to_string() } else { u.fairshare.to_string() };
        notes.push(format!("user {} in {} has Fairshare={value}: allot gives users 1", u.name, account.name));
    }
    if !others.is_empty() {
        children.push(node("users", others.iter().map(|u| arg(u.name.as_str()))));
    }
    if !defaults.is_empty() {
        let mut line = node("users", defaults.iter().map(|u| arg(u.name.as_str())));
        line.push(prop("default", true));
        children.push(line);
    }
    let qos = if own_qos.is_empty() { parent_qos } else { &own_qos };
    for child in index.children(&account.name) {
        children.push(project(index, child, qos, notes));
    }
    if !children.is_empty() {
        out.ensure_children().nodes_mut().extend(children);
    }
    out
}

/// (name, parent) of accounts, (name, account) of user associations.
type Pairs = BTreeSet<(String, String)>;

/// Defence in depth: the files compile, and their tree on the cluster has the dump's
/// accounts under the same parents and the same user associations.
fn reads_back(files: &[(String, String)], tree: &Tree) -> Result<(), Vec<String>> {
    let loader = MemoryLoader::new(files.iter().map(|(path, text)| (path.as_str(), text.as_str())));
    // The files written hold no grant: any moment gives the same model.
    let compilation = compile(&loader, ENTRY_FILE, 0);
    let Some(model) = compilation.model else {
        let errors = compilation.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone());
        return Err(errors.map(|m| format!("the imported budgets do not compile: {m}")).collect());
    };
    let imported = desired(&model, &tree.cluster);
    let shape = |t: &Tree| -> (Pairs, Pairs) {
        (
            t.accounts.iter().map(|a| (a.name.clone(), a.parent.clone())).collect(),
            t.users
                .iter()
                .filter(|u| u.account != "root")
                .map(|u| (u.name.clone(), u.account.clone()))
                .collect(),
        )
    };
    if shape(&imported) != shape(tree) {
        return Err(vec!["the imported budgets do not read back as the dump's tree".to_string()]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::tree::parse;

    fn options() -> Options {
        Options { gpus: 8, gpu_type: "h100".into(), gpus_per_node: 8 }
    }

    #[test]
    fn names_reach_the_file_through_kdl_quoting_and_read_back() {
        let dump = "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\nParent - 'a'\n\
                    User - '/-y':Fairshare=1\nUser - 'true':Fairshare=1\nUser - '1st':Fairshare=1\n";
        let tree = parse(dump).unwrap();
        let files = to_repository(&tree, &options()).unwrap();
        let [(_, text)] = files.as_slice() else { panic!("{files:?}") };
        assert!(text.contains(r#"users "/-y" "true" "1st""#), "{text}");
        // A GPU type given on the command line goes through the same checks.
        let hostile = Options { gpu_type: "h100 \"sxm\"\n}".into(), ..options() };
        let problems = to_repository(&tree, &hostile).unwrap_err();
        assert!(problems[0].contains("cannot be a GPU type"), "{problems:?}");
        let projects = text.lines().filter(|l| l.trim_start().starts_with("project")).count();
        assert_eq!(projects, 1, "{text}");
    }

    #[test]
    fn a_repository_too_large_for_one_file_is_split_by_top_level_account() {
        let dump = "Cluster - 'lab'\nParent - 'root'\nAccount - 'a'\nAccount - 'b'\nParent - 'a'\n\
                    Account - 'a1'\nParent - 'a1'\nUser - 'alice'\nParent - 'b'\nUser - 'bob'\n";
        let tree = parse(dump).unwrap();
        let whole = repository(&tree, &options(), MAX_FILE_BYTES).unwrap();
        assert_eq!(whole.len(), 1);
        // Files of at most the largest of the split ones: the projects go to files of their own.
        let largest =
            split(&write(&tree, &options())).unwrap().iter().map(|(_, text)| text.len()).max().unwrap();
        assert!(largest < whole[0].1.len());
        let files = repository(&tree, &options(), largest).unwrap();
        let paths: Vec<&str> = files.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(paths, [ENTRY_FILE, "projects/a.kdl", "projects/b.kdl"]);
        assert!(
            files[0].1.ends_with("include \"projects/a.kdl\"\ninclude \"projects/b.kdl\"\n"),
            "{}",
            files[0].1
        );
        assert_eq!(
            files[1].1,
            "project a share=1 {\n    project a1 share=1 {\n        users alice\n    }\n}\n"
        );
        // Every file the same size as the whole: one of them is too large.
        let problems = repository(&tree, &options(), 10).unwrap_err();
        assert!(problems[0].starts_with("allot.kdl would be"), "{problems:?}");
    }

    #[test]
    fn names_allot_refuses_are_errors_at_their_line() {
        let dump = "Cluster - 'lab_1'\nParent - 'root'\nAccount - 'ml_team':QOS='Gpu.High'\nAccount - 'ok'\n\
                    Parent - 'ok'\nUser - 'bob'\n";
        let problems = to_repository(&parse(dump).unwrap(), &options()).unwrap_err();
        assert_eq!(
            problems,
            [
                "line 1: cluster \"lab_1\" cannot be an allot cluster: Kubernetes names (DNS-1123 labels) allow only `a-z`, `0-9` and `-`",
                "line 3: account \"ml_team\" cannot be an allot project: Kubernetes names (DNS-1123 labels) allow only `a-z`, `0-9` and `-`",
                "line 3: QOS \"gpu.high\" cannot be an allot contract: YARN reads `.` as a queue path separator",
            ]
        );
    }

    #[test]
    fn a_tree_deeper_than_budgets_nest_is_refused_at_the_first_account_too_deep() {
        let mut dump = String::from("Cluster - 'lab'\nParent - 'root'\nAccount - 'a0'\n");
        for i in 1..60 {
            dump.push_str(&format!("Parent - 'a{}'\nAccount - 'a{i}'\n", i - 1));
        }
        let problems = to_repository(&parse(&dump).unwrap(), &options()).unwrap_err();
        assert_eq!(
            problems,
            [format!(
                "line {}: account \"a32\" is 33 levels deep; budgets nest at most 32 projects",
                3 + 2 * 32
            )]
        );
    }
}
