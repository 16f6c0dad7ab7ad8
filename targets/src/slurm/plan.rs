//! `allot plan slurm`: what it takes to bring a live Slurm association tree (a `sacctmgr
//! dump`) to the one the budgets want: changes to what allot manages (accounts, their
//! parent, Fairshare, GPU limit and QOS; user associations, their default account and
//! Fairshare), drift in what it does not manage, and the ordered `sacctmgr` script.

use std::collections::{BTreeMap, HashMap, HashSet};

use allot_compiler::ir::Location;
use serde_json::{Value, json};

use super::tree::{Account, MAX_DUMP_DEPTH, PARENT_FAIRSHARE, Tree, User, quoted, slurm_name_problem};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    Add,
    Change,
    Destroy,
}

impl Action {
    fn symbol(self) -> &'static str {
        match self {
            Action::Add => "+",
            Action::Change => "~",
            Action::Destroy => "-",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Action::Add => "add",
            Action::Change => "change",
            Action::Destroy => "destroy",
        }
    }
}

/// One setting before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub before: String,
    pub after: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub action: Action,
    /// `account` or `user`.
    pub kind: &'static str,
    pub name: String,
    /// For users: the account of the association.
    pub account: Option<String>,
    pub fields: Vec<Field>,
    pub source: Option<Location>,
    /// For accounts: the fraction of the cluster before and after.
    pub effective_share: Option<(f64, f64)>,
}

/// A setting allot does not manage, found on a live association; left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    pub association: String,
    pub setting: String,
    pub value: String,
}

/// An association a plan does not touch, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub association: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub cluster: String,
    pub changes: Vec<Change>,
    pub drift: Vec<Drift>,
    /// Live associations of Slurm's root user, and the accounts holding them: not touched.
    pub left_alone: Vec<Note>,
    /// Changes the budgets ask for that allot refuses to make (Slurm's root, names no
    /// command can carry): the plan is not to be applied while there are any.
    pub refused: Vec<Note>,
}

