//! The audit: what happened in a trace, measured against the budgets. Jobs are replayed
//! in submit order with their recorded start and end, each placed on its cluster and
//! budget by [`budgets`](crate::budgets); a job is demand from when it could run (its
//! eligibility, else its submission) until it ends. At every event each cluster's GPUs are
//! divided among the budgets with demand ([`entitlement`](crate::entitlement)), and
//! entitled, delivered and used GPU-hours are integrated exactly into
//! [`figures`](crate::figures), per budget (leaf and inner), per window and over the whole
//! trace (from its first submission to its last event), with wait percentiles per contract
//! and per budget. A job that never started waited until it was cancelled, or until the
//! trace ends (a censored wait); a row with a duration and no start records a submission
//! only and is counted, not audited.
//!
//! Only jobs that have not ended are held (a queue of their coming events, each one
//! number; a job's changes due at its submission are applied at once), so memory does not
//! grow with the trace; waits are kept as one number per job for exact percentiles, and
//! the jobs still waiting at the end as one record each. On the way from one job to the
//! next, budgets and contracts are numbers, not names: nothing is allocated per event.
//!
//! Windows start at the first submission, or at multiples of the window since the epoch
//! ([`Alignment`]); the first and the last may be cut short by the trace's span
//! ([`Span::partial`](crate::figures::Span::partial)). Windows are sparse: one in which nothing happened (no GPU used or entitled, no job
//! submitted) is not kept, and the audit jumps over a stretch where no job is waiting or
//! running instead of walking it window by window. At most [`MAX_WINDOWS`] windows are
//! kept; a trace with activity in more is an error that names the limit, so a job that
//! runs for centuries under a one-second window costs an error, not the machine's memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use allot_compiler::ir::Model;

use crate::budgets::{Assignment, Budgets, ClusterBudgets, JobError};
use crate::entitlement::{Change, EntitlementError, Event, Ledger, NodeId};
use crate::figures::{Audit, BudgetFigures, ClusterFigures, ContractFigures, Span, Waits};
use crate::trace::{Job, TraceError, WaitCount};

/// Why a trace cannot be audited (or simulated).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Trace(TraceError),
    /// A job the budgets cannot place.
    #[error("job {id}: {error}")]
    Job { id: String, error: JobError },
    #[error(
        "job {id} is submitted at {submit}, before the previous job ({previous}): the trace must be in submit order"
    )]
    NotSorted { id: String, submit: i64, previous: i64 },
    /// Entitlement arithmetic that the budgets' numbers break.
    #[error(transparent)]
    Entitlement(#[from] EntitlementError),
    /// Not one job of the trace could be used, and why.
    #[error("no job of the trace could be used: {0}")]
    NoJobs(String),
    #[error(
        "the trace has activity in more than {limit} windows of {window} s, more than allot keeps; use a longer window"
    )]
    TooManyWindows { limit: usize, window: i64 },
    #[error("the budgets make {nodes} nodes over their clusters, more than the {limit} an audit can index")]
    TooManyBudgets { nodes: usize, limit: usize },
}

/// The most windows an audit keeps (windows in which something happened).
pub const MAX_WINDOWS: usize = 100_000;
/// The longest window, in seconds (about 35,000 years: beyond any trace's times).
const MAX_WINDOW_SECONDS: u64 = 1 << 40;

/// Where windows start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Alignment {
    /// At the first submission, and every window after it.
    #[default]
    FirstSubmit,
    /// At multiples of the window since the epoch (the first window cut to start at the
    /// first submission).
    Epoch,
}

/// How to audit a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The windows' length, in seconds.
    pub window: u64,
    /// Count and pass over bad rows (rows that are not jobs, jobs the budgets cannot place)
    /// instead of stopping at the first.
    pub skip_bad_rows: bool,
    pub align: Alignment,
}

/// A future change to one cluster's ledger, packed in one number so that events order by
/// time, then [`DEMAND`], [`START`], [`END`] (at one instant a job is demand before it
/// starts, and starts before it ends), then budget (cluster, node), GPUs, and whether the
/// job ran. From the highest bits: the time (64 bits, sign flipped), the order (2), the
/// budget's index over all clusters (29), the GPUs (32), whether the job ran (1: for an
/// end, its use leaves with its demand).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pending(u128);

/// The most budget nodes, over all clusters, a [`Pending`] can name.
const MAX_NODES: usize = 1 << 29;

