//! `allot replay`: the verifier. `audit` measures what happened in a job trace against the
//! budgets; `simulate` replays the trace's submissions under policies or revisions, side by
//! side.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use allot_simulate::{Policy, SlurmSettings};
use allot_verify::audit;
use allot_verify::{expectations, render};

use crate::args;
use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::input::git_loader::GitRepo;
use crate::input::kueue_files::{self, KueueFiles, ObjectsArg};
use crate::input::traces::TraceInput;
use crate::output::{self, json, plural, print};
use crate::simulation::{self, PolicyName, Scenario};

/// The largest `slurm.conf` read (real ones are a few kilobytes).
const MAX_SLURM_CONF_BYTES: u64 = 1 << 20;

#[derive(clap::Subcommand)]
pub enum Command {
    /// What happened: entitled, delivered and used GPU-hours per budget, waits per contract.
    Audit(AuditArgs),
    /// What would happen: the trace's submissions replayed on the clusters' nodes under the
    /// budgets (or the priority baseline), with the audit's figures, preemptions, GPU-hours
    /// lost to restarts and the largest jobs' waits; several runs side by side.
    Simulate(SimulateArgs),
}

#[derive(clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    repository: args::Repository,
    #[command(flatten)]
    input: TraceInput,
    /// The window of the per-window figures [default: the policy window].
    #[arg(long)]
    window: Option<String>,
    /// Where windows start: at the first submission, or at multiples of the window since
    /// the epoch.
    #[arg(long, value_enum, default_value = "first-submit")]
    align: Align,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

/// Where the audit's windows start, as `--align` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Align {
    FirstSubmit,
    Epoch,
}

#[derive(clap::Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    repository: args::Repository,
    #[command(flatten)]
    input: TraceInput,
    /// The policies to run, side by side (e.g. `slurm,budget,priority`); by default `kueue`
    /// with --kueue-objects or --kueue-config, `slurm` when every cluster is bound to Slurm,
    /// `kueue` when every one is bound to Kueue, else `budget`.
    #[arg(long, value_enum, value_delimiter = ',')]
    policy: Vec<PolicyName>,
    /// The Slurm's `slurm.conf`, for the `slurm` policy's scheduler settings
    /// (`PriorityCalcPeriod`, `SchedulerParameters` sched_interval, bf_interval,
    /// bf_resolution, bf_max_job_test and bf_window, `AuthInfo` cred_expire, `PreemptType`
    /// partition_prio or qos); without it, Slurm's defaults and what allot writes.
    #[arg(long, value_name = "FILE")]
    slurm_conf: Option<PathBuf>,
    /// Simulate the Kueue objects in DIR instead of those allot writes, for the budgets'
    /// cluster CLUSTER (without `CLUSTER=`: their only cluster); repeat for other clusters.
    ///
    /// DIR's `.yaml`, `.yml` and `.json` files (not its subfolders; a symbolic link is
    /// refused) hold the objects as `kubectl get
    /// clusterqueues,cohorts,resourceflavors,localqueues,workloadpriorityclasses -A -o yaml`
    /// prints them: YAML documents, each an object or a List. Objects that are not Kueue's,
    /// and Workloads, are passed over with a note. A job goes to the ClusterQueue its row's
    /// `queue` names, else to its budget's: the one named as allot names it (the project's
    /// path with `-` for `/`) when DIR has one, else none (counted unplaceable). GPUs are the
    /// cluster's Kubernetes binding's resource, else `nvidia.com/gpu`; Kueue's Configuration
    /// its defaults unless --kueue-config. Implies `--policy kueue`; with --against, the same
    /// objects are simulated for both revisions.
    #[arg(long, value_name = "[CLUSTER=]DIR", value_parser = kueue_files::objects_arg)]
    kueue_objects: Vec<ObjectsArg>,
    /// Kueue's controller Configuration (YAML or JSON, or the ConfigMap that holds it under
    /// `controller_manager_config.yaml`, as Kueue's Helm chart installs it), for every cluster
    /// the kueue policy simulates; without it, Kueue's defaults for the clusters given
    /// --kueue-objects and what allot writes (Fair Sharing on) for the others. Implies
    /// `--policy kueue`.
    #[arg(long, value_name = "FILE")]
    kueue_config: Option<PathBuf>,
    /// Also run the budgets as of this git revision, beside the working tree's.
    #[arg(long)]
    against: Option<String>,
    /// Write an HTML report (index.html, self-contained) to this folder.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Write the simulated schedule to FILE, as a trace of allot's CSV (a row per run).
    ///
    /// Columns: `id,project,user,cluster,gpus,submit,start,end,contract,wait,attempt,ended_by,preempted_for`
    /// (`submit`: when the run entered its queue; `wait`: the job's, on its first run;
    /// `ended_by`: finished, preempted, max-runtime or time-limit); `allot replay audit
    /// --trace FILE` reads it back to the simulation's figures. With several runs, a file per
    /// run, in FILE's folder: FILE's name with `-POLICY` before its extension
    /// (`schedule-budget.csv`, `schedule-slurm.csv`), and with --against `-base-POLICY` for
    /// the revision and `-working-tree-POLICY` for the working tree
    /// (`schedule-base-budget.csv`, `schedule-working-tree-budget.csv`). Files already there
    /// are replaced only once every run has succeeded.
    #[arg(long, value_name = "FILE")]
    schedule: Option<PathBuf>,
    /// Write the workloads the kueue policy replays to FILE, for a replay through Kueue's
    /// own scheduler (`scripts/kueue-oracle.sh`): JSON Lines, a job a line in submission
    /// order, with its ClusterQueue, priority, GPUs, entry into its queue, work (seconds,
    /// cut at its contract's maximum runtime) and whether it resumes after a preemption.
    /// Needs the kueue policy; with --against, the working tree's. The budgets and objects
    /// are those before the first grant boundary.
    #[arg(long, value_name = "FILE")]
    kueue_workloads: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

