//! Names: clusters, contracts, projects and namespaces portable by the rules of
//! [`crate::names`], none called `root`, user and group names usable, no two siblings
//! (clusters, contracts) alike, and every value that reaches one scheduler's files (Slurm
//! cluster, partition and nodes, GPU type, Kubernetes flavor, resource and node label, YARN
//! resource) in the syntax that scheduler reads. Owners are checked in `owners`.

use std::collections::BTreeMap;

use crate::ast::{Budget, Cluster, Project, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::names::{
    bad_gpu_type, bad_kubernetes_resource, bad_node_label, bad_slurm_cluster, bad_slurm_nodes,
    bad_slurm_partition, bad_subdomain, bad_yarn_resource, portable_form, unportable,
    unusable_account_member,
};
use crate::source::Spanned;

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    for cluster in &budget.clusters {
        portable(&cluster.name, "cluster", out);
        native(cluster, out);
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
        for user in project.users.iter().map(|m| &m.name).filter(|u| u.value == "root") {
            out.push(
                Diagnostic::error(Code::NameReserved, "the `root` user cannot be given a project")
                    .label(user.span, "reserved")
                    .help("Slurm's `root` user keeps its own association under the `root` account; allot never changes it"),
            );
        }
        for member in project.users.iter().map(|m| &m.name).chain(&project.groups) {
            if let Some(why) = unusable_account_member(&member.value) {
                out.push(
                    Diagnostic::error(Code::NameUnportable, format!("`{}` cannot name a user or group: {why}", member.value.escape_debug()))
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

/// The values of a cluster and its bindings that reach one scheduler's files.
fn native(cluster: &Cluster, out: &mut Vec<Diagnostic>) {
    if let Some(gpu_type) = &cluster.gpu_type {
        invalid(
            gpu_type,
            "a GPU type",
            bad_gpu_type,
            "write the type as the schedulers know it, e.g. `h100` or `a100-80gb`",
            out,
        );
    }
    if let Some(slurm) = &cluster.slurm {
        if let Some(name) = &slurm.cluster {
            invalid(
                name,
                "a Slurm cluster",
                bad_slurm_cluster,
                "write the `ClusterName` of slurm.conf, e.g. `jupiter`",
                out,
            );
        } else if bad_slurm_cluster(&cluster.name.value).is_some() {
            let why = bad_slurm_cluster(&cluster.name.value).unwrap_or_default();
            out.push(
                Diagnostic::error(
                    Code::NameInvalid,
                    format!("`{}` cannot name a Slurm cluster: {why}", cluster.name.value.escape_debug()),
                )
                .label(slurm.span, "the Slurm cluster defaults to the cluster's name")
                .help("give the Slurm cluster's name: `slurm cluster=NAME`"),
            );
        }
        if let Some(partition) = &slurm.partition {
            invalid(
                partition,
                "a Slurm partition",
                bad_slurm_partition,
                "write the `PartitionName` of slurm.conf, e.g. `gpu`",
                out,
            );
        }
        if let Some(nodes) = &slurm.nodes {
            invalid(
                nodes,
                "a Slurm node list",
                bad_slurm_nodes,
                "write the `Nodes` of the partition's line in slurm.conf, e.g. `gpu[01-16]`",
                out,
            );
        }
    }
    if let Some(kubernetes) = &cluster.kubernetes {
        match (&kubernetes.flavor, &cluster.gpu_type) {
            (Some(flavor), _) => invalid(
                flavor,
                "a Kueue flavor",
                bad_subdomain,
                "a ResourceFlavor name is lower-case, e.g. `h100`",
                out,
            ),
            (None, Some(gpu_type)) if bad_gpu_type(&gpu_type.value).is_none() => {
                if let Some(why) = bad_subdomain(&gpu_type.value) {
                    out.push(
                        Diagnostic::error(
                            Code::NameInvalid,
                            format!(
                                "GPU type `{}` cannot name a Kueue flavor: {why}",
                                gpu_type.value.escape_debug()
                            ),
                        )
                        .label(gpu_type.span, "the flavor defaults to the GPU type")
                        .label(kubernetes.span, "bound to Kubernetes here")
                        .help("give the flavor's name on the binding: `kubernetes ... flavor=NAME`"),
                    );
                }
            }
            (None, _) => {}
        }
        if let Some(resource) = &kubernetes.resource {
            invalid(
                resource,
                "a Kubernetes resource",
                bad_kubernetes_resource,
                "write the extended resource, e.g. `nvidia.com/gpu`",
                out,
            );
        }
        if let Some(label) = &kubernetes.node_label {
            invalid(
                label,
                "a node label",
                bad_node_label,
                "write `key=value`, e.g. `node.kubernetes.io/instance-type=p5.48xlarge`",
                out,
            );
        }
    }
    if let Some(resource) = cluster.yarn.as_ref().and_then(|y| y.resource.as_ref()) {
        invalid(
            resource,
            "a YARN resource",
            bad_yarn_resource,
            "write the resource type, e.g. `yarn.io/gpu`",
            out,
        );
    }
}

/// An error at `value` when `rule` refuses it.
fn invalid(
    value: &Spanned<String>,
    what: &str,
    rule: fn(&str) -> Option<&'static str>,
    help: &str,
    out: &mut Vec<Diagnostic>,
) {
    if let Some(why) = rule(&value.value) {
        out.push(
            Diagnostic::error(
                Code::NameInvalid,
                format!("`{}` cannot be {what}: {why}", value.value.escape_debug()),
            )
            .label(value.span, "not accepted")
            .help(help),
        );
    }
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
    Diagnostic::error(
        Code::NameUnportable,
        format!("`{}` cannot name a {what}: {why}", name.value.escape_debug()),
    )
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