impl Pending {
    fn new(at: i64, order: u8, budget: usize, gpus: u32, ran: bool) -> Pending {
        let time = (at as u64) ^ (1 << 63);
        Pending(
            (u128::from(time) << 64)
                | (u128::from(order) << 62)
                | ((budget as u128) << 33)
                | (u128::from(gpus) << 1)
                | u128::from(ran),
        )
    }

    fn at(self) -> i64 {
        (self.time() ^ (1 << 63)) as i64
    }

    /// The time, ordered as unsigned.
    fn time(self) -> u64 {
        (self.0 >> 64) as u64
    }

    fn order(self) -> u8 {
        ((self.0 >> 62) & 3) as u8
    }

    fn budget(self) -> usize {
        ((self.0 >> 33) as usize) & (MAX_NODES - 1)
    }

    fn gpus(self) -> u32 {
        (self.0 >> 1) as u32
    }

    fn ran(self) -> bool {
        self.0 & 1 == 1
    }
}

/// The pending changes, the earliest first.
#[derive(Default)]
struct Queue(BinaryHeap<Reverse<Pending>>);

impl Queue {
    fn new() -> Queue {
        Queue::default()
    }

    fn push(&mut self, change: Pending) {
        self.0.push(Reverse(change));
    }

    /// Takes the earliest change if it is due at or before `until`.
    fn pop_due(&mut self, until: i64) -> Option<Pending> {
        let &Reverse(first) = self.0.peek()?;
        if first.at() > until {
            return None;
        }
        self.0.pop().map(|Reverse(c)| c)
    }
}

const DEMAND: u8 = 0;
const START: u8 = 1;
const END: u8 = 2;

/// Every budget node of every cluster, numbered in the clusters' order.
struct Index {
    /// The number of the first node of each cluster.
    first: Vec<usize>,
    /// (cluster, node) of each number.
    nodes: Vec<(usize, NodeId)>,
}

impl Index {
    fn new(clusters: &[ClusterBudgets]) -> Result<Index, AuditError> {
        let mut first = Vec::with_capacity(clusters.len());
        let mut nodes = Vec::new();
        for (c, cluster) in clusters.iter().enumerate() {
            first.push(nodes.len());
            nodes.extend((0..cluster.paths.len()).map(|i| (c, NodeId(i))));
        }
        if nodes.len() > MAX_NODES {
            return Err(AuditError::TooManyBudgets { nodes: nodes.len(), limit: MAX_NODES });
        }
        Ok(Index { first, nodes })
    }

    fn of(&self, cluster: usize, node: NodeId) -> usize {
        self.first[cluster] + node.0
    }
}

/// A job still waiting when the trace ends: its wait is known at the end.
struct Censored {
    /// The start of the window it was submitted in.
    window: i64,
    /// Its budget's number in the [`Index`].
    budget: usize,
    /// Its contract's number among [`Contracts::names`].
    contract: usize,
    /// When it became demand.
    since: i64,
}

/// The names of contracts a job can run under, sorted: the model's, and none (`""`).
struct Contracts<'m> {
    names: Vec<&'m str>,
    /// The model's contracts in its order, each with its name's number.
    model: Vec<(&'m str, usize)>,
    /// The number of the contract of a job that names none of the model's: the default
    /// contract's, else none's.
    default: usize,
}

