//! The association tree of one Slurm cluster: what allot wants (from the model) and what
//! Slurm has (from a `sacctmgr dump`), in one shape so that `plan` can compare them, and
//! the flat-file format `sacctmgr load` reads and `sacctmgr dump` writes.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use allot_compiler::ir::{Allocation, Location, Model, Project, ShareSpec, WorkRule};

/// `Fairshare=parent` as the dump writes it.
pub const PARENT_FAIRSHARE: u64 = 2_147_483_647;
use allot_compiler::names::PREEMPTIBLE_QOS;

use super::qos::{self, Qos};
use super::{floors, slurm_name_problem};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    pub cluster: String,
    /// The dump's `Cluster` line (dump trees only).
    pub cluster_line: Option<usize>,
    /// Parents before children.
    pub accounts: Vec<Account>,
    pub users: Vec<User>,
    /// The QOS, when known: the ones the budgets want, or the live ones `sacctmgr show qos`
    /// lists (a dump holds none).
    pub qos: Option<Vec<qos::Qos>>,
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
    /// The dump's line of the record (dump trees only).
    pub line: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub account: String,
    pub default_account: Option<String>,
    pub fairshare: u64,
    pub other: BTreeMap<String, String>,
    pub source: Option<Location>,
    /// The dump's line of the record (dump trees only).
    pub line: Option<usize>,
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
    let mut tree =
        Tree { cluster: cluster.to_string(), qos: Some(wanted_qos(model, cluster)), ..Tree::default() };
    let mut loss = 0.0;
    let context = Context { bound: &bound, preemptible, default_qos: default_contract.as_deref() };
    let mut associations = HashSet::new();
    add(&mut tree, &mut associations, &mut loss, &model.projects, "root", None, &context);
    let defaults = default_accounts(&tree);
    for user in &mut tree.users {
        user.default_account = defaults.get(&user.name).cloned();
    }
    (tree, loss)
}

/// The QOS the budgets want on Slurm cluster `cluster`: the contracts' and
/// [`PREEMPTIBLE_QOS`] ([`qos::wanted`]), then the floors' and reserves'
/// ([`floors::Floors::caps`]; one Slurm could not take is the build's violation, and left out).
pub fn wanted_qos(model: &Model, cluster: &str) -> Vec<qos::Qos> {
    let mut qos = qos::wanted(model);
    let (floors, _) = floors::floors(model, cluster, "");
    qos.extend(floors.caps());
    qos
}

