//! `allot plan slurm`: what it takes to bring a live Slurm association tree (a `sacctmgr
//! dump`) to the one the budgets want: changes to what allot manages (accounts, their
//! parent, Fairshare, GPU limit and QOS; user associations, their default account and
//! Fairshare), drift in what it does not manage, and the ordered `sacctmgr` script.

use std::collections::BTreeMap;

use allot_compiler::ir::Location;
use serde_json::{Value, json};

use super::tree::{Account, PARENT_FAIRSHARE, Tree, User};

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

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub cluster: String,
    pub changes: Vec<Change>,
    pub drift: Vec<Drift>,
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

/// Slurm's own `root` user association is not allot's business.
fn is_root_user(u: &User) -> bool {
    u.name == "root" && u.account == "root"
}

pub fn plan(desired: &Tree, live: &Tree) -> Plan {
    // Slurm's root user is a sibling of the top accounts on both sides.
    let mut with_root = desired.clone();
    with_root.users.extend(live.users.iter().filter(|u| is_root_user(u)).cloned());
    let (before, after) = (live.effective_shares(), with_root.effective_shares());
    let share = |name: &str| {
        Some((before.get(name).copied().unwrap_or(0.0), after.get(name).copied().unwrap_or(0.0)))
    };
    let mut changes = Vec::new();
    let mut drift = Vec::new();
    for account in &desired.accounts {
        let current = live.account(&account.name);
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
    for account in live.accounts.iter().rev().filter(|a| desired.account(&a.name).is_none()) {
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
    let find = |tree: &'_ Tree, u: &User| {
        tree.users.iter().find(|x| x.name == u.name && x.account == u.account).cloned()
    };
    for user in &desired.users {
        let current = find(live, user);
        let fields = user_fields(current.as_ref(), Some(user));
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
    for user in live.users.iter().filter(|u| !is_root_user(u) && find(desired, u).is_none()) {
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
    Plan { cluster: desired.cluster.clone(), changes, drift }
}

/// A word the shell reads as itself: as it is when plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain =
        !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "._@/=,+-:%".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// The `sacctmgr -i` commands, in an order Slurm accepts: accounts added parents first,
/// then account changes, users added, default accounts moved, and only then deletions,
/// user associations before accounts, children before parents.
pub fn script(plan: &Plan, desired: &Tree, live: &Tree) -> String {
    let c = shell_word(&plan.cluster);
    let mut out =
        format!("#!/bin/sh\n# allot plan for Slurm cluster {}: {}\nset -eu\n", plan.cluster, plan.summary());
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push_str(&format!("\n# {title}\n{}\n", lines.join("\n")));
        }
    };
    let account = |name: &str| desired.account(name);
    let settings = |a: &Account, fields: &[Field], new: bool| -> Vec<String> {
        let mut set = Vec::new();
        for f in fields {
            match f.name {
                "parent" if !new => set.push(format!("parent={}", shell_word(&a.parent))),
                "fairshare" => set.push(format!("fairshare={}", a.fairshare)),
                "grptres" => set
                    .push(format!("grptres=gres/gpu={}", a.grp_gpus.map_or("-1".into(), |g| g.to_string()))),
                "qos" => set.push(format!("qos={}", shell_word(&a.qos.join(",")))),
                "defaultqos" => {
                    set.push(format!("defaultqos={}", shell_word(a.default_qos.as_deref().unwrap_or("-1"))))
                }
                _ => {}
            }
        }
        set
    };
    let adds: Vec<String> = plan
        .changes
        .iter()
        .filter(|ch| ch.kind == "account" && ch.action == Action::Add)
        .filter_map(|ch| account(&ch.name).map(|a| (a, ch)))
        .map(|(a, ch)| {
            format!(
                "sacctmgr -i add account {} cluster={c} parent={} description={} organization=allot {}",
                shell_word(&a.name),
                shell_word(&a.parent),
                shell_word(&a.description),
                settings(a, &ch.fields, true).join(" ")
            )
        })
        .collect();
    section("accounts to add, parents first", adds);
    let modified: Vec<String> = plan
        .changes
        .iter()
        .filter(|ch| ch.kind == "account" && ch.action == Action::Change)
        .filter_map(|ch| account(&ch.name).map(|a| (a, ch)))
        .map(|(a, ch)| {
            format!(
                "sacctmgr -i modify account where name={} cluster={c} set {}",
                shell_word(&a.name),
                settings(a, &ch.fields, false).join(" ")
            )
        })
        .collect();
    section("accounts to change", modified);
    let known_users: Vec<&str> = live.users.iter().map(|u| u.name.as_str()).collect();
    let user_of = |ch: &Change| {
        desired.users.iter().find(|u| u.name == ch.name && Some(&u.account) == ch.account.as_ref())
    };
    let added_users: Vec<String> = plan
        .changes
        .iter()
        .filter(|ch| ch.kind == "user" && ch.action == Action::Add)
        .filter_map(user_of)
        .map(|u| {
            let default = match (&u.default_account, known_users.contains(&u.name.as_str())) {
                (Some(d), false) => format!(" defaultaccount={}", shell_word(d)),
                _ => String::new(),
            };
            format!(
                "sacctmgr -i add user {} cluster={c} account={} fairshare={}{default}",
                shell_word(&u.name),
                shell_word(&u.account),
                fairshare(u.fairshare)
            )
        })
        .collect();
    section("user associations to add", added_users);
    let mut defaults: Vec<String> = Vec::new();
    let mut user_changes: Vec<String> = Vec::new();
    for ch in plan.changes.iter().filter(|ch| ch.kind == "user" && ch.action != Action::Destroy) {
        let Some(u) = user_of(ch) else { continue };
        for f in &ch.fields {
            match f.name {
                "defaultaccount" if ch.action == Action::Change || known_users.contains(&u.name.as_str()) => {
                    if let Some(d) = &u.default_account {
                        let line = format!(
                            "sacctmgr -i modify user where name={} cluster={c} set defaultaccount={}",
                            shell_word(&u.name),
                            shell_word(d)
                        );
                        if !defaults.contains(&line) {
                            defaults.push(line);
                        }
                    }
                }
                "fairshare" if ch.action == Action::Change => user_changes.push(format!(
                    "sacctmgr -i modify user where name={} cluster={c} account={} set fairshare={}",
                    shell_word(&u.name),
                    shell_word(&u.account),
                    fairshare(u.fairshare)
                )),
                _ => {}
            }
        }
    }
    section("default accounts, moved before any deletion", defaults);
    section("user associations to change", user_changes);
    let deleted_users: Vec<String> = plan
        .changes
        .iter()
        .filter(|ch| ch.kind == "user" && ch.action == Action::Destroy)
        .map(|ch| {
            format!(
                "sacctmgr -i delete user where name={} cluster={c} account={}",
                shell_word(&ch.name),
                shell_word(ch.account.as_deref().unwrap_or(""))
            )
        })
        .collect();
    section("user associations to delete", deleted_users);
    let deleted_accounts: Vec<String> = plan
        .changes
        .iter()
        .filter(|ch| ch.kind == "account" && ch.action == Action::Destroy)
        .map(|ch| format!("sacctmgr -i delete account where name={} cluster={c}", shell_word(&ch.name)))
        .collect();
    section("accounts to delete, children first", deleted_accounts);
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
    out.push_str(&format!("\n{}\n", plan.summary()));
    out
}

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
    json!({
        "cluster": plan.cluster,
        "changes": changes,
        "drift": drift,
        "summary": { "add": plan.count(Action::Add), "change": plan.count(Action::Change), "destroy": plan.count(Action::Destroy) },
    })
}
