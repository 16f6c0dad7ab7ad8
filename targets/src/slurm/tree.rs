//! The association tree of one Slurm cluster: what allot wants (from the model) and what
//! Slurm has (from a `sacctmgr dump`), in one shape so that `plan` can compare them, and
//! the flat-file format `sacctmgr load` reads and `sacctmgr dump` writes.

use std::collections::BTreeMap;

use allot_compiler::ir::{Location, Model, Project, ShareSpec, WorkRule};

/// `Fairshare=parent` as the dump writes it.
pub const PARENT_FAIRSHARE: u64 = 2_147_483_647;
/// The QOS that work beyond a budget, and unbudgeted work, runs under.
pub const PREEMPTIBLE_QOS: &str = "preemptible";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    pub cluster: String,
    /// Parents before children.
    pub accounts: Vec<Account>,
    pub users: Vec<User>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub parent: String,
    /// A number, or [`PARENT_FAIRSHARE`].
    pub fairshare: u64,
    /// `GrpTRES=gres/gpu=N`.
    pub grp_gpus: Option<u64>,
    /// Sorted, as Slurm stores it.
    pub qos: Vec<String>,
    pub default_qos: Option<String>,
    pub description: String,
    /// Options allot does not manage, as `key=value` (the dump's), for drift.
    pub other: BTreeMap<String, String>,
    /// The project it comes from (desired trees only).
    pub source: Option<Location>,
    /// The project's path (desired trees only).
    pub path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub account: String,
    pub default_account: Option<String>,
    pub fairshare: u64,
    pub other: BTreeMap<String, String>,
    pub source: Option<Location>,
}

impl Tree {
    pub fn account(&self, name: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.name == name)
    }

    /// Each account's fraction of the cluster: its Fairshare over its siblings' (users
    /// included, as Slurm counts them), multiplied down the tree.
    pub fn effective_shares(&self) -> BTreeMap<String, f64> {
        let mut siblings: BTreeMap<&str, u64> = BTreeMap::new();
        for a in &self.accounts {
            *siblings.entry(&a.parent).or_default() += shares(a.fairshare);
        }
        for u in &self.users {
            *siblings.entry(&u.account).or_default() += shares(u.fairshare);
        }
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        for a in &self.accounts {
            let parent = if a.parent == "root" { 1.0 } else { out.get(&a.parent).copied().unwrap_or(0.0) };
            let total = siblings.get(a.parent.as_str()).copied().unwrap_or(0).max(1);
            out.insert(a.name.clone(), parent * shares(a.fairshare) as f64 / total as f64);
        }
        out
    }
}

/// What an association weighs among its siblings (`parent` counts as 1 here: its usage
/// is its parent's).
fn shares(fairshare: u64) -> u64 {
    if fairshare == PARENT_FAIRSHARE { 1 } else { fairshare }
}

/// The tree allot wants on Slurm cluster `cluster`: the projects that may use any allot
/// cluster bound to it, with the shares of the first such allot cluster where each appears.
pub fn desired(model: &Model, cluster: &str) -> Tree {
    desired_with_loss(model, cluster).0
}

/// [`desired`], and the worst relative error of a Fairshare ratio in it
/// ([`scaled_fairshares`]).
pub fn desired_with_loss(model: &Model, cluster: &str) -> (Tree, f64) {
    let bound: Vec<&str> = model
        .clusters
        .iter()
        .filter(|c| c.bindings.slurm.as_ref().is_some_and(|s| s.cluster == cluster))
        .map(|c| c.name.as_str())
        .collect();
    let preemptible = [model.policy.overflow, model.policy.unbudgeted].contains(&WorkRule::Preemptible);
    let default_contract = model.contracts.iter().find(|c| c.default).map(|c| c.name.clone());
    let mut tree = Tree { cluster: cluster.to_string(), accounts: Vec::new(), users: Vec::new() };
    let mut loss = 0.0;
    let context = Context { bound: &bound, preemptible, default_qos: default_contract.as_deref() };
    add(&mut tree, &mut loss, &model.projects, "root", None, &context);
    let defaults = default_accounts(&tree);
    for user in &mut tree.users {
        user.default_account = defaults.get(&user.name).cloned();
    }
    (tree, loss)
}

