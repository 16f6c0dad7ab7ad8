//! What moved, as a reviewer reads it: a row per changed project and per budget whose
//! guaranteed GPUs moved beyond rounding, the clusters as columns, in tree order, with the
//! ancestors of every row shown once; the top rows by GPUs moved when there are many, the
//! rest (and the budgets moved by rounding only) kept apart for a folded section. Built
//! once from the semantic diff and both models; [`super::moved`] renders it.

use std::collections::{BTreeMap, BTreeSet};

use allot_compiler::diff::{Change, Diff, Kind, ShareMove};
use allot_compiler::ir::{Model, Project, ShareSpec};

/// The most rows the table of what moved shows; the rest go to the folded part.
pub const MAX_ROWS: usize = 40;

/// A budget's guaranteed GPUs on one cluster, before and after (`None`: not on it).
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub before: Option<u64>,
    pub after: Option<u64>,
    /// Its share on this cluster, where it differs from the row's share.
    pub share: Option<String>,
}

impl Cell {
    /// The change in GPUs (a side absent counts as none).
    pub fn delta(&self) -> i64 {
        self.after.unwrap_or(0) as i64 - self.before.unwrap_or(0) as i64
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Its path at the new revision (the old one if it was removed).
    pub path: String,
    /// How the project itself changed (`None`: only its GPUs moved).
    pub kind: Option<Kind>,
    /// Its share as written: `["35%", "30%"]` when it changed (`new` or `removed` on a side).
    pub share: Vec<String>,
    /// One per cluster of [`Table::clusters`]; empty for an ancestor shown for context.
    pub cells: Vec<Cell>,
}

impl Row {
    /// GPUs moved, over every cluster.
    pub fn moved(&self) -> u64 {
        self.cells.iter().map(|c| c.delta().unsigned_abs()).sum()
    }

    pub fn depth(&self) -> usize {
        self.path.matches('/').count()
    }

    pub fn name(&self) -> &str {
        self.path.rsplit_once('/').map_or(&self.path, |(_, name)| name)
    }