impl Plan {
    pub fn count(&self, action: Action) -> usize {
        self.changes.iter().filter(|c| c.action == action).count()
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn summary(&self) -> String {
        format!(
            "Plan: {} to add, {} to change, {} to destroy.",
            self.count(Action::Add),
            self.count(Action::Change),
            self.count(Action::Destroy)
        )
    }
}

fn fairshare(value: u64) -> String {
    if value == PARENT_FAIRSHARE { "parent".into() } else { value.to_string() }
}

fn optional(value: &Option<impl ToString>) -> String {
    value.as_ref().map_or("-".into(), |v| v.to_string())
}

/// A managed setting: its name and how it reads.
type Setting<T> = (&'static str, fn(&T) -> String);

fn account_fields(before: Option<&Account>, after: Option<&Account>) -> Vec<Field> {
    let get = |a: Option<&Account>, f: fn(&Account) -> String| a.map_or(String::new(), f);
    let fields: [Setting<Account>; 5] = [
        ("parent", |a| a.parent.clone()),
        ("fairshare", |a| fairshare(a.fairshare)),
        ("grptres", |a| a.grp_gpus.map_or("-".into(), |g| format!("gres/gpu={g}"))),
        ("qos", |a| a.qos.join(",")),
        ("defaultqos", |a| optional(&a.default_qos)),
    ];
    fields
        .iter()
        .map(|(name, f)| Field { name, before: get(before, *f), after: get(after, *f) })
        .filter(|f| {
            f.before != f.after
                && !(f.before.is_empty() && f.after == "-")
                && !(f.after.is_empty() && f.before == "-")
        })
        .collect()
}

fn user_fields(before: Option<&User>, after: Option<&User>) -> Vec<Field> {
    let get = |u: Option<&User>, f: fn(&User) -> String| u.map_or(String::new(), f);
    let fields: [Setting<User>; 2] =
        [("defaultaccount", |u| optional(&u.default_account)), ("fairshare", |u| fairshare(u.fairshare))];
    fields
        .iter()
        .map(|(name, f)| Field { name, before: get(before, *f), after: get(after, *f) })
        .filter(|f| f.before != f.after)
        .collect()
}

/// Slurm's `root` account and `root` user: never added, changed, moved or deleted by a
/// plan, whatever the budgets or the dump say.
pub const ROOT: &str = "root";

/// Whether a user association is one of Slurm's `root` user (in any account).
fn is_root_user(u: &User) -> bool {
    u.name == ROOT
}

/// Why a name cannot reach a `sacctmgr` command, if it cannot: the dump's parser and the
/// budgets' checks refuse such names already; the plan refuses them again.
fn unusable(name: &str) -> Option<&'static str> {
    if name == ROOT { Some("Slurm's root is never touched") } else { slurm_name_problem(name) }
}

/// The names a change puts into `sacctmgr` commands (what it had before goes into none).
fn names_of(change: &Change) -> Vec<&str> {
    let mut names = vec![change.name.as_str()];
    names.extend(change.account.as_deref());
    if change.action != Action::Destroy {
        for f in &change.fields {
            match f.name {
                "parent" if f.after != ROOT => names.push(&f.after),
                "defaultaccount" | "defaultqos" => names.push(&f.after),
                "qos" => names.extend(f.after.split(',')),
                _ => {}
            }
        }
    }
    names.retain(|n| !n.is_empty() && *n != "-");
    names
}

pub fn plan(desired: &Tree, live: &Tree) -> Plan {
    let mut refused = Vec::new();
    let mut left_alone = Vec::new();
    // Slurm's root user is a sibling of the top accounts on both sides.
    let mut with_root = desired.clone();
    with_root.users.retain(|u| !is_root_user(u));
    with_root.users.extend(live.users.iter().filter(|u| is_root_user(u)).cloned());
    let (before, after) = (live.effective_shares(), with_root.effective_shares());
    let share = |name: &str| {
        Some((before.get(name).copied().unwrap_or(0.0), after.get(name).copied().unwrap_or(0.0)))
    };
    let live_accounts: HashMap<&str, &Account> = live.accounts.iter().map(|a| (a.name.as_str(), a)).collect();
    let desired_accounts: HashSet<&str> = desired.accounts.iter().map(|a| a.name.as_str()).collect();
    let live_users: HashMap<(&str, &str), &User> =
        live.users.iter().map(|u| ((u.name.as_str(), u.account.as_str()), u)).collect();
    let desired_users: HashSet<(&str, &str)> =
        desired.users.iter().map(|u| (u.name.as_str(), u.account.as_str())).collect();
    // The accounts that hold an association of the root user, and their ancestors: deleting
    // one would delete that association.
    let mut holding_root: HashSet<&str> = HashSet::new();
    for u in live.users.iter().filter(|u| is_root_user(u) && u.account != ROOT) {
        let mut account = Some(u.account.as_str());
        while let Some(name) = account.filter(|n| *n != ROOT && holding_root.insert(n)) {
            account = live_accounts.get(name).map(|a| a.parent.as_str());
        }
        left_alone.push(Note {
            association: format!("user {ROOT} in {}", u.account),
            reason: "Slurm's root user is never touched".into(),
        });
    }
    let mut changes = Vec::new();
    let mut drift = Vec::new();
    for account in &desired.accounts {
        if account.name == ROOT {
            refused.push(Note {
                association: format!("account {ROOT}"),
                reason: "Slurm's root account is implicit; no project can be it".into(),
            });
            continue;
        }
        let current = live_accounts.get(account.name.as_str()).copied();
        let fields = account_fields(current, Some(account));
        let action = if current.is_none() { Action::Add } else { Action::Change };
        if !fields.is_empty() {
            changes.push(Change {
                action,
                kind: "account",
                name: account.name.clone(),
                account: None,
                fields,
                source: account.source.clone(),
                effective_share: share(&account.name),
            });
        }
    }
    for account in live.accounts.iter().rev().filter(|a| !desired_accounts.contains(a.name.as_str())) {
        if holding_root.contains(account.name.as_str()) {
            left_alone.push(Note {
                association: format!("account {}", account.name),
                reason: "it holds an association of Slurm's root user; deleting it would delete that".into(),
            });
            continue;
        }
        changes.push(Change {
            action: Action::Destroy,
            kind: "account",
            name: account.name.clone(),
            account: None,
            fields: account_fields(Some(account), None),
            source: None,
            effective_share: share(&account.name),
        });
    }
    for user in &desired.users {
        if is_root_user(user) {
            refused.push(Note {
                association: format!("user {ROOT} in {}", user.account),
                reason: "Slurm's root user is never touched; take it out of the budgets".into(),
            });
            continue;
        }
        let current = live_users.get(&(user.name.as_str(), user.account.as_str())).copied();
        let fields = user_fields(current, Some(user));
        if !fields.is_empty() {
            changes.push(Change {
                action: if current.is_none() { Action::Add } else { Action::Change },
                kind: "user",
                name: user.name.clone(),
                account: Some(user.account.clone()),
                fields,
                source: user.source.clone(),
                effective_share: None,
            });
        }
    }
    for user in live
        .users
        .iter()
        .filter(|u| !is_root_user(u) && !desired_users.contains(&(u.name.as_str(), u.account.as_str())))
    {
        if user.account == ROOT {
            left_alone.push(Note {
                association: format!("user {} in {ROOT}", user.name),
                reason: "associations of Slurm's root account are never touched".into(),
            });
            continue;
        }
        changes.push(Change {
            action: Action::Destroy,
            kind: "user",
            name: user.name.clone(),
            account: Some(user.account.clone()),
            fields: user_fields(Some(user), None),
            source: None,
            effective_share: None,
        });
    }
    for account in &live.accounts {
        for (setting, value) in &account.other {
            drift.push(Drift {
                association: format!("account {}", account.name),
                setting: setting.clone(),
                value: value.clone(),
            });
        }
    }
    for user in live.users.iter().filter(|u| !is_root_user(u)) {
        for (setting, value) in &user.other {
            drift.push(Drift {
                association: format!("user {} ({})", user.name, user.account),
                setting: setting.clone(),
                value: value.clone(),
            });
        }
    }
    // Every name a command would carry, checked once more.
    changes.retain(|change| {
        let bad = names_of(change).into_iter().find_map(|n| unusable(n).map(|why| (n.to_string(), why)));
        if let Some((name, why)) = &bad {
            refused.push(Note { association: subject(change), reason: format!("{name:?}: {why}") });
        }
        bad.is_none()
    });
    Plan { cluster: desired.cluster.clone(), changes, drift, left_alone, refused }
}

/// A word the shell reads as itself (shared by every emitter that writes a script).
pub use crate::text::shell_word;

/// One word of a `sacctmgr` command: a keyword, or a value, after its `key=` when it has
/// one. Values come from the budgets and the dump: a script quotes them (see
/// [`shell_word`]); an argument list passes them as they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Word {
    Keyword(&'static str),
    Value(Option<&'static str>, String),
}

impl Word {
    /// The word as one argument of the command.
    pub fn argument(&self) -> String {
        match self {
            Word::Keyword(k) => (*k).to_string(),
            Word::Value(Some(key), value) => format!("{key}={value}"),
            Word::Value(None, value) => value.clone(),
        }
    }

    /// The word in a shell script.
    fn shell(&self) -> String {
        match self {
            Word::Keyword(k) => (*k).to_string(),
            Word::Value(Some(key), value) => format!("{key}={}", shell_word(value)),
            Word::Value(None, value) => shell_word(value),
        }
    }
}

/// One `sacctmgr -i` command of a plan (the words after `sacctmgr -i`), and the step of the
/// plan it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub step: &'static str,
    pub words: Vec<Word>,
}

impl Command {
    /// The command's arguments after `sacctmgr -i`.
    pub fn arguments(&self) -> Vec<String> {
        self.words.iter().map(Word::argument).collect()
    }

