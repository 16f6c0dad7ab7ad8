//! `allot replay simulate`: replays a trace's submissions under one or more policies or
//! budget trees and shows the runs side by side, as text, Markdown (with charts GitHub
//! draws), JSON (each run's audit in `allot replay audit --format json`'s shape) and an HTML
//! report.

use std::path::Path;
use std::process::ExitCode;

use allot_compiler::normalize::Model;
use allot_verify::figures::Waits;
use allot_verify::report;
use allot_verify::simulate::{Policy, SHORT_JOB, Simulation, simulate};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use crate::replay::{
    ReportFormat, TraceInput, expectations, fail, hours, json_report, ratio, waits_json, waits_text,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyName {
    /// Budgets by hierarchical fair share with the scheduling contracts.
    Budget,
    /// The old way: static priorities, not preemptible up to each team's guaranteed GPUs.
    Priority,
}

impl PolicyName {
    fn policy(self) -> Policy {
        match self {
            PolicyName::Budget => Policy::Budget,
            PolicyName::Priority => Policy::Priority,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            PolicyName::Budget => "budget policy",
            PolicyName::Priority => "priority baseline",
        }
    }
}

/// A run to simulate: a label, a budget tree and a policy.
pub struct Scenario<'m> {
    pub label: String,
    pub model: &'m Model,
    pub policy: PolicyName,
}

pub fn run(
    scenarios: &[Scenario<'_>],
    input: &TraceInput,
    format: ReportFormat,
    report: Option<&Path>,
) -> std::io::Result<ExitCode> {
    let runs = match simulate_all(scenarios, input) {
        Ok(runs) => runs,
        Err(message) => return Ok(fail(message)),
    };
    if let Some(dir) = report {
        std::fs::create_dir_all(dir)?;
        let page = dir.join("index.html");
        std::fs::write(&page, report::html("allot replay simulate", &audits(&runs)))?;
        eprintln!("report: {}", page.display());
    }
    let text = match format {
        ReportFormat::Human => side_by_side(&runs, false),
        ReportFormat::Markdown => markdown(&runs),
        ReportFormat::Json => format!("{}\n", serde_json::to_string_pretty(&json(&runs))?),
    };
    crate::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

pub type Runs<'s, 'm> = Vec<(&'s Scenario<'m>, Simulation)>;

pub fn simulate_all<'s, 'm>(
    scenarios: &'s [Scenario<'m>],
    input: &TraceInput,
) -> Result<Runs<'s, 'm>, String> {
    scenarios.iter().map(|scenario| Ok((scenario, simulated(scenario, input)?))).collect()
}

fn audits<'r>(runs: &'r Runs<'_, '_>) -> Vec<(&'r str, &'r allot_verify::figures::Audit)> {
    runs.iter().map(|(s, sim)| (s.label.as_str(), &sim.audit)).collect()
}

pub fn markdown(runs: &Runs<'_, '_>) -> String {
    format!("{}\n{}", side_by_side(runs, true), report::markdown_charts(&audits(runs)))
}

pub fn json(runs: &Runs<'_, '_>) -> Value {
    json!({ "runs": runs.iter().map(|(s, sim)| run_json(s, sim)).collect::<Vec<_>>() })
}

fn simulated(scenario: &Scenario<'_>, input: &TraceInput) -> Result<Simulation, String> {
    let jobs = input.jobs()?;
    let bar = ProgressBar::new_spinner().with_message(scenario.label.clone());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {pos} jobs read ({per_sec}) {elapsed}")
            .expect("a valid template"),
    );
    let result = simulate(scenario.model, jobs, scenario.policy.policy(), input.skip_bad_rows, &mut |read| {
        bar.set_position(read as u64)
    });
    bar.finish_and_clear();
    result.map_err(|e| format!("{}: {e}", input.trace.display()))
}

fn run_json(scenario: &Scenario<'_>, sim: &Simulation) -> Value {
    let verdicts = expectations(scenario.model, &sim.audit);
    json!({
        "label": scenario.label,
        "policy": scenario.policy.label(),
        "preemptions": sim.preemptions,
        "lost_gpu_hours": sim.lost_gpu_hours,
        "largest_jobs": job_class(("min_gpus", json!(sim.largest.min_gpus)), &sim.largest.waits),
        "short_jobs": job_class(("max_work_s", json!(SHORT_JOB)), &sim.short_jobs),
        "not_replayed": sim.not_replayed,
        "unplaceable": sim.unplaceable,
        "audit": json_report(&sim.audit, &verdicts),
    })
}

