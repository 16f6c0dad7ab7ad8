//! Simulations as `allot replay simulate` and `allot diff --replay` run them: a trace's
//! submissions under one or more policies or budget trees (with a progress line on a
//! terminal), each run's schedule written to a file as it is simulated when asked
//! (`--schedule`), and the runs side by side as the verifier renders them: text, Markdown
//! (with charts GitHub draws), JSON, or the HTML report.

use std::cell::Cell;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use allot_compiler::escape;
use allot_compiler::ir::{Cluster, KubernetesBinding, KubernetesScheduler, Model};
use allot_targets::kubernetes::{self, kueue};
use allot_verify::figures::Audit;
use allot_verify::render::simulation::{self, Outcome};
use allot_verify::report;
use allot_verify::schedule::ScheduleWriter;
use allot_verify::simulate::{
    ClusterObjects, Kueue, Policy, Simulation, SlurmSettings, UNBUDGETED, simulate, simulate_into,
};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::exit::Error;
use crate::output::{AtomicFile, unreplaceable};
use crate::traces::TraceInput;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyName {
    /// The Slurm configuration `allot build` writes, scheduled as Slurm schedules it.
    Slurm,
    /// The Kueue objects `allot build` writes, admitted and preempted as Kueue does.
    Kueue,
    /// Budgets by hierarchical fair share with the scheduling contracts.
    Budget,
    /// The old way: static priorities, not preemptible up to each team's guaranteed GPUs.
    Priority,
}

impl PolicyName {
    /// The policy for the budgets `model`; a Slurm one follows `slurm`, a Kueue one the
    /// objects `allot build` writes for `model` (each of its clusters must be bound to Kueue).
    pub fn policy(self, model: &Model, slurm: SlurmSettings) -> Result<Policy, Error> {
        Ok(match self {
            PolicyName::Slurm => Policy::Slurm(slurm),
            PolicyName::Kueue => Policy::Kueue(Arc::new(kueue_policy(model)?)),
            PolicyName::Budget => Policy::Budget,
            PolicyName::Priority => Policy::Priority,
        })
    }

    /// Its name on the command line (`slurm`, `kueue`, `budget`, `priority`).
    pub fn name(self) -> &'static str {
        match self {
            PolicyName::Slurm => "slurm",
            PolicyName::Kueue => "kueue",
            PolicyName::Budget => "budget",
            PolicyName::Priority => "priority",
        }
    }

    /// The policy run when none is named: Slurm's when every cluster of the budgets is
    /// bound to Slurm, Kueue's when every one is bound to Kueue, else the budget rule (the
    /// reference).
    pub fn default_for(model: &Model) -> PolicyName {
        if model.clusters.iter().all(|c| c.bindings.slurm.is_some()) {
            PolicyName::Slurm
        } else if model.clusters.iter().all(|c| bound_to_kueue(c).is_some()) {
            PolicyName::Kueue
        } else {
            PolicyName::Budget
        }
    }
}

/// The Kubernetes binding of `cluster` when it names Kueue.
fn bound_to_kueue(cluster: &Cluster) -> Option<&KubernetesBinding> {
    cluster.bindings.kubernetes.as_ref().filter(|b| b.schedulers.contains(&KubernetesScheduler::Kueue))
}

/// The `kueue` policy for `model`: per cluster, the objects and the controller
/// `Configuration` `allot build` writes, and the ClusterQueue of each budget (and of work
/// no budget covers, `root-unbudgeted`, when allot writes it).
fn kueue_policy(model: &Model) -> Result<Kueue, Error> {
    let mut given = Vec::new();
    for cluster in &model.clusters {
        let Some(binding) = bound_to_kueue(cluster) else {
            return Err(Error::failed(format!(
                "--policy kueue simulates the Kueue objects allot writes, and cluster {} is not bound to Kueue (its kubernetes binding does not name kueue)",
                escape::controls(&cluster.name, false)
            )));
        };
        let objects = kueue::objects(model, &cluster.name);
        let mut queues = kueue::queue_names(model, &cluster.name);
        if objects
            .iter()
            .any(|o| o["kind"] == "ClusterQueue" && o["metadata"]["name"] == kubernetes::UNBUDGETED)
        {
            queues.push((kubernetes::UNBUDGETED.to_string(), UNBUDGETED.to_string()));
        }
        given.push((cluster.name.as_str(), binding.resource.as_str(), objects, queues));
    }
    let configuration = kueue::configuration();
    Kueue::new(given.iter().map(|(cluster, resource, objects, queues)| ClusterObjects {
        cluster,
        objects,
        configuration: Some(&configuration),
        resource,
        queues,
    }))
    .map_err(|e| Error::failed(format!("the Kueue objects allot writes: {e}")))
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
    scenarios.iter().map(|scenario| Ok((scenario, simulated(scenario, input, None)?))).collect()
}