    /// The command as one line of a shell script.
    pub fn shell(&self) -> String {
        let words: Vec<String> = self.words.iter().map(Word::shell).collect();
        format!("sacctmgr -i {}", words.join(" "))
    }
}

fn keyword(k: &'static str) -> Word {
    Word::Keyword(k)
}

fn value(key: &'static str, value: impl Into<String>) -> Word {
    Word::Value(Some(key), value.into())
}

fn name(value: impl Into<String>) -> Word {
    Word::Value(None, value.into())
}

/// The `sacctmgr -i` commands of a plan, in an order Slurm accepts: accounts added parents
/// first, then account changes, users added, default accounts moved, and only then
/// deletions, user associations before accounts, children before parents. Within a step,
/// the order depends on the trees' associations, not on the order the trees list them in
/// (a saved plan's trees are read back in another order). A change the plan would have
/// refused (Slurm's root, a name no command can carry) gives no command.
fn commands(plan: &Plan, desired: &Tree, live: &Tree) -> Vec<Command> {
    commands_but(plan, desired, live, |_| false)
}

/// How a plan is applied in as few `sacctmgr` calls as exactness allows: one `sacctmgr load`
/// of a flat file for the changes Slurm's load makes exactly, then the [`commands`] of the
/// others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Application {
    /// The flat file to load first, if any change goes that way.
    pub load: Option<String>,
    pub commands: Vec<Command>,
}