/// What every level of [`add`] shares.
struct Context<'a> {
    /// The allot clusters bound to the Slurm cluster.
    bound: &'a [&'a str],
    preemptible: bool,
    default_qos: Option<&'a str>,
}

/// The Slurm clusters the model binds, in the order of their first allot cluster.
pub fn slurm_clusters(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for slurm in model.clusters.iter().filter_map(|c| c.bindings.slurm.as_ref()) {
        if !out.contains(&slurm.cluster) {
            out.push(slurm.cluster.clone());
        }
    }
    out
}

/// Adds `projects` under account `parent`, whose own GPU cap is `parent_cap`: a sub-project
/// carries `GrpTRES` only when its cap is tighter (Slurm applies a parent's to its subtree).
fn add(
    tree: &mut Tree,
    loss: &mut f64,
    projects: &[Project],
    parent: &str,
    parent_cap: Option<u64>,
    context: &Context,
) {
    let Context { bound, preemptible, default_qos } = *context;
    let present: Vec<(&Project, &ShareSpec)> = projects
        .iter()
        .filter_map(|p| bound.iter().find_map(|c| p.clusters.get(*c)).map(|a| (p, &a.share)))
        .collect();
    let (fairshares, error) = scaled_fairshares(&present.iter().map(|(_, s)| **s).collect::<Vec<_>>());
    *loss = loss.max(error);
    for ((project, _), fairshare) in present.iter().zip(fairshares) {
        let allocation = bound.iter().find_map(|c| project.clusters.get(*c));
        let mut qos: Vec<String> = project.contracts.clone();
        if preemptible {
            qos.push(PREEMPTIBLE_QOS.into());
        }
        qos.sort();
        qos.dedup();
        let default = default_qos
            .filter(|d| project.contracts.iter().any(|c| c == d))
            .or(project.contracts.first().map(String::as_str));
        tree.accounts.push(Account {
            name: project.name.clone(),
            parent: parent.to_string(),
            fairshare,
            grp_gpus: allocation.and_then(|a| a.max_gpus).filter(|cap| Some(*cap) != parent_cap),
            qos,
            default_qos: default.map(str::to_string),
            description: project.path.clone(),
            other: BTreeMap::new(),
            source: Some(project.source.clone()),
            path: project.path.clone(),
        });
        for user in &project.users {
            if !tree.users.iter().any(|u| u.name == user.name && u.account == project.name) {
                tree.users.push(User {
                    name: user.name.clone(),
                    account: project.name.clone(),
                    // Marks the project the user chose as default; `desired` settles it.
                    default_account: user.default.then(|| project.name.clone()),
                    fairshare: 1,
                    other: BTreeMap::new(),
                    source: Some(project.source.clone()),
                });
            }
        }
        let cap = allocation.and_then(|a| a.max_gpus);
        add(tree, loss, &project.children, &project.name, cap, context);
    }
}

/// Each user's default account: the one marked default, else the first (the checks
/// ensure a user in several projects marks one).
fn default_accounts(tree: &Tree) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for u in &tree.users {
        if let Some(marked) = &u.default_account {
            out.insert(u.name.clone(), marked.clone());
        }
    }
    for u in &tree.users {
        out.entry(u.name.clone()).or_insert_with(|| u.account.clone());
    }
    out
}

/// The largest Fairshare Slurm takes as a number: 2147483647 means `parent`, and the
/// 32-bit values above it are Slurm's "no value" sentinels (`NO_VAL` is 0xfffffffe).
pub const MAX_FAIRSHARE: u64 = PARENT_FAIRSHARE - 1;