/// Why `qos` is not a list [`qos::wanted`] could give for the associations of `tree`, if it is
/// not (a saved plan's wanted QOS are read back, and must not reach a QOS allot does not
/// manage, or set what allot never sets): [`PREEMPTIBLE_QOS`] as `wanted` makes it, QOS
/// named by the tree's accounts, of priority 0, cancelled or requeued, that may preempt
/// [`PREEMPTIBLE_QOS`] alone, and floors and reserves as [`qos::partition_cap`] makes them,
/// each named `<partition>-floor-<account>` for an account of the tree or
/// `<partition>-reserve-<QOS>` for a QOS the tree names.
pub fn unwanted_qos(qos: &[Qos], tree: &Tree) -> Option<String> {
    let named: std::collections::HashSet<&str> =
        tree.accounts.iter().flat_map(|a| a.qos.iter().map(String::as_str)).collect();
    let preemptible = Qos { name: PREEMPTIBLE_QOS.into(), preempt_mode: "requeue".into(), ..Qos::default() };
    if !qos.iter().any(|q| q.name == PREEMPTIBLE_QOS) {
        return Some(format!("it lacks QOS {PREEMPTIBLE_QOS}"));
    }
    let over = |name: &str, kind: &str, of: &str| {
        name.strip_suffix(of)
            .and_then(|rest| rest.strip_suffix(kind))
            .is_some_and(|partition| allot_compiler::names::bad_slurm_partition(partition).is_none())
    };
    let cap_of_tree = |name: &str| {
        tree.accounts.iter().any(|a| over(name, "-floor-", &a.name))
            || named.iter().any(|q| over(name, "-reserve-", q))
    };
    qos.iter().find_map(|q| {
        let fine = if q.name == PREEMPTIBLE_QOS {
            q.fields() == preemptible.fields()
        } else if let Some(gpus) = q.grp_gpus {
            let floor = Qos {
                name: q.name.clone(),
                preempt_mode: "cluster".into(),
                grp_gpus: Some(gpus),
                ..Qos::default()
            };
            cap_of_tree(&q.name) && q.fields() == floor.fields()
        } else {
            named.contains(q.name.as_str())
                && q.priority == 0
                && matches!(q.preempt_mode.as_str(), "requeue" | "cancel")
                && q.preempt == [PREEMPTIBLE_QOS]
        };
        (!fine).then(|| format!("QOS {} is not one the budgets could want", q.name))
    })
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
/// `associations` holds the (user, account) pairs already in `tree.users`.
fn add<'m>(
    tree: &mut Tree,
    associations: &mut HashSet<(&'m str, &'m str)>,
    loss: &mut f64,
    projects: &'m [Project],
    parent: &str,
    parent_cap: Option<u64>,
    context: &Context,
) {
    let Context { bound, preemptible, default_qos } = *context;
    let present: Vec<(&Project, &Allocation)> = projects
        .iter()
        .filter_map(|p| bound.iter().find_map(|c| p.clusters.get(*c)).map(|a| (p, a)))
        .collect();
    // The shares as written; while a grant is in force among the siblings, their fractions
    // of the parent then (to a millionth of a percent), which carry the grant.
    let granted = present.iter().any(|(_, a)| a.granted_share > 0.0);
    let shares: Vec<ShareSpec> = present
        .iter()
        .map(|(_, a)| match granted {
            false => a.share,
            true => ShareSpec::Percent((a.normalized_share * 1e8).round() / 1e6),
        })
        .collect();
    let (fairshares, error) = scaled_fairshares(&shares);
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
            line: None,
        });
        for user in &project.users {
            if associations.insert((user.name.as_str(), project.name.as_str())) {
                tree.users.push(User {
                    name: user.name.clone(),
                    account: project.name.clone(),
                    // Marks the project the user chose as default; `desired` settles it.
                    default_account: user.default.then(|| project.name.clone()),
                    fairshare: 1,
                    other: BTreeMap::new(),
                    source: Some(project.source.clone()),
                    line: None,
                });
            }
        }
        let cap = allocation.and_then(|a| a.max_gpus);
        add(tree, associations, loss, &project.children, &project.name, cap, context);
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
/// character) is replaced by `_` so that the record stays one line: the Slurm target
/// refuses such a tree ([`flat_file_problem`]) before anything is written.
pub(crate) fn quoted(value: &str) -> String {
    let clean: String =
        value.chars().map(|c| if allot_compiler::escape::is_hidden(c) { '_' } else { c }).collect();
    match (clean.contains('\''), clean.contains('"')) {
        (false, _) => format!("'{clean}'"),
        (true, false) => format!("\"{clean}\""),
        (true, true) => format!("'{}'", clean.replace('\'', "_")),
    }
}

/// Why `value` cannot be written as a flat-file value, if it cannot: the flat file has no
/// escapes, so a quote, `#`, `\\` or a line break would change what `sacctmgr` reads.
pub fn flat_file_problem(value: &str) -> Option<&'static str> {
    if let Some(why) = crate::text::unwritable(value) {
        Some(why)
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
    // Each parent's accounts and users, in the tree's order.
    let mut children: HashMap<&str, (Vec<&Account>, Vec<&User>)> = HashMap::new();
    for a in &tree.accounts {
        children.entry(a.parent.as_str()).or_default().0.push(a);
    }
    for u in &tree.users {
        children.entry(u.account.as_str()).or_default().1.push(u);
    }
    for parent in parents {
        let Some((accounts, users)) = children.get(parent) else {
            continue;
        };
        out.push_str(&format!("Parent - {}\n", quoted(parent)));
        for a in accounts {
            out.push_str(&account_line(a));
            out.push('\n');
        }
        for u in users {
            out.push_str(&user_line(u, true));
            out.push('\n');
        }
    }
    out
}

/// An account's line of a flat file, with every setting allot manages.
pub(crate) fn account_line(a: &Account) -> String {
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
    line
}

