//! The what-if of `allot diff --replay` in one line of the headline: the trace simulated
//! under the base's budgets and under the change's, before -> after: delivered overall and
//! for the budgets whose GPUs move most, each contract's p90 wait, and how many of the
//! budgets' expectations are met. The full figures stay in the folded simulation tables.

use std::path::Path;

use allot_compiler::units::format_duration;
use allot_simulate::Simulation;
use allot_verify::expectations;

use super::table::Table;
use crate::simulation::Runs;

/// How many budgets the line names (those whose GPUs move most).
const BUDGETS: usize = 2;

fn percent(ratio: Option<f64>) -> String {
    ratio.map_or("-".into(), |r| format!("{:.1}%", r * 100.0))
}

/// A budget's delivered over entitled GPU-hours, over every cluster.
fn delivered(simulation: &Simulation, budget: &str) -> Option<f64> {
    let figures = simulation.audit.whole.budgets.iter().filter(|b| b.project == budget);
    let (entitled, delivered) =
        figures.fold((0.0, 0.0), |(e, d), b| (e + b.entitled_gpu_hours, d + b.delivered_gpu_hours));
    (entitled > 0.0).then(|| delivered / entitled)
}

/// A contract's p90 wait, written as the budget files write durations.
fn p90(simulation: &Simulation, contract: &str) -> String {
    let c = simulation.audit.whole.contracts.iter().find(|c| c.contract == contract);
    c.and_then(|c| c.waits.percentile(90.0)).map_or("-".into(), format_duration)
}

/// `before -> after`, or the one value when they agree.
fn change(before: String, after: String, arrow: &str) -> String {
    if before == after { before } else { format!("{before} {arrow} {after}") }
}

/// The line, for two runs (the base's budgets, then the change's); `None` otherwise.
pub fn line(
    runs: &Runs<'_, '_>,
    trace: &Path,
    table: &Table,
    name: fn(&str) -> String,
    arrow: &str,
) -> Option<String> {
    let [(base, before), (_, after)] = runs.as_slice() else { return None };
    let mut parts = Vec::new();
    let overall = |s: &Simulation| percent(s.audit.whole.overall_ratio(&s.audit.leaves));
    parts.push(format!("delivered {}", change(overall(before), overall(after), arrow)));

    let mut moved: Vec<_> =
        table.rows.iter().filter(|r| !r.context() && r.moved() > 0 && after.audit.is_leaf(&r.path)).collect();
    moved.sort_by_key(|r| std::cmp::Reverse(r.moved()));
    let budgets: Vec<String> = moved
        .iter()
        .take(BUDGETS)
        .map(|r| {
            let (b, a) = (percent(delivered(before, &r.path)), percent(delivered(after, &r.path)));
            format!("{} {}", name(&r.path), change(b, a, arrow))
        })
        .collect();
    if !budgets.is_empty() {
        parts.push(budgets.join(", "));
    }

    // The contracts of both revisions: the base's, then those the change adds.
    let mut contracts: Vec<&str> = before.audit.whole.contracts.iter().map(|c| c.contract.as_str()).collect();
    for c in &after.audit.whole.contracts {
        if !contracts.contains(&c.contract.as_str()) {
            contracts.push(&c.contract);
        }
    }
    let waits: Vec<String> = contracts
        .iter()
        .map(|c| format!("{} {}", name(c), change(p90(before, c), p90(after, c), arrow)))
        .collect();
    if !waits.is_empty() {
        parts.push(format!("p90 wait {}", waits.join(", ")));
    }

    let met = |run: &(&crate::simulation::Scenario<'_>, Simulation)| {
        let verdicts = expectations::check(run.0.model, &run.1.audit);
        (verdicts.iter().filter(|v| v.met).count(), verdicts.len())
    };
    let ((met_before, of_before), (met_after, of_after)) = (met(&runs[0]), met(&runs[1]));
    if of_before + of_after > 0 {
        parts.push(format!(
            "expectations met {}",
            change(format!("{met_before} of {of_before}"), format!("{met_after} of {of_after}"), arrow)
        ));
    }
    let trace = name(&trace.display().to_string());
    Some(format!("What-if on {trace} ({}): {}.", base.policy.label(), parts.join("; ")))
}