/// Fairshare integers with the siblings' ratios: shares in millionths, divided by the
/// largest power of ten they all share (`60`/`40` stay `60`/`40`, `"12.5%"` is `125`).
pub fn fairshares(shares: &[ShareSpec]) -> Vec<u64> {
    scaled_fairshares(shares).0
}

/// [`fairshares`], and the worst relative error of a sibling's ratio to the others'
/// (0 when they are exact). Shares whose integers would exceed [`MAX_FAIRSHARE`] are scaled
/// down to fit, each kept at 1 at least: only then are they approximated.
pub fn scaled_fairshares(shares: &[ShareSpec]) -> (Vec<u64>, f64) {
    // Percentages have at most 6 decimals and weights 3: millionths carry both exactly, and
    // the largest weight (10^9) is 10^15 of them.
    let exact: Vec<u128> = shares
        .iter()
        .map(|s| match s {
            ShareSpec::Percent(v) | ShareSpec::Weight(v) => {
                let millionths = (v * 1e6).round();
                if millionths.is_finite() && millionths >= 1.0 { millionths as u128 } else { 1 }
            }
        })
        .collect();
    let mut divisor: u128 = 1_000_000;
    while divisor > 1 && exact.iter().any(|v| v % divisor != 0) {
        divisor /= 10;
    }
    let reduced: Vec<u128> = exact.iter().map(|v| v / divisor).collect();
    let largest = reduced.iter().copied().max().unwrap_or(1).max(1);
    let max = u128::from(MAX_FAIRSHARE);
    let carried: Vec<u64> = if largest <= max {
        reduced.iter().map(|&v| v as u64).collect()
    } else {
        // v * max < 10^15 * 2^31 < 2^81: no overflow in u128.
        reduced.iter().map(|&v| ((v * max + largest / 2) / largest).clamp(1, max) as u64).collect()
    };
    let wanted: Vec<f64> = exact.iter().map(|&v| v as f64).collect();
    let error = crate::fidelity::ratio_error(&wanted, &carried);
    (carried, error)
}

/// Quotes a flat-file value: in single quotes, or double quotes when it holds a single
/// one. What no quote can carry (a value with both quotes, a line break, a control
/// character) is replaced by `_` so that the record stays one line: `validate` refuses
/// such a tree ([`flat_file_problem`]) before anything is written.
fn quoted(value: &str) -> String {
    let clean: String = value.chars().map(|c| if crate::text::breaks_line(c) { '_' } else { c }).collect();
    match (clean.contains('\''), clean.contains('"')) {
        (false, _) => format!("'{clean}'"),
        (true, false) => format!("\"{clean}\""),
        (true, true) => format!("'{}'", clean.replace('\'', "_")),
    }
}

/// Why `value` cannot be written as a flat-file value, if it cannot: the flat file has no
/// escapes, so a quote, `#`, `\\` or a line break would change what `sacctmgr` reads.
pub fn flat_file_problem(value: &str) -> Option<&'static str> {
    if crate::text::unwritable(value).is_some() {
        Some("it holds a line break or a control character")
    } else if value.chars().any(|c| matches!(c, '\'' | '"' | '#' | '\\')) {
        Some("sacctmgr's flat files cannot carry quotes, `#` or `\\` in a value")
    } else {
        None
    }
}