/// A user association's line of a flat file; its default account only when `default` (a
/// load sets the default account of a user it adds, and moves an existing user's).
pub(crate) fn user_line(u: &User, default: bool) -> String {
    let mut line = format!("User - {}", quoted(&u.name));
    if let Some(account) = u.default_account.as_ref().filter(|_| default) {
        line.push_str(&format!(":DefaultAccount={}", quoted(account)));
    }
    line.push_str(&format!(":Fairshare={}", u.fairshare));
    line
}

/// Largest dump allot reads, in bytes: a large site's dump is a few megabytes.
pub const MAX_DUMP_BYTES: usize = 64 << 20;
/// Deepest account a dump may hold, in levels below `root`. Slurm trees are a handful of
/// levels deep, and `sshare` indents each row by its depth, so a deeper dump is refused.
pub const MAX_DUMP_DEPTH: usize = 64;

/// Why a dump could not be read, with the line of the record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ParseError {
    pub line: usize,
    pub problem: DumpProblem,
}

/// What is wrong with a record of a dump. Names in the messages are shown as read only
/// once they passed [`slurm_name_problem`]; before that, escaped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DumpProblem {
    #[error("the dump is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("a control or invisible character (U+{0:04X})")]
    Unprintable(u32),
    #[error("a quote is not closed")]
    UnclosedQuote,
    #[error("empty record")]
    EmptyRecord,
    #[error("{0:?} is not `Kind - 'name'`")]
    NotARecord(String),
    #[error("option {0:?} has no `=`")]
    OptionWithoutValue(String),
    #[error("{key}={value:?} is not a number")]
    NotANumber { key: String, value: String },
    #[error("{what} {name:?} cannot be a Slurm name: {why}")]
    BadName { what: &'static str, name: String, why: &'static str },
    #[error("an account before the Cluster line")]
    AccountBeforeCluster,
    #[error("a user before the Cluster line")]
    UserBeforeCluster,
    #[error("a second Cluster line (the first is line {first}): a dump is of one cluster")]
    SecondCluster { first: usize },
    #[error("unknown record kind {0:?}")]
    UnknownKind(String),
    #[error("an account named `root`: Slurm's root account is implicit and no record defines it")]
    RootAccount,
    #[error("account `{name}` is defined twice (first on line {first})")]
    DuplicateAccount { name: String, first: usize },
    #[error("user `{user}` is associated with account `{account}` twice (first on line {first})")]
    DuplicateUser { user: String, account: String, first: usize },
    #[error("`Parent - '{0}'` names an account the dump does not define")]
    UnknownParent(String),
    #[error("account `{0}` is not under root: its parents form a cycle")]
    Cycle(String),
    #[error("account `{name}` is {depth} levels below root, deeper than the {limit} allot reads")]
    TooDeep { name: String, depth: usize, limit: usize },
    #[error("the last record ends with `\\`: the dump is cut off")]
    CutOff,
    #[error("no `Cluster - 'name'` line: not a sacctmgr dump")]
    NoCluster,
}