/// Whether `sacctmgr load` (Slurm 22.05 and later) makes a change exactly, and nothing else:
/// associations added with all their settings; an account's Fairshare, GPU limit (set, not
/// removed) and parent; a user association's Fairshare. A load adds QOS to a list but never
/// removes one, cannot clear a limit or a default QOS, and sets a user's default account
/// only with the line of one of its associations: those go by commands.
fn loadable(change: &Change) -> bool {
    match (change.kind, change.action) {
        (_, Action::Add) => true,
        ("account", Action::Change) => change
            .fields
            .iter()
            .all(|f| matches!(f.name, "fairshare" | "parent") || (f.name == "grptres" && f.after != "-")),
        ("user", Action::Change) => change.fields.iter().all(|f| f.name == "fairshare"),
        _ => false,
    }
}

/// The plan's [`Application`]: the flat file of its loadable changes (accounts parents
/// first, then user associations; an account that exists is written without its
/// description and organization, which a load would set), and the commands of the rest.
pub fn application(plan: &Plan, desired: &Tree, live: &Tree) -> Application {
    let commands = commands_but(plan, desired, live, loadable);
    let desired_accounts: HashMap<&str, &Account> =
        desired.accounts.iter().map(|a| (a.name.as_str(), a)).collect();
    let desired_users: HashMap<(&str, &str), &User> =
        desired.users.iter().map(|u| ((u.name.as_str(), u.account.as_str()), u)).collect();
    let known_users: HashSet<&str> = live.users.iter().map(|u| u.name.as_str()).collect();
    let mut accounts: Vec<(&str, String)> = Vec::new();
    let mut users: Vec<(&str, String)> = Vec::new();
    for change in sorted_allowed(plan, desired, live).into_iter().filter(|ch| loadable(ch)) {
        if change.kind == "account" {
            let Some(a) = desired_accounts.get(change.name.as_str()) else { continue };
            let mut line = format!("Account - {}", quoted(&a.name));
            if change.action == Action::Add {
                line.push_str(&format!(
                    ":Description={}:Organization={}",
                    quoted(&a.description),
                    quoted("allot")
                ));
            }
            line.push_str(&format!(":Fairshare={}", a.fairshare));
            let grptres = change.fields.iter().any(|f| f.name == "grptres");
            if let Some(gpus) = a.grp_gpus.filter(|_| change.action == Action::Add || grptres) {
                line.push_str(&format!(":GrpTRES={}", quoted(&format!("gres/gpu={gpus}"))));
            }
            if change.action == Action::Add {
                if !a.qos.is_empty() {
                    line.push_str(&format!(":QOS={}", quoted(&a.qos.join(","))));
                }
                if let Some(default) = &a.default_qos {
                    line.push_str(&format!(":DefaultQOS={}", quoted(default)));
                }
            }
            accounts.push((a.parent.as_str(), line));
        } else {
            let Some(account) = change.account.as_deref() else { continue };
            let Some(u) = desired_users.get(&(change.name.as_str(), account)) else { continue };
            let mut line = format!("User - {}", quoted(&u.name));
            if let (Action::Add, Some(d), false) =
                (change.action, &u.default_account, known_users.contains(u.name.as_str()))
            {
                line.push_str(&format!(":DefaultAccount={}", quoted(d)));
            }
            line.push_str(&format!(":Fairshare={}", u.fairshare));
            users.push((u.account.as_str(), line));
        }
    }
    if accounts.is_empty() && users.is_empty() {
        return Application { load: None, commands };
    }
    users.sort();
    let mut load = format!(
        "# allot: the changes of {} that sacctmgr load makes exactly\nCluster - {}\n",
        crate::text::comment(&plan.summary()),
        quoted(&plan.cluster)
    );
    let mut parent = None;
    for (of, line) in accounts.iter().chain(&users) {
        if parent != Some(*of) {
            load.push_str(&format!("Parent - {}\n", quoted(of)));
            parent = Some(*of);
        }
        load.push_str(line);
        load.push('\n');
    }
    Application { load: Some(load), commands }
}

