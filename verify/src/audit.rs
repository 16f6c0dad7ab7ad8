//! The audit: what happened in a trace, measured against the budgets. Jobs are replayed
//! in submit order with their recorded start and end, each placed on its cluster and
//! budget by [`budgets`](crate::budgets); at every event each cluster's GPUs are divided
//! among the budgets with demand ([`entitlement`](crate::entitlement)), and entitled,
//! delivered and used GPU-hours are integrated exactly into [`figures`](crate::figures),
//! per budget (leaf and inner), per window and over the whole trace, with wait percentiles
//! per contract and per budget.
//!
//! Only jobs that have not ended are held (a heap of their coming events), so memory does
//! not grow with the trace; waits are kept as one number per job for exact percentiles.
//!
//! Windows are sparse: one in which nothing happened (no GPU used or entitled, no job
//! submitted) is not kept, and the audit jumps over a stretch where no job is waiting or
//! running instead of walking it window by window. At most [`MAX_WINDOWS`] windows are
//! kept; a trace with activity in more is an error that names the limit, so a job that
//! runs for centuries under a one-second window costs an error, not the machine's memory.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

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
}

/// The most windows an audit keeps (windows in which something happened).
pub const MAX_WINDOWS: usize = 100_000;
/// The longest window, in seconds (about 35,000 years: beyond any trace's times).
const MAX_WINDOW_SECONDS: u64 = 1 << 40;

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
    let budgets = Budgets::new(model)?;
    let clusters = &budgets.clusters;
    let mut ledgers: Vec<Ledger<'_>> =
        clusters.iter().map(|b| Ledger::new(&b.hierarchy, b.gpus as f64)).collect::<Result<_, _>>()?;
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let window = window.clamp(1, MAX_WINDOW_SECONDS) as i64;
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
        flush(&mut pending, &mut ledgers, job.submit, clusters, &mut state, &mut audit, window)?;
        let Assignment { cluster, node } =
            budgets.assign(&job).map_err(|error| AuditError::Job { id: job.id.clone(), error })?;
        let gpus = f64::from(job.gpus);
        state.window_start.get_or_insert(origin);
        state.ensure_window(job.submit, window, clusters, &mut ledgers, &mut audit)?;
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
            let wait = match job.wait {
                WaitCount::Measured => Some(start - job.submit),
                WaitCount::Total(wait) => Some(wait),
                WaitCount::Elsewhere => None,
            };
            if let Some(wait) = wait {
                let ClusterBudgets { name, paths, .. } = &clusters[cluster];
                state.record_wait(&paths[node.0], name, budgets.contract(&job), wait);
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
    flush(&mut pending, &mut ledgers, i64::MAX - 1, clusters, &mut state, &mut audit, window)?;
    let end = last.max(state.last_event);
    state.ensure_window(end, window, clusters, &mut ledgers, &mut audit)?;
    for ledger in ledgers.iter_mut() {
        ledger.advance_to(end as f64)?;
    }
    state.close_window(end, window, clusters, &ledgers, &mut audit)?;
    let origin = state.origin.unwrap_or(0);
    audit.whole = totals(origin, end, clusters, &ledgers, &state.all_waits);
    audit.leaves = clusters
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
        while let Some(start) = self.window_start
            && at >= start.saturating_add(window)
        {
            let end = start.saturating_add(window);
            if end <= start {
                break; // at the end of time: the last window is closed by the caller
            }
            for ledger in ledgers.iter_mut() {
                ledger.advance_to(end as f64)?;
            }
            self.close_window(end, window, clusters, ledgers, audit)?;
            if ledgers.iter().all(Ledger::is_idle) {
                self.window_start = Some(end + at.saturating_sub(end) / window * window);
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
        let mut span = Span { start, end, ..Span::default() };
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
                let waits = self
                    .window_waits
                    .budgets
                    .remove(&(path.clone(), cluster.name.clone()))
                    .unwrap_or_default();
                let figures = BudgetFigures {
                    project: path.clone(),
                    cluster: cluster.name.clone(),
                    used_gpu_hours: now.0 - before.0,
                    entitled_gpu_hours: now.1 - before.1,
                    delivered_gpu_hours: now.2 - before.2,
                    waits,
                };
                if figures.has_activity() {
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
        span.contracts = std::mem::take(&mut self.window_waits.contracts)
            .into_iter()
            .map(|(contract, waits)| ContractFigures { contract, waits })
            .collect();
        self.window_waits.budgets.clear();
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
fn flush(
    pending: &mut BinaryHeap<Reverse<Pending>>,
    ledgers: &mut [Ledger<'_>],
    until: i64,
    clusters: &[ClusterBudgets],
    state: &mut Progress,
    audit: &mut Audit,
    window: i64,
) -> Result<(), AuditError> {
    while let Some(Reverse(next)) = pending.peek().copied() {
        if next.at > until {
            break;
        }
        pending.pop();
        state.ensure_window(next.at, window, clusters, ledgers, audit)?;
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

fn totals(
    start: i64,
    end: i64,
    clusters: &[ClusterBudgets],
    ledgers: &[Ledger<'_>],
    waits: &WaitBook,
) -> Span {
    let mut span = Span { start, end, ..Span::default() };
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
                waits: waits.budgets.get(&(path.clone(), cluster.name.clone())).cloned().unwrap_or_default(),
            };
            if cluster.hierarchy.node(id).is_some_and(|n| n.parent.is_none()) {
                cluster_used += figures.used_gpu_hours;
            }
            span.budgets.push(figures);
        }
        span.clusters.push(ClusterFigures {
            cluster: cluster.name.clone(),
            gpus: cluster.gpus,
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