impl<'m> Contracts<'m> {
    fn new(model: &'m Model) -> Contracts<'m> {
        let mut names: Vec<&str> = model.contracts.iter().map(|c| c.name.as_str()).collect();
        names.push("");
        names.sort_unstable();
        names.dedup();
        let number = |name: &str| names.binary_search(&name).unwrap_or(0);
        let model_contracts = model.contracts.iter().map(|c| (c.name.as_str(), number(&c.name))).collect();
        let default = number(model.contracts.iter().find(|c| c.default).map_or("", |c| c.name.as_str()));
        Contracts { model: model_contracts, default, names }
    }

    /// The number of the contract a job runs under (as [`Budgets::contract`] says): the one
    /// it names, else the default contract, else none.
    fn of(&self, job: &Job) -> usize {
        self.model.iter().find(|(name, _)| *name == job.contract).map_or(self.default, |&(_, number)| number)
    }
}

/// Replays `jobs` (in submit order) against the model; `window` in seconds, windows aligned
/// to the first submission.
pub fn audit(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    window: u64,
    skip_bad_rows: bool,
) -> Result<Audit, AuditError> {
    audit_with(model, jobs, Options { window, skip_bad_rows, align: Alignment::FirstSubmit })
}

/// Replays `jobs` (in submit order) against the model, as `options` say.
pub fn audit_with(
    model: &Model,
    jobs: impl Iterator<Item = Result<Job, TraceError>>,
    options: Options,
) -> Result<Audit, AuditError> {
    // With grants, the shares before the first grant boundary, then from each boundary on:
    // every ledger takes its cluster's weights of each period at its start.
    let (budgets, later) = Budgets::over_time(model)?;
    let clusters = &budgets.clusters;
    let index = Index::new(clusters)?;
    let mut ledgers: Vec<Ledger<'_>> = clusters
        .iter()
        .enumerate()
        .map(|(c, b)| {
            let reweighs = later.iter().map(move |(from, p)| (*from as f64, &p.clusters[c].hierarchy));
            Ok(Ledger::new(&b.hierarchy, b.gpus as f64)?.reweighing(reweighs))
        })
        .collect::<Result<_, AuditError>>()?;
    let mut pending = Queue::new();
    let window = options.window.clamp(1, MAX_WINDOW_SECONDS) as i64;
    let mut state = Progress::new(index.nodes.len(), Contracts::new(model));
    let mut audit = Audit { window, ..Audit::default() };
    let mut censored: Vec<Censored> = Vec::new();
    let mut last_submit: Option<i64> = None;

    for job in jobs {
        let job = match job {
            Ok(job) => job,
            Err(_) if options.skip_bad_rows => {
                audit.skipped_rows += 1;
                continue;
            }
            Err(e) => return Err(AuditError::Trace(e)),
        };
        if let Some(previous) = last_submit
            && job.submit < previous
        {
            return Err(AuditError::NotSorted { id: job.id.into(), submit: job.submit, previous });
        }
        last_submit = Some(job.submit);
        if job.start.is_none() && job.duration.is_some() {
            // A submission with the work it asks for: what a simulation replays.
            audit.not_audited += 1;
            continue;
        }
        let Assignment { cluster, node } = match budgets.assign(&job) {
            Ok(assignment) => assignment,
            Err(_) if options.skip_bad_rows => {
                audit.skipped_rows += 1;
                continue;
            }
            Err(error) => return Err(AuditError::Job { id: job.id.into(), error }),
        };
        if state.window_start.is_none() {
            // The trace's span and its first window start at its first submission.
            state.origin = job.submit;
            state.phase = match options.align {
                Alignment::FirstSubmit => job.submit,
                Alignment::Epoch => 0,
            };
            state.window_start = Some(job.submit);
            state.last_event = job.submit;
        }
        flush(&mut pending, &mut ledgers, job.submit, clusters, &index, &mut state, &mut audit, window)?;
        state.ensure_window(job.submit, window, clusters, &mut ledgers, &mut audit)?;
        state.last_event = state.last_event.max(job.submit);
        let budget = index.of(cluster, node);
        // Demand from when the job could run: held or waiting on another, it is no one's.
        let demand = job.eligible.unwrap_or(job.submit);
        let events = [
            Some(Pending::new(demand, DEMAND, budget, job.gpus, false)),
            job.start.map(|start| Pending::new(start, START, budget, job.gpus, true)),
            // A job without an end holds its demand (and use) to the end of the trace.
            job.end.map(|end| Pending::new(end, END, budget, job.gpus, job.start.is_some())),
        ];
        // Every change due before the submission is applied: the job's first changes due at
        // its submission are the next ones, and are applied now rather than queued.
        let mut queue = false;
        for event in events.into_iter().flatten() {
            queue |= event.at() != job.submit;
            if queue {
                pending.push(event);
            } else {
                apply(&mut ledgers, &index, event)?;
            }
        }
        let contract = state.contracts.of(&job);
        let wait = match (job.wait, job.start, job.end) {
            (WaitCount::Measured, Some(start), _) => Some(start - demand),
            // Cancelled while waiting: it waited until then.
            (WaitCount::Measured, None, Some(end)) => Some(end - demand),
            (WaitCount::Measured, None, None) => {
                let window = state.window_start.unwrap_or(job.submit);
                censored.push(Censored { window, budget, contract, since: demand });
                state.expect_censored(budget, contract);
                None
            }
            (WaitCount::Total(wait), _, _) => Some(wait),
            (WaitCount::Elsewhere, _, _) => None,
        };
        if let Some(wait) = wait {
            state.record_wait(budget, contract, wait);
        }
        audit.jobs += 1;
    }
    if audit.jobs == 0 {
        return Err(AuditError::NoJobs(no_jobs(&audit)));
    }
    flush(&mut pending, &mut ledgers, i64::MAX - 1, clusters, &index, &mut state, &mut audit, window)?;
    let end = state.last_event;
    state.ensure_window(end, window, clusters, &mut ledgers, &mut audit)?;
    for ledger in ledgers.iter_mut() {
        ledger.advance_to(end as f64)?;
    }
    state.close_window(end, window, clusters, &ledgers, &mut audit)?;
    for job in censored {
        let (cluster, node) = index.nodes[job.budget];
        let (path, name) = (&clusters[cluster].paths[node.0], &clusters[cluster].name);
        let contract = state.contracts.names[job.contract];
        let wait = end - job.since;
        let whole = &mut state.all_waits;
        whole.budgets[job.budget].get_or_insert_default().push_censored(wait);
        whole.contracts[job.contract].get_or_insert_default().push_censored(wait);
        // The window it was submitted in was kept with a row for its budget and contract.
        if let Ok(w) = audit.windows.binary_search_by_key(&job.window, |w| w.start) {
            let span = &mut audit.windows[w];
            if let Some(b) = span.budgets.iter_mut().find(|b| b.project == *path && b.cluster == *name) {
                b.waits.push_censored(wait);
            }
            if let Some(c) = span.contracts.iter_mut().find(|c| c.contract == contract) {
                c.waits.push_censored(wait);
            }
        }
    }
    audit.whole = totals(state.origin, end, clusters, &ledgers, &mut state);
    // Leaf budgets: an inner project's own jobs only when it had some.
    let listed: std::collections::HashSet<(&str, &str)> =
        audit.whole.budgets.iter().map(|b| (b.project.as_str(), b.cluster.as_str())).collect();
    let leaves: Vec<String> = clusters
        .iter()
        .flat_map(|b| {
            (0..b.paths.len())
                .filter(|&i| b.hierarchy.is_leaf(NodeId(i)) && NodeId(i) != b.unbudgeted)
                .filter(|&i| listed.contains(&(b.paths[i].as_str(), b.name.as_str())))
                .map(|i| b.paths[i].clone())
        })
        .collect();
    audit.leaves = leaves;
    audit.leaves.sort();
    audit.leaves.dedup();
    Ok(audit)
}

/// Why no job of a trace could be audited.
fn no_jobs(audit: &Audit) -> String {
    let submissions = "record submissions only (no start times): `allot replay simulate` replays them";
    match (audit.skipped_rows, audit.not_audited) {
        (0, 0) => "the trace has no jobs".to_string(),
        (0, _) => format!("the trace's rows {submissions}"),
        (skipped, 0) => format!("every row was skipped as bad ({skipped})"),
        (skipped, rest) => format!("{skipped} rows were skipped as bad, and the other {rest} {submissions}"),
    }
}

/// Waits by budget (its number in the [`Index`]) and by contract (its number among
/// [`Contracts::names`]); `None` for those without a job.
struct WaitBook {
    budgets: Vec<Option<Waits>>,
    contracts: Vec<Option<Waits>>,
}

impl WaitBook {
    fn new(budgets: usize, contracts: usize) -> WaitBook {
        WaitBook { budgets: vec![None; budgets], contracts: vec![None; contracts] }
    }
}

struct Progress<'m> {
    /// The contracts' names, by number.
    contracts: Contracts<'m>,
    /// The first submission: where the trace's span starts.
    origin: i64,
    /// A boundary of windows: the first submission, or the epoch.
    phase: i64,
    last_event: i64,
    window_start: Option<i64>,
    /// Cumulative figures at the start of the current window, per cluster and node.
    at_window_start: Vec<Vec<(f64, f64, f64)>>,
    window_waits: WaitBook,
    all_waits: WaitBook,
}