/// The changes a command may carry, in the order their commands go in: accounts by depth
/// (deletions deepest first), then by name and account.
fn sorted_allowed<'p>(plan: &'p Plan, desired: &Tree, live: &Tree) -> Vec<&'p Change> {
    let mut allowed: Vec<&Change> =
        plan.changes.iter().filter(|ch| names_of(ch).into_iter().all(|n| unusable(n).is_none())).collect();
    let (desired_depth, live_depth) = (depths(desired), depths(live));
    allowed.sort_by_cached_key(|ch| {
        let depth = match (ch.kind, ch.action) {
            // Children before parents.
            ("account", Action::Destroy) => {
                usize::MAX - live_depth.get(ch.name.as_str()).copied().unwrap_or(0)
            }
            ("account", _) => desired_depth.get(ch.name.as_str()).copied().unwrap_or(0),
            _ => 0,
        };
        (depth, ch.name.clone(), ch.account.clone())
    });
    allowed
}

/// The plan's commands, but none for the changes `by_load` takes (a default account moved
/// still goes by command).
fn commands_but(plan: &Plan, desired: &Tree, live: &Tree, by_load: impl Fn(&Change) -> bool) -> Vec<Command> {
    let cluster = || value("cluster", plan.cluster.clone());
    let allowed = sorted_allowed(plan, desired, live);
    let mut out: Vec<Command> = Vec::new();
    let mut step = |step: &'static str, commands: Vec<Vec<Word>>| {
        out.extend(commands.into_iter().map(|words| Command { step, words }));
    };
    let desired_accounts: HashMap<&str, &Account> =
        desired.accounts.iter().map(|a| (a.name.as_str(), a)).collect();
    let account = |name: &str| desired_accounts.get(name).copied();
    let settings = |a: &Account, fields: &[Field], new: bool| -> Vec<Word> {
        let mut set = Vec::new();
        for f in fields {
            match f.name {
                "parent" if !new => set.push(value("parent", a.parent.clone())),
                "fairshare" => set.push(value("fairshare", a.fairshare.to_string())),
                "grptres" => set.push(value(
                    "grptres",
                    format!("gres/gpu={}", a.grp_gpus.map_or("-1".into(), |g| g.to_string())),
                )),
                "qos" => set.push(value("qos", a.qos.join(","))),
                "defaultqos" => set.push(value("defaultqos", a.default_qos.as_deref().unwrap_or("-1"))),
                _ => {}
            }
        }
        set
    };
    let adds = allowed
        .iter()
        .filter(|ch| ch.kind == "account" && ch.action == Action::Add && !by_load(ch))
        .filter_map(|ch| account(&ch.name).map(|a| (a, ch)))
        .map(|(a, ch)| {
            let mut words = vec![
                keyword("add"),
                keyword("account"),
                name(a.name.clone()),
                cluster(),
                value("parent", a.parent.clone()),
                value("description", a.description.clone()),
                value("organization", "allot"),
            ];
            words.extend(settings(a, &ch.fields, true));
            words
        })
        .collect();
    step("accounts to add, parents first", adds);
    let modified = allowed
        .iter()
        .filter(|ch| ch.kind == "account" && ch.action == Action::Change && !by_load(ch))
        .filter_map(|ch| account(&ch.name).map(|a| (a, ch)))
        .map(|(a, ch)| {
            let mut words = vec![
                keyword("modify"),
                keyword("account"),
                keyword("where"),
                value("name", a.name.clone()),
                cluster(),
                keyword("set"),
            ];
            words.extend(settings(a, &ch.fields, false));
            words
        })
        .collect();
    step("accounts to change", modified);
    let known_users: HashSet<&str> = live.users.iter().map(|u| u.name.as_str()).collect();
    let desired_users: HashMap<(&str, &str), &User> =
        desired.users.iter().map(|u| ((u.name.as_str(), u.account.as_str()), u)).collect();
    let user_of = |ch: &Change| desired_users.get(&(ch.name.as_str(), ch.account.as_deref()?)).copied();
    let added_users = allowed
        .iter()
        .filter(|ch| ch.kind == "user" && ch.action == Action::Add && !by_load(ch))
        .filter_map(|ch| user_of(ch))
        .map(|u| {
            let mut words = vec![
                keyword("add"),
                keyword("user"),
                name(u.name.clone()),
                cluster(),
                value("account", u.account.clone()),
                value("fairshare", fairshare(u.fairshare)),
            ];
            if let (Some(d), false) = (&u.default_account, known_users.contains(u.name.as_str())) {
                words.push(value("defaultaccount", d.clone()));
            }
            words
        })
        .collect();
    step("user associations to add", added_users);
    let mut defaults: Vec<Vec<Word>> = Vec::new();
    let mut user_changes: Vec<Vec<Word>> = Vec::new();
    for ch in allowed.iter().filter(|ch| ch.kind == "user" && ch.action != Action::Destroy) {
        let Some(u) = user_of(ch) else { continue };
        for f in &ch.fields {
            match f.name {
                "defaultaccount" if ch.action == Action::Change || known_users.contains(u.name.as_str()) => {
                    if let Some(d) = &u.default_account {
                        let words = vec![
                            keyword("modify"),
                            keyword("user"),
                            keyword("where"),
                            value("name", u.name.clone()),
                            cluster(),
                            keyword("set"),
                            value("defaultaccount", d.clone()),
                        ];
                        if !defaults.contains(&words) {
                            defaults.push(words);
                        }
                    }
                }
                "fairshare" if ch.action == Action::Change && !by_load(ch) => user_changes.push(vec![
                    keyword("modify"),
                    keyword("user"),
                    keyword("where"),
                    value("name", u.name.clone()),
                    cluster(),
                    value("account", u.account.clone()),
                    keyword("set"),
                    value("fairshare", fairshare(u.fairshare)),
                ]),
                _ => {}
            }
        }
    }
    step("default accounts, moved before any deletion", defaults);
    step("user associations to change", user_changes);
    let deleted_users = allowed
        .iter()
        .filter(|ch| ch.kind == "user" && ch.action == Action::Destroy)
        .map(|ch| {
            vec![
                keyword("delete"),
                keyword("user"),
                keyword("where"),
                value("name", ch.name.clone()),
                cluster(),
                value("account", ch.account.clone().unwrap_or_default()),
            ]
        })
        .collect();
    step("user associations to delete", deleted_users);
    let deleted_accounts = allowed
        .iter()
        .filter(|ch| ch.kind == "account" && ch.action == Action::Destroy)
        .map(|ch| {
            vec![
                keyword("delete"),
                keyword("account"),
                keyword("where"),
                value("name", ch.name.clone()),
                cluster(),
            ]
        })
        .collect();
    step("accounts to delete, children first", deleted_accounts);
    out
}

