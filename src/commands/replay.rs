//! `allot replay`: the verifier. `audit` measures what happened in a job trace against the
//! budgets; `simulate` replays the trace's submissions under policies or revisions, side by
//! side.

use std::path::PathBuf;

use allot_verify::audit;
use allot_verify::simulate::{Policy, SlurmSettings};
use allot_verify::{expectations, render};

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::git_loader::GitRepo;
use crate::output::{self, json, plural, print};
use crate::simulation::{self, PolicyName, Scenario};
use crate::traces::TraceInput;

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
    repository: budgets::Repository,
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
    repository: budgets::Repository,
    #[command(flatten)]
    input: TraceInput,
    /// The policies to run, side by side (e.g. `slurm,budget,priority`); by default `slurm`
    /// when every cluster is bound to Slurm, else `budget`.
    #[arg(long, value_enum, value_delimiter = ',')]
    policy: Vec<PolicyName>,
    /// The Slurm's `slurm.conf`, for the `slurm` policy's scheduler settings
    /// (`PriorityCalcPeriod`, `SchedulerParameters` bf_interval, bf_resolution and
    /// bf_max_job_test, `AuthInfo` cred_expire); Slurm's defaults without it.
    #[arg(long, value_name = "FILE")]
    slurm_conf: Option<PathBuf>,
    /// Also run the budgets as of this git revision, beside the working tree's.
    #[arg(long)]
    against: Option<String>,
    /// Write an HTML report (index.html, self-contained) to this folder.
    #[arg(long)]
    report: Option<PathBuf>,
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
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
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
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
    let base = match &args.against {
        None => None,
        Some(rev) => {
            let git = GitRepo::discover(&args.repository.path)?;
            let Some(base) = budgets::revision(&git, &args.repository.path, Some(rev), format)? else {
                return Ok(Exit::Problems);
            };
            Some((rev.as_str(), base))
        }
    };
    let slurm = match &args.slurm_conf {
        None => SlurmSettings::default(),
        Some(path) => {
            let text = crate::read::read_text(path, MAX_SLURM_CONF_BYTES)
                .map_err(|e| Error::failed(format!("--slurm-conf {}: {e}", path.display())))?;
            SlurmSettings::read(&text)
                .map_err(|e| Error::failed(format!("--slurm-conf {}: {e}", path.display())))?
        }
    };
    let names = if args.policy.is_empty() { vec![PolicyName::default_for(&model)] } else { args.policy };
    let policies: Vec<Policy> = names.iter().map(|p| p.policy(slurm)).collect();
    let named = |name: &str, p: Policy| {
        if policies.len() > 1 { format!("{name} ({})", p.label()) } else { name.to_string() }
    };
    let mut scenarios = Vec::new();
    for &p in &policies {
        match &base {
            Some((rev, base)) => {
                scenarios.push(Scenario { label: named(rev, p), model: base, policy: p });
                scenarios.push(Scenario { label: named("working tree", p), model: &model, policy: p });
            }
            None => scenarios.push(Scenario { label: p.label().into(), model: &model, policy: p }),
        }
    }
    let trace = args.input.fetched(&model)?;
    let runs = simulation::simulate_all(&scenarios, &trace.input)?;
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
