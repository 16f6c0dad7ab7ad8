//! What `allot replay audit` prints: the figures of the whole trace (per budget, contract
//! and cluster) and the verdicts of the budgets' expectations, as text or Markdown, or all
//! of it and every window's figures as JSON.

use serde_json::{Value, json};

use super::table::{Cell, Column, Table};
use crate::expectations::Verdict;
use crate::figures::{Audit, BudgetFigures, ContractFigures, Span};

const BUDGETS: [Column<'static>; 9] = [
    Column::left().text("  ", "CLUSTER", 10).heading("cluster").key("cluster"),
    Column::left().text(" ", "BUDGET", 34).heading("budget").key("project"),
    Column::right().text(" ", "USED GPUh", 10).heading("used GPU-h").key("used_gpu_hours"),
    Column::right().text(" ", "ENTITLED", 10).heading("entitled GPU-h").key("entitled_gpu_hours"),
    Column::right().text(" ", "DELIVERED", 10).heading("delivered GPU-h").key("delivered_gpu_hours"),
    Column::right().text(" ", "RATIO", 7).heading("delivered").key("delivered_ratio"),
    Column::right().key("jobs"),
    Column::left().text("  ", "WAIT", 0).heading("wait p50 / p90 / p99").key("wait"),
    // In text and Markdown, the wait cell says how many waits are censored.
    Column::right().key("censored"),
];

const CONTRACTS: [Column<'static>; 4] = [
    Column::left().text("  ", "", 16).heading("contract").key("contract"),
    Column::right().text(" ", "", 8).heading("jobs").key("jobs"),
    Column::left().text(" jobs  wait ", "", 0).heading("wait p50 / p90 / p99 (nearest rank)").key("wait"),
    Column::right().key("censored"),
];

const CLUSTERS: [Column<'static>; 4] = [
    Column::left().text("  ", "", 16).key("cluster"),
    Column::right().text(" ", "", 6).key("gpus"),
    Column::right().text(" GPUs  used ", "", 10).key("used_gpu_hours"),
    Column::right().text(" GPUh  utilisation ", "", 0).key("utilisation"),
];

/// The verdict leads the line in text and ends the row in Markdown.
const VERDICTS: [Column<'static>; 6] = [
    Column::left().text("  ", "", 4),
    Column::left().text(" ", "", 22).heading("expectation").key("expectation"),
    Column::left().text(" ", "", 34).heading("subject").key("subject"),
    Column::right().text(" ", "", 0).heading("value").key("value"),
    Column::right().text(" against ", "", 0).heading("threshold").key("threshold"),
    Column::left().heading("").key("met"),
];

/// For a terminal: the budgets with something to show, contracts, clusters, the overall
/// delivered ratio and the verdicts.
pub fn text(audit: &Audit, verdicts: &[Verdict]) -> String {
    let whole = &audit.whole;
    let mut out = format!(
        "Audit of {} jobs from {} to {} ({} rows skipped{}); waits are nearest-rank p50 / p90 / p99\n",
        audit.jobs,
        whole.start,
        whole.end,
        audit.skipped_rows,
        not_audited(audit)
    );
    out.push_str(&windows(audit));
    out.push('\n');
    out.push_str(&shown_budgets(whole).text());
    out.push_str("\nContracts:\n");
    out.push_str(&contracts(&whole.contracts).text());
    out.push_str("\nClusters:\n");
    out.push_str(&clusters(whole).text());
    out.push_str(&format!("\nDelivered overall: {}\n", Cell::Ratio(whole.overall_ratio(&audit.leaves))));
    if !verdicts.is_empty() {
        out.push_str("\nExpectations:\n");
        out.push_str(&verdicts_table(verdicts).text());
    }
    out
}

/// For a pull request: a headline, the budgets with something to show, contracts and the
/// verdicts.
pub fn markdown(audit: &Audit, verdicts: &[Verdict]) -> String {
    let whole = &audit.whole;
    let failed = verdicts.iter().filter(|v| !v.met).count();
    let mut out = format!(
        "### allot: audit of {} jobs\n\n**Delivered overall: {}; {} of {} expectations met.**\n\n",
        audit.jobs,
        Cell::Ratio(whole.overall_ratio(&audit.leaves)),
        verdicts.len() - failed,
        verdicts.len()
    );
    if audit.skipped_rows > 0 || audit.not_audited > 0 {
        out.push_str(&format!("{} rows skipped{}.\n\n", audit.skipped_rows, not_audited(audit)));
    }
    out.push_str(&windows(audit));
    out.push('\n');
    out.push_str(&shown_budgets(whole).markdown());
    out.push('\n');
    out.push_str(&contracts(&whole.contracts).markdown());
    if !verdicts.is_empty() {
        out.push('\n');
        out.push_str(&verdicts_table(verdicts).markdown());
    }
    out
}