/// Each account's depth below `root` (1 for root's children), up to [`MAX_DUMP_DEPTH`]
/// levels.
fn depths<'t>(tree: &'t Tree) -> HashMap<&'t str, usize> {
    let parents: HashMap<&'t str, &'t str> =
        tree.accounts.iter().map(|a| (a.name.as_str(), a.parent.as_str())).collect();
    let depth = |mut name: &'t str| {
        let mut depth = 0;
        while let Some(&parent) = parents.get(name)
            && depth < MAX_DUMP_DEPTH
        {
            depth += 1;
            name = parent;
        }
        depth
    };
    tree.accounts.iter().map(|a| (a.name.as_str(), depth(a.name.as_str()))).collect()
}

/// The plan's [`commands`] as a shell script, each step under a comment. Every value goes
/// through [`shell_word`], in comments too.
pub fn script(plan: &Plan, desired: &Tree, live: &Tree) -> String {
    let mut out = format!(
        "#!/bin/sh\n# allot plan for Slurm cluster {}: {}\nset -eu\n",
        shell_word(&plan.cluster),
        plan.summary()
    );
    let mut step = None;
    for command in commands(plan, desired, live) {
        if step != Some(command.step) {
            out.push_str(&format!("\n# {}\n", command.step));
            step = Some(command.step);
        }
        out.push_str(&command.shell());
        out.push('\n');
    }
    out
}

fn percent(value: f64) -> String {
    format!("{:.2}%", value * 100.0)
}

fn share_text(ch: &Change) -> Option<String> {
    let (before, after) = ch.effective_share?;
    if (before - after).abs() < 5e-5 {
        return None;
    }
    Some(format!(
        "effective share {} -> {} ({:+.2} pp)",
        percent(before),
        percent(after),
        (after - before) * 100.0
    ))
}

fn subject(ch: &Change) -> String {
    match &ch.account {
        Some(account) => format!("{} {} in {account}", ch.kind, ch.name),
        None => format!("{} {}", ch.kind, ch.name),
    }
}

fn location(ch: &Change) -> String {
    ch.source.as_ref().map_or(String::new(), |l| format!("{}:{}", l.file, l.line))
}

