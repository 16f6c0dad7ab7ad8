//! `allot plan slurm`: what it takes to bring a live Slurm association tree (a `sacctmgr
//! dump`) to the one the budgets want: changes to what allot manages (accounts, their
//! parent, Fairshare, GPU limit and QOS; user associations, their default account and
//! Fairshare), drift in what it does not manage, and the ordered `sacctmgr` script.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use allot_compiler::ir::Location;
use serde_json::{Value, json};

use super::qos::Qos;
use super::slurm_name_problem;
use super::tree::{Account, MAX_DUMP_DEPTH, PARENT_FAIRSHARE, Tree, User, account_line, quoted, user_line};

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
    /// Whether the live QOS were read and compared (a dump holds none).
    pub qos_compared: bool,
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

/// The settings of a QOS that differ from the wanted ones (all of them for a QOS to add).
fn qos_fields(before: Option<&Qos>, after: &Qos) -> Vec<Field> {
    let before = before.map(Qos::fields);
    after
        .fields()
        .into_iter()
        .enumerate()
        .map(|(i, (name, after))| Field {
            name,
            before: before.as_ref().map_or(String::new(), |b| b[i].1.clone()),
            after,
        })
        .filter(|f| f.before != f.after && !(f.before.is_empty() && f.after == "-"))
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
                "qos" | "preempt" => names.extend(f.after.split(',')),
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
    let qos_compared = desired.qos.is_some() && live.qos.is_some();
    if let (Some(wanted), Some(current)) = (&desired.qos, &live.qos) {
        let current: HashMap<&str, &Qos> = current.iter().map(|q| (q.name.as_str(), q)).collect();
        let qos_changes = wanted.iter().filter_map(|q| {
            let before = current.get(q.name.as_str()).copied();
            let fields = qos_fields(before, q);
            (!fields.is_empty()).then(|| Change {
                action: if before.is_none() { Action::Add } else { Action::Change },
                kind: "qos",
                name: q.name.clone(),
                account: None,
                fields,
                source: q.source.clone(),
                effective_share: None,
            })
        });
        changes.splice(0..0, qos_changes.collect::<Vec<_>>());
    }
    // Every name a command would carry, checked once more.
    changes.retain(|change| {
        let bad = names_of(change).into_iter().find_map(|n| unusable(n).map(|why| (n.to_string(), why)));
        if let Some((name, why)) = &bad {
            refused.push(Note { association: subject(change), reason: format!("{name:?}: {why}") });
        }
        bad.is_none()
    });
    Plan { cluster: desired.cluster.clone(), changes, drift, left_alone, refused, qos_compared }
}

/// A word the shell reads as itself (shared by every emitter that writes a script).
pub use crate::text::shell_word;

/// One word of a `sacctmgr` command: a keyword, or a value, after its `key=` when it has
/// one. Values come from the budgets and the dump: a script quotes them (see
/// [`shell_word`]); an argument list passes them as they are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

/// The `sacctmgr -i` commands of a plan, one per change, in an order Slurm accepts: QOS
/// first (added, changed, then their preemption lists), accounts added parents first,
/// account changes, users added, default accounts moved, user changes, and only then
/// deletions, user associations before accounts, children before parents. Within a step,
/// the order depends on the trees' associations, not on the order the trees list them in
/// (a saved plan's trees are read back in another order). A change the plan would have
/// refused (Slurm's root, a name no command can carry) gives no command.
fn commands(plan: &Plan, desired: &Tree, live: &Tree) -> Vec<Command> {
    let allowed = sorted_allowed(plan, desired, live);
    let mut out = qos_commands(&allowed, desired, live);
    out.extend(Associations::new(plan, desired, live).commands(&allowed, Part::All));
    out
}

/// How a plan is applied in as few `sacctmgr` calls as exactness allows, step by step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Commands run one by one, in order.
    InOrder(Vec<Command>),
    /// One `sacctmgr load` of this flat file.
    Load(String),
    /// Commands that depend on nothing but the steps before, run side by side: `sacctmgr`
    /// spends its time waiting for slurmdbd, not working.
    Together(Vec<Command>),
}

impl Step {
    /// The `sacctmgr` calls the step makes.
    pub fn calls(&self) -> usize {
        match self {
            Step::InOrder(commands) | Step::Together(commands) => commands.len(),
            Step::Load(_) => 1,
        }
    }
}