pub fn run(command: Command, format: Format) -> Outcome {
    match command {
        Command::Audit(args) => audit(args, format),
        Command::Simulate(args) => simulate(args, format),
    }
}

fn audit(args: AuditArgs, format: Format) -> Outcome {
    let window = match args.window.as_deref().map(allot_compiler::units::parse_duration) {
        Some(None) => return Err(Error::failed("--window: not a duration (e.g. 7d, 12h)")),
        Some(Some(0)) => return Err(Error::failed("--window: must be above zero (e.g. 7d, 12h)")),
        other => other.flatten(),
    };
    let Some(model) = args.repository.model_over_time(format, budgets::now())? else {
        return Ok(Exit::Problems);
    };
    let options = audit::Options {
        window: window.unwrap_or(model.policy.window_seconds),
        skip_bad_rows: args.input.skip_bad_rows,
        align: match args.align {
            Align::FirstSubmit => audit::Alignment::FirstSubmit,
            Align::Epoch => audit::Alignment::Epoch,
        },
    };
    let trace = args.input.fetched(&model)?;
    let result = trace.input.replay(|jobs| audit::audit_with(&model, jobs, options))?;
    let verdicts = expectations::check(&model, &result);
    print(&match args.format {
        output::Format::Human => render::audit::text(&result, &verdicts),
        output::Format::Markdown => render::audit::markdown(&result, &verdicts),
        output::Format::Json => json(&render::audit::json(&result, &verdicts))?,
    })?;
    let failed = verdicts.iter().filter(|v| !v.met).count();
    if failed > 0 {
        eprintln!("{} not met", plural(failed, "expectation"));
        return Ok(Exit::Problems);
    }
    Ok(Exit::Success)
}