/// A class of jobs in the JSON: its bound, how many and their wait percentiles.
fn job_class((key, bound): (&str, Value), waits: &Waits) -> Value {
    let (p50, p90, p99) = waits_json(waits);
    let mut class = json!({ "jobs": waits.jobs(), "wait_p50_s": p50, "wait_p90_s": p90, "wait_p99_s": p99 });
    class[key] = bound;
    class
}

/// One table: a row per figure, a column per run; in Markdown, bold where a run differs
/// from the first.
pub fn side_by_side(runs: &Runs<'_, '_>, markdown: bool) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: String, cell: &dyn Fn(&Simulation) -> String| {
        rows.push((name, runs.iter().map(|(_, sim)| cell(sim)).collect()));
    };
    row("jobs simulated".into(), &|s| s.audit.jobs.to_string());
    row("delivered, all budgets".into(), &|s| ratio(s.audit.whole.overall_ratio(&s.audit.leaves)));
    let first = runs.first().map(|(_, s)| s);
    if let Some(first) = first {
        for cluster in &first.audit.whole.clusters {
            let name = cluster.cluster.clone();
            row(format!("utilisation {name}"), &|s| {
                let c = s.audit.whole.clusters.iter().find(|c| c.cluster == name);
                c.map_or("-".into(), |c| format!("{:.1}%", s.audit.whole.utilisation(c) * 100.0))
            });
        }
    }
    row("preemptions".into(), &|s| s.preemptions.to_string());
    row("GPU-hours lost to restarts".into(), &|s| hours(s.lost_gpu_hours));
    if let Some(first) = first {
        row(format!("largest jobs (≥ {} GPUs) wait p50 / p90 / p99", first.largest.min_gpus), &|s| {
            waits_text(&s.largest.waits)
        });
        row("short jobs (≤ 1 h) wait p50 / p90 / p99".into(), &|s| waits_text(&s.short_jobs));
        for leaf in &first.audit.leaves {
            row(format!("delivered {leaf}"), &|s| {
                let figures = s.audit.whole.budgets.iter().filter(|b| &b.project == leaf);
                let (entitled, delivered) = figures
                    .fold((0.0, 0.0), |(e, d), b| (e + b.entitled_gpu_hours, d + b.delivered_gpu_hours));
                ratio((entitled > 0.0).then(|| delivered / entitled))
            });
        }
        for contract in &first.audit.whole.contracts {
            let name = contract.contract.clone();
            row(format!("wait {name} p50 / p90 / p99"), &|s| {
                let c = s.audit.whole.contracts.iter().find(|c| c.contract == name);
                c.map_or("-".into(), |c| waits_text(&c.waits))
            });
        }
    }
    let labels: Vec<&str> = runs.iter().map(|(s, _)| s.label.as_str()).collect();
    if markdown {
        let mut out = format!("| | {} |\n|---|{}\n", labels.join(" | "), "---:|".repeat(labels.len()));
        for (name, cells) in rows {
            let shown: Vec<String> =
                cells.iter().map(|c| if c != &cells[0] { format!("**{c}**") } else { c.clone() }).collect();
            out.push_str(&format!("| {name} | {} |\n", shown.join(" | ")));
        }
        return out;
    }
    let width = rows.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0);
    let columns: Vec<usize> = (0..labels.len())
        .map(|i| rows.iter().map(|(_, c)| c[i].chars().count()).chain([labels[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |name: &str, cells: &[String], changed: bool| {
        let cells: Vec<String> = cells.iter().zip(&columns).map(|(c, w)| format!("{c:>w$}")).collect();
        format!("{name:<width$}  {}{}\n", cells.join("   "), if changed { "  *" } else { "" })
    };
    let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
    let mut out = line("", &labels, false);
    for (name, cells) in &rows {
        out.push_str(&line(name, cells, cells.iter().any(|c| c != &cells[0])));
    }
    if runs.len() > 1 {
        out.push_str("\n* differs from the first run\n");
    }
    out
}
