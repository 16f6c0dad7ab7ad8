//! The semantic diff of two normalised models (two revisions of a budget repository):
//! projects added, removed, moved and renamed; share, grant, limit, member, owner,
//! contract, policy, cluster and expectation changes; every project whose effective share or
//! guaranteed GPUs moved; and, for each change, the owners who must approve it (found by
//! [`crate::owners`] at the old revision, so that a change cannot name its own approvers).

use std::collections::{BTreeMap, BTreeSet};

use crate::ir::{Allocation, Cluster, Contract, Location, Model, Project, ShareSpec};
use crate::owners::owners_at;
use crate::units::{format_duration, format_instant};

/// One change, as a reviewer reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub kind: Kind,
    /// What changed: `project olmo/pretrain`, `contract batch`, `policy`, ...
    pub subject: String,
    pub details: Vec<Detail>,
    /// Where it is written at the new revision (at the old one for removals).
    pub source: Option<Location>,
    /// Owners who must approve it (empty: no owner is named above it).
    pub approvers: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Added,
    Removed,
    Moved,
    Renamed,
    Changed,
}

impl Kind {
    pub fn symbol(self) -> &'static str {
        match self {
            Kind::Added => "+",
            Kind::Removed => "-",
            Kind::Moved | Kind::Renamed | Kind::Changed => "~",
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Kind::Added => "added",
            Kind::Removed => "removed",
            Kind::Moved => "moved",
            Kind::Renamed => "renamed",
            Kind::Changed => "changed",
        }
    }
}

/// A setting before and after (empty when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detail {
    pub field: String,
    pub before: String,
    pub after: String,
}

/// A project's place on one cluster at one revision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Standing {
    /// Its fraction of its parent.
    pub normalized_share: f64,
    /// Its fraction of the cluster.
    pub effective_share: f64,
    pub guaranteed_gpus: u64,
}

/// A project's standing on one cluster, before and after.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareMove {
    /// Its path at the new revision (the old one if it was removed).
    pub project: String,
    pub cluster: String,
    pub before: Option<Standing>,
    pub after: Option<Standing>,
}

