//! Grants: a start before the end, not ended at the moment checked (a warning), within the
//! policy's `max-grant`, on a cluster the project may use (named, for GPUs, where it may
//! use several). Whether grants fit beside their siblings at each date is measured on the
//! normalised shares, by [`crate::calendar`].

use crate::ast::{Budget, GrantAmount, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::units::{Instant, format_duration, format_instant};

pub(super) fn check(budget: &Budget, at: Instant, out: &mut Vec<Diagnostic>) {
    let clusters: Vec<&str> = budget.clusters.iter().map(|c| c.name.value.as_str()).collect();
    let max = budget.policy.max_grant.as_ref();
    walk(&budget.projects, &mut |ancestors, project| {
        let usable = project.usable(ancestors, &clusters);
        for grant in &project.grants {
            let (Some(until), from) = (&grant.until, &grant.from) else { continue };
            if let Some(from) = from
                && from.value >= until.value
            {
                out.push(
                    Diagnostic::error(
                        Code::GrantDates,
                        format!(
                            "this grant ends ({}) before it starts ({})",
                            format_instant(until.value),
                            format_instant(from.value)
                        ),
                    )
                    .label(until.span, "the end")
                    .label(from.span, "the start")
                    .help("`until` is the first moment the grant is no longer in force: put it after `from`"),
                );
                continue;
            }
            if until.value <= at {
                out.push(
                    Diagnostic::warning(
                        Code::GrantExpired,
                        format!(
                            "this grant to `{}` ended on {}",
                            project.name.value,
                            format_instant(until.value)
                        ),
                    )
                    .label(until.span, "in the past")
                    .help("it no longer changes any share: remove it (the repository's history keeps it)"),
                );
            }
            if let Some(max) = max {
                let start = from.as_ref().map_or(at, |f| f.value);
                let length = until.value.saturating_sub(start);
                if length > max.value as i64 {
                    let since = if from.is_some() { "from its start" } else { "from now" };
                    out.push(
                        Diagnostic::error(
                            Code::GrantTooLong,
                            format!(
                                "this grant lasts {} {since}, longer than the policy's `max-grant` of {}",
                                format_duration(length.max(0) as u64),
                                format_duration(max.value)
                            ),
                        )
                        .label(until.span, "too far")
                        .label(max.span, "the policy's limit")
                        .help("end it sooner and renew it when it ends, or change the share itself if the change is lasting"),
                    );
                }
            }
            match &grant.cluster {
                Some(cluster)
                    if clusters.contains(&cluster.value.as_str())
                        && !usable.contains(&cluster.value.as_str()) =>
                {
                    out.push(
                        Diagnostic::error(
                            Code::GrantCluster,
                            format!("`{}` has a grant on cluster `{}`, which it may not use", project.name.value, cluster.value),
                        )
                        .label(cluster.span, "not available here")
                        .help("a grant applies on a cluster the project may use; check its `clusters` and its ancestors'"),
                    );
                }
                None if usable.len() > 1
                    && matches!(grant.amount.as_ref().map(|a| a.value), Some(GrantAmount::Gpus(_))) =>
                {
                    let names: Vec<String> = usable.iter().map(|c| format!("`{c}`")).collect();
                    out.push(
                        Diagnostic::error(
                            Code::GrantCluster,
                            format!("which cluster's GPUs does this grant to `{}` add to?", project.name.value),
                        )
                        .label(grant.span, "no `cluster`")
                        .help(format!(
                            "the project may use {}: name one with `cluster=NAME` (a grant of `share` applies on all)",
                            names.join(", ")
                        )),
                    );
                }
                _ => {}
            }
        }
    });
}
