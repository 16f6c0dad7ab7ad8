//! Simulations as `allot replay simulate` and `allot diff --replay` run them: a trace's
//! submissions under one or more policies or budget trees (with a progress line on a
//! terminal), each run's schedule written to a file as it is simulated when asked
//! (`--schedule`), and the runs side by side as the verifier renders them: text, Markdown
//! (with charts GitHub draws), JSON, or the HTML report.

use std::borrow::Cow;
use std::cell::Cell;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use allot_compiler::escape;
use allot_compiler::ir::{Cluster, KubernetesBinding, KubernetesScheduler, Model};
use allot_simulate::kueue::workloads::{Left, Workload, workloads};
use allot_simulate::render::{self, Outcome};
use allot_simulate::schedule::ScheduleWriter;
use allot_simulate::{
    ClusterObjects, Kueue, Policy, Simulation, SlurmSettings, UNBUDGETED, simulate, simulate_into,
};
use allot_targets::kubernetes::{self, kueue};
use allot_verify::figures::Audit;
use allot_verify::report;
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::exit::Error;
use crate::input::kueue_files::{Folder, KueueFiles, first_few};
use crate::input::traces::TraceInput;
use crate::output::{AtomicFile, plural, unreplaceable};

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
    /// objects `allot build` writes for `model` (each of its clusters must be bound to Kueue),
    /// or a cluster's own objects and Kueue's Configuration where `files` gives them.
    pub fn policy(self, model: &Model, slurm: SlurmSettings, files: &KueueFiles) -> Result<Policy, Error> {
        Ok(match self {
            PolicyName::Slurm => Policy::Slurm(slurm),
            PolicyName::Kueue => Policy::Kueue(Arc::new(kueue_policy(model, files)?)),
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

/// The GPU resource of a cluster's own Kueue objects when its Kubernetes binding does not
/// name one (Kueue's usual, NVIDIA's device plugin's).
const DEFAULT_RESOURCE: &str = "nvidia.com/gpu";

/// One cluster as the `kueue` policy is given it, and how an error names its objects.
struct Given<'a> {
    cluster: &'a str,
    resource: &'a str,
    objects: Cow<'a, [Value]>,
    queues: Vec<(String, String)>,
    /// The objects from each grant boundary on (allot's own objects only).
    later: Vec<(i64, Vec<Value>)>,
    label: String,
}

/// The `kueue` policy for `model`: per cluster, its own objects where `files` gives them
/// (its budgets' ClusterQueues those named as allot names them), else the objects `allot
/// build` writes; and the controller `Configuration` of `files`, else allot's for its
/// objects and Kueue's defaults for a cluster's own. The ClusterQueue of each budget (and
/// of work no budget covers, `root-unbudgeted`, when there is one), and of each contract
/// that holds a reserve (`root-reserve-<contract>`, when there is one). allot's objects follow
/// the model's timeline: those of the shares before the first grant boundary, then those
/// written for each boundary on; a cluster's own objects hold all along.
fn kueue_policy(model: &Model, files: &KueueFiles) -> Result<Kueue, Error> {
    let mut given = Vec::new();
    let (first, later) = match model.timeline.split_first() {
        Some(((_, first), later)) => (first, later),
        None => (model, &[][..]),
    };
    for cluster in &model.clusters {
        let mut queues = kueue::queue_names(model, &cluster.name);
        let mut over_time = Vec::new();
        let (resource, objects, label) = match files.objects.get(&cluster.name) {
            Some(folder) => {
                let resource = cluster.bindings.kubernetes.as_ref().map_or(DEFAULT_RESOURCE, |b| &b.resource);
                let leaves = leaves(&queues);
                queues.retain(|(name, _)| {
                    folder.cluster_queues.contains(name) || folder.cohorts.contains(name)
                });
                note_missing(files, folder, &cluster.name, &leaves, &queues);
                (resource, Cow::Borrowed(folder.objects.as_slice()), folder.label.clone())
            }
            None => {
                let Some(binding) = bound_to_kueue(cluster) else {
                    return Err(Error::failed(format!(
                        "--policy kueue simulates the Kueue objects allot writes, and cluster {} is not bound to Kueue (its kubernetes binding does not name kueue; or give its own objects with --kueue-objects {}=DIR)",
                        escape::line(&cluster.name),
                        escape::line(&cluster.name)
                    )));
                };
                let label =
                    format!("the Kueue objects allot writes for cluster {}", escape::line(&cluster.name));
                over_time = later.iter().map(|(from, m)| (*from, kueue::objects(m, &cluster.name))).collect();
                (binding.resource.as_str(), Cow::Owned(kueue::objects(first, &cluster.name)), label)
            }
        };
        if objects
            .iter()
            .any(|o| o["kind"] == "ClusterQueue" && o["metadata"]["name"] == kubernetes::UNBUDGETED)
        {
            queues.push((kubernetes::UNBUDGETED.to_string(), UNBUDGETED.to_string()));
        }
        given.push(Given { cluster: &cluster.name, resource, objects, queues, later: over_time, label });
    }
    let allot_configuration = kueue::configuration();
    let configuration = |g: &Given<'_>| match &files.configuration {
        Some((_, configuration)) => Some(configuration),
        None if files.objects.contains_key(g.cluster) => None,
        None => Some(&allot_configuration),
    };
    // A contract's reserve has a ClusterQueue of its own (on a cluster's own objects, when
    // they hold one of the name allot writes).
    let contracts = kueue::reserve_queues(model);
    let new = |given: &[Given<'_>]| {
        Kueue::new(given.iter().map(|g| ClusterObjects {
            cluster: g.cluster,
            objects: &g.objects,
            configuration: configuration(g),
            resource: g.resource,
            queues: &g.queues,
            contracts: &contracts,
            later: &g.later,
        }))
    };
    new(&given).map_err(|e| {
        // The cluster whose objects are refused (each alone: only on this path).
        let culprit = given.iter().find(|g| new(std::slice::from_ref(*g)).is_err());
        let label = match (&files.configuration, culprit) {
            (Some((label, _)), _) if e.object == "Configuration" => label.clone(),
            (_, Some(g)) => g.label.clone(),
            (_, None) => "the Kueue objects".to_string(),
        };
        Error::failed(format!("{label}: {e}"))
    })
}

/// The project paths of `queues` that are budget leaves (no other path below them): those
/// whose ClusterQueue allot writes (the others are Cohorts).
fn leaves(queues: &[(String, String)]) -> Vec<(String, String)> {
    queues
        .iter()
        .filter(|(_, path)| {
            !queues
                .iter()
                .any(|(_, other)| other.strip_prefix(path.as_str()).is_some_and(|r| r.starts_with('/')))
        })
        .cloned()
        .collect()
}

/// A note on the budget leaves of `cluster` that a folder has no ClusterQueue for (allot's
/// name for them): their jobs find a ClusterQueue only through the trace's `queue` column.
/// Said once for the run (a revision of the same budgets would say it again).
fn note_missing(
    files: &KueueFiles,
    folder: &Folder,
    cluster: &str,
    leaves: &[(String, String)],
    kept: &[(String, String)],
) {
    if leaves.is_empty() {
        return;
    }
    let missing: Vec<String> = leaves
        .iter()
        .filter(|(name, _)| !folder.cluster_queues.contains(name))
        .map(|(name, _)| escape::line(name))
        .collect();
    let placed = kept.iter().any(|(name, _)| folder.cluster_queues.contains(name));
    let note = if !placed {
        format!(
            "no ClusterQueue there is named as allot names the budgets of cluster {} ({}): jobs find their ClusterQueue only through the trace's `queue` column",
            escape::line(cluster),
            first_few(&missing)
        )
    } else if !missing.is_empty() {
        format!(
            "no ClusterQueue there for {} of cluster {} ({}): their jobs find their ClusterQueue only through the trace's `queue` column, or are counted unplaceable",
            plural(missing.len(), "budget"),
            escape::line(cluster),
            first_few(&missing)
        )
    } else {
        return;
    };
    files.note(&format!("{}: {note}", folder.label));
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

/// Writes the workloads the `kueue` policy `kueue` replays of the trace to `path` (see
/// [`workloads`](allot_simulate::kueue::workloads)): JSON Lines, into a temporary file renamed
/// into place once all are written. Gives the jobs left out, and why.
pub fn write_workloads(
    model: &Model,
    kueue: &Arc<Kueue>,
    input: &TraceInput,
    path: &Path,
) -> Result<Left, Error> {
    let failed =
        |why: &dyn std::fmt::Display| Error::failed(format!("--kueue-workloads {}: {why}", path.display()));
    let mut file = AtomicFile::create(path).map_err(|e| failed(&e))?;
    let left = input
        .replay(|jobs| {
            // A trace found out of order is replayed again: the file is written again.
            let file = file.file();
            if let Err(e) = file.set_len(0).and_then(|()| file.seek(SeekFrom::Start(0))) {
                return Ok(Err(e));
            }
            let mut out = std::io::BufWriter::new(file);
            let mut written = Ok(());
            let left = workloads(model, jobs, kueue.clone(), &mut |w| {
                if written.is_ok() {
                    written = writeln!(out, "{}", workload_json(w));
                }
            })?;
            Ok(written.and_then(|()| out.flush()).map(|()| left))
        })?
        .map_err(|e| failed(&e))?;
    file.commit().map_err(|e| failed(&e))?;
    Ok(left)
}

/// A workload as a line of `--kueue-workloads`.
fn workload_json(w: &Workload) -> Value {
    serde_json::json!({
        "id": w.id, "project": w.project, "user": w.user, "cluster": w.cluster,
        "contract": w.contract, "gpus": w.gpus, "submit": w.submit, "work": w.work,
        "resumable": w.resumable, "cluster_queue": w.cluster_queue, "priority": w.priority,
    })
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
    render::text(&outcomes(runs))
}

/// The runs side by side, as Markdown with charts.
pub fn markdown(runs: &Runs<'_, '_>) -> String {
    render::markdown(&outcomes(runs))
}

/// Every run in full, as JSON.
pub fn json(runs: &Runs<'_, '_>) -> Value {
    render::json(&outcomes(runs))
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
