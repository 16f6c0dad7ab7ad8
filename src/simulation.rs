//! Simulations as `allot replay simulate` and `allot diff --replay` run them: a trace's
//! submissions under one or more policies or budget trees (with a progress line on a
//! terminal), and the runs side by side as the verifier renders them: text, Markdown (with
//! charts GitHub draws), JSON, or the HTML report.

use allot_compiler::ir::Model;
use allot_verify::figures::Audit;
use allot_verify::render::simulation::{self, Outcome};
use allot_verify::report;
use allot_verify::simulate::{Policy, Simulation, SlurmSettings, simulate};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::exit::Error;
use crate::traces::TraceInput;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyName {
    /// The Slurm configuration `allot build` writes, scheduled as Slurm schedules it.
    Slurm,
    /// Budgets by hierarchical fair share with the scheduling contracts.
    Budget,
    /// The old way: static priorities, not preemptible up to each team's guaranteed GPUs.
    Priority,
}

impl PolicyName {
    /// The policy; a Slurm one follows `slurm`.
    pub fn policy(self, slurm: SlurmSettings) -> Policy {
        match self {
            PolicyName::Slurm => Policy::Slurm(slurm),
            PolicyName::Budget => Policy::Budget,
            PolicyName::Priority => Policy::Priority,
        }
    }

    /// The policy run when none is named: Slurm's when every cluster of the budgets is
    /// bound to Slurm, else the budget policy (which models Kueue's and KAI's reclaim).
    pub fn default_for(model: &Model) -> PolicyName {
        if model.clusters.iter().all(|c| c.bindings.slurm.is_some()) {
            PolicyName::Slurm
        } else {
            PolicyName::Budget
        }
    }
}

/// A run to simulate: a label, a budget tree and a policy.
pub struct Scenario<'m> {
    pub label: String,
    pub model: &'m Model,
    pub policy: Policy,
}

pub type Runs<'s, 'm> = Vec<(&'s Scenario<'m>, Simulation)>;

pub fn simulate_all<'s, 'm>(
    scenarios: &'s [Scenario<'m>],
    input: &TraceInput,
) -> Result<Runs<'s, 'm>, Error> {
    scenarios.iter().map(|scenario| Ok((scenario, simulated(scenario, input)?))).collect()
}

/// The runs as one HTML page.
pub fn html(runs: &Runs<'_, '_>) -> String {
    let audits: Vec<(&str, &Audit)> = runs.iter().map(|(s, sim)| (s.label.as_str(), &sim.audit)).collect();
    report::html("allot replay simulate", &audits)
}

/// The runs as the verifier's renderers take them, with the budgets they ran under.
fn outcomes<'r>(runs: &'r Runs<'_, '_>) -> Vec<Outcome<'r>> {
    runs.iter()
        .map(|(scenario, simulation)| Outcome {
            label: &scenario.label,
            policy: scenario.policy,
            simulation,
            model: scenario.model,
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

fn simulated(scenario: &Scenario<'_>, input: &TraceInput) -> Result<Simulation, Error> {
    let bar = ProgressBar::new_spinner().with_message(scenario.label.clone());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {pos} jobs read ({per_sec}) {elapsed}")
            .expect("a valid template"),
    );
    let result = input.replay(|jobs| {
        simulate(scenario.model, jobs, scenario.policy, input.skip_bad_rows, &mut |read| {
            bar.set_position(read as u64)
        })
    });
    bar.finish_and_clear();
    result
}
