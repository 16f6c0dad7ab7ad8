//! The audit: what happened in a trace, measured against the budgets. Jobs are replayed
//! in submit order with their recorded start and end; at every event each cluster's GPUs
//! are divided among the budgets with demand ([`entitlement`]), and entitled, delivered and
//! used GPU-hours are integrated exactly, per budget (leaf and inner), per window and over
//! the whole trace, with wait percentiles per contract and per budget.
//!
//! Only jobs that have not ended are held (a heap of their coming events), so memory does
//! not grow with the trace; waits are kept as one number per job for exact percentiles.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::entitlement::{Change, EntitlementError, Event, Hierarchy, Ledger, Node, NodeId};
use crate::trace::{Job, TraceError};
use allot_compiler::normalize::{Model, Project};

/// Figures of one budget (or of everything) over a span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BudgetFigures {
    /// The project's path; `(unbudgeted)` for jobs no budget covers.
    pub project: String,
    pub cluster: String,
    pub used_gpu_hours: f64,
    pub entitled_gpu_hours: f64,
    pub delivered_gpu_hours: f64,
    pub waits: Waits,
}

impl BudgetFigures {
    /// Delivered over entitled GPU-hours; `None` when nothing was entitled.
    pub fn delivered_ratio(&self) -> Option<f64> {
        (self.entitled_gpu_hours > 0.0).then(|| self.delivered_gpu_hours / self.entitled_gpu_hours)
    }
}

/// Waits of a set of jobs, in seconds, for exact nearest-rank percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waits(Vec<u32>);

impl Waits {
    pub(crate) fn push(&mut self, seconds: i64) {
        self.0.push(seconds.clamp(0, u32::MAX as i64) as u32);
    }

    pub fn jobs(&self) -> usize {
        self.0.len()
    }

    /// Every wait, in seconds, in the order the jobs were recorded (for histograms).
    pub fn values(&self) -> &[u32] {
        &self.0
    }

    /// The nearest-rank percentile: the smallest wait that `p`% of the jobs do not exceed.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.0.is_empty() {
            return None;
        }
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted.get(rank.min(sorted.len()) - 1).map(|&w| u64::from(w))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContractFigures {
    pub contract: String,
    pub waits: Waits,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFigures {
    pub cluster: String,
    pub gpus: u64,
    pub used_gpu_hours: f64,
}

/// Figures between two instants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Span {
    pub start: i64,
    pub end: i64,
    pub budgets: Vec<BudgetFigures>,
    pub contracts: Vec<ContractFigures>,
    pub clusters: Vec<ClusterFigures>,
}

impl Span {
    /// Delivered over entitled GPU-hours of all leaf budgets together.
    pub fn overall_ratio(&self, leaves: &[String]) -> Option<f64> {
        let leaf = |b: &&BudgetFigures| leaves.contains(&b.project);
        let entitled: f64 = self.budgets.iter().filter(leaf).map(|b| b.entitled_gpu_hours).sum();
        let delivered: f64 = self.budgets.iter().filter(leaf).map(|b| b.delivered_gpu_hours).sum();
        (entitled > 0.0).then(|| delivered / entitled)
    }

    /// Used GPU-hours over GPU-hours available, per cluster.
    pub fn utilisation(&self, cluster: &ClusterFigures) -> f64 {
        let hours = (self.end - self.start) as f64 / 3600.0;
        if hours <= 0.0 || cluster.gpus == 0 {
            0.0
        } else {
            cluster.used_gpu_hours / (hours * cluster.gpus as f64)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Audit {
    pub whole: Span,
    pub windows: Vec<Span>,
    /// Leaf budgets' paths (for the overall ratio and the per-budget expectation).
    pub leaves: Vec<String>,
    pub jobs: usize,
    pub skipped_rows: usize,
}

#[derive(Debug, PartialEq)]
pub enum AuditError {
    Trace(TraceError),
    /// A job the budgets cannot place, with why.
    Job {
        id: String,
        message: String,
    },
    NotSorted {
        id: String,
        submit: i64,
        previous: i64,
    },
    Arithmetic(String),
}

impl std::fmt::Display for AuditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditError::Trace(e) => write!(f, "{e}"),
            AuditError::Job { id, message } => write!(f, "job {id}: {message}"),
            AuditError::NotSorted { id, submit, previous } => {
                write!(
                    f,
                    "job {id} is submitted at {submit}, before the previous job ({previous}): the trace must be in submit order"
                )
            }
            AuditError::Arithmetic(m) => write!(f, "{m}"),
        }
    }
}