/// Simulates as [`simulate_all`] does, and writes each scenario's schedule to its file of
/// `schedules` (one per scenario, in their order) as it is simulated: into a temporary file
/// beside it, every one renamed into place once all the runs succeeded. A run that fails
/// leaves every earlier file as it was.
pub fn simulate_all_with_schedules<'s, 'm>(
    scenarios: &'s [Scenario<'m>],
    input: &TraceInput,
    schedules: &[PathBuf],
) -> Result<Runs<'s, 'm>, Error> {
    assert_eq!(scenarios.len(), schedules.len(), "a schedule file per scenario");
    let mut files = schedules
        .iter()
        .map(|path| {
            if let Some(reason) = unreplaceable(path).map_err(|e| cannot_write(path, &e))? {
                return Err(cannot_write(path, &reason));
            }
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !folder.is_dir() {
                return Err(cannot_write(path, &format!("its folder {} does not exist", folder.display())));
            }
            AtomicFile::create(path).map_err(|e| cannot_write(path, &e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let runs = scenarios
        .iter()
        .zip(schedules.iter().zip(files.iter_mut()))
        .map(|(scenario, (path, file))| {
            Ok((scenario, simulated(scenario, input, Some((path, file.file())))?))
        })
        .collect::<Result<Runs<'s, 'm>, Error>>()?;
    for (file, path) in files.into_iter().zip(schedules) {
        file.commit().map_err(|e| cannot_write(path, &e))?;
    }
    Ok(runs)
}

/// A schedule file that cannot be written, named.
fn cannot_write(path: &Path, why: &dyn std::fmt::Display) -> Error {
    Error::failed(format!("--schedule {}: {why}", path.display()))
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
            policy: scenario.policy.clone(),
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

/// Simulates one scenario, with a progress line; its schedule written to `schedule` (a file
/// named by its path) when given.
fn simulated(
    scenario: &Scenario<'_>,
    input: &TraceInput,
    schedule: Option<(&Path, &mut File)>,
) -> Result<Simulation, Error> {
    let bar = ProgressBar::new_spinner().with_message(scenario.label.clone());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {pos} jobs read ({per_sec}) {elapsed}")
            .expect("a valid template"),
    );
    let mut progress = |read: usize| bar.set_position(read as u64);
    let (model, policy, skip) = (scenario.model, &scenario.policy, input.skip_bad_rows);
    let result = match schedule {
        None => input.replay(|jobs| simulate(model, jobs, policy.clone(), skip, &mut progress)),
        Some((path, file)) => input
            .replay(|jobs| {
                // A trace found out of order is replayed again: its schedule is written again.
                let mut out = match restart(file) {
                    Ok(out) => out,
                    Err(e) => return Ok(Err(e)),
                };
                let (mut failed, stop) = (None, Cell::new(false));
                // A schedule that cannot be written stops the reading of the trace: the
                // simulation ends with the jobs it has, and the error is said.
                let jobs = jobs.take_while(|_| !stop.get());
                let simulation =
                    simulate_into(model, jobs, policy.clone(), skip, &mut progress, &mut |run| {
                        if failed.is_none()
                            && let Err(e) = out.write(run)
                        {
                            failed = Some(e);
                            stop.set(true);
                        }
                    });
                if let Some(e) = failed {
                    return Ok(Err(e));
                }
                let simulation = simulation?;
                Ok(out.finish().map(|_| simulation))
            })
            .and_then(|written| written.map_err(|e| cannot_write(path, &e))),
    };
    bar.finish_and_clear();
    result
}

/// A schedule written to `file` from its start (what an earlier attempt wrote is dropped).
fn restart(file: &mut File) -> std::io::Result<ScheduleWriter<&mut File>> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    ScheduleWriter::new(file)
}
