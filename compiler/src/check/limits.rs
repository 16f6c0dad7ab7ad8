//! Limits: a project's max GPUs fit a cluster it may use and its ancestors' caps.

use crate::ast::{Budget, Project, walk};
use crate::diagnostic::{Code, Diagnostic};

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    walk(&budget.projects, &mut |ancestors, project| {
        let usable: Vec<_> = budget
            .clusters
            .iter()
            .filter(|c| ancestors.iter().all(|a| a.may_use(&c.name.value)) && project.may_use(&c.name.value))
            .collect();
        if let Some(max) = &project.max_gpus {
            let largest = usable.iter().map(|c| c.gpus()).max().unwrap_or(0);
            if max.value > largest && !usable.is_empty() {
                out.push(
                    Diagnostic::error(
                        Code::LimitAboveCluster,
                        format!(
                            "`{}` is capped at {} GPUs, more than any cluster it may use",
                            project.name.value, max.value
                        ),
                    )
                    .label(max.span, format!("the largest cluster it may use has {largest}"))
                    .help("lower `max-gpus`, or drop it: a project can never hold more than its cluster"),
                );
            }
        }
        for o in &project.overrides {
            let (Some(max), Some(cluster)) =
                (&o.max_gpus, budget.clusters.iter().find(|c| c.name.value == o.cluster.value))
            else {
                continue;
            };
            if max.value > cluster.gpus() {
                out.push(
                    Diagnostic::error(
                        Code::LimitAboveCluster,
                        format!(
                            "`{}` is capped at {} GPUs on `{}`, which has {}",
                            project.name.value,
                            max.value,
                            cluster.name.value,
                            cluster.gpus()
                        ),
                    )
                    .label(max.span, format!("above the cluster's {} GPUs", cluster.gpus()))
                    .help("lower `max-gpus` to at most the cluster's GPUs"),
                );
            }
        }
        for cluster in &usable {
            let name = &cluster.name.value;
            let Some(max) = project.max_gpus_on(name) else { continue };
            let cap = ancestors
                .iter()
                .filter_map(|a: &&Project| a.max_gpus_on(name).map(|m| (a, m)))
                .min_by_key(|(_, m)| m.value);
            if let Some((ancestor, cap)) = cap
                && max.value > cap.value
            {
                out.push(
                    Diagnostic::error(
                        Code::LimitAboveParent,
                        format!(
                            "`{}` is capped at {} GPUs, above `{}`'s cap of {}",
                            project.name.value, max.value, ancestor.name.value, cap.value
                        ),
                    )
                    .label(max.span, "more than the ancestor allows")
                    .label(cap.span, "the ancestor's cap")
                    .help(
                        "a sub-project cannot hold more than its ancestors; lower this cap or raise theirs",
                    ),
                );
            }
        }
    });
}