impl From<EntitlementError> for AuditError {
    fn from(e: EntitlementError) -> Self {
        AuditError::Arithmetic(format!("{e:?}"))
    }
}

/// One cluster's budgets as an entitlement hierarchy.
pub(crate) struct ClusterBook {
    pub(crate) name: String,
    pub(crate) gpus: u64,
    pub(crate) hierarchy: Hierarchy,
    /// Project path of each node.
    pub(crate) paths: Vec<String>,
    /// The node of an unbudgeted pseudo-budget: a leaf with no share.
    pub(crate) unbudgeted: NodeId,
}

const UNBUDGETED: &str = "(unbudgeted)";

impl ClusterBook {
    pub(crate) fn new(
        model: &Model,
        cluster: &allot_compiler::normalize::Cluster,
    ) -> Result<ClusterBook, AuditError> {
        let mut nodes = Vec::new();
        let mut paths = Vec::new();
        fn add(
            projects: &[Project],
            cluster: &str,
            parent: Option<NodeId>,
            nodes: &mut Vec<Node>,
            paths: &mut Vec<String>,
        ) {
            for p in projects {
                let Some(a) = p.clusters.get(cluster) else { continue };
                let id = NodeId(nodes.len());
                let mut node = Node::new(&p.path, parent, a.normalized_share.max(1e-12));
                if let Some(cap) = a.max_gpus {
                    node = node.with_cap(cap as f64);
                }
                nodes.push(node);
                paths.push(p.path.clone());
                add(&p.children, cluster, Some(id), nodes, paths);
            }
        }
        add(&model.projects, &cluster.name, None, &mut nodes, &mut paths);
        // Work outside any budget has demand but no share: it is entitled to nothing.
        let unbudgeted = NodeId(nodes.len());
        nodes.push(Node::new(UNBUDGETED, None, 1e-12).with_cap(0.0));
        paths.push(UNBUDGETED.into());
        Ok(ClusterBook {
            name: cluster.name.clone(),
            gpus: cluster.gpus,
            hierarchy: Hierarchy::new(nodes)?,
            paths,
            unbudgeted,
        })
    }
}

/// Where a job's project and cluster lead.
pub(crate) struct Resolver<'m> {
    model: &'m Model,
    by_path: BTreeMap<&'m str, &'m Project>,
    by_name: BTreeMap<&'m str, Vec<&'m Project>>,
    defaults: BTreeMap<&'m str, &'m Project>,
}

impl<'m> Resolver<'m> {
    pub(crate) fn new(model: &'m Model) -> Resolver<'m> {
        let mut resolver =
            Resolver { model, by_path: BTreeMap::new(), by_name: BTreeMap::new(), defaults: BTreeMap::new() };
        fn walk<'m>(projects: &'m [Project], r: &mut Resolver<'m>) {
            for p in projects {
                r.by_path.insert(&p.path, p);
                r.by_name.entry(&p.name).or_default().push(p);
                for u in &p.users {
                    if u.default || !r.defaults.contains_key(u.name.as_str()) {
                        r.defaults.insert(&u.name, p);
                    }
                }
                walk(&p.children, r);
            }
        }
        walk(&model.projects, &mut resolver);
        resolver
    }