impl<'m> Progress<'m> {
    fn new(budgets: usize, contracts: Contracts<'m>) -> Progress<'m> {
        let count = contracts.names.len();
        Progress {
            contracts,
            origin: 0,
            phase: 0,
            last_event: 0,
            window_start: None,
            at_window_start: Vec::new(),
            window_waits: WaitBook::new(budgets, count),
            all_waits: WaitBook::new(budgets, count),
        }
    }

    fn record_wait(&mut self, budget: usize, contract: usize, wait: i64) {
        for book in [&mut self.window_waits, &mut self.all_waits] {
            book.budgets[budget].get_or_insert_default().push(wait);
            book.contracts[contract].get_or_insert_default().push(wait);
        }
    }

    /// Keeps the current window's rows of a budget and a contract with a job still waiting
    /// at the end of the trace: its wait is added to them then.
    fn expect_censored(&mut self, budget: usize, contract: usize) {
        let book = &mut self.window_waits;
        book.budgets[budget].get_or_insert_default();
        book.contracts[contract].get_or_insert_default();
    }

    /// The end of the window that holds `at`: the next boundary after it.
    fn window_end(&self, at: i64, window: i64) -> i64 {
        let offset = at.saturating_sub(self.phase);
        self.phase.saturating_add((offset.div_euclid(window) + 1).saturating_mul(window))
    }

    /// Closes every window that ends at or before `at`; when nothing is waiting or running
    /// (no ledger changes before `at`), jumps to the window that holds `at`.
    fn ensure_window(
        &mut self,
        at: i64,
        window: i64,
        clusters: &[ClusterBudgets],
        ledgers: &mut [Ledger<'_>],
        audit: &mut Audit,
    ) -> Result<(), AuditError> {
        if self.at_window_start.is_empty() {
            self.at_window_start = clusters.iter().map(|b| vec![(0.0, 0.0, 0.0); b.paths.len()]).collect();
        }
        while let Some(start) = self.window_start {
            let end = self.window_end(start, window);
            if at < end || end <= start {
                break;
            }
            for ledger in ledgers.iter_mut() {
                ledger.advance_to(end as f64)?;
            }
            self.close_window(end, window, clusters, ledgers, audit)?;
            if ledgers.iter().all(Ledger::is_idle) {
                self.window_start = Some(end + (at - end) / window * window);
            }
        }
        Ok(())
    }

    /// Ends the current window at `end`; keeps its figures if anything happened in it.
    fn close_window(
        &mut self,
        end: i64,
        window: i64,
        clusters: &[ClusterBudgets],
        ledgers: &[Ledger<'_>],
        audit: &mut Audit,
    ) -> Result<(), AuditError> {
        let Some(start) = self.window_start else { return Ok(()) };
        if end <= start {
            return Ok(());
        }
        let mut span = Span { start, end, partial: end - start < window, ..Span::default() };
        // The budgets' numbers in the index: node by node, cluster by cluster.
        let mut budget = 0;
        for (c, (cluster, ledger)) in clusters.iter().zip(ledgers).enumerate() {
            let mut cluster_used = 0.0;
            for (i, path) in cluster.paths.iter().enumerate() {
                let id = NodeId(i);
                let now = (
                    ledger.used_gpu_hours(id),
                    ledger.entitled_gpu_hours(id),
                    ledger.delivered_gpu_hours(id),
                );
                let before =
                    self.at_window_start.get(c).and_then(|v| v.get(i)).copied().unwrap_or((0.0, 0.0, 0.0));
                if cluster.hierarchy.node(id).is_some_and(|n| n.parent.is_none()) {
                    cluster_used += now.0 - before.0;
                }
                // A budget with jobs in the window keeps its row, even before their waits are
                // known (jobs still waiting at the end of the trace).
                let waits = self.window_waits.budgets.get_mut(budget).and_then(Option::take);
                budget += 1;
                let had_jobs = waits.is_some();
                let waits = waits.unwrap_or_default();
                let figures = BudgetFigures {
                    project: path.clone(),
                    cluster: cluster.name.clone(),
                    used_gpu_hours: now.0 - before.0,
                    entitled_gpu_hours: now.1 - before.1,
                    delivered_gpu_hours: now.2 - before.2,
                    waits,
                };
                if figures.has_activity() || had_jobs {
                    span.budgets.push(figures);
                }
                if let Some(slot) = self.at_window_start.get_mut(c).and_then(|v| v.get_mut(i)) {
                    *slot = now;
                }
            }
            span.clusters.push(ClusterFigures {
                cluster: cluster.name.clone(),
                gpus: cluster.gpus,
                used_gpu_hours: cluster_used,
            });
        }
        // By name, as the contracts are numbered.
        span.contracts = (self.window_waits.contracts.iter_mut().zip(&self.contracts.names))
            .filter_map(|(waits, name)| {
                Some(ContractFigures { contract: name.to_string(), waits: waits.take()? })
            })
            .collect();
        self.window_waits.budgets.iter_mut().for_each(|waits| *waits = None);
        self.window_start = Some(end);
        if span.budgets.is_empty() && span.contracts.is_empty() {
            return Ok(());
        }
        if audit.windows.len() >= MAX_WINDOWS {
            return Err(AuditError::TooManyWindows { limit: MAX_WINDOWS, window });
        }
        audit.windows.push(span);
        Ok(())
    }
}

/// Applies every pending change due before `until`, closing windows on the way.
#[allow(clippy::too_many_arguments)]
fn flush(
    pending: &mut Queue,
    ledgers: &mut [Ledger<'_>],
    until: i64,
    clusters: &[ClusterBudgets],
    index: &Index,
    state: &mut Progress<'_>,
    audit: &mut Audit,
    window: i64,
) -> Result<(), AuditError> {
    while let Some(next) = pending.pop_due(until) {
        state.ensure_window(next.at(), window, clusters, ledgers, audit)?;
        apply(ledgers, index, next)?;
        state.last_event = state.last_event.max(next.at());
    }
    Ok(())
}

/// Applies one change to its cluster's ledger.
fn apply(ledgers: &mut [Ledger<'_>], index: &Index, change: Pending) -> Result<(), AuditError> {
    let (cluster, node) = index.nodes[change.budget()];
    let gpus = f64::from(change.gpus());
    let ledger = &mut ledgers[cluster];
    let at = change.at() as f64;
    match change.order() {
        DEMAND => ledger.apply(&Event { at, change: Change::Demand { node, gpus } })?,
        START => ledger.apply(&Event { at, change: Change::Use { node, gpus } })?,
        _ => {
            ledger.apply(&Event { at, change: Change::Demand { node, gpus: -gpus } })?;
            if change.ran() {
                ledger.apply(&Event { at, change: Change::Use { node, gpus: -gpus } })?;
            }
        }
    }
    Ok(())
}

/// The whole trace's figures; the waits are moved out of `state`.
fn totals(
    start: i64,
    end: i64,
    clusters: &[ClusterBudgets],
    ledgers: &[Ledger<'_>],
    state: &mut Progress<'_>,
) -> Span {
    let waits = &mut state.all_waits;
    let mut span = Span { start, end, ..Span::default() };
    let mut budget = 0;
    for (cluster, ledger) in clusters.iter().zip(ledgers) {
        let mut cluster_used = 0.0;
        for (i, path) in cluster.paths.iter().enumerate() {
            let id = NodeId(i);
            let figures = BudgetFigures {
                project: path.clone(),
                cluster: cluster.name.clone(),
                used_gpu_hours: ledger.used_gpu_hours(id),
                entitled_gpu_hours: ledger.entitled_gpu_hours(id),
                delivered_gpu_hours: ledger.delivered_gpu_hours(id),
                waits: waits.budgets.get_mut(budget).and_then(Option::take).unwrap_or_default(),
            };
            budget += 1;
            if cluster.hierarchy.node(id).is_some_and(|n| n.parent.is_none()) {
                cluster_used += figures.used_gpu_hours;
            }
            // An inner project's own jobs are listed only when it had some.
            if cluster.is_own(id) && !figures.has_activity() {
                continue;
            }
            span.budgets.push(figures);
        }
        span.clusters.push(ClusterFigures {
            cluster: cluster.name.clone(),
            gpus: cluster.gpus,
            used_gpu_hours: cluster_used,
        });
    }
    span.contracts = (waits.contracts.iter_mut().zip(&state.contracts.names))
        .filter_map(|(waits, name)| {
            Some(ContractFigures { contract: name.to_string(), waits: waits.take()? })
        })
        .collect();
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_change_keeps_its_fields() {
        let change = Pending::new(-3, END, MAX_NODES - 1, u32::MAX, true);
        assert_eq!(
            (change.at(), change.order(), change.budget(), change.gpus(), change.ran()),
            (-3, END, MAX_NODES - 1, u32::MAX, true)
        );
        assert!(Pending::new(-1, END, 9, 9, true) < Pending::new(0, DEMAND, 0, 0, false));
        assert!(Pending::new(i64::MIN, END, 9, 9, true) < Pending::new(i64::MAX, DEMAND, 0, 0, false));
    }
}