/// Characters no dump holds and no terminal or review should be shown: controls (but tab),
/// and invisible or direction-changing format characters.
fn unprintable(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Reads a `sacctmgr dump` (or a flat file): names and values lower-cased as Slurm stores
/// them, `Fairshare=parent` as [`PARENT_FAIRSHARE`], QOS lists sorted, accounts parents
/// first, each record's line kept. A dump Slurm could not have written is refused with the
/// line of the record: names Slurm cannot carry, an account named `root`, accounts or user
/// associations defined twice, parents that are not accounts, cycles, a tree deeper than
/// [`MAX_DUMP_DEPTH`], a last record cut off after a `\`. Linear in the dump's size.
pub fn parse(text: &str) -> Result<Tree, ParseError> {
    if text.len() > MAX_DUMP_BYTES {
        return Err(ParseError { line: 1, problem: DumpProblem::TooLarge { limit: MAX_DUMP_BYTES } });
    }
    let mut reader = Reader::default();
    let mut logical = String::new();
    let mut first_line = 0;
    let mut continued = false;
    for (index, raw) in text.lines().enumerate() {
        if let Some(c) = raw.chars().find(|&c| unprintable(c)) {
            return Err(ParseError { line: index + 1, problem: DumpProblem::Unprintable(c.into()) });
        }
        let line = strip_comment(raw);
        if !continued {
            first_line = index + 1;
        }
        if let Some(rest) = line.strip_suffix('\\') {
            logical.push_str(rest);
            continued = true;
            continue;
        }
        continued = false;
        logical.push_str(&line);
        let record = std::mem::take(&mut logical);
        reader
            .record(record.trim(), first_line)
            .map_err(|problem| ParseError { line: first_line, problem })?;
    }
    if continued {
        return Err(ParseError { line: first_line, problem: DumpProblem::CutOff });
    }
    reader.finish()
}

/// What the records read so far say.
#[derive(Default)]
struct Reader {
    tree: Tree,
    cluster_qos: Vec<String>,
    /// The current `Parent` record: its account and line (none: `root`).
    parent: Option<(String, usize)>,
    /// Every `Parent` record.
    parents: Vec<(String, usize)>,
    /// The line of each account, and of each user association (user, account).
    account_lines: HashMap<String, usize>,
    user_lines: HashMap<(String, String), usize>,
}

impl Reader {
    fn record(&mut self, record: &str, line: usize) -> Result<(), DumpProblem> {
        if record.is_empty() {
            return Ok(());
        }
        let fields = split_fields(record)?;
        let (head, options) = fields.split_first().ok_or(DumpProblem::EmptyRecord)?;
        let (kind, name) = head.split_once(" - ").ok_or_else(|| DumpProblem::NotARecord(head.clone()))?;
        let kind = kind.trim().to_lowercase();
        let name = unquote(name.trim()).to_lowercase();
        let mut values = BTreeMap::new();
        for option in options {
            let (key, value) =
                option.split_once('=').ok_or_else(|| DumpProblem::OptionWithoutValue(option.clone()))?;
            values.insert(key.trim().to_lowercase(), unquote(value.trim()).to_lowercase());
        }
        let what = match kind.as_str() {
            "cluster" | "machine" => "cluster",
            "parent" => "parent account",
            "account" | "project" => "account",
            "user" => "user",
            _ => return Err(DumpProblem::UnknownKind(kind)),
        };
        named(what, &name)?;
        for key in ["defaultaccount", "defaultqos"] {
            if let Some(value) = values.get(key) {
                named(if key == "defaultqos" { "QOS" } else { "account" }, value)?;
            }
        }
        let qos = match values.get("qos") {
            Some(list) => qos_list(list)?,
            None => Vec::new(),
        };
        match what {
            "cluster" => {
                if let Some(first) = self.tree.cluster_line {
                    return Err(DumpProblem::SecondCluster { first });
                }
                self.tree.cluster = name;
                self.tree.cluster_line = Some(line);
                self.cluster_qos = qos;
            }
            "parent account" => {
                self.parents.push((name.clone(), line));
                self.parent = (name != "root").then_some((name, line));
            }
            "account" => self.account(name, values, qos, line)?,
            _ => self.user(name, values, line)?,
        }
        Ok(())
    }

    fn parent_name(&self) -> String {
        self.parent.as_ref().map_or_else(|| "root".to_string(), |(name, _)| name.clone())
    }

    fn account(
        &mut self,
        name: String,
        values: BTreeMap<String, String>,
        qos: Vec<String>,
        line: usize,
    ) -> Result<(), DumpProblem> {
        if self.tree.cluster_line.is_none() {
            return Err(DumpProblem::AccountBeforeCluster);
        }
        if name == "root" {
            return Err(DumpProblem::RootAccount);
        }
        if let Some(&first) = self.account_lines.get(&name) {
            return Err(DumpProblem::DuplicateAccount { name, first });
        }
        self.account_lines.insert(name.clone(), line);
        let grp_gpus = values.get("grptres").and_then(|t| gpu_count(t));
        let fairshare = number(&values, "fairshare")?.unwrap_or(1);
        let other = values
            .iter()
            .filter(|(k, _)| {
                !matches!(k.as_str(), "fairshare" | "qos" | "defaultqos" | "description" | "organization")
            })
            .filter(|(k, v)| !(k.as_str() == "grptres" && gpu_count(v).is_some() && !v.contains(',')))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.tree.accounts.push(Account {
            name,
            parent: self.parent_name(),
            fairshare,
            grp_gpus,
            qos,
            default_qos: values.get("defaultqos").cloned(),
            description: values.get("description").cloned().unwrap_or_default(),
            other,
            source: None,
            path: String::new(),
            line: Some(line),
        });
        Ok(())
    }

    fn user(
        &mut self,
        name: String,
        values: BTreeMap<String, String>,
        line: usize,
    ) -> Result<(), DumpProblem> {
        if self.tree.cluster_line.is_none() {
            return Err(DumpProblem::UserBeforeCluster);
        }
        let account = self.parent_name();
        let key = (name, account);
        if let Some(&first) = self.user_lines.get(&key) {
            let (user, account) = key;
            return Err(DumpProblem::DuplicateUser { user, account, first });
        }
        self.user_lines.insert(key.clone(), line);
        let (name, account) = key;
        let other = values
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "fairshare" | "defaultaccount" | "adminlevel"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.tree.users.push(User {
            name,
            account,
            default_account: values.get("defaultaccount").cloned(),
            fairshare: number(&values, "fairshare")?.unwrap_or(1),
            other,
            source: None,
            line: Some(line),
        });
        Ok(())
    }

    /// The tree, once every parent is known: accounts ordered parents first (breadth first
    /// from root, in the dump's order), depth bounded, and QOS inherited.
    fn finish(mut self) -> Result<Tree, ParseError> {
        if self.tree.cluster_line.is_none() {
            return Err(ParseError { line: 1, problem: DumpProblem::NoCluster });
        }
        if let Some((name, line)) =
            self.parents.iter().find(|(name, _)| name != "root" && !self.account_lines.contains_key(name))
        {
            return Err(ParseError { line: *line, problem: DumpProblem::UnknownParent(name.clone()) });
        }
        self.tree.accounts = parents_first(std::mem::take(&mut self.tree.accounts))?;
        inherit_qos(&mut self.tree, &self.cluster_qos);
        Ok(self.tree)
    }
}

/// A name refused when Slurm could not carry it, escaped in the message.
fn named(what: &'static str, name: &str) -> Result<(), DumpProblem> {
    match slurm_name_problem(name) {
        Some(why) => Err(DumpProblem::BadName { what, name: name.to_string(), why }),
        None => Ok(()),
    }
}

fn number(values: &BTreeMap<String, String>, key: &str) -> Result<Option<u64>, DumpProblem> {
    match values.get(key).map(String::as_str) {
        None => Ok(None),
        Some("parent") => Ok(Some(PARENT_FAIRSHARE)),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| DumpProblem::NotANumber { key: key.to_string(), value: v.to_string() }),
    }
}