    /// The leaf project of a job, `None` when no budget covers it.
    pub(crate) fn project(&self, job: &Job) -> Option<&'m Project> {
        let named = if job.project.is_empty() {
            self.defaults.get(job.user.as_str()).copied()
        } else {
            self.by_path.get(job.project.as_str()).copied().or_else(|| {
                match self.by_name.get(job.project.as_str()).map(Vec::as_slice) {
                    Some([only]) => Some(*only),
                    _ => None,
                }
            })
        };
        named.filter(|p| p.children.is_empty())
    }

    /// The index of the job's cluster among the model's.
    pub(crate) fn cluster(&self, job: &Job) -> Result<usize, String> {
        let clusters = &self.model.clusters;
        if job.cluster.is_empty() {
            return if clusters.len() == 1 {
                Ok(0)
            } else {
                Err("names no cluster, and the budgets have several".into())
            };
        }
        clusters
            .iter()
            .position(|c| {
                c.name == job.cluster || c.bindings.slurm.as_ref().is_some_and(|s| s.cluster == job.cluster)
            })
            .ok_or_else(|| format!("cluster `{}` is not in the budgets", job.cluster))
    }

    pub(crate) fn contract(&self, job: &Job) -> String {
        if self.model.contracts.iter().any(|c| c.name == job.contract) {
            job.contract.clone()
        } else {
            self.model.contracts.iter().find(|c| c.default).map_or_else(String::new, |c| c.name.clone())
        }
    }
}

/// A future change to one cluster's ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    at: i64,
    /// 0 a start, 1 an end: a job that starts and ends at one instant starts first.
    order: u8,
    cluster: usize,
    node: usize,
    gpus: u32,
    /// For an end: whether the job ran (then its use leaves with its demand).
    ran: bool,
}

/// Replays `jobs` (in submit order) against the model; `window` in seconds.
pub fn audit(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    window: u64,
    skip_bad_rows: bool,
) -> Result<Audit, AuditError> {
    let books: Vec<ClusterBook> =
        model.clusters.iter().map(|c| ClusterBook::new(model, c)).collect::<Result<_, _>>()?;
    let mut ledgers: Vec<Ledger<'_>> =
        books.iter().map(|b| Ledger::new(&b.hierarchy, b.gpus as f64)).collect::<Result<_, _>>()?;
    let resolver = Resolver::new(model);
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let window = window.max(1) as i64;
    let mut state = Progress::default();
    let mut audit = Audit::default();

    for job in jobs {
        let job = match job {
            Ok(job) => job,
            Err(_) if skip_bad_rows => {
                audit.skipped_rows += 1;
                continue;
            }
            Err(e) => return Err(AuditError::Trace(e)),
        };
        if let Some(previous) = state.last_submit
            && job.submit < previous
        {
            return Err(AuditError::NotSorted { id: job.id, submit: job.submit, previous });
        }
        state.last_submit = Some(job.submit);
        let origin = *state.origin.get_or_insert(job.submit.div_euclid(window) * window);
        flush(&mut pending, &mut ledgers, job.submit, &books, &mut state, &mut audit, window)?;
        let cluster =
            resolver.cluster(&job).map_err(|message| AuditError::Job { id: job.id.clone(), message })?;
        let book = &books[cluster];
        let node =
            resolver.project(&job).and_then(|p| book.hierarchy.find(&p.path)).unwrap_or(book.unbudgeted);
        let gpus = f64::from(job.gpus);
        state.window_start.get_or_insert(origin);
        state.ensure_window(job.submit, window, &books, &mut ledgers, &mut audit)?;
        ledgers[cluster].apply(&Event { at: job.submit as f64, change: Change::Demand { node, gpus } })?;
        if let Some(start) = job.start {
            pending.push(Reverse(Pending {
                at: start,
                order: 0,
                cluster,
                node: node.0,
                gpus: job.gpus,
                ran: true,
            }));
            if !job.requeued {
                let wait = start - job.submit;
                let contract = resolver.contract(&job);
                state.record_wait(&book.paths[node.0], &book.name, &contract, wait);
            }
        }
        // A job without an end holds its demand (and use) to the end of the trace.
        if let Some(end) = job.end {
            let ran = job.start.is_some();
            pending.push(Reverse(Pending { at: end, order: 1, cluster, node: node.0, gpus: job.gpus, ran }));
        }
        audit.jobs += 1;
    }
    let last = pending.iter().map(|Reverse(p)| p.at).max().or(state.last_submit).unwrap_or(0);
    flush(&mut pending, &mut ledgers, i64::MAX - 1, &books, &mut state, &mut audit, window)?;
    let end = last.max(state.last_event);
    state.ensure_window(end, window, &books, &mut ledgers, &mut audit)?;
    for ledger in ledgers.iter_mut() {
        ledger.advance_to(end as f64)?;
    }
    state.close_window(end, &books, &ledgers, &mut audit);
    let origin = state.origin.unwrap_or(0);
    audit.whole = totals(origin, end, &books, &ledgers, &state.all_waits);
    audit.leaves = books
        .iter()
        .flat_map(|b| {
            (0..b.paths.len())
                .filter(|&i| b.hierarchy.is_leaf(NodeId(i)) && NodeId(i) != b.unbudgeted)
                .map(|i| b.paths[i].clone())
        })
        .collect();
    audit.leaves.sort();
    audit.leaves.dedup();
    Ok(audit)
}