/// The flat file `sacctmgr load` reads: the cluster line, then each parent's accounts and
/// users, parents before children.
pub fn flat_file(tree: &Tree, comment: &str) -> String {
    let mut out = format!("# {}\nCluster - {}\n", crate::text::comment(comment), quoted(&tree.cluster));
    let mut parents: Vec<&str> = vec!["root"];
    parents.extend(tree.accounts.iter().map(|a| a.name.as_str()));
    for parent in parents {
        let accounts: Vec<&Account> = tree.accounts.iter().filter(|a| a.parent == parent).collect();
        let users: Vec<&User> = tree.users.iter().filter(|u| u.account == parent).collect();
        if accounts.is_empty() && users.is_empty() {
            continue;
        }
        out.push_str(&format!("Parent - {}\n", quoted(parent)));
        for a in accounts {
            let mut line = format!(
                "Account - {}:Description={}:Organization={}:Fairshare={}",
                quoted(&a.name),
                quoted(&a.description),
                quoted("allot"),
                a.fairshare
            );
            if let Some(gpus) = a.grp_gpus {
                line.push_str(&format!(":GrpTRES={}", quoted(&format!("gres/gpu={gpus}"))));
            }
            if !a.qos.is_empty() {
                line.push_str(&format!(":QOS={}", quoted(&a.qos.join(","))));
            }
            if let Some(default) = &a.default_qos {
                line.push_str(&format!(":DefaultQOS={}", quoted(default)));
            }
            out.push_str(&line);
            out.push('\n');
        }
        for u in users {
            let mut line = format!("User - {}", quoted(&u.name));
            if let Some(default) = &u.default_account {
                line.push_str(&format!(":DefaultAccount={}", quoted(default)));
            }
            line.push_str(&format!(":Fairshare={}\n", u.fairshare));
            out.push_str(&line);
        }
    }
    out
}

/// Why a dump could not be read, with the line of the record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ParseError {
    pub line: usize,
    pub problem: DumpProblem,
}

/// What is wrong with a record of a dump.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DumpProblem {
    #[error("a quote is not closed")]
    UnclosedQuote,
    #[error("empty record")]
    EmptyRecord,
    #[error("`{0}` is not `Kind - 'name'`")]
    NotARecord(String),
    #[error("option `{0}` has no `=`")]
    OptionWithoutValue(String),
    #[error("{key}={value} is not a number")]
    NotANumber { key: String, value: String },
    #[error("an account before the Cluster line")]
    AccountBeforeCluster,
    #[error("a user before the Cluster line")]
    UserBeforeCluster,
    #[error("unknown record kind `{0}`")]
    UnknownKind(String),
    #[error("no `Cluster - 'name'` line: not a sacctmgr dump")]
    NoCluster,
}

