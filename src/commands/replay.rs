//! `allot replay`: the verifier. `audit` measures what happened in a job trace against the
//! budgets; `simulate` replays the trace's submissions under policies or revisions, side by
//! side.

use std::path::PathBuf;

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::git_loader::GitRepo;
use crate::{output, replay, simulate};

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
    input: replay::TraceInput,
    /// The window of the per-window figures [default: the policy window].
    #[arg(long)]
    window: Option<String>,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

#[derive(clap::Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    repository: budgets::Repository,
    #[command(flatten)]
    input: replay::TraceInput,
    /// The policies to run, side by side (e.g. `budget,priority`).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "budget")]
    policy: Vec<simulate::PolicyName>,
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
        other => other.flatten(),
    };
    let Some(model) = args.repository.model(format)? else { return Ok(Exit::Problems) };
    replay::run_audit(&model, &args.input, window, args.format)
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
    let named = |name: &str, p: simulate::PolicyName| {
        if args.policy.len() > 1 { format!("{name} ({})", p.label()) } else { name.to_string() }
    };
    let mut scenarios = Vec::new();
    for &p in &args.policy {
        match &base {
            Some((rev, base)) => {
                scenarios.push(simulate::Scenario { label: named(rev, p), model: base, policy: p });
                scenarios.push(simulate::Scenario {
                    label: named("working tree", p),
                    model: &model,
                    policy: p,
                });
            }
            None => scenarios.push(simulate::Scenario { label: p.label().into(), model: &model, policy: p }),
        }
    }
    simulate::run(&scenarios, &args.input, args.format, args.report.as_deref())
}