pub fn human(plan: &Plan) -> String {
    let mut out = format!("Slurm cluster {}\n", plan.cluster);
    if plan.changes.is_empty() {
        out.push_str("\nNo changes: the live associations match the budgets.\n");
    }
    for ch in &plan.changes {
        out.push_str(&format!("\n  {} {:<48} {}\n", ch.action.symbol(), subject(ch), location(ch)));
        for f in &ch.fields {
            match ch.action {
                Action::Add => out.push_str(&format!("      {}: {}\n", f.name, f.after)),
                Action::Destroy => out.push_str(&format!("      {}: {}\n", f.name, f.before)),
                Action::Change => out.push_str(&format!("      {}: {} -> {}\n", f.name, f.before, f.after)),
            }
        }
        if let Some(text) = share_text(ch) {
            out.push_str(&format!("      {text}\n"));
        }
    }
    if !plan.drift.is_empty() {
        out.push_str("\nDrift (settings allot does not manage, left as they are):\n");
        for d in &plan.drift {
            out.push_str(&format!("  {}: {}={}\n", d.association, d.setting, d.value));
        }
    }
    for (title, notes) in [(LEFT_ALONE, &plan.left_alone), (REFUSED, &plan.refused)] {
        if !notes.is_empty() {
            out.push_str(&format!("\n{title}:\n"));
            for n in notes {
                out.push_str(&format!("  {}: {}\n", n.association, n.reason));
            }
        }
    }
    out.push_str(&format!("\n{}\n", plan.summary()));
    out
}

const LEFT_ALONE: &str = "Left alone (Slurm's root, never touched)";
const REFUSED: &str = "Refused (the plan must not be applied)";

/// The plan for a pull request. Names, values and paths come from the budget files and the
/// live dump: each is escaped for Markdown and HTML, so that none adds a row, a link or a
/// mention.
pub fn markdown(plan: &Plan) -> String {
    let text = allot_compiler::escape::markdown;
    let mut out = format!("### Slurm cluster {}\n\n**{}**\n\n", text(&plan.cluster), plan.summary());
    if !plan.changes.is_empty() {
        out.push_str("| | association | changes | effective share | source |\n|---|---|---|---|---|\n");
        for ch in &plan.changes {
            let fields: Vec<String> = ch
                .fields
                .iter()
                .map(|f| match ch.action {
                    Action::Add => format!("{}: {}", f.name, text(&f.after)),
                    Action::Destroy => format!("{}: {}", f.name, text(&f.before)),
                    Action::Change => format!("{}: {} → {}", f.name, text(&f.before), text(&f.after)),
                })
                .collect();
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                ch.action.symbol(),
                text(&subject(ch)),
                fields.join("<br>"),
                share_text(ch).unwrap_or_default(),
                text(&location(ch))
            ));
        }
    }
    if !plan.drift.is_empty() {
        out.push_str("\n<details><summary>Drift: settings allot does not manage</summary>\n\n");
        for d in &plan.drift {
            out.push_str(&format!("- {}: {}={}\n", text(&d.association), text(&d.setting), text(&d.value)));
        }
        out.push_str("\n</details>\n");
    }
    for (title, notes) in [(LEFT_ALONE, &plan.left_alone), (REFUSED, &plan.refused)] {
        if !notes.is_empty() {
            out.push_str(&format!("\n**{title}**\n\n"));
            for n in notes {
                out.push_str(&format!("- {}: {}\n", text(&n.association), text(&n.reason)));
            }
        }
    }
    out
}