/// Reads a `sacctmgr dump` (or a flat file): names and values lower-cased as Slurm stores
/// them, `Fairshare=parent` as [`PARENT_FAIRSHARE`], QOS lists sorted.
pub fn parse(text: &str) -> Result<Tree, ParseError> {
    let mut tree = Tree { cluster: String::new(), accounts: Vec::new(), users: Vec::new() };
    let mut parent = "root".to_string();
    let mut cluster_qos: Vec<String> = Vec::new();
    let mut logical = String::new();
    let mut first_line = 0;
    for (index, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        if logical.is_empty() {
            first_line = index + 1;
        }
        if let Some(continued) = line.strip_suffix('\\') {
            logical.push_str(continued);
            continue;
        }
        logical.push_str(&line);
        let record = std::mem::take(&mut logical);
        let record = record.trim();
        if record.is_empty() {
            continue;
        }
        let error = |problem: DumpProblem| ParseError { line: first_line, problem };
        let fields = split_fields(record).map_err(error)?;
        let (head, options) = fields.split_first().ok_or_else(|| error(DumpProblem::EmptyRecord))?;
        let (kind, name) =
            head.split_once(" - ").ok_or_else(|| error(DumpProblem::NotARecord(head.clone())))?;
        let name = unquote(name.trim()).to_lowercase();
        let mut values = BTreeMap::new();
        for option in options {
            let (key, value) = option
                .split_once('=')
                .ok_or_else(|| error(DumpProblem::OptionWithoutValue(option.clone())))?;
            values.insert(key.trim().to_lowercase(), unquote(value.trim()).to_lowercase());
        }
        let number = |values: &BTreeMap<String, String>, key: &str| -> Result<Option<u64>, ParseError> {
            match values.get(key).map(String::as_str) {
                None => Ok(None),
                Some("parent") => Ok(Some(PARENT_FAIRSHARE)),
                Some(v) => v.parse().map(Some).map_err(|_| {
                    error(DumpProblem::NotANumber { key: key.to_string(), value: v.to_string() })
                }),
            }
        };
        match kind.trim().to_lowercase().as_str() {
            "cluster" | "machine" => {
                tree.cluster = name;
                cluster_qos = values.get("qos").map(|q| qos_list(q)).unwrap_or_default();
            }
            "parent" => parent = name,
            "account" | "project" => {
                if tree.cluster.is_empty() {
                    return Err(error(DumpProblem::AccountBeforeCluster));
                }
                let qos = values.get("qos").map(|q| qos_list(q)).unwrap_or_default();
                let grp_gpus = values.get("grptres").and_then(|t| gpu_count(t));
                let other = values
                    .iter()
                    .filter(|(k, _)| {
                        !matches!(
                            k.as_str(),
                            "fairshare" | "qos" | "defaultqos" | "description" | "organization"
                        )
                    })
                    .filter(|(k, v)| !(k.as_str() == "grptres" && gpu_count(v).is_some() && !v.contains(',')))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                tree.accounts.push(Account {
                    name,
                    parent: parent.clone(),
                    fairshare: number(&values, "fairshare")?.unwrap_or(1),
                    grp_gpus,
                    qos,
                    default_qos: values.get("defaultqos").cloned(),
                    description: values.get("description").cloned().unwrap_or_default(),
                    other,
                    source: None,
                    path: String::new(),
                });
            }
            "user" => {
                if tree.cluster.is_empty() {
                    return Err(error(DumpProblem::UserBeforeCluster));
                }
                let other = values
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "fairshare" | "defaultaccount" | "adminlevel"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                tree.users.push(User {
                    name,
                    account: parent.clone(),
                    default_account: values.get("defaultaccount").cloned(),
                    fairshare: number(&values, "fairshare")?.unwrap_or(1),
                    other,
                    source: None,
                });
            }
            other => return Err(error(DumpProblem::UnknownKind(other.to_string()))),
        }
    }
    if tree.cluster.is_empty() {
        return Err(ParseError { line: 1, problem: DumpProblem::NoCluster });
    }
    sort_parents_first(&mut tree);
    inherit_qos(&mut tree, &cluster_qos);
    Ok(tree)
}

/// An account without its own QOS list (or default QOS) has its parent's, and the top
/// accounts the cluster line's: store what is in force, as allot's own trees do. With no
/// default QOS anywhere, Slurm gives jobs `normal` when the account may use it, or the only
/// QOS it may use.
fn inherit_qos(tree: &mut Tree, cluster_qos: &[String]) {
    let mut inherited: BTreeMap<String, (Vec<String>, Option<String>)> = BTreeMap::new();
    inherited.insert("root".into(), (cluster_qos.to_vec(), None));
    for account in &mut tree.accounts {
        let (qos, default) = inherited.get(&account.parent).cloned().unwrap_or_default();
        if account.qos.is_empty() {
            account.qos = qos;
        }
        if account.default_qos.is_none() {
            account.default_qos = default;
        }
        inherited.insert(account.name.clone(), (account.qos.clone(), account.default_qos.clone()));
        if account.default_qos.is_none() {
            account.default_qos = match account.qos.as_slice() {
                [only] => Some(only.clone()),
                list if list.iter().any(|q| q == "normal") => Some("normal".into()),
                _ => None,
            };
        }
    }
}

/// The dump lists accounts before their Parent blocks; order them parents first.
fn sort_parents_first(tree: &mut Tree) {
    let mut ordered: Vec<Account> = Vec::new();
    let mut rest = std::mem::take(&mut tree.accounts);
    let mut placed = vec!["root".to_string()];
    while !rest.is_empty() {
        let (ready, waiting): (Vec<Account>, Vec<Account>) =
            rest.into_iter().partition(|a| placed.contains(&a.parent));
        if ready.is_empty() {
            // Accounts under a parent that is nowhere: keep them, in file order.
            ordered.extend(waiting);
            break;
        }
        placed.extend(ready.iter().map(|a| a.name.clone()));
        ordered.extend(ready);
        rest = waiting;
    }
    tree.accounts = ordered;
}