/// Accounts in breadth-first order from root (each parent's children in the dump's order),
/// in one pass; an account deeper than [`MAX_DUMP_DEPTH`] or out of root's reach (its
/// parents form a cycle: every parent is known by now) is an error at its line.
fn parents_first(accounts: Vec<Account>) -> Result<Vec<Account>, ParseError> {
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, account) in accounts.iter().enumerate() {
        children.entry(account.parent.as_str()).or_default().push(index);
    }
    let line_of = |index: usize| accounts.get(index).and_then(|a| a.line).unwrap_or(0);
    let mut order: Vec<usize> = Vec::with_capacity(accounts.len());
    let mut queue: VecDeque<(usize, usize)> =
        children.get("root").into_iter().flatten().map(|&i| (i, 1)).collect();
    while let Some((index, depth)) = queue.pop_front() {
        let Some(account) = accounts.get(index) else { continue };
        if depth > MAX_DUMP_DEPTH {
            let problem = DumpProblem::TooDeep { name: account.name.clone(), depth, limit: MAX_DUMP_DEPTH };
            return Err(ParseError { line: line_of(index), problem });
        }
        order.push(index);
        queue.extend(children.get(account.name.as_str()).into_iter().flatten().map(|&c| (c, depth + 1)));
    }
    if order.len() < accounts.len() {
        let mut reached = vec![false; accounts.len()];
        for &index in &order {
            reached[index] = true;
        }
        if let Some(index) = reached.iter().position(|r| !r) {
            let name = accounts.get(index).map_or_else(String::new, |a| a.name.clone());
            return Err(ParseError { line: line_of(index), problem: DumpProblem::Cycle(name) });
        }
    }
    let mut slots: Vec<Option<Account>> = accounts.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|index| slots.get_mut(index).and_then(Option::take)).collect())
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

