//! Names every target can carry, and no two siblings (clusters, contracts) alike. Member
//! names (users, groups, namespaces) must be usable by the targets that carry them.
//!
//! The rule is the intersection of the targets' rules: Slurm lower-cases account names,
//! Kubernetes needs DNS-1123 labels (queue names travel in pod labels, at most 63
//! characters), YARN splits queue paths on `.` and reserves `root`.

use std::collections::BTreeMap;

use crate::ast::{Budget, Project, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::source::Spanned;

pub const MAX_NAME_LEN: usize = 63;

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    for cluster in &budget.clusters {
        portable(&cluster.name, "cluster", out);
    }
    for contract in &budget.contracts {
        portable(&contract.name, "contract", out);
    }
    walk(&budget.projects, &mut |_, project| {
        portable(&project.name, "project", out);
        for namespace in &project.namespaces {
            // Kubernetes namespaces are DNS-1123 labels too; `root` is a fine namespace.
            if let Some(why) = unportable(&namespace.value) {
                out.push(unportable_diagnostic(namespace, "namespace", why));
            }
        }
        for member in project.users.iter().map(|m| &m.name).chain(&project.groups) {
            if let Some(why) = unusable_account_member(&member.value) {
                out.push(
                    Diagnostic::error(Code::NameUnportable, format!("`{}` cannot name a user or group: {why}", member.value))
                        .label(member.span, "not usable")
                        .help("user and group names are written as the system knows them, e.g. `alice` or `ml-staff`"),
                );
            }
        }
    });

    unique(budget.clusters.iter().map(|c| &c.name), "cluster", out);
    unique(budget.contracts.iter().map(|c| &c.name), "contract", out);
    unique(budget.projects.iter().map(|p| &p.name), "top-level project", out);
    walk(&budget.projects, &mut |_, project: &Project| {
        unique(project.children.iter().map(|p| &p.name), "sub-project", out);
    });
}

/// Why a name is not portable, if it is not.
pub fn unportable(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Some("Kubernetes label values are at most 63 characters");
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Some("Slurm lower-cases names and Kubernetes names are lower case");
    }
    if name.contains('.') {
        return Some("YARN reads `.` as a queue path separator");
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Some("Kubernetes names (DNS-1123 labels) allow only `a-z`, `0-9` and `-`");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("Kubernetes names must start and end with a letter or digit");
    }
    None
}

/// A portable name close to `name`.
pub fn portable_form(name: &str) -> String {
    let mapped: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' })
        .collect();
    let mut out = String::new();
    for c in mapped.chars() {
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.truncate(MAX_NAME_LEN);
    out.trim_end_matches('-').to_string()
}

fn portable(name: &Spanned<String>, what: &str, out: &mut Vec<Diagnostic>) {
    if name.value == "root" {
        out.push(
            Diagnostic::error(Code::NameReserved, format!("`root` cannot name a {what}"))
                .label(name.span, "reserved")
                .help("Slurm's top account and YARN's top queue are called `root`; choose another name"),
        );
    } else if let Some(why) = unportable(&name.value) {
        out.push(unportable_diagnostic(name, what, why));
    }
}

fn unportable_diagnostic(name: &Spanned<String>, what: &str, why: &str) -> Diagnostic {
    let suggestion = portable_form(&name.value);
    let help = if suggestion.is_empty() {
        "use lower-case letters, digits and `-`, at most 63 characters".to_string()
    } else {
        format!("use lower-case letters, digits and `-`, e.g. `{suggestion}`")
    };
    Diagnostic::error(Code::NameUnportable, format!("`{}` cannot name a {what}: {why}", name.value))
        .label(name.span, "not portable")
        .help(help)
}

/// Why a user or group name cannot reach Slurm's association files, if it cannot.
fn unusable_account_member(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it contains blanks")
    } else if name.chars().any(|c| matches!(c, ':' | ',' | '\'' | '"' | '=' | '#' | '\\')) {
        Some("Slurm's files separate fields with `:`, `,`, `=` and quotes")
    } else {
        None
    }
}

fn unique<'a>(names: impl Iterator<Item = &'a Spanned<String>>, what: &str, out: &mut Vec<Diagnostic>) {
    let mut seen: BTreeMap<&str, &Spanned<String>> = BTreeMap::new();
    for name in names {
        if let Some(first) = seen.get(name.value.as_str()) {
            out.push(
                Diagnostic::error(Code::NameDuplicate, format!("two {what}s are named `{}`", name.value))
                    .label(name.span, "second one")
                    .label(first.span, "first one")
                    .help("rename one, or merge them"),
            );
        } else {
            seen.insert(&name.value, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_names() {
        for ok in ["a", "olmo", "team-7", "a1-b2", &"x".repeat(63)] {
            assert_eq!(unportable(ok), None, "{ok}");
        }
        for bad in ["", "Olmo", "a.b", "a_b", "-a", "a-", "é", &"x".repeat(64)] {
            assert!(unportable(bad).is_some(), "{bad}");
        }
        assert_eq!(portable_form("Vision.Team"), "vision-team");
        assert_eq!(portable_form("nlp__group_"), "nlp-group");
    }
}