/// `'normal,gpu-high'` -> `["gpu-high", "normal"]`
fn qos_list(value: &str) -> Vec<String> {
    let mut list: Vec<String> =
        value.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    list.sort();
    list.dedup();
    list
}

/// `gres/gpu=6` (or `cpu=4,gres/gpu=4`) -> 6.
fn gpu_count(tres: &str) -> Option<u64> {
    tres.split(',').find_map(|part| part.trim().strip_prefix("gres/gpu=")).and_then(|n| n.parse().ok())
}

fn strip_comment(line: &str) -> String {
    let mut out = String::new();
    let mut quote = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quote) {
            ('\\', None) if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            ('#', None) => break,
            ('\'' | '"', None) => {
                quote = Some(c);
                out.push(c);
            }
            (c, Some(q)) if c == q => {
                quote = None;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// Splits a record on `:` outside quotes.
fn split_fields(record: &str) -> Result<Vec<String>, DumpProblem> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quote = None;
    for c in record.chars() {
        match (c, quote) {
            (':', None) => fields.push(std::mem::take(&mut field)),
            ('\'' | '"', None) => {
                quote = Some(c);
                field.push(c);
            }
            (c, Some(q)) if c == q => {
                quote = None;
                field.push(c);
            }
            _ => field.push(c),
        }
    }
    if quote.is_some() {
        return Err(DumpProblem::UnclosedQuote);
    }
    fields.push(field);
    Ok(fields.into_iter().map(|f| f.trim().to_string()).filter(|f| !f.is_empty()).collect())
}

fn unquote(value: &str) -> &str {
    let value = value.trim();
    for q in ['\'', '"'] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "# comment\nCluster - 'test':Fairshare=1:QOS='normal'\nParent - 'root'\n\
        User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1\n\
        Account - 'eng':Description='engineering':Organization='acme':Fairshare=60\n\
        Account - 'research':Description='research':Organization='acme':Fairshare=40\n\
        Parent - 'eng'\nAccount - 'ml':Description='machine learning':Organization='acme':Fairshare=70:GrpTRES=gres/gpu=6\n\
        Account - 'infra':Description='infrastructure':Organization='acme':Fairshare=30:MaxWallDurationPerJob=240\n\
        Parent - 'ml'\nAccount - 'vision':Description='v':Organization='acme':DefaultQOS='normal':Fairshare=50:QOS='normal,gpu-high'\n\
        Parent - 'research'\nAccount - 'physics':Fairshare=100:GrpTRES=cpu=4,gres/gpu=4\n\
        Parent - 'physics'\nUser - 'alice':DefaultAccount='vision':Fairshare=2147483647\nUser - 'Dave':DefaultAccount='physics':Fairshare=1\n";

    #[test]
    fn reads_a_dump_as_slurm_stores_it() {
        let tree = parse(DUMP).unwrap();
        assert_eq!(tree.cluster, "test");
        let names: Vec<&str> = tree.accounts.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["eng", "research", "ml", "infra", "physics", "vision"]);
        let vision = tree.account("vision").unwrap();
        assert_eq!((vision.parent.as_str(), vision.fairshare), ("ml", 50));
        assert_eq!(vision.qos, ["gpu-high", "normal"]);
        assert_eq!(tree.account("ml").unwrap().grp_gpus, Some(6));
        assert_eq!(
            tree.account("infra").unwrap().other.get("maxwalldurationperjob").map(String::as_str),
            Some("240")
        );
        assert!(tree.account("physics").unwrap().other.contains_key("grptres"), "cpu limits are not allot's");
        let alice = tree.users.iter().find(|u| u.name == "alice").unwrap();
        assert_eq!((alice.account.as_str(), alice.fairshare), ("physics", PARENT_FAIRSHARE));
        assert!(tree.users.iter().any(|u| u.name == "dave"), "names are lower-cased");
        let shares = tree.effective_shares();
        assert!((shares["eng"] - 60.0 / 101.0).abs() < 1e-12, "the root user is a sibling: {shares:?}");
    }

    #[test]
    fn bad_dumps_say_where() {
        assert_eq!(parse("Account - 'a'\n").unwrap_err().line, 1);
        assert_eq!(parse("Cluster - 'c'\n\nAccount - 'a':Fairshare=lots\n").unwrap_err().line, 3);
        assert_eq!(parse("Cluster - 'c'\nAccount - 'a:Fairshare=1\n").unwrap_err().line, 2);
        assert!(parse("hello\n").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn fairshares_keep_ratios_in_small_integers() {
        let w = |v: f64| ShareSpec::Weight(v);
        let p = |v: f64| ShareSpec::Percent(v);
        assert_eq!(fairshares(&[w(60.0), w(40.0)]), [60, 40]);
        assert_eq!(fairshares(&[p(12.5), p(37.5)]), [125, 375]);
        assert_eq!(fairshares(&[w(1.5), w(2.0)]), [15, 20]);
        assert_eq!(fairshares(&[p(12.345678), p(50.0)]), [12_345_678, 50_000_000]);
        assert_eq!(scaled_fairshares(&[w(0.001), w(2.0)]).1, 0.0);
    }

    #[test]
    fn fairshares_stay_in_slurms_range_and_say_what_they_lose() {
        let w = |v: f64| ShareSpec::Weight(v);
        // 10^12 thousandths: scaled into 1..=2147483646, the small one kept at 1.
        let (values, error) = scaled_fairshares(&[w(1e9), w(0.001)]);
        assert_eq!(values, [MAX_FAIRSHARE, 1]);
        assert!(error > 100.0, "the small share is carried hundreds of times too large: {error}");
        let (values, error) = scaled_fairshares(&[w(1e9), w(123_456_789.123), w(1.0)]);
        assert!(values.iter().all(|v| (1..=MAX_FAIRSHARE).contains(v)), "{values:?}");
        assert!(error > 0.0 && error < 1.0, "{error}");
        // Hostile input that skipped the checks: never 0, never `parent` or a sentinel.
        let (values, _) = scaled_fairshares(&[w(f64::MAX), w(0.0), w(-5.0), w(f64::NAN)]);
        assert!(values.iter().all(|v| (1..=MAX_FAIRSHARE).contains(v)), "{values:?}");
    }

    #[test]
    fn flat_file_values_stay_in_their_record() {
        let tree = Tree {
            cluster: "c\nUser - 'root':AdminLevel=Administrator".into(),
            accounts: vec![Account {
                name: "it's".into(),
                parent: "root".into(),
                fairshare: 1,
                description: "a\"b'c#d".into(),
                ..Account::default()
            }],
            users: Vec::new(),
        };
        let text = flat_file(&tree, "comment\nUser - 'x'");
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(text.lines().all(|l| !l.starts_with("User")), "{text}");
        assert_eq!(
            flat_file_problem("it's"),
            Some("sacctmgr's flat files cannot carry quotes, `#` or `\\` in a value")
        );
        assert!(flat_file_problem("a\nb").is_some());
        assert_eq!(flat_file_problem("olmo/pretrain"), None);
        let back = parse(&text).unwrap();
        assert_eq!(back.accounts[0].name, "it's", "a single quote is carried in double quotes");
    }

    #[test]
    fn the_flat_file_reads_back() {
        let tree = parse(DUMP).unwrap();
        let again = parse(&flat_file(&tree, "test")).unwrap();
        let names = |t: &Tree| {
            t.accounts.iter().map(|a| (a.name.clone(), a.parent.clone(), a.fairshare)).collect::<Vec<_>>()
        };
        assert_eq!(names(&again), names(&tree));
    }
}
