//! `allot replay simulate`: simulates a trace's submissions under one or more policies or
//! budget trees (with a progress line on a terminal) and prints the runs side by side as
//! the verifier renders them, as text, Markdown (with charts GitHub draws) or JSON, and
//! writes its HTML report when asked.

use std::path::Path;
use std::process::ExitCode;

use allot_compiler::normalize::Model;
use allot_verify::expectations;
use allot_verify::figures::Audit;
use allot_verify::render::simulation::{self, Outcome};
use allot_verify::report;
use allot_verify::simulate::{Policy, Simulation, simulate};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::replay::{ReportFormat, TraceInput, fail};

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
        self.policy().label()
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
        ReportFormat::Human => side_by_side(&runs),
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

fn audits<'r>(runs: &'r Runs<'_, '_>) -> Vec<(&'r str, &'r Audit)> {
    runs.iter().map(|(s, sim)| (s.label.as_str(), &sim.audit)).collect()
}

/// The runs as the verifier's renderers take them, with their budgets' verdicts.
fn outcomes<'r>(runs: &'r Runs<'_, '_>) -> Vec<Outcome<'r>> {
    runs.iter()
        .map(|(scenario, simulation)| Outcome {
            label: &scenario.label,
            policy: scenario.policy.policy(),
            simulation,
            verdicts: expectations::check(scenario.model, &simulation.audit),
        })
        .collect()
}

/// The runs side by side, as text.
pub fn side_by_side(runs: &Runs<'_, '_>) -> String {
    simulation::text(&outcomes(runs))
}

/// The runs side by side, as Markdown with charts.
pub fn markdown(runs: &Runs<'_, '_>) -> String {
    simulation::markdown(&outcomes(runs))
}

/// Every run in full, as JSON.
pub fn json(runs: &Runs<'_, '_>) -> Value {
    simulation::json(&outcomes(runs))
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
