//! Time in the model: the moments at which grants start or end (the only moments at which
//! a share changes), and whether the grants in force fit beside their siblings at each.

use std::collections::{BTreeMap, BTreeSet};

use crate::Compilation;
use crate::ast::{Budget, GrantAmount, walk};
use crate::diagnostic::{Code, Diagnostic};
use crate::diff::{ShareMove, diff, share_moves_over_time};
use crate::ir::{Grant, Model, Project};
use crate::normalize::{Excess, allocations, excess, normalize};
use crate::source::{Sources, Span};
use crate::units::{Instant, format_instant};

/// A moment at which shares change: the grants that start and end then, and every project
/// whose effective share or guaranteed GPUs move.
#[derive(Clone, Debug)]
pub struct Boundary {
    pub at: Instant,
    /// (project path, grant).
    pub starting: Vec<(String, Grant)>,
    pub ending: Vec<(String, Grant)>,
    pub moves: Vec<ShareMove>,
}

/// The boundaries after `from`, each against the model just before it (the first against
/// the model at `from`). The budget must have passed the checks.
pub fn calendar(budget: &Budget, sources: &Sources, from: Instant) -> Vec<Boundary> {
    // Every grant, whatever the moment; at each boundary, the division alone.
    let model = normalize(budget, sources, from);
    let grants: Vec<(String, Grant)> = grants(&model).into_iter().map(|(p, g)| (p, g.clone())).collect();
    let mut before = model.projects;
    let mut out = Vec::new();
    for at in boundaries(budget).into_iter().filter(|&t| t > from) {
        let after = allocations(budget, sources, at);
        let at_edge = |edge: fn(&Grant) -> Option<Instant>| -> Vec<(String, Grant)> {
            grants.iter().filter(|(_, g)| edge(g) == Some(at)).cloned().collect()
        };
        out.push(Boundary {
            at,
            starting: at_edge(|g| g.from),
            ending: at_edge(|g| Some(g.until)),
            moves: share_moves_over_time(&before, &after),
        });
        before = after;
    }
    out
}

/// How two revisions' shares differ at each moment after `from`, up to and including
/// `until`, at which a grant of either starts or ends: the moves from `old`'s model to
/// `new`'s then. Both must be free of errors.
pub fn compared(
    old: &Compilation,
    new: &Compilation,
    from: Instant,
    until: Instant,
) -> Vec<(Instant, Vec<ShareMove>)> {
    let mut moments = boundaries(&old.budget);
    moments.extend(boundaries(&new.budget));
    moments.sort_unstable();
    moments.dedup();
    moments
        .into_iter()
        .filter(|&t| t > from && t <= until)
        .filter(|_| old.model.is_some() && new.model.is_some())
        .map(|t| {
            let at = |c: &Compilation| normalize(&c.budget, &c.sources, t);
            (t, diff(&at(old), &at(new)).share_moves)
        })
        .collect()
}

/// Every grant of a model, with its project's path, parents before children.
pub fn grants(model: &Model) -> Vec<(String, &Grant)> {
    fn go<'m>(projects: &'m [Project], out: &mut Vec<(String, &'m Grant)>) {
        for p in projects {
            out.extend(p.grants.iter().map(|g| (p.path.clone(), g)));
            go(&p.children, out);
        }
    }
    let mut out = Vec::new();
    go(&model.projects, &mut out);
    out
}

/// Every moment at which some grant starts or ends, in order, once each.
pub fn boundaries(budget: &Budget) -> Vec<Instant> {
    let mut moments = Vec::new();
    walk(&budget.projects, &mut |_, project| {
        for grant in project.grants.iter().filter(|g| g.amount.is_some()) {
            moments.extend(grant.from.as_ref().map(|f| f.value));
            moments.extend(grant.until.as_ref().map(|u| u.value));
        }
    });
    moments.sort_unstable();
    moments.dedup();
    moments
}