/// The steps of a plan's application: the QOS it adds or changes, side by side, then their
/// preemption lists in order (those cleared first); one `sacctmgr
/// load` of the associations it adds (a load adds a whole tree in a few requests); the
/// settings of existing associations that depend on nothing else (an account's Fairshare,
/// GPU limit, QOS and default QOS, a user association's Fairshare), one command for all the
/// associations given the same settings, side by side; then the rest in order: moves,
/// default accounts, deletions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Application {
    pub steps: Vec<Step>,
}

impl Application {
    /// The `sacctmgr` calls of the whole application.
    pub fn calls(&self) -> usize {
        self.steps.iter().map(Step::calls).sum()
    }
}

/// The plan's [`Application`].
pub fn application(plan: &Plan, desired: &Tree, live: &Tree) -> Application {
    let allowed = sorted_allowed(plan, desired, live);
    let associations = Associations::new(plan, desired, live);
    // QOS added and changed depend on no other; the preemption lists name them.
    let (lists, qos): (Vec<Command>, Vec<Command>) =
        qos_commands(&allowed, desired, live).into_iter().partition(|c| c.step == PREEMPTION_LISTS);
    let steps = [
        Some(Step::Together(qos)),
        Some(Step::InOrder(lists)),
        associations.load(&allowed, &plan.summary()).map(Step::Load),
        Some(Step::Together(grouped(associations.commands(&allowed, Part::Independent)))),
        Some(Step::InOrder(associations.commands(&allowed, Part::Ordered))),
    ];
    Application { steps: steps.into_iter().flatten().filter(|step| step.calls() > 0).collect() }
}

/// The most names one grouped command carries.
const MAX_NAMES_PER_COMMAND: usize = 100;