pub fn json(plan: &Plan) -> Value {
    let changes: Vec<Value> = plan
        .changes
        .iter()
        .map(|ch| {
            let fields: BTreeMap<&str, Value> =
                ch.fields.iter().map(|f| (f.name, json!({ "before": f.before, "after": f.after }))).collect();
            json!({
                "action": ch.action.word(),
                "kind": ch.kind,
                "name": ch.name,
                "account": ch.account,
                "fields": fields,
                "effective_share_before": ch.effective_share.map(|s| s.0),
                "effective_share_after": ch.effective_share.map(|s| s.1),
                "source": ch.source.as_ref().map(|l| json!({ "file": l.file, "line": l.line, "column": l.column })),
            })
        })
        .collect();
    let drift: Vec<Value> = plan
        .drift
        .iter()
        .map(|d| json!({ "association": d.association, "setting": d.setting, "value": d.value }))
        .collect();
    let notes = |notes: &[Note]| -> Vec<Value> {
        notes.iter().map(|n| json!({ "association": n.association, "reason": n.reason })).collect()
    };
    json!({
        "cluster": plan.cluster,
        "changes": changes,
        "drift": drift,
        "left_alone": notes(&plan.left_alone),
        "refused": notes(&plan.refused),
        "summary": { "add": plan.count(Action::Add), "change": plan.count(Action::Change), "destroy": plan.count(Action::Destroy) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::tree::parse;

    fn account(name: &str, parent: &str) -> Account {
        Account { name: name.into(), parent: parent.into(), fairshare: 1, ..Account::default() }
    }

    fn user(name: &str, account: &str) -> User {
        User {
            name: name.into(),
            account: account.into(),
            default_account: Some(account.into()),
            fairshare: 1,
            ..User::default()
        }
    }

    #[test]
    fn slurms_root_is_never_touched() {
        let live = parse(
            "Cluster - 'c'\nParent - 'root'\nUser - 'root':DefaultAccount='old':Fairshare=1\n\
             User - 'bob':DefaultAccount='root':Fairshare=1\nAccount - 'old':Fairshare=1\nAccount - 'gone':Fairshare=1\n\
             Parent - 'old'\nAccount - 'inner':Fairshare=1\nParent - 'inner'\nUser - 'root':DefaultAccount='old':Fairshare=1\n",
        )
        .unwrap();
        let desired = Tree { cluster: "c".into(), accounts: vec![account("a", "root")], ..Tree::default() };
        let result = plan(&desired, &live);
        assert!(result.refused.is_empty(), "{:?}", result.refused);
        let text = script(&result, &desired, &live);
        assert!(!text.contains("name=root") && !text.contains("user root"), "{text}");
        assert!(text.contains("delete account where name=gone"), "{text}");
        assert!(!text.contains("name=old") && !text.contains("name=inner"), "{text}");
        let alone: Vec<&str> = result.left_alone.iter().map(|n| n.association.as_str()).collect();
        assert_eq!(alone, ["user root in inner", "account inner", "account old", "user bob in root"]);

        let desired = Tree {
            cluster: "c".into(),
            accounts: vec![account("a", "root"), account("root", "a")],
            users: vec![user("root", "a")],
            ..Tree::default()
        };
        let result = plan(&desired, &live);
        let refused: Vec<&str> = result.refused.iter().map(|n| n.association.as_str()).collect();
        assert_eq!(refused, ["account root", "user root in a"]);
        let text = script(&result, &desired, &live);
        assert!(!text.contains("name=root") && !text.contains("account root"), "{text}");
        assert!(!text.contains("user root"), "{text}");
    }

    #[test]
    fn names_no_command_can_carry_are_refused_again() {
        let live = parse("Cluster - 'c'\n").unwrap();
        let desired = Tree {
            cluster: "c".into(),
            accounts: vec![account("a", "root")],
            users: vec![user("x y", "a"), user("b,root", "a"), user("ok;$(id)", "a")],
            ..Tree::default()
        };
        let result = plan(&desired, &live);
        assert_eq!(result.refused.len(), 3, "{:?}", result.refused);
        let text = script(&result, &desired, &live);
        assert!(!text.contains("b,root") && !text.contains("x y") && !text.contains("$(id)"), "{text}");
    }

    #[test]
    fn markdown_keeps_dump_values_inside_their_line() {
        let live = parse("Cluster - 'c'\nParent - 'root'\nAccount - 'a':MaxJobs='`x`|<b>[l](u)'\n").unwrap();
        let text = markdown(&plan(&Tree { cluster: "c".into(), ..Tree::default() }, &live));
        assert!(text.contains(r"- account a: maxjobs=\`x\`\|&lt;b&gt;\[l\](u)"), "{text}");
    }

    #[test]
    fn a_wide_plan_and_its_script_are_linear() {
        // A search of the live tree per desired association would take minutes.
        const WIDE: usize = 20_000;
        let mut desired = Tree { cluster: "c".into(), ..Tree::default() };
        let mut live = desired.clone();
        for i in 0..WIDE {
            desired.accounts.push(account(&format!("a{i}"), "root"));
            desired.users.push(user(&format!("u{i}"), &format!("a{i}")));
            live.accounts.push(Account { fairshare: 2, ..account(&format!("a{i}"), "root") });
            live.users.push(user(&format!("v{i}"), &format!("a{i}")));
        }
        let result = plan(&desired, &live);
        assert_eq!(result.summary(), format!("Plan: {WIDE} to add, {WIDE} to change, {WIDE} to destroy."));
        let text = script(&result, &desired, &live);
        assert_eq!(text.lines().filter(|l| l.starts_with("sacctmgr")).count(), 3 * WIDE);
    }
}
