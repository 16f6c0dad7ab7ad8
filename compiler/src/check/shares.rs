//! Shares: positive, one kind per sibling set, and percentages within 100% unless
//! overcommit is declared, both for the projects' own shares and per cluster where
//! `on CLUSTER share=...` overrides them.

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Budget, Project, Share, walk};
use crate::source::{Span, Spanned};

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    walk(&budget.projects, &mut |_, project| {
        positive(project.share.as_ref(), out);
        for o in &project.overrides {
            positive(o.share.as_ref(), out);
        }
    });
    let declared = |flag: Option<&Spanned<bool>>| flag.filter(|f| f.value).map(|f| f.span);
    siblings(&budget.projects, "top-level projects", declared(budget.policy.overcommit.as_ref()), out);
    walk(&budget.projects, &mut |_, parent| {
        let whose = format!("the children of `{}`", parent.name.value);
        siblings(&parent.children, &whose, declared(parent.overcommit.as_ref()), out);
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
    }
}

fn siblings(projects: &[Project], whose: &str, overcommit: Option<Span>, out: &mut Vec<Diagnostic>) {
    let base: Vec<_> = projects.iter().filter_map(|p| p.share.as_ref()).collect();
    sibling_shares(&base, whose, None, overcommit, out);
    let overridden: BTreeSet<&str> = projects
        .iter()
        .flat_map(|p| p.overrides.iter().filter(|o| o.share.is_some()).map(|o| o.cluster.value.as_str()))
        .collect();
    for cluster in overridden {
        let shares: Vec<_> = projects
            .iter()
            .filter(|p| p.may_use(cluster))
            .filter_map(|p| p.share_on(cluster))
            .collect();
        sibling_shares(&shares, whose, Some(cluster), overcommit, out);
    }
}

fn sibling_shares(
    shares: &[&Spanned<Share>],
    whose: &str,
    cluster: Option<&str>,
    overcommit: Option<Span>,
    out: &mut Vec<Diagnostic>,
) {
    let on = cluster.map(|c| format!(" on cluster `{c}`")).unwrap_or_default();
    let is_percent = |s: &Spanned<Share>| matches!(s.value, Share::Percent(_));
    let Some(first) = shares.first() else { return };
    if let Some(other) = shares.iter().find(|s| is_percent(s) != is_percent(first)) {
        let kind = |s: &Spanned<Share>| if is_percent(s) { "a percentage" } else { "a weight" };
        out.push(
            Diagnostic::error(Code::ShareMixed, format!("{whose} mix percentages and weights{on}"))
                .label(other.span, kind(other))
                .label(first.span, kind(first))
                .help("siblings are shared out either by percentages of the parent or by weights; use one kind"),
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