/// Waits by (budget, cluster) and by contract.
#[derive(Default)]
struct WaitBook {
    budgets: BTreeMap<(String, String), Waits>,
    contracts: BTreeMap<String, Waits>,
}

#[derive(Default)]
struct Progress {
    origin: Option<i64>,
    last_submit: Option<i64>,
    last_event: i64,
    window_start: Option<i64>,
    /// Cumulative figures at the start of the current window, per cluster and node.
    at_window_start: Vec<Vec<(f64, f64, f64)>>,
    window_waits: WaitBook,
    all_waits: WaitBook,
}

impl Progress {
    fn record_wait(&mut self, project: &str, cluster: &str, contract: &str, wait: i64) {
        for book in [&mut self.window_waits, &mut self.all_waits] {
            book.budgets.entry((project.to_string(), cluster.to_string())).or_default().push(wait);
            book.contracts.entry(contract.to_string()).or_default().push(wait);
        }
    }

    /// Closes every window that ends at or before `at`.
    fn ensure_window(
        &mut self,
        at: i64,
        window: i64,
        books: &[ClusterBook],
        ledgers: &mut [Ledger<'_>],
        audit: &mut Audit,
    ) -> Result<(), AuditError> {
        if self.at_window_start.is_empty() {
            self.at_window_start = books.iter().map(|b| vec![(0.0, 0.0, 0.0); b.paths.len()]).collect();
        }
        while let Some(start) = self.window_start
            && at >= start + window
        {
            let end = start + window;
            for ledger in ledgers.iter_mut() {
                ledger.advance_to(end as f64)?;
            }
            self.close_window(end, books, ledgers, audit);
        }
        Ok(())
    }

    fn close_window(&mut self, end: i64, books: &[ClusterBook], ledgers: &[Ledger<'_>], audit: &mut Audit) {
        let Some(start) = self.window_start else { return };
        if end <= start {
            return;
        }
        let mut span = Span { start, end, ..Span::default() };
        for (c, (book, ledger)) in books.iter().zip(ledgers).enumerate() {
            let mut cluster_used = 0.0;
            for (i, path) in book.paths.iter().enumerate() {
                let id = NodeId(i);
                let now = (
                    ledger.used_gpu_hours(id),
                    ledger.entitled_gpu_hours(id),
                    ledger.delivered_gpu_hours(id),
                );
                let before =
                    self.at_window_start.get(c).and_then(|v| v.get(i)).copied().unwrap_or((0.0, 0.0, 0.0));
                if book.hierarchy.node(id).is_some_and(|n| n.parent.is_none()) {
                    cluster_used += now.0 - before.0;
                }
                let waits =
                    self.window_waits.budgets.remove(&(path.clone(), book.name.clone())).unwrap_or_default();
                let figures = BudgetFigures {
                    project: path.clone(),
                    cluster: book.name.clone(),
                    used_gpu_hours: now.0 - before.0,
                    entitled_gpu_hours: now.1 - before.1,
                    delivered_gpu_hours: now.2 - before.2,
                    waits,
                };
                if figures.used_gpu_hours > 0.0
                    || figures.entitled_gpu_hours > 0.0
                    || figures.waits.jobs() > 0
                {
                    span.budgets.push(figures);
                }
                if let Some(slot) = self.at_window_start.get_mut(c).and_then(|v| v.get_mut(i)) {
                    *slot = now;
                }
            }
            span.clusters.push(ClusterFigures {
                cluster: book.name.clone(),
                gpus: book.gpus,
                used_gpu_hours: cluster_used,
            });
        }
        span.contracts = std::mem::take(&mut self.window_waits.contracts)
            .into_iter()
            .map(|(contract, waits)| ContractFigures { contract, waits })
            .collect();
        self.window_waits.budgets.clear();
        audit.windows.push(span);
        self.window_start = Some(end);
    }
}

/// Applies every pending change due before `until`, closing windows on the way.
fn flush(
    pending: &mut BinaryHeap<Reverse<Pending>>,
    ledgers: &mut [Ledger<'_>],
    until: i64,
    books: &[ClusterBook],
    state: &mut Progress,
    audit: &mut Audit,
    window: i64,
) -> Result<(), AuditError> {
    while let Some(Reverse(next)) = pending.peek().copied() {
        if next.at > until {
            break;
        }
        pending.pop();
        state.ensure_window(next.at, window, books, ledgers, audit)?;
        let node = NodeId(next.node);
        let gpus = f64::from(next.gpus);
        let ledger = &mut ledgers[next.cluster];
        let at = next.at as f64;
        if next.order == 0 {
            ledger.apply(&Event { at, change: Change::Use { node, gpus } })?;
        } else {
            ledger.apply(&Event { at, change: Change::Demand { node, gpus: -gpus } })?;
            if next.ran {
                ledger.apply(&Event { at, change: Change::Use { node, gpus: -gpus } })?;
            }
        }
        state.last_event = state.last_event.max(next.at);
    }
    Ok(())
}

fn totals(start: i64, end: i64, books: &[ClusterBook], ledgers: &[Ledger<'_>], waits: &WaitBook) -> Span {
    let mut span = Span { start, end, ..Span::default() };
    for (book, ledger) in books.iter().zip(ledgers) {
        let mut cluster_used = 0.0;
        for (i, path) in book.paths.iter().enumerate() {
            let id = NodeId(i);
            let figures = BudgetFigures {
                project: path.clone(),
                cluster: book.name.clone(),
                used_gpu_hours: ledger.used_gpu_hours(id),
                entitled_gpu_hours: ledger.entitled_gpu_hours(id),
                delivered_gpu_hours: ledger.delivered_gpu_hours(id),
                waits: waits.budgets.get(&(path.clone(), book.name.clone())).cloned().unwrap_or_default(),
            };
            if book.hierarchy.node(id).is_some_and(|n| n.parent.is_none()) {
                cluster_used += figures.used_gpu_hours;
            }
            span.budgets.push(figures);
        }
        span.clusters.push(ClusterFigures {
            cluster: book.name.clone(),
            gpus: book.gpus,
            used_gpu_hours: cluster_used,
        });
    }
    span.contracts = waits
        .contracts
        .iter()
        .map(|(c, w)| ContractFigures { contract: c.clone(), waits: w.clone() })
        .collect();
    span
}