    pub fn context(&self) -> bool {
        self.cells.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// The clusters, in the new revision's order, then those it removed.
    pub clusters: Vec<String>,
    /// The rows shown, in tree order, ancestors included.
    pub rows: Vec<Row>,
    /// Budgets moved beyond the shown rows (rounding only, or past [`MAX_ROWS`]), in tree order.
    pub rest: Vec<Row>,
    /// Of [`Table::rest`], how many moved beyond rounding (cut for size).
    pub cut: usize,
    /// Per cluster, the GPUs that move from one budget to another.
    pub moving: Vec<u64>,
    /// Projects added, removed, moved, renamed or changed.
    pub projects_changed: usize,
    /// Everyone who must approve, in order of first mention (`None`: the maintainers).
    pub approvers: Vec<Option<String>>,
}

/// A share as the budget files write it.
fn share_text(share: &ShareSpec) -> String {
    match share {
        ShareSpec::Percent(p) => format!("{p}%"),
        ShareSpec::Weight(w) => format!("weight {w}"),
    }
}

fn parent_path(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// The project path a change is about, if it is about a project.
pub(super) fn project_of(change: &Change) -> Option<&str> {
    change.subject.strip_prefix("project ")
}

/// Before and after for a changed share, else the share written now.
fn share_column(change: Option<&Change>, project: Option<&Project>) -> Vec<String> {
    let detail = change.and_then(|c| c.details.iter().find(|d| d.field == "share"));
    match detail {
        Some(d) if d.before.is_empty() => vec!["new".into(), d.after.clone()],
        Some(d) if d.after.is_empty() => vec![d.before.clone(), "removed".into()],
        Some(d) => vec![d.before.clone(), d.after.clone()],
        None => project.map(|p| share_text(&p.share)).into_iter().collect(),
    }
}

/// Every project by path, the new revision's first (old paths only for the removed).
fn projects<'m>(old: &'m Model, new: &'m Model) -> BTreeMap<String, &'m Project> {
    let mut out: BTreeMap<String, &Project> =
        old.projects_by_path().into_iter().map(|(k, (p, _))| (k, p)).collect();
    out.extend(new.projects_by_path().into_iter().map(|(k, (p, _))| (k, p)));
    out
}

/// Each path's place in a depth-first walk of the new revision (then the old one).
fn tree_order(old: &Model, new: &Model) -> BTreeMap<String, usize> {
    fn walk(projects: &[Project], order: &mut BTreeMap<String, usize>) {
        for p in projects {
            let next = order.len();
            order.entry(p.path.clone()).or_insert(next);
            walk(&p.children, order);
        }
    }
    let mut order = BTreeMap::new();
    walk(&new.projects, &mut order);
    walk(&old.projects, &mut order);
    order
}

/// A key that sorts paths in tree order: each ancestor's place, then its name.
fn tree_key(path: &str, order: &BTreeMap<String, usize>) -> Vec<(usize, String)> {
    let mut key = Vec::new();
    let mut at = 0;
    for segment in path.split('/') {
        at += segment.len();
        let prefix = &path[..at];
        key.push((order.get(prefix).copied().unwrap_or(usize::MAX), segment.to_string()));
        at += 1;
    }
    key
}

/// Where each moved or renamed project's subtree went: (old path, new path).
fn relocations(diff: &Diff) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for change in &diff.changes {
        let Some(path) = project_of(change) else { continue };
        let (parent, name) = (parent_path(path), path.rsplit_once('/').map_or(path, |(_, n)| n));
        let join = |parent: &str, name: &str| {
            if parent.is_empty() { name.to_string() } else { format!("{parent}/{name}") }
        };
        for d in &change.details {
            match d.field.as_str() {
                "parent" if change.kind == Kind::Moved => out.push((join(&d.before, name), path.to_string())),
                "name" if change.kind == Kind::Renamed => {
                    out.push((join(parent, &d.before), path.to_string()))
                }
                _ => {}
            }
        }
    }
    out
}

/// An old path as the new revision names it (its nearest relocated ancestor's new path).
fn renamed(path: &str, relocations: &[(String, String)]) -> String {
    relocations
        .iter()
        .filter(|(old, _)| path == old || path.strip_prefix(old.as_str()).is_some_and(|r| r.starts_with('/')))
        .max_by_key(|(old, _)| old.len())
        .map_or(path.to_string(), |(old, new)| format!("{new}{}", &path[old.len()..]))
}

/// Each budget's own GPUs on a cluster (a leaf's guaranteed, an inner project's part that no
/// child is guaranteed; the cluster's unbudgeted part under the empty path), by `key`.
fn own_gpus(model: &Model, cluster: &str, key: &dyn Fn(&str) -> String) -> BTreeMap<String, u64> {
    fn walk(
        projects: &[Project],
        cluster: &str,
        key: &dyn Fn(&str) -> String,
        out: &mut BTreeMap<String, u64>,
    ) {
        for p in projects {
            if let Some(a) = p.clusters.get(cluster) {
                let inner = p.children.iter().any(|c| c.clusters.contains_key(cluster));
                out.insert(key(&p.path), if inner { a.unallocated_gpus } else { a.guaranteed_gpus });
            }
            walk(&p.children, cluster, key, out);
        }
    }
    let mut out = BTreeMap::new();
    if let Some(c) = model.clusters.iter().find(|c| c.name == cluster) {
        out.insert(String::new(), c.unallocated_gpus);
    }
    walk(&model.projects, cluster, key, &mut out);
    out
}

/// The GPUs that move from one budget to another on a cluster: what the budgets that gain
/// gain (a project moved or renamed is the same budget).
fn moving(old: &Model, new: &Model, cluster: &str, relocations: &[(String, String)]) -> u64 {
    let before = own_gpus(old, cluster, &|p| renamed(p, relocations));
    let after = own_gpus(new, cluster, &|p| p.to_string());
    after.iter().map(|(path, a)| a.saturating_sub(before.get(path).copied().unwrap_or(0))).sum()
}

/// Whether a move is rounding only: the share of the cluster is the same, a GPU moved.
fn rounding(m: &ShareMove) -> bool {
    match (m.before, m.after) {
        (Some(b), Some(a)) => (a.effective_share - b.effective_share).abs() <= 1e-9,
        _ => false,
    }
}

impl Table {
    pub fn new(diff: &Diff, old: &Model, new: &Model) -> Table {
        let mut clusters: Vec<String> = new.clusters.iter().map(|c| c.name.clone()).collect();
        for c in &old.clusters {
            if !clusters.contains(&c.name) {
                clusters.push(c.name.clone());
            }
        }
        let all = projects(old, new);
        let order = tree_order(old, new);
        let changes: BTreeMap<&str, &Change> =
            diff.changes.iter().filter_map(|c| project_of(c).map(|p| (p, c))).collect();
        let mut moves: BTreeMap<&str, Vec<&ShareMove>> = BTreeMap::new();
        for m in &diff.share_moves {
            moves.entry(m.project.as_str()).or_default().push(m);
        }
        let row = |path: &str| -> Row {
            let project = all.get(path).copied();
            let share = share_column(changes.get(path).copied(), project);
            let cells = clusters
                .iter()
                .map(|cluster| {
                    let allocation = project.and_then(|p| p.clusters.get(cluster));
                    let cluster_share = allocation
                        .filter(|a| project.is_some_and(|p| a.share != p.share))
                        .map(|a| share_text(&a.share));
                    let moved = moves.get(path).and_then(|ms| ms.iter().find(|m| &m.cluster == cluster));
                    let (before, after) = match moved {
                        Some(m) => (m.before.map(|b| b.guaranteed_gpus), m.after.map(|a| a.guaranteed_gpus)),
                        None => {
                            (allocation.map(|a| a.guaranteed_gpus), allocation.map(|a| a.guaranteed_gpus))
                        }
                    };
                    Cell { before, after, share: cluster_share }
                })
                .collect();
            Row { path: path.to_string(), kind: changes.get(path).map(|c| c.kind), share, cells }
        };
        let key = |r: &Row| tree_key(&r.path, &order);

        // The rows: every changed project, every budget whose GPUs moved beyond rounding.
        let mut main: Vec<Row> = Vec::new();
        let mut rest: Vec<Row> = Vec::new();
        let paths: BTreeSet<&str> = changes.keys().copied().chain(moves.keys().copied()).collect();
        for path in paths {
            let beyond_rounding = moves.get(path).is_some_and(|ms| {
                ms.iter().any(|m| {
                    !rounding(m) && m.before.map(|b| b.guaranteed_gpus) != m.after.map(|a| a.guaranteed_gpus)
                })
            });
            let r = row(path);
            if changes.contains_key(path) || beyond_rounding { main.push(r) } else { rest.push(r) }
        }
        // The top rows by GPUs moved (changed projects first among equals), the rest apart.
        let mut cut = 0;
        if main.len() > MAX_ROWS {
            main.sort_by(|a, b| {
                b.moved()
                    .cmp(&a.moved())
                    .then(b.kind.is_some().cmp(&a.kind.is_some()))
                    .then(key(a).cmp(&key(b)))
            });
            let over = main.split_off(MAX_ROWS);
            cut = over.len();
            rest.extend(over);
        }
        // Each shown row's ancestors, once, for context.
        let shown: BTreeSet<String> = main.iter().map(|r| r.path.clone()).collect();
        let mut ancestors = BTreeSet::new();
        for r in &main {
            let mut at = parent_path(&r.path);
            while !at.is_empty() && !shown.contains(at) {
                ancestors.insert(at.to_string());
                at = parent_path(at);
            }
        }
        for path in ancestors {
            let project = all.get(&path).copied();
            main.push(Row { share: share_column(None, project), path, kind: None, cells: Vec::new() });
        }
        main.sort_by_key(|r| key(r));
        rest.sort_by_key(|r| key(r));

        let relocations = relocations(diff);
        let moving = clusters.iter().map(|c| moving(old, new, c, &relocations)).collect();
        let mut approvers: Vec<Option<String>> = Vec::new();
        for change in &diff.changes {
            let names: Vec<Option<String>> = if change.approvers.is_empty() {
                vec![None]
            } else {
                change.approvers.iter().cloned().map(Some).collect()
            };
            for name in names {
                if !approvers.contains(&name) {
                    approvers.push(name);
                }
            }
        }
        Table { clusters, rows: main, rest, cut, moving, projects_changed: changes.len(), approvers }
    }
}
