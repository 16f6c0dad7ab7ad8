//! What `allot replay simulate` prints, and `allot diff --replay` adds to a review: the
//! simulated runs side by side, a row per figure and a column per run, as text or as
//! Markdown (with the [`report`]'s Mermaid charts), or each run in full as JSON, its audit
//! as [`audit::json`] gives it.

use allot_compiler::ir::Model;
use allot_verify::expectations;
use allot_verify::figures::{Audit, Waits};
use allot_verify::render::audit;
use allot_verify::render::table::{Cell, Column, Table};
use allot_verify::report;
use serde_json::{Map, Value, json};

use crate::{Policy, SHORT_JOB, Simulation};

/// One simulated run, as the outputs show it.
pub struct Outcome<'a> {
    pub label: &'a str,
    pub policy: Policy,
    pub simulation: &'a Simulation,
    /// The budgets it ran under, whose expectations JSON checks against the run's audit.
    pub model: &'a Model,
}

/// The runs side by side; `*` marks the figures that differ from the first run's.
pub fn text(outcomes: &[Outcome<'_>]) -> String {
    let mut out = side_by_side(outcomes).text();
    if outcomes.len() > 1 {
        out.push_str("\n* differs from the first run\n");
    }
    out
}

/// The runs side by side, what differs from the first run in bold, then charts GitHub draws.
pub fn markdown(outcomes: &[Outcome<'_>]) -> String {
    let audits: Vec<(&str, &Audit)> = outcomes.iter().map(|o| (o.label, &o.simulation.audit)).collect();
    format!("{}\n{}", side_by_side(outcomes).markdown(), report::markdown_charts(&audits))
}

/// `{"runs": [...]}`: each run's label, policy, costs, job classes and audit.
pub fn json(outcomes: &[Outcome<'_>]) -> Value {
    json!({ "runs": outcomes.iter().map(run_json).collect::<Vec<_>>() })
}

/// A row per figure, a column per run (the rows of per-cluster, per-budget and
/// per-contract figures are the first run's).
fn side_by_side<'a>(outcomes: &'a [Outcome<'a>]) -> Table<'a> {
    let mut rows: Vec<Vec<Cell<'a>>> = Vec::new();
    let mut row = |name: String, cell: &dyn Fn(&'a Simulation) -> Cell<'a>| {
        let runs = outcomes.iter().map(|o| cell(o.simulation));
        rows.push(std::iter::once(Cell::text(name)).chain(runs).collect());
    };
    row("jobs simulated".into(), &|s| Cell::Count(s.audit.jobs as u64));
    row("delivered, all budgets".into(), &|s| Cell::Ratio(s.audit.whole.overall_ratio(&s.audit.leaves)));
    let first = outcomes.first().map(|o| o.simulation);
    if let Some(first) = first {
        for cluster in &first.audit.whole.clusters {
            let name = &cluster.cluster;
            row(format!("utilisation {name}"), &|s| {
                let whole = &s.audit.whole;
                let c = whole.clusters.iter().find(|c| &c.cluster == name);
                c.map_or(Cell::Absent, |c| Cell::Ratio(Some(whole.utilisation(c))))
            });
        }
    }
    row("preemptions".into(), &|s| Cell::Count(s.preemptions));
    row("GPU-hours lost to restarts".into(), &|s| Cell::GpuHours(s.lost_gpu_hours));
    // Only a policy that can preempt in circles (Kueue's) counts these.
    if outcomes.iter().any(|o| o.simulation.stalled > 0) {
        row("instants preempting in circles, cut short".into(), &|s| Cell::Count(s.stalled));
    }
    if let Some(first) = first {
        row(format!("largest jobs (≥ {} GPUs) wait p50 / p90 / p99", first.largest.min_gpus), &|s| {
            Cell::Waits(&s.largest.waits)
        });
        row("short jobs (≤ 1 h) wait p50 / p90 / p99".into(), &|s| Cell::Waits(&s.short_jobs));
        for leaf in &first.audit.leaves {
            row(format!("delivered {leaf}"), &|s| {
                let figures = s.audit.whole.budgets.iter().filter(|b| &b.project == leaf);
                let (entitled, delivered) = figures
                    .fold((0.0, 0.0), |(e, d), b| (e + b.entitled_gpu_hours, d + b.delivered_gpu_hours));
                Cell::Ratio((entitled > 0.0).then(|| delivered / entitled))
            });
        }
        for contract in &first.audit.whole.contracts {
            let name = &contract.contract;
            row(format!("wait {name} p50 / p90 / p99"), &|s| {
                let c = s.audit.whole.contracts.iter().find(|c| &c.contract == name);
                c.map_or(Cell::Absent, |c| Cell::Waits(&c.waits))
            });
        }
    }
    let runs = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| Column::right().fitted(if i == 0 { "  " } else { "   " }, o.label).heading(o.label));
    let columns = std::iter::once(Column::left().fitted("", "").heading("")).chain(runs).collect();
    Table::new(columns, rows).titled().compared()
}

fn run_json(outcome: &Outcome<'_>) -> Value {
    let sim = outcome.simulation;
    json!({
        "label": outcome.label,
        "policy": outcome.policy.label(),
        "preemptions": sim.preemptions,
        "lost_gpu_hours": sim.lost_gpu_hours,
        "stalled_instants": sim.stalled,
        "largest_jobs": job_class(("min_gpus", json!(sim.largest.min_gpus)), &sim.largest.waits),
        "short_jobs": job_class(("max_work_s", json!(SHORT_JOB)), &sim.short_jobs),
        "not_replayed": sim.not_replayed,
        "unplaceable": sim.unplaceable,
        "audit": audit::json(&sim.audit, &expectations::check(outcome.model, &sim.audit)),
    })
}

/// A class of jobs: its bound, how many and their wait percentiles.
fn job_class((key, bound): (&str, Value), waits: &Waits) -> Value {
    let mut class = Map::new();
    class.insert(key.to_string(), bound);
    Cell::Count(waits.jobs() as u64).json("jobs", &mut class);
    Cell::Waits(waits).json("wait", &mut class);
    Value::Object(class)
}