impl ShareMove {
    /// The change of effective share, in percentage points.
    pub fn points(&self) -> f64 {
        (self.after.map_or(0.0, |a| a.effective_share) - self.before.map_or(0.0, |b| b.effective_share))
            * 100.0
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diff {
    pub changes: Vec<Change>,
    pub share_moves: Vec<ShareMove>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// `3 projects changed, 1 added, ...; 12 effective shares moved`
    pub fn summary(&self) -> String {
        if self.changes.is_empty() {
            return "No changes.".into();
        }
        let mut counts: BTreeMap<Kind, usize> = BTreeMap::new();
        for c in &self.changes {
            *counts.entry(c.kind).or_default() += 1;
        }
        let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {}", k.word())).collect();
        let moved = self.share_moves.len();
        format!(
            "{} change{}: {}; {moved} effective share{} moved.",
            self.changes.len(),
            if self.changes.len() == 1 { "" } else { "s" },
            parts.join(", "),
            if moved == 1 { "" } else { "s" }
        )
    }
}

fn parent_path(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

fn name_of(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

/// How alike two projects are, 0 to 1: members, namespaces, owners, children names and share.
fn likeness(a: &Project, b: &Project) -> f64 {
    let set = |p: &Project| -> BTreeSet<String> {
        let mut s: BTreeSet<String> = p.users.iter().map(|u| format!("u:{}", u.name)).collect();
        s.extend(p.namespaces.iter().map(|n| format!("n:{n}")));
        s.extend(p.groups.iter().map(|g| format!("g:{g}")));
        s.extend(p.owners.iter().map(|o| format!("o:{o}")));
        s.extend(p.children.iter().map(|c| format!("c:{}", c.name)));
        s
    };
    let (x, y) = (set(a), set(b));
    let shared = x.intersection(&y).count() as f64;
    let union = x.union(&y).count() as f64;
    let members = if union == 0.0 { 0.5 } else { shared / union };
    let share = if a.share == b.share { 1.0 } else { 0.0 };
    0.8 * members + 0.2 * share
}

fn share_text(share: &ShareSpec) -> String {
    match share {
        ShareSpec::Percent(p) => format!("{p}%"),
        ShareSpec::Weight(w) => format!("weight {w}"),
    }
}

fn detail(field: &str, before: String, after: String) -> Option<Detail> {
    (before != after).then(|| Detail { field: field.into(), before, after })
}

fn list(items: &[String]) -> String {
    items.join(", ")
}

/// What changed inside a project (not its place in the tree).
fn project_details(old: &Project, new: &Project) -> Vec<Detail> {
    let users = |p: &Project| -> String {
        let mut names: Vec<String> = p
            .users
            .iter()
            .map(|u| if u.default { format!("{} (default)", u.name) } else { u.name.clone() })
            .collect();
        names.sort();
        list(&names)
    };
    let overrides = |p: &Project| -> String {
        p.clusters
            .iter()
            .filter(|(_, a)| a.share != p.share)
            .map(|(c, a)| format!("{c}: {}", share_text(&a.share)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let clusters = |p: &Project| -> String { p.clusters.keys().cloned().collect::<Vec<_>>().join(", ") };
    let grants = |p: &Project| -> String {
        let text = |g: &crate::ir::Grant| {
            let on = g.cluster.as_ref().map(|c| format!(" on {c}")).unwrap_or_default();
            let from = g.from.map(|f| format!(" from {}", format_instant(f))).unwrap_or_default();
            format!("{}{on}{from} until {} ({})", g.amount, format_instant(g.until), g.reason)
        };
        p.grants.iter().map(text).collect::<Vec<_>>().join("; ")
    };
    [
        detail("share", share_text(&old.share), share_text(&new.share)),
        detail("per-cluster shares", overrides(old), overrides(new)),
        detail("grants", grants(old), grants(new)),
        detail(
            "max GPUs",
            old.max_gpus.map(|m| m.to_string()).unwrap_or_default(),
            new.max_gpus.map(|m| m.to_string()).unwrap_or_default(),
        ),
        detail("clusters", clusters(old), clusters(new)),
        detail("contracts", list(&old.contracts), list(&new.contracts)),
        detail("users", users(old), users(new)),
        detail("groups", list(&old.groups), list(&new.groups)),
        detail("namespaces", list(&old.namespaces), list(&new.namespaces)),
        detail("owners", list(&old.owners), list(&new.owners)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn contract_text(c: &Contract) -> Vec<(&'static str, String)> {
    vec![
        ("min runtime", format_duration(c.min_runtime_seconds)),
        ("max runtime", c.max_runtime_seconds.map(format_duration).unwrap_or_default()),
        ("resumable", c.resumable.to_string()),
        ("max GPUs per job", c.max_gpus.map(|m| m.to_string()).unwrap_or_default()),
        ("reserved GPUs", c.reserve_gpus.map(|r| r.to_string()).unwrap_or_default()),
        ("default", c.default.to_string()),
    ]
}

fn cluster_text(c: &Cluster) -> Vec<(&'static str, String)> {
    vec![
        ("GPUs", c.gpus.to_string()),
        ("GPU type", c.gpu_type.clone()),
        ("GPUs per node", c.gpus_per_node.to_string()),
        ("bindings", serde_json::to_string(&c.bindings).unwrap_or_default()),
    ]
}

/// Changes between named items (contracts, clusters) compared field by field; they are
/// the repository maintainers' call.
fn named<T>(
    kind_name: &str,
    old: &[T],
    new: &[T],
    name: fn(&T) -> &str,
    fields: fn(&T) -> Vec<(&'static str, String)>,
    source: fn(&T) -> &Location,
    out: &mut Vec<Change>,
) {
    for n in new {
        let change = |kind, details| Change {
            kind,
            subject: format!("{kind_name} {}", name(n)),
            details,
            source: Some(source(n).clone()),
            approvers: Vec::new(),
        };
        match old.iter().find(|o| name(o) == name(n)) {
            None => out.push(change(
                Kind::Added,
                fields(n)
                    .into_iter()
                    .map(|(f, v)| Detail { field: f.into(), before: String::new(), after: v })
                    .collect(),
            )),
            Some(o) => {
                let details: Vec<Detail> = fields(o)
                    .into_iter()
                    .zip(fields(n))
                    .filter_map(|((f, before), (_, after))| detail(f, before, after))
                    .collect();
                if !details.is_empty() {
                    out.push(change(Kind::Changed, details));
                }
            }
        }
    }
    for o in old.iter().filter(|o| !new.iter().any(|n| name(n) == name(*o))) {
        out.push(Change {
            kind: Kind::Removed,
            subject: format!("{kind_name} {}", name(o)),
            details: Vec::new(),
            source: Some(source(o).clone()),
            approvers: Vec::new(),
        });
    }
}

/// The diff from `old` to `new`.
pub fn diff(old: &Model, new: &Model) -> Diff {
    let before = old.projects_by_path();
    let after = new.projects_by_path();
    let mut changes = Vec::new();

    // Match projects: same path; else the same name under another parent (a move); else
    // the most alike under the same parent (a rename).
    let mut matched: BTreeMap<String, String> = BTreeMap::new(); // new path -> old path
    for path in after.keys().filter(|p| before.contains_key(*p)) {
        matched.insert(path.clone(), path.clone());
    }
    // The old paths no new path has matched yet (in the end: the removed projects).
    let mut unmatched: BTreeSet<&String> = before.keys().filter(|p| !after.contains_key(*p)).collect();
    for new_path in after.keys().filter(|p| !before.contains_key(*p)) {
        let moved = unmatched
            .iter()
            .find(|old| name_of(old) == name_of(new_path) && parent_path(old) != parent_path(new_path));
        let old = moved.copied().or_else(|| {
            let (new_project, _) = after[new_path];
            unmatched
                .iter()
                .filter(|old| parent_path(old) == parent_path(new_path))
                .map(|old| (likeness(before[*old].0, new_project), *old))
                .filter(|(score, _)| *score >= 0.6)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, old)| old)
        });
        if let Some(old) = old {
            unmatched.remove(old);
            matched.insert(new_path.clone(), old.clone());
        }
    }

    // Approvers are the old revision's owners: the owners a change writes approve nothing
    // until it is merged. A path of the new revision is owned as its nearest ancestor (or
    // itself) that the old revision has, under its old path.
    let base_owners = |new_path: &str| -> Vec<String> {
        let mut at = new_path;
        while !at.is_empty() {
            if let Some(old_path) = matched.get(at) {
                return owners_at(&before, old_path);
            }
            at = parent_path(at);
        }
        Vec::new()
    };
    for (new_path, (new_project, _)) in &after {
        let source = Some(new_project.source.clone());
        let Some(old_path) = matched.get(new_path) else {
            let parent = parent_path(new_path);
            changes.push(Change {
                kind: Kind::Added,
                subject: format!("project {new_path}"),
                details: vec![Detail {
                    field: "share".into(),
                    before: String::new(),
                    after: share_text(&new_project.share),
                }],
                source,
                approvers: base_owners(parent),
            });
            continue;
        };
        let (old_project, _) = before[old_path];
        let mut details = Vec::new();
        let kind = if old_path == new_path {
            Kind::Changed
        } else if name_of(old_path) == name_of(new_path) {
            details.push(Detail {
                field: "parent".into(),
                before: parent_path(old_path).into(),
                after: parent_path(new_path).into(),
            });
            Kind::Moved
        } else {
            details.push(Detail {
                field: "name".into(),
                before: name_of(old_path).into(),
                after: name_of(new_path).into(),
            });
            Kind::Renamed
        };
        let own = project_details(old_project, new_project);
        // A share or a place in the tree is the parent's owners' call; the rest the project's.
        let structural = kind != Kind::Changed
            || own.iter().any(|d| d.field == "share" || d.field == "per-cluster shares");
        details.extend(own);
        if details.is_empty() {
            continue;
        }
        let mut approvers =
            if structural { base_owners(parent_path(new_path)) } else { owners_at(&before, old_path) };
        if kind == Kind::Moved {
            for owner in owners_at(&before, parent_path(old_path)) {
                if !approvers.contains(&owner) {
                    approvers.push(owner);
                }
            }
        }
        changes.push(Change { kind, subject: format!("project {new_path}"), details, source, approvers });
    }
    for &old_path in &unmatched {
        let (old_project, _) = before[old_path];
        changes.push(Change {
            kind: Kind::Removed,
            subject: format!("project {old_path}"),
            details: vec![Detail {
                field: "share".into(),
                before: share_text(&old_project.share),
                after: String::new(),
            }],
            source: Some(old_project.source.clone()),
            approvers: owners_at(&before, parent_path(old_path)),
        });
    }

    named(
        "contract",
        &old.contracts,
        &new.contracts,
        |c| &c.name,
        contract_text,
        |c| &c.source,
        &mut changes,
    );
    named("cluster", &old.clusters, &new.clusters, |c| &c.name, cluster_text, |c| &c.source, &mut changes);
    let policy = |m: &Model| {
        vec![
            ("window", format_duration(m.policy.window_seconds)),
            ("unbudgeted", m.policy.unbudgeted.as_str().to_string()),
            ("overflow", m.policy.overflow.as_str().to_string()),
            ("overcommit", m.policy.overcommit.to_string()),
        ]
    };
    let policy_details: Vec<Detail> =
        policy(old).into_iter().zip(policy(new)).filter_map(|((f, b), (_, a))| detail(f, b, a)).collect();
    if !policy_details.is_empty() {
        changes.push(Change {
            kind: Kind::Changed,
            subject: "policy".into(),
            details: policy_details,
            source: None,
            approvers: Vec::new(),
        });
    }
    let expectations = |m: &Model| serde_json::to_string(&m.expectations).unwrap_or_default();
    if let Some(d) = detail("expect", expectations(old), expectations(new)) {
        changes.push(Change {
            kind: Kind::Changed,
            subject: "expectations".into(),
            details: vec![d],
            source: None,
            approvers: Vec::new(),
        });
    }

    Diff { changes, share_moves: share_moves(&before, &after, &matched, &unmatched) }
}

/// The share moves between the project trees of one budget at two moments (the same
/// projects, in the same order; their allocations are all that is read): those [`diff`]
/// finds, without the rest of its comparison.
pub fn share_moves_over_time(before: &[Project], after: &[Project]) -> Vec<ShareMove> {
    fn walk(before: &[Project], after: &[Project], moves: &mut Vec<ShareMove>) {
        for (old, new) in before.iter().zip(after) {
            debug_assert_eq!(old.path, new.path, "one budget's projects");
            project_moves(&new.path, Some(old), Some(new), moves);
            walk(&old.children, &new.children, moves);
        }
    }
    let mut moves = Vec::new();
    walk(before, after, &mut moves);
    moves.sort_by(|a, b| (&a.cluster, &a.project).cmp(&(&b.cluster, &b.project)));
    moves
}

/// Every project and cluster whose effective share or guaranteed GPUs differ: `matched`
/// pairs each new path with its old one, and `removed` are the old paths without one.
fn share_moves(
    before: &BTreeMap<String, (&Project, Option<&Project>)>,
    after: &BTreeMap<String, (&Project, Option<&Project>)>,
    matched: &BTreeMap<String, String>,
    removed: &BTreeSet<&String>,
) -> Vec<ShareMove> {
    let mut moves = Vec::new();
    for (path, (project, _)) in after {
        let old = matched.get(path).and_then(|o| before.get(o)).map(|(p, _)| *p);
        project_moves(path, old, Some(project), &mut moves);
    }
    for &path in removed {
        project_moves(path, Some(before[path].0), None, &mut moves);
    }
    moves.sort_by(|a, b| (&a.cluster, &a.project).cmp(&(&b.cluster, &b.project)));
    moves
}

/// The moves of one project (`old` and `new` its two versions, either absent): each cluster
/// where its effective share or guaranteed GPUs differ, or where it has one version only.
fn project_moves(project: &str, old: Option<&Project>, new: Option<&Project>, moves: &mut Vec<ShareMove>) {
    let value = |a: &Allocation| Standing {
        normalized_share: a.normalized_share,
        effective_share: a.effective_share,
        guaranteed_gpus: a.guaranteed_gpus,
    };
    // Each cluster once: the old version's, then those only the new one has.
    let only_new = new
        .into_iter()
        .flat_map(|p| p.clusters.keys())
        .filter(|c| !old.is_some_and(|p| p.clusters.contains_key(*c)));
    for cluster in old.into_iter().flat_map(|p| p.clusters.keys()).chain(only_new) {
        let b = old.and_then(|p| p.clusters.get(cluster)).map(value);
        let a = new.and_then(|p| p.clusters.get(cluster)).map(value);
        let moved = match (b, a) {
            (Some(b), Some(a)) => {
                (a.effective_share - b.effective_share).abs() > 1e-9 || a.guaranteed_gpus != b.guaranteed_gpus
            }
            _ => true,
        };
        if moved {
            moves.push(ShareMove {
                project: project.to_string(),
                cluster: cluster.clone(),
                before: b,
                after: a,
            });
        }
    }
}
