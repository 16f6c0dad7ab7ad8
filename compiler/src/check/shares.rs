//! Shares: positive, weights within [`crate::units::MAX_WEIGHT`] and 3 decimals, one kind
//! per sibling set, and percentages within 100% unless
//! overcommit is declared, on every cluster: siblings count where they may run
//! (`clusters`), with their share there (`on CLUSTER share=...`).

use std::collections::BTreeMap;

use crate::ast::{Budget, Project, Share, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::source::{Span, Spanned};
use crate::units::weight_problem;

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    walk(&budget.projects, &mut |_, project| {
        positive(project.share.as_ref(), out);
        for o in &project.overrides {
            positive(o.share.as_ref(), out);
        }
    });
    let declared = |flag: Option<&Spanned<bool>>| flag.filter(|f| f.value).map(|f| f.span);
    let clusters: Vec<&str> = budget.clusters.iter().map(|c| c.name.value.as_str()).collect();
    siblings(
        &budget.projects,
        "top-level projects",
        &clusters,
        declared(budget.policy.overcommit.as_ref()),
        out,
    );
    walk(&budget.projects, &mut |ancestors, parent| {
        let usable = parent.usable(ancestors, &clusters);
        let whose = format!("the children of `{}`", parent.name.value);
        siblings(&parent.children, &whose, &usable, declared(parent.overcommit.as_ref()), out);
    });
}

fn positive(share: Option<&Spanned<Share>>, out: &mut Vec<Diagnostic>) {
    let Some(share) = share else { return };
    let zero_or_less = match share.value {
        Share::Percent(p) => p.0 <= 0.0,
        Share::Weight(w) => w <= 0.0,
    };
    if zero_or_less {
        out.push(
            Diagnostic::error(Code::ShareNonPositive, "a share must be above zero")
                .label(share.span, "zero or less")
                .help("a project without a budget needs no project: its work runs as unbudgeted, preemptible work; otherwise give it a positive share"),
        );
    } else if let Share::Weight(w) = share.value
        && let Some(why) = weight_problem(w)
    {
        out.push(
            Diagnostic::error(Code::ValueOutOfRange, format!("weight {w} is out of range: {why}"))
                .label(share.span, "out of range")
                .help("weights are numbers from 0.001 to 1000000000 with at most 3 decimals; only their ratios among siblings count, so scale them all alike"),
        );
    }
}

/// Checks a sibling set on each cluster its parent may use: the siblings present there,
/// with their shares there. Clusters where those are the same are checked once.
fn siblings(
    projects: &[Project],
    whose: &str,
    clusters: &[&str],
    overcommit: Option<Span>,
    out: &mut Vec<Diagnostic>,
) {
    if clusters.is_empty() {
        // No cluster to divide (reported elsewhere): check the shares as written.
        let shares: Vec<_> = projects.iter().filter_map(|p| p.share.as_ref()).collect();
        return sibling_shares(&shares, whose, "", overcommit, out);
    }
    // By the shares counted: those shares and the clusters where they are counted.
    type Set<'a> = (Vec<&'a Spanned<Share>>, Vec<&'a str>);
    let mut sets: BTreeMap<Vec<Span>, Set> = BTreeMap::new();
    for &cluster in clusters {
        let shares: Vec<&Spanned<Share>> =
            projects.iter().filter(|p| p.may_use(cluster)).filter_map(|p| p.share_on(cluster)).collect();
        let key = shares.iter().map(|s| s.span).collect();
        sets.entry(key).or_insert_with(|| (shares, Vec::new())).1.push(cluster);
    }
    let several = sets.len() > 1;
    for (shares, on) in sets.values() {
        let on = if several {
            let names: Vec<String> = on.iter().map(|c| format!("`{c}`")).collect();
            format!(" on {}", names.join(", "))
        } else {
            String::new()
        };
        sibling_shares(shares, whose, &on, overcommit, out);
    }
}

fn sibling_shares(
    shares: &[&Spanned<Share>],
    whose: &str,
    on: &str,
    overcommit: Option<Span>,
    out: &mut Vec<Diagnostic>,
) {
    let is_percent = |s: &Spanned<Share>| matches!(s.value, Share::Percent(_));
    let Some(first) = shares.first() else { return };
    if let Some(other) = shares.iter().find(|s| is_percent(s) != is_percent(first)) {
        let kind = |s: &Spanned<Share>| if is_percent(s) { "a percentage" } else { "a weight" };
        out.push(
            Diagnostic::error(Code::ShareMixed, format!("{whose} mix percentages and weights{on}"))
                .label(other.span, kind(other))
                .label(first.span, kind(first))
                .help(
                    "siblings are shared out either by percentages of the parent or by weights; use one kind",
                ),
        );
        return;
    }
    let mut sum = 0.0;
    let mut crossing = None;
    for share in shares {
        if let Share::Percent(p) = share.value {
            sum += p.0;
            if sum > 100.0 + 1e-9 && crossing.is_none() {
                crossing = Some(*share);
            }
        }
    }
    let Some(crossing) = crossing else { return };
    let total = format!("{}%", (sum * 1e6).round() / 1e6);
    let mut d = match overcommit {
        None => Diagnostic::error(Code::ShareOvercommit, format!("{whose} claim {total}{on}"))
            .label(crossing.span, format!("brings the sum to {total}"))
            .help("percentages of one parent may sum to at most 100%; lower them, or declare `overcommit=#true` on the parent (on `policy` for top-level projects) if that is intended"),
        Some(flag) => Diagnostic::warning(Code::ShareOvercommit, format!("{whose} claim {total}{on}"))
            .label(crossing.span, format!("brings the sum to {total}"))
            .label(flag, "overcommit declared here")
            .help(format!("overcommit is declared, so each share is scaled down by 100/{total} to fit")),
    };
    for share in shares.iter().filter(|s| s.span != crossing.span) {
        d = d.label(share.span, "");
    }
    out.push(d);
}
