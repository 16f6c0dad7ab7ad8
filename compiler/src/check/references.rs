//! References: every cluster and contract named by a project, a grant or an expectation exists.

use crate::ast::{Budget, walk};
use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::source::Spanned;

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    let clusters: Vec<&str> = budget.clusters.iter().map(|c| c.name.value.as_str()).collect();
    let contracts: Vec<&str> = budget.contracts.iter().map(|c| c.name.value.as_str()).collect();
    walk(&budget.projects, &mut |ancestors, project| {
        for name in project.clusters.iter().flatten() {
            known(name, &clusters, Code::ReferenceUnknownCluster, "cluster", out);
            let excluding = ancestors.iter().rev().find(|a| !a.may_use(&name.value));
            if let (Some(ancestor), true) = (excluding, clusters.contains(&name.value.as_str())) {
                out.push(
                    Diagnostic::error(
                        Code::ReferenceUnknownCluster,
                        format!("`{}` lists cluster `{}`, which `{}` may not use", project.name.value, name.value, ancestor.name.value),
                    )
                    .label(name.span, "not available here")
                    .help(format!("a sub-project runs within its ancestors' clusters; add `{}` to `{}`'s `clusters`, or drop it here", name.value, ancestor.name.value)),
                );
            }
        }
        for o in &project.overrides {
            known(&o.cluster, &clusters, Code::ReferenceUnknownCluster, "cluster", out);
            let usable =
                project.may_use(&o.cluster.value) && ancestors.iter().all(|a| a.may_use(&o.cluster.value));
            if !usable && clusters.contains(&o.cluster.value.as_str()) {
                out.push(
                    Diagnostic::error(
                        Code::ReferenceUnknownCluster,
                        format!("`{}` overrides cluster `{}`, which it may not use", project.name.value, o.cluster.value),
                    )
                    .label(o.cluster.span, "not available here")
                    .help("an override applies on a cluster the project may use; check its `clusters` and its ancestors'"),
                );
            }
        }
        for grant in &project.grants {
            if let Some(cluster) = &grant.cluster {
                known(cluster, &clusters, Code::ReferenceUnknownCluster, "cluster", out);
            }
        }
        for name in project.contracts.iter().flatten() {
            known(name, &contracts, Code::ReferenceUnknownContract, "contract", out);
        }
    });
    for wait in &budget.expectations.waits {
        if let Some(contract) = &wait.contract {
            known(contract, &contracts, Code::ReferenceUnknownContract, "contract", out);
        }
    }
}

fn known(name: &Spanned<String>, names: &[&str], code: Code, what: &str, out: &mut Vec<Diagnostic>) {
    if names.contains(&name.value.as_str()) {
        return;
    }
    let help = did_you_mean(&name.value, names.iter().copied())
        .unwrap_or_else(|| format!("defined {what}s: {}", names.join(", ")));
    out.push(
        Diagnostic::error(code, format!("no {what} is named `{}`", name.value.escape_debug()))
            .label(name.span, format!("unknown {what}"))
            .help(help),
    );
}