/// The commands, those that differ only in the association they name merged into one naming
/// them all (`where name=a,b,c`), in the order of their first.
fn grouped(commands: Vec<Command>) -> Vec<Command> {
    let is_name = |w: &Word| matches!(w, Word::Value(Some("name"), _));
    let mut groups: Vec<(Command, Vec<String>)> = Vec::new();
    let mut index: HashMap<Vec<Word>, usize> = HashMap::new();
    for command in commands {
        let Some(Word::Value(_, name)) = command.words.iter().find(|w| is_name(w)).cloned() else {
            groups.push((command, Vec::new()));
            continue;
        };
        let key: Vec<Word> = command.words.iter().filter(|w| !is_name(w)).cloned().collect();
        match index.get(&key) {
            Some(&i) if groups[i].1.len() < MAX_NAMES_PER_COMMAND => groups[i].1.push(name),
            _ => {
                index.insert(key, groups.len());
                groups.push((command, vec![name]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(mut command, names)| {
            if let Some(word) = command.words.iter_mut().find(|w| is_name(w)) {
                *word = value("name", names.join(","));
            }
            command
        })
        .collect()
}

/// The step of the commands that set QOS preemption lists.
const PREEMPTION_LISTS: &str = "QOS preemption lists, once every QOS exists";

/// The QOS commands of the allowed changes: QOS added (with every setting but their
/// preemption lists), QOS changed, then the preemption lists, once every QOS they name exists.
fn qos_commands(allowed: &[&Change], desired: &Tree, live: &Tree) -> Vec<Command> {
    let wanted: HashMap<&str, &Qos> = desired.qos.iter().flatten().map(|q| (q.name.as_str(), q)).collect();
    let held: HashMap<&str, &Qos> = live.qos.iter().flatten().map(|q| (q.name.as_str(), q)).collect();
    let changes = || {
        allowed
            .iter()
            .filter(|ch| ch.kind == "qos")
            .filter_map(|ch| Some((*ch, *wanted.get(ch.name.as_str())?)))
    };
    // Every setting but the preemption list, which waits for every QOS to exist.
    let settings = |q: &Qos, fields: &[&'static str]| -> Vec<Word> {
        fields.iter().filter(|f| **f != "preempt").map(|f| value(f, q.setting(f))).collect()
    };
    let mut out = Vec::new();
    for (_, q) in changes().filter(|(ch, _)| ch.action == Action::Add) {
        let mut words = vec![keyword("add"), keyword("qos"), name(q.name.clone())];
        words.extend(settings(q, &q.fields().map(|(f, _)| f)));
        out.push(Command { step: "QOS to add", words });
    }
    for (ch, q) in changes().filter(|(ch, _)| ch.action == Action::Change) {
        let fields: Vec<&'static str> = ch.fields.iter().map(|f| f.name).collect();
        let set = settings(q, &fields);
        if !set.is_empty() {
            let mut words = vec![
                keyword("modify"),
                keyword("qos"),
                keyword("where"),
                value("name", q.name.clone()),
                keyword("set"),
            ];
            words.extend(set);
            out.push(Command { step: "QOS to change", words });
        }
    }
    // A QOS added without a preemption list has no `preempt` field. Slurm refuses a list
    // that closes a loop, so the lists change in two passes: first each loses what it must
    // lose (kept to what it has and is wanted), then each gains what it must gain. While the
    // first pass runs, every list holds part of its live one; while the second runs, part of
    // its wanted one. Neither the live nor the wanted lists loop (Slurm holds the first and
    // allot's lists name only the preemptible QOS, which preempts nothing), so no moment
    // between them does, whatever command an apply stopped at.
    let lists: Vec<(&Qos, BTreeSet<&str>, BTreeSet<&str>)> = changes()
        .filter(|(ch, _)| ch.fields.iter().any(|f| f.name == "preempt"))
        .map(|(_, q)| (q, preempted(held.get(q.name.as_str()).copied()), preempted(Some(q))))
        .collect();
    let set_list = |q: &Qos, list: String| Command {
        step: PREEMPTION_LISTS,
        words: vec![
            keyword("modify"),
            keyword("qos"),
            keyword("where"),
            value("name", q.name.clone()),
            keyword("set"),
            value("preempt", list),
        ],
    };
    for (q, before, after) in &lists {
        if !before.is_subset(after) {
            let kept: Vec<&str> =
                q.preempt.iter().map(String::as_str).filter(|n| before.contains(n)).collect();
            out.push(set_list(q, kept.join(",")));
        }
    }
    for (q, before, after) in &lists {
        if !after.is_subset(before) {
            out.push(set_list(q, q.setting("preempt")));
        }
    }
    out
}

/// The QOS a QOS's preemption list names (none for a QOS that does not exist).
fn preempted(qos: Option<&Qos>) -> BTreeSet<&str> {
    qos.map(|q| q.preempt.iter().map(String::as_str).collect()).unwrap_or_default()
}

/// Which association commands to make.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Every one, a command per change (the script).
    All,
    /// Settings of existing associations that depend on nothing else: an account's
    /// Fairshare, GPU limit, QOS and default QOS, a user association's Fairshare. Setting
    /// an account's QOS list changes only the associations that inherit it (user
    /// associations, and accounts without a list of their own), and allot gives every
    /// account a list of its own and no user association one.
    Independent,
    /// What is neither added (a load adds) nor independent: moves, default accounts,
    /// deletions.
    Ordered,
}

impl Part {
    /// Whether a command of this part carries an account's `field`.
    fn carries(self, field: &str) -> bool {
        let independent = matches!(field, "fairshare" | "grptres" | "qos" | "defaultqos");
        match self {
            Part::All => true,
            Part::Independent => independent,
            Part::Ordered => !independent,
        }
    }
}

/// What the association commands of a plan read from its trees.
struct Associations<'t> {
    cluster: &'t str,
    accounts: HashMap<&'t str, &'t Account>,
    users: HashMap<(&'t str, &'t str), &'t User>,
    /// Users that have an association already: a new one does not set their default account.
    known_users: HashSet<&'t str>,
}

impl<'t> Associations<'t> {
    fn new(plan: &'t Plan, desired: &'t Tree, live: &'t Tree) -> Self {
        Associations {
            cluster: &plan.cluster,
            accounts: desired.accounts.iter().map(|a| (a.name.as_str(), a)).collect(),
            users: desired.users.iter().map(|u| ((u.name.as_str(), u.account.as_str()), u)).collect(),
            known_users: live.users.iter().map(|u| u.name.as_str()).collect(),
        }
    }

    fn user_of(&self, ch: &Change) -> Option<&'t User> {
        self.users.get(&(ch.name.as_str(), ch.account.as_deref()?)).copied()
    }

    /// The flat file of the associations the allowed changes add, if any, for one `sacctmgr
    /// load`: accounts parents first, then user associations.
    fn load(&self, allowed: &[&Change], summary: &str) -> Option<String> {
        let mut accounts: Vec<(&str, String)> = Vec::new();
        let mut users: Vec<(&str, String)> = Vec::new();
        for change in allowed.iter().filter(|ch| ch.action == Action::Add) {
            match change.kind {
                "account" => {
                    let Some(a) = self.accounts.get(change.name.as_str()) else { continue };
                    accounts.push((a.parent.as_str(), account_line(a)));
                }
                "user" => {
                    let Some(u) = self.user_of(change) else { continue };
                    users.push((
                        u.account.as_str(),
                        user_line(u, !self.known_users.contains(u.name.as_str())),
                    ));
                }
                _ => {}
            }
        }
        if accounts.is_empty() && users.is_empty() {
            return None;
        }
        users.sort();
        let mut load = format!(
            "# allot: the associations {} adds\nCluster - {}\n",
            crate::text::comment(summary),
            quoted(self.cluster)
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
        Some(load)
    }

    /// The association commands of the allowed changes that `part` takes, one per change.
    fn commands(&self, allowed: &[&'t Change], part: Part) -> Vec<Command> {
        let cluster = || value("cluster", self.cluster);
        let mut out: Vec<Command> = Vec::new();
        let mut step = |step: &'static str, commands: Vec<Vec<Word>>| {
            out.extend(commands.into_iter().map(|words| Command { step, words }));
        };
        let settings = |a: &Account, fields: &[Field], new: bool| -> Vec<Word> {
            let mut set = Vec::new();
            for f in fields.iter().filter(|f| part.carries(f.name)) {
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
        let of_kind = |kind: &'static str, action: Action| {
            allowed.iter().copied().filter(move |ch| ch.kind == kind && ch.action == action)
        };
        let with_account = |ch: &'t Change| self.accounts.get(ch.name.as_str()).map(|a| (*a, ch));
        if part == Part::All {
            let adds = of_kind("account", Action::Add)
                .filter_map(with_account)
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
        }
        let modified = of_kind("account", Action::Change)
            .filter_map(with_account)
            .filter_map(|(a, ch)| {
                let set = settings(a, &ch.fields, false);
                if set.is_empty() {
                    return None;
                }
                let mut words = vec![
                    keyword("modify"),
                    keyword("account"),
                    keyword("where"),
                    value("name", a.name.clone()),
                    cluster(),
                    keyword("set"),
                ];
                words.extend(set);
                Some(words)
            })
            .collect();
        step("accounts to change", modified);
        if part == Part::All {
            let added_users = of_kind("user", Action::Add)
                .filter_map(|ch| self.user_of(ch))
                .map(|u| {
                    let mut words = vec![
                        keyword("add"),
                        keyword("user"),
                        name(u.name.clone()),
                        cluster(),
                        value("account", u.account.clone()),
                        value("fairshare", fairshare(u.fairshare)),
                    ];
                    if let (Some(d), false) = (&u.default_account, self.known_users.contains(u.name.as_str()))
                    {
                        words.push(value("defaultaccount", d.clone()));
                    }
                    words
                })
                .collect();
            step("user associations to add", added_users);
        }
        let mut defaults: Vec<Vec<Word>> = Vec::new();
        let mut user_changes: Vec<Vec<Word>> = Vec::new();
        for ch in allowed.iter().filter(|ch| ch.kind == "user" && ch.action != Action::Destroy) {
            let Some(u) = self.user_of(ch) else { continue };
            for f in &ch.fields {
                match f.name {
                    "defaultaccount"
                        if part != Part::Independent
                            && (ch.action == Action::Change
                                || self.known_users.contains(u.name.as_str())) =>
                    {
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
                    "fairshare" if ch.action == Action::Change && part != Part::Ordered => {
                        user_changes.push(vec![
                            keyword("modify"),
                            keyword("user"),
                            keyword("where"),
                            value("name", u.name.clone()),
                            cluster(),
                            value("account", u.account.clone()),
                            keyword("set"),
                            value("fairshare", fairshare(u.fairshare)),
                        ])
                    }
                    _ => {}
                }
            }
        }
        step("default accounts, moved before any deletion", defaults);
        step("user associations to change", user_changes);
        if part == Part::Independent {
            return out;
        }
        let deleted_users = of_kind("user", Action::Destroy)
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
        let deleted_accounts = of_kind("account", Action::Destroy)
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
    if !plan.qos_compared {
        out.push_str(&format!("\n{QOS_NOT_COMPARED}\n"));
    }
    out.push_str(&format!("\n{}\n", plan.summary()));
    out
}

/// Said when the live QOS were not read.
const QOS_NOT_COMPARED: &str = "QOS not compared: a dump holds none (`allot plan slurm --live` without a file reads them with sacctmgr).";

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
    if !plan.qos_compared {
        out.push_str(&format!("\n{}\n", text(QOS_NOT_COMPARED)));
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
        "qos_compared": plan.qos_compared,
        "summary": { "add": plan.count(Action::Add), "change": plan.count(Action::Change), "destroy": plan.count(Action::Destroy) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::qos;
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
    fn preemption_lists_lose_before_they_gain_so_that_no_moment_loops() {
        // Live: b preempts a and c. Wanted: a preempts b, b preempts c only. Setting a's list
        // while b's still names a would close a loop, which Slurm refuses.
        let live = Tree {
            cluster: "c".into(),
            qos: Some(qos::parse("a|0|requeue|||||\nb|0|requeue|||||a,c\nc|0|requeue|||||\n").unwrap()),
            ..Tree::default()
        };
        let desired = Tree {
            qos: Some(qos::parse("a|0|requeue|||||b\nb|0|requeue|||||c\nc|0|requeue|||||\n").unwrap()),
            ..live.clone()
        };
        let result = plan(&desired, &live);
        let Application { steps } = application(&result, &desired, &live);
        let [Step::InOrder(lists)] = &steps[..] else { panic!("{steps:?}") };
        let words: Vec<String> = lists.iter().map(|c| c.arguments().join(" ")).collect();
        assert_eq!(words, ["modify qos where name=b set preempt=c", "modify qos where name=a set preempt=b"]);

        // A list that loses one name and gains another passes through what it keeps.
        let desired = Tree {
            qos: Some(qos::parse("a|0|requeue|||||b\nb|0|requeue|||||\nc|0|requeue|||||b\n").unwrap()),
            ..live.clone()
        };
        let live = Tree {
            qos: Some(qos::parse("a|0|requeue|||||\nb|0|requeue|||||c\nc|0|requeue|||||a\n").unwrap()),
            ..live
        };
        let result = plan(&desired, &live);
        let Application { steps } = application(&result, &desired, &live);
        let [Step::InOrder(lists)] = &steps[..] else { panic!("{steps:?}") };
        let words: Vec<String> = lists.iter().map(|c| c.arguments().join(" ")).collect();
        assert_eq!(
            words,
            [
                "modify qos where name=b set preempt=",
                "modify qos where name=c set preempt=",
                "modify qos where name=a set preempt=b",
                "modify qos where name=c set preempt=b",
            ]
        );
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
    fn qos_come_first_and_settings_of_existing_associations_go_together() {
        let mut live = parse(
            "Cluster - 'c'\nParent - 'root'\nAccount - 'a':Fairshare=1\nAccount - 'b':Fairshare=1\n\
             Account - 'c':Fairshare=1\nParent - 'a'\nUser - 'u':DefaultAccount='a':Fairshare=1\n",
        )
        .unwrap();
        live.qos = Some(qos::parse("normal|0|cluster|||||\nx|0|requeue|||||\n").unwrap());
        let with = |name: &str, parent: &str, fairshare| Account { fairshare, ..account(name, parent) };
        let wanted =
            qos::parse("x|0|requeue|00:01:00||||\ny|0|cancel|00:00:00|01:00:00|gres/gpu=2||x\n").unwrap();
        let desired = Tree {
            cluster: "c".into(),
            accounts: vec![
                with("a", "root", 5),
                with("b", "root", 5),
                with("c", "a", 6),
                with("d", "root", 1),
            ],
            users: vec![User { fairshare: 2, ..user("u", "a") }],
            qos: Some(wanted),
            ..Tree::default()
        };
        let result = plan(&desired, &live);
        assert_eq!(result.summary(), "Plan: 2 to add, 5 to change, 0 to destroy.");
        let subjects: Vec<String> = result.changes.iter().map(subject).collect();
        assert_eq!(subjects[..2], ["qos x", "qos y"], "QOS first; `normal` is left alone");
        let words = |commands: &[Command]| -> Vec<String> {
            commands.iter().map(|c| c.arguments().join(" ")).collect()
        };
        let Application { steps } = application(&result, &desired, &live);
        let [
            Step::Together(qos),
            Step::InOrder(lists),
            Step::Load(load),
            Step::Together(together),
            Step::InOrder(rest),
        ] = &steps[..]
        else {
            panic!("{steps:?}")
        };
        assert_eq!(
            words(qos),
            [
                "add qos y priority=0 preemptmode=cancel preemptexempttime=00:00:00 maxwall=60 maxtresperjob=gres/gpu=2 grptres=gres/gpu=-1",
                "modify qos where name=x set preemptexempttime=00:01:00",
            ]
        );
        assert_eq!(words(lists), ["modify qos where name=y set preempt=x"]);
        assert!(load.contains("Parent - 'root'\nAccount - 'd':") && !load.contains("'a'"), "{load}");
        assert_eq!(
            words(together),
            [
                "modify account where name=a,b cluster=c set fairshare=5",
                "modify account where name=c cluster=c set fairshare=6",
                "modify user where name=u cluster=c account=a set fairshare=2",
            ]
        );
        assert_eq!(words(rest), ["modify account where name=c cluster=c set parent=a"]);
        assert_eq!(steps.iter().map(Step::calls).sum::<usize>(), 8);
        // The script has a command per change, the moved account's in one.
        let text = script(&result, &desired, &live);
        assert!(
            text.contains("sacctmgr -i modify account where name=c cluster=c set parent=a fairshare=6\n"),
            "{text}"
        );
        assert!(text.contains("where name=a cluster=c set fairshare=5\n"), "{text}");
        // A dump alone holds no QOS: they are not compared, and the plan says so.
        live.qos = None;
        let result = plan(&desired, &live);
        assert!(!result.qos_compared && result.changes.iter().all(|c| c.kind != "qos"));
        assert!(human(&result).contains("QOS not compared"));
    }

    #[test]
    fn user_associations_of_different_accounts_are_not_grouped() {
        let live = parse(
            "Cluster - 'c'\nParent - 'root'\nAccount - 'a':Fairshare=1\nAccount - 'b':Fairshare=1\n\
             Parent - 'a'\nUser - 'u':DefaultAccount='a':Fairshare=1\nUser - 'v':DefaultAccount='a':Fairshare=1\n\
             Parent - 'b'\nUser - 'u':DefaultAccount='a':Fairshare=1\n",
        )
        .unwrap();
        let mut desired = live.clone();
        for u in &mut desired.users {
            u.fairshare = 2;
            u.source = None;
        }
        let result = plan(&desired, &live);
        let Application { steps } = application(&result, &desired, &live);
        let [Step::Together(together)] = &steps[..] else { panic!("{steps:?}") };
        let words: Vec<String> = together.iter().map(|c| c.arguments().join(" ")).collect();
        assert_eq!(
            words,
            [
                "modify user where name=u,v cluster=c account=a set fairshare=2",
                "modify user where name=u cluster=c account=b set fairshare=2",
            ]
        );
    }

    #[test]
    fn grouped_commands_name_at_most_a_hundred_associations() {
        let command = |name: &str, share: u64| Command {
            step: "s",
            words: vec![
                keyword("modify"),
                keyword("account"),
                keyword("where"),
                value("name", name),
                keyword("set"),
                value("fairshare", share.to_string()),
            ],
        };
        let commands: Vec<Command> = (0..250).map(|i| command(&format!("a{i}"), 1 + i % 2)).collect();
        let grouped = grouped(commands);
        let sizes: Vec<usize> = grouped.iter().map(|c| c.arguments()[3].split(',').count()).collect();
        assert_eq!(sizes, [100, 100, 25, 25]);
        assert!(grouped[0].arguments()[3].starts_with("name=a0,a2,a4,"));
        assert_eq!(grouped[0].arguments()[5], "fairshare=1");
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