/// `'normal,gpu-high'` -> `["gpu-high", "normal"]`; each a name Slurm can carry.
fn qos_list(value: &str) -> Result<Vec<String>, DumpProblem> {
    let mut list: Vec<String> =
        value.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    for q in &list {
        named("QOS", q)?;
    }
    list.sort();
    list.dedup();
    Ok(list)
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

    /// The line and message of a dump's error.
    fn refusal(text: &str) -> (usize, String) {
        let error = parse(text).unwrap_err();
        (error.line, error.problem.to_string())
    }

    #[test]
    fn dumps_slurm_could_not_have_written_are_refused_at_their_line() {
        let c = "Cluster - 'c'\nParent - 'root'\n";
        let cases = [
            (format!("{c}Account - 'a'\nParent - 'a'\nAccount - 'root'\n"), 5, "named `root`"),
            (
                format!("{c}Account - 'a'\nAccount - 'b'\nAccount - 'a'\n"),
                5,
                "defined twice (first on line 3)",
            ),
            (
                format!("{c}Account - 'a'\nParent - 'a'\nUser - 'u'\nUser - 'u'\n"),
                6,
                "twice (first on line 5)",
            ),
            (format!("{c}Account - 'a'\nParent - 'ghost'\nUser - 'u'\n"), 4, "does not define"),
            (
                format!("{c}Account - 'a'\nParent - 'x'\nAccount - 'y'\nParent - 'y'\nAccount - 'x'\n"),
                5,
                "cycle",
            ),
            (format!("{c}Account - 'a':Fairshare=1:\\\n"), 3, "cut off"),
            (format!("{c}Account - 'a'\nCluster - 'd'\n"), 4, "second Cluster line (the first is line 1)"),
            (format!("{c}Account - 'a,root'\n"), 3, "cannot be a Slurm name"),
            (format!("{c}Account - 'a':QOS='normal,q\"x'\n"), 3, "QOS"),
            (format!("{c}Account - 'a':Description='\u{1b}[2J'\n"), 3, "U+001B"),
            (format!("{c}User - 'evil\u{202e}txt'\n"), 3, "U+202E"),
        ];
        for (text, line, message) in cases {
            let (at, said) = refusal(&text);
            assert_eq!(at, line, "{text:?}: {said}");
            assert!(said.contains(message), "{text:?}: {said}");
        }
    }

    #[test]
    fn a_dump_deeper_than_the_limit_is_refused_at_the_first_account_too_deep() {
        let mut text = String::from("Cluster - 'c'\nParent - 'root'\nAccount - 'a0'\n");
        for i in 1..4000 {
            text.push_str(&format!("Parent - 'a{}'\nAccount - 'a{i}'\n", i - 1));
        }
        let (line, said) = refusal(&text);
        assert_eq!(line, 3 + 2 * MAX_DUMP_DEPTH, "{said}");
        assert!(said.contains("65 levels below root"), "{said}");
        let shallow: String =
            text.lines().take(2 + 2 * MAX_DUMP_DEPTH - 1).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse(&shallow).unwrap().accounts.len(), MAX_DUMP_DEPTH);
    }

    #[test]
    fn a_wide_dump_reads_in_one_pass() {
        // Quadratic ordering (a search of the placed parents per account) would take minutes.
        let mut text = String::from("Cluster - 'c'\nParent - 'root'\n");
        for i in 0..20_000 {
            text.push_str(&format!("Account - 'a{i}':Fairshare=1\n"));
        }
        for i in 0..20_000 {
            text.push_str(&format!("Parent - 'a{i}'\nAccount - 'b{i}'\nUser - 'u{i}'\n"));
        }
        let tree = parse(&text).unwrap();
        assert_eq!((tree.accounts.len(), tree.users.len()), (40_000, 20_000));
        assert_eq!(tree.accounts.last().map(|a| (a.name.as_str(), a.line)), Some(("b19999", Some(80_001))));
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
            ..Tree::default()
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
        // The quote stays inside its value (in double quotes), and the dump parser, which
        // takes no name Slurm could not have written, refuses the names (the cluster's first).
        assert!(text.contains("Account - \"it's\""), "{text}");
        assert_eq!(parse(&text).map_err(|e| e.line), Err(2));
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
