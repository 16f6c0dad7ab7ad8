//! `allot import slurm`: a live association tree as a budget repository, so that a site
//! can adopt allot without retyping its tree. Building the result and planning against the
//! same dump shows no changes (but for what KDL cannot say, listed in the header).

use std::collections::BTreeSet;

use allot_compiler::names::unportable;

use super::tree::{PARENT_FAIRSHARE, PREEMPTIBLE_QOS, Tree, User};

pub struct Options {
    pub gpus: u64,
    pub gpu_type: String,
    pub gpus_per_node: u64,
}

/// The `allot.kdl` of the tree, or the names allot cannot carry.
pub fn to_kdl(tree: &Tree, options: &Options) -> Result<String, Vec<String>> {
    let mut problems: Vec<String> = tree
        .accounts
        .iter()
        .filter_map(|a| unportable(&a.name).map(|why| format!("account `{}`: {why}", a.name)))
        .collect();
    if unportable(&tree.cluster).is_some() {
        problems.push(format!("cluster `{}` cannot be an allot cluster name", tree.cluster));
    }
    let largest_limit = tree.accounts.iter().filter_map(|a| a.grp_gpus).max().unwrap_or(0);
    if largest_limit > options.gpus {
        problems.push(format!(
            "an account is limited to {largest_limit} GPUs, more than --gpus {}",
            options.gpus
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let qos: BTreeSet<&str> = tree
        .accounts
        .iter()
        .flat_map(|a| a.qos.iter().map(String::as_str))
        .filter(|q| *q != PREEMPTIBLE_QOS)
        .collect();
    let preemptible = tree.accounts.iter().any(|a| a.qos.iter().any(|q| q == PREEMPTIBLE_QOS));
    let mut notes = Vec::new();
    let default = most_common_default(tree)
        .or_else(|| qos.first().map(|q| q.to_string()))
        .unwrap_or_else(|| "normal".into());
    let mut out = String::new();
    out.push_str(&format!(
        "cluster {} gpus={} gpu-type={} gpus-per-node={} {{\n    slurm cluster={}\n}}\n\n",
        tree.cluster,
        options.gpus,
        quoted(&options.gpu_type),
        options.gpus_per_node,
        tree.cluster
    ));
    let rule = if preemptible { "preemptible" } else { "deny" };
    for account in tree.accounts.iter().filter(|a| preemptible && !a.qos.iter().any(|q| q == PREEMPTIBLE_QOS))
    {
        notes.push(format!(
            "account {} lacks QOS {PREEMPTIBLE_QOS}, which allot gives every account under this policy",
            account.name
        ));
    }
    out.push_str(&format!("policy unbudgeted={rule} overflow={rule}\n\n"));
    let mut contracts: Vec<&str> = qos.iter().copied().collect();
    if !contracts.contains(&default.as_str()) {
        contracts.push(&default);
    }
    for name in contracts {
        let flag = if name == default { " default=#true" } else { "" };
        out.push_str(&format!("contract {name} min-runtime=\"0s\"{flag}\n"));
    }
    notes.push(
        "contracts are the QOS the accounts use; give them their minimum runtime and limits".to_string(),
    );
    write_children(tree, "root", &[], 0, &mut out, &mut notes);
    let header: String =
        std::iter::once(format!("// Imported from Slurm cluster {} by `allot import slurm`.", tree.cluster))
            .chain(notes.iter().map(|n| format!("// - {n}")))
            .collect::<Vec<_>>()
            .join("\n");
    Ok(format!("{header}\n\n{out}"))
}

fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn most_common_default(tree: &Tree) -> Option<String> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for d in tree.accounts.iter().filter_map(|a| a.default_qos.as_deref()) {
        *counts.entry(d).or_default() += 1;
    }
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(q, _)| q.to_string())
}

fn write_children(
    tree: &Tree,
    parent: &str,
    parent_qos: &[String],
    depth: usize,
    out: &mut String,
    notes: &mut Vec<String>,
) {
    let indent = "    ".repeat(depth);
    for account in tree.accounts.iter().filter(|a| a.parent == parent) {
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
            notes.push(format!(
                "account {} has Fairshare=0, which allot refuses: imported as 1",
                account.name
            ));
        }
        let max = account.grp_gpus.map_or(String::new(), |g| format!(" max-gpus={g}"));
        let gap = if depth == 0 { "\n" } else { "" };
        out.push_str(&format!("{gap}{indent}project {} share={share}{max} {{\n", account.name));
        let own_qos: Vec<String> = account.qos.iter().filter(|q| *q != PREEMPTIBLE_QOS).cloned().collect();
        if own_qos != parent_qos && !own_qos.is_empty() {
            out.push_str(&format!("{indent}    contracts {}\n", own_qos.join(" ")));
        }
        let users: Vec<&User> = tree.users.iter().filter(|u| u.account == account.name).collect();
        let (defaults, others): (Vec<&User>, Vec<&User>) = users.iter().partition(|u| {
            u.default_account.as_deref() == Some(account.name.as_str()) && in_several(tree, &u.name)
        });
        for u in users.iter().filter(|u| u.fairshare != 1) {
            let value =
                if u.fairshare == PARENT_FAIRSHARE { "parent".to_string() } else { u.fairshare.to_string() };
            notes.push(format!(
                "user {} in {} has Fairshare={value}: allot gives users 1",
                u.name, account.name
            ));
        }
        if !others.is_empty() {
            let names: Vec<&str> = others.iter().map(|u| u.name.as_str()).collect();
            out.push_str(&format!("{indent}    users {}\n", names.join(" ")));
        }
        if !defaults.is_empty() {
            let names: Vec<&str> = defaults.iter().map(|u| u.name.as_str()).collect();
            out.push_str(&format!("{indent}    users {} default=#true\n", names.join(" ")));
        }
        write_children(
            tree,
            &account.name,
            if own_qos.is_empty() { parent_qos } else { &own_qos },
            depth + 1,
            out,
            notes,
        );
        out.push_str(&format!("{indent}}}\n"));
    }
}

fn in_several(tree: &Tree, user: &str) -> bool {
    tree.users.iter().filter(|u| u.name == user).count() > 1
}