/// The sibling sets that grants take beyond their parent at `at` or at a later boundary:
/// one error for each parent, at the first such moment, naming its clusters then. The
/// budget must have passed the checks.
///
/// A sum can grow only when a grant starts, or when a grant ends on a project below which
/// GPUs are granted (its GPUs shrink, so the same GPUs are more of it): only those moments
/// are divided again.
pub fn overcommitted_from(budget: &Budget, sources: &Sources, at: Instant) -> Vec<Diagnostic> {
    let mut moments = Vec::new();
    let mut granted = false;
    walk(&budget.projects, &mut |_, project| {
        granted |= !project.grants.is_empty();
        let gpus_below = || {
            let mut found = false;
            walk(&project.children, &mut |_, p| {
                found |= p
                    .grants
                    .iter()
                    .any(|g| matches!(g.amount.as_ref().map(|a| a.value), Some(GrantAmount::Gpus(_))));
            });
            found
        };
        for grant in project.grants.iter().filter(|g| g.amount.is_some()) {
            moments.extend(grant.from.as_ref().map(|f| f.value));
            if let Some(until) = &grant.until
                && until.value > at
                && gpus_below()
            {
                moments.push(until.value);
            }
        }
    });
    if !granted {
        return Vec::new();
    }
    moments.sort_unstable();
    moments.dedup();
    let later = moments.into_iter().filter(|&t| t > at);
    let excess: Vec<(Instant, Vec<Excess>)> =
        std::iter::once(at).chain(later).map(|t| (t, excess(budget, sources, t))).collect();
    overcommitted(&excess)
}

/// The grant boundaries around a moment, as a live view reads them.
#[derive(Clone, Debug)]
pub struct Around {
    /// The last boundary at or before the moment, with the model in force just before it.
    pub last: Option<(Instant, Model)>,
    /// The first boundary after the moment.
    pub next: Option<Instant>,
}

/// The boundaries around `at`: one normalisation at most, where [`timeline`] makes one per
/// boundary. The budget must have passed the checks.
pub fn around(budget: &Budget, sources: &Sources, at: Instant) -> Around {
    let moments = boundaries(budget);
    let last = moments.iter().copied().rfind(|&t| t <= at);
    Around {
        // The model of the second before: no boundary falls between it and `last`.
        last: last.map(|t| (t, normalize(budget, sources, t.saturating_sub(1)))),
        next: moments.into_iter().find(|&t| t > at),
    }
}

/// The model before the first boundary (from `i64::MIN`) and at each boundary, as
/// [`Model::timeline`] holds them for replays; empty when no grant ever changes a share.
/// The budget must have passed the checks.
pub fn timeline(budget: &Budget, sources: &Sources) -> Vec<(Instant, Model)> {
    let moments = boundaries(budget);
    if moments.is_empty() {
        return Vec::new();
    }
    std::iter::once(Instant::MIN).chain(moments).map(|t| (t, normalize(budget, sources, t))).collect()
}

/// For each parent, the first moment at which grants take its children beyond it.
fn overcommitted(excess: &[(Instant, Vec<Excess>)]) -> Vec<Diagnostic> {
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    for (moment, excess) in excess {
        // By parent: its clusters, the largest sum, the grants counted.
        let mut parents: BTreeMap<&str, (Vec<&str>, f64, Vec<Span>)> = BTreeMap::new();
        for e in excess.iter().filter(|e| !reported.contains(e.parent.as_str())) {
            let entry = parents.entry(&e.parent).or_default();
            entry.0.push(&e.cluster);
            entry.1 = entry.1.max(e.sum);
            for span in &e.grants {
                if !entry.2.contains(span) {
                    entry.2.push(*span);
                }
            }
        }
        for (parent, (clusters, sum, grants)) in parents {
            let whose = if parent.is_empty() {
                "the top-level projects".to_string()
            } else {
                format!("the children of `{parent}`")
            };
            let on: Vec<String> = clusters.iter().map(|c| format!("`{c}`")).collect();
            let total = format!("{}%", (sum * 100.0 * 1e6).round() / 1e6);
            let mut d = Diagnostic::error(
                Code::GrantOvercommit,
                format!(
                    "from {}, {whose} claim {total} of {} with their grants",
                    format_instant(*moment),
                    on.join(", ")
                ),
            )
            .help("a grant adds to its project's share, and the shares of one parent fit in it: lower a grant, end one before the other starts, or lower a sibling's share");
            for span in grants {
                d = d.label(span, "in force then");
            }
            out.push(d);
            reported.insert(parent);
        }
    }
    out
}
