//! Names: clusters, contracts, projects and namespaces portable by the rules of
//! [`crate::names`], none called `root`, user and group names usable, and no two siblings
//! (clusters, contracts) alike.

use std::collections::BTreeMap;

use crate::ast::{Budget, Project, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::names::{portable_form, unportable, unusable_account_member};
use crate::source::Spanned;

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