/// For programs: every budget, contract and cluster, the leaf budgets' totals, each
/// window's figures and the verdicts (the shape docs/verifier.md documents).
pub fn json(audit: &Audit, verdicts: &[Verdict]) -> Value {
    let whole = &audit.whole;
    let leaves = |f: fn(&BudgetFigures) -> f64| -> f64 { audit.leaf_budgets().map(f).sum() };
    let windows: Vec<Value> = audit
        .windows
        .iter()
        .map(|w| {
            json!({
                "start": w.start,
                "end": w.end,
                "partial": w.partial,
                "budgets": budgets(&w.budgets).json(),
                "contracts": contracts(&w.contracts).json(),
                "clusters": clusters(w).json(),
            })
        })
        .collect();
    json!({
        "percentiles": "nearest-rank",
        "start": whole.start,
        "end": whole.end,
        "budgets": budgets(&whole.budgets).json(),
        "contracts": contracts(&whole.contracts).json(),
        "clusters": clusters(whole).json(),
        "totals": {
            "jobs": audit.jobs,
            "skipped_rows": audit.skipped_rows,
            "not_audited": audit.not_audited,
            "used_gpu_hours": leaves(|b| b.used_gpu_hours),
            "entitled_gpu_hours": leaves(|b| b.entitled_gpu_hours),
            "delivered_gpu_hours": leaves(|b| b.delivered_gpu_hours),
            "delivered_ratio": whole.overall_ratio(&audit.leaves),
        },
        "windows": windows,
        "expectations": verdicts_table(verdicts).json(),
    })
}

/// ", 3 rows of submissions only (no start) not audited", when there are such rows.
fn not_audited(audit: &Audit) -> String {
    match audit.not_audited {
        0 => String::new(),
        1 => ", 1 row of a submission only (no start) not audited".to_string(),
        n => format!(", {n} rows of submissions only (no start) not audited"),
    }
}

/// The windows in a line: how many, how long, and which are partial.
fn windows(audit: &Audit) -> String {
    let partial: Vec<String> =
        audit.windows.iter().filter(|w| w.partial).map(|w| format!("{} to {}", w.start, w.end)).collect();
    let count = audit.windows.len();
    let mut line = format!("{count} window{} of {} s", if count == 1 { "" } else { "s" }, audit.window);
    if !partial.is_empty() {
        line.push_str(&format!(" (partial: {})", partial.join(", ")));
    }
    line + "\n"
}

/// The budgets of a span for people: those with nothing to show (no use, no entitlement,
/// no job) are left out.
fn shown_budgets(span: &Span) -> Table<'_> {
    budgets(span.budgets.iter().filter(|b| b.has_activity()))
}

fn budgets<'a>(budgets: impl IntoIterator<Item = &'a BudgetFigures>) -> Table<'a> {
    let rows = budgets
        .into_iter()
        .map(|b| {
            vec![
                Cell::text(&b.cluster),
                Cell::text(&b.project),
                Cell::GpuHours(b.used_gpu_hours),
                Cell::GpuHours(b.entitled_gpu_hours),
                Cell::GpuHours(b.delivered_gpu_hours),
                Cell::Ratio(b.delivered_ratio()),
                Cell::Count(b.waits.jobs() as u64),
                Cell::Waits(&b.waits),
                Cell::Count(b.waits.censored() as u64),
            ]
        })
        .collect();
    Table::new(BUDGETS.to_vec(), rows).titled()
}

fn contracts(contracts: &[ContractFigures]) -> Table<'_> {
    let rows = contracts
        .iter()
        .map(|c| {
            vec![
                Cell::text(&c.contract),
                Cell::Count(c.waits.jobs() as u64),
                Cell::Waits(&c.waits),
                Cell::Count(c.waits.censored() as u64),
            ]
        })
        .collect();
    Table::new(CONTRACTS.to_vec(), rows)
}

fn clusters(span: &Span) -> Table<'_> {
    let rows = span
        .clusters
        .iter()
        .map(|c| {
            vec![
                Cell::text(&c.cluster),
                Cell::Count(c.gpus),
                Cell::GpuHours(c.used_gpu_hours),
                Cell::Ratio(Some(span.utilisation(c))),
            ]
        })
        .collect();
    Table::new(CLUSTERS.to_vec(), rows)
}

fn verdicts_table(verdicts: &[Verdict]) -> Table<'_> {
    let rows = verdicts
        .iter()
        .map(|v| {
            vec![
                Cell::Met(v.met),
                Cell::text(&v.expectation),
                Cell::text(&v.subject),
                Cell::Number(v.value),
                Cell::Number(v.threshold),
                Cell::Met(v.met),
            ]
        })
        .collect();
    Table::new(VERDICTS.to_vec(), rows)
}