fn simulate(args: SimulateArgs, format: Format) -> Outcome {
    let Some(model) = args.repository.model_over_time(format, budgets::now())? else {
        return Ok(Exit::Problems);
    };
    let base = match &args.against {
        None => None,
        Some(rev) => {
            let git = GitRepo::discover(&args.repository.path)?;
            let Some(base) =
                budgets::revision_over_time(&git, &args.repository.path, Some(rev), format, budgets::now())?
            else {
                return Ok(Exit::Problems);
            };
            Some((rev.as_str(), base))
        }
    };
    let slurm = match &args.slurm_conf {
        None => SlurmSettings::default(),
        Some(path) => {
            let text = crate::input::read::read_text(path, MAX_SLURM_CONF_BYTES)
                .map_err(|e| Error::failed(format!("--slurm-conf {}: {e}", path.display())))?;
            SlurmSettings::read(&text)
                .map_err(|e| Error::failed(format!("--slurm-conf {}: {e}", path.display())))?
        }
    };
    // Kueue's own objects or Configuration call for the kueue policy.
    let kueue_flag = match (args.kueue_objects.is_empty(), &args.kueue_config) {
        (false, _) => Some("--kueue-objects"),
        (true, Some(_)) => Some("--kueue-config"),
        (true, None) => None,
    };
    let names = match (args.policy.is_empty(), kueue_flag) {
        (true, Some(_)) => vec![PolicyName::Kueue],
        (true, None) => vec![PolicyName::default_for(&model)],
        (false, _) => args.policy,
    };
    if let Some(flag) = kueue_flag
        && !names.contains(&PolicyName::Kueue)
    {
        let named: Vec<&str> = names.iter().map(|p| p.name()).collect();
        return Err(Error::failed(format!(
            "{flag} is for the kueue policy, and --policy {} does not name it (add it: --policy kueue,{})",
            named.join(","),
            named.join(",")
        )));
    }
    let kueue = KueueFiles::read(&args.kueue_objects, args.kueue_config.as_deref(), &model)?;
    // A policy follows its budgets (Kueue's objects are the budgets'): one per model.
    let policies: Vec<Policy> =
        names.iter().map(|p| p.policy(&model, slurm, &kueue)).collect::<Result<_, _>>()?;
    let named = |name: &str, p: &Policy| {
        if policies.len() > 1 { format!("{name} ({})", p.label()) } else { name.to_string() }
    };
    let mut scenarios = Vec::new();
    // Each scenario's name in its schedule file's.
    let mut slugs = Vec::new();
    for (p, name) in policies.iter().zip(&names) {
        match &base {
            Some((rev, base)) => {
                let policy = name.policy(base, slurm, &kueue)?;
                scenarios.push(Scenario { label: named(rev, &policy), model: base, policy });
                scenarios.push(Scenario {
                    label: named("working tree", p),
                    model: &model,
                    policy: p.clone(),
                });
                slugs.extend([format!("base-{}", name.name()), format!("working-tree-{}", name.name())]);
            }
            None => {
                scenarios.push(Scenario { label: p.label().into(), model: &model, policy: p.clone() });
                slugs.push(name.name().to_string());
            }
        }
    }
    let schedules = match &args.schedule {
        None => None,
        Some(file) => Some(schedule_files(file, &slugs)?),
    };
    let trace = args.input.fetched(&model)?;
    if let Some(file) = &args.kueue_workloads {
        let Some(Policy::Kueue(kueue)) = policies.iter().find(|p| matches!(p, Policy::Kueue(_))) else {
            return Err(Error::failed(
                "--kueue-workloads is for the kueue policy, and --policy does not name it",
            ));
        };
        let left = simulation::write_workloads(&model, kueue, &trace.input, file)?;
        eprintln!(
            "workloads: {} ({} without a runtime and {} never placeable left out)",
            file.display(),
            left.not_replayed,
            left.unplaceable
        );
    }
    let runs = match &schedules {
        None => simulation::simulate_all(&scenarios, &trace.input)?,
        Some(files) => simulation::simulate_all_with_schedules(&scenarios, &trace.input, files)?,
    };
    for file in schedules.iter().flatten() {
        eprintln!("schedule: {}", file.display());
    }
    if let Some(dir) = &args.report {
        std::fs::create_dir_all(dir)?;
        let page = dir.join("index.html");
        std::fs::write(&page, simulation::html(&runs))?;
        eprintln!("report: {}", page.display());
    }
    print(&match args.format {
        output::Format::Human => simulation::side_by_side(&runs),
        output::Format::Markdown => simulation::markdown(&runs),
        output::Format::Json => json(&simulation::json(&runs))?,
    })?;
    Ok(Exit::Success)
}

/// The schedule file of each scenario: `file` for one; for several, `file`'s name with
/// `-SLUG` before its extension, in its folder (`out/schedule.csv` and `budget`:
/// `out/schedule-budget.csv`). Two scenarios of one name (a policy named twice) would write
/// one file: an error.
fn schedule_files(file: &Path, slugs: &[String]) -> Result<Vec<PathBuf>, Error> {
    if slugs.len() == 1 {
        return Ok(vec![file.to_path_buf()]);
    }
    let Some(stem) = file.file_stem() else {
        return Err(Error::failed(format!("--schedule {}: not a file name", file.display())));
    };
    let files: Vec<PathBuf> = slugs
        .iter()
        .map(|slug| {
            let mut name = OsString::from(stem);
            name.push(format!("-{slug}"));
            if let Some(extension) = file.extension() {
                name.push(".");
                name.push(extension);
            }
            file.with_file_name(name)
        })
        .collect();
    for (i, path) in files.iter().enumerate() {
        if files[..i].contains(path) {
            return Err(Error::failed(format!(
                "--schedule: two runs would write {}: name each policy once",
                path.display()
            )));
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_runs_write_a_schedule_each_named_after_it() {
        let slugs = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let files = |file: &str, names: &[&str]| {
            schedule_files(Path::new(file), &slugs(names))
                .unwrap()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(files("out/schedule.csv", &["budget"]), ["out/schedule.csv"]);
        assert_eq!(
            files("out/schedule.csv", &["budget", "slurm"]),
            ["out/schedule-budget.csv", "out/schedule-slurm.csv"]
        );
        assert_eq!(
            files("runs", &["base-budget", "working-tree-budget"]),
            ["runs-base-budget", "runs-working-tree-budget"]
        );
        assert_eq!(files("a.b.csv", &["priority", "budget"]), ["a.b-priority.csv", "a.b-budget.csv"]);
        let twice = schedule_files(Path::new("s.csv"), &slugs(&["budget", "budget"])).unwrap_err();
        assert_eq!(twice.to_string(), "--schedule: two runs would write s-budget.csv: name each policy once");
    }
}
