//! `allot diff`: what a change does, between two revisions read straight from git. The
//! compiler's semantic diff of the two models now, how they differ at the grant boundaries
//! of the coming days ([`later`]), each target's native files diffed on request, and a
//! simulation of a trace under both revisions' budgets (`--replay`), rendered for a
//! reviewer by [`review`].

mod later;
mod moved;
mod review;
mod table;
mod whatif;

use std::path::{Path, PathBuf};

use allot_compiler::calendar;
use allot_compiler::escape;
use allot_compiler::ir::Model;

use crate::args;
use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::input::git_loader::GitRepo;
use crate::input::kueue_files::KueueFiles;
use crate::input::traces::TraceInput;
use crate::output::{json, print};
use crate::simulation::{self, PolicyName, Scenario};
use allot_simulate::SlurmSettings;

#[derive(clap::Args)]
pub struct Args {
    /// The budgets, and the moment of the review (`--at`): the shares in force then, and the
    /// grant boundaries of the 30 days after it.
    #[command(flatten)]
    budgets: args::RepositoryAt,
    /// The base revision (branch, tag, commit, HEAD~1).
    #[arg(long)]
    against: String,
    /// The revision to compare [default: the working tree].
    #[arg(long)]
    head: Option<String>,
    /// Also diff every target's native files.
    #[arg(long)]
    native: bool,
    #[arg(long, value_enum, default_value = "human")]
    format: review::DiffFormat,
    /// Exit 2 when there are changes (0 none, 1 error).
    #[arg(long)]
    detailed_exitcode: bool,
    /// Also simulate this trace under both revisions' budgets, side by side.
    #[arg(long, value_name = "TRACE")]
    replay: Option<PathBuf>,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let git = GitRepo::discover(&args.budgets.repository.path)?;
    let at = args.budgets.moment.instant();
    let (Some(base), Some(changed)) = (
        budgets::revision_compiled(&git, &args.budgets.repository.path, Some(&args.against), format, at)?,
        budgets::revision_compiled(&git, &args.budgets.repository.path, args.head.as_deref(), format, at)?,
    ) else {
        return Ok(Exit::Problems);
    };
    let (Some(old), Some(new)) = (&base.model, &changed.model) else { return Ok(Exit::Problems) };
    let diff = allot_compiler::diff::diff(old, new);
    let later = calendar::compared(&base, &changed, at, at + later::HORIZON_DAYS * 86_400);
    let natives = if args.native { review::native(old, new) } else { Vec::new() };
    let head = args.head.as_deref().unwrap_or("working tree");
    // The policy the new budgets' clusters call for (Slurm's with its defaults), each
    // revision under its own budgets; made only for a replay (Kueue's follows the objects).
    let policy = PolicyName::default_for(new);
    let scenario = |label: &str, model| -> Result<Scenario<'_>, crate::exit::Error> {
        Ok(Scenario {
            label: label.into(),
            model,
            policy: policy.policy(model, SlurmSettings::default(), &KueueFiles::default())?,
        })
    };
    // A replay takes each revision's shares at every moment of the trace.
    let over_time = |c: &allot_compiler::Compilation, model: &Model| Model {
        timeline: calendar::timeline(&c.budget, &c.sources),
        ..model.clone()
    };
    let timed = args.replay.as_ref().map(|_| (over_time(&base, old), over_time(&changed, new)));
    let scenarios = match &timed {
        None => Vec::new(),
        Some((old, new)) => vec![scenario(&args.against, old)?, scenario(head, new)?],
    };
    let runs = match &args.replay {
        None => None,
        Some(trace) => Some(simulation::simulate_all(&scenarios, &TraceInput::at(trace))?),
    };
    let replayed = |trace: &Path| format!("Simulated on {} under each revision's budgets", trace.display());
    // The table of what moved, for the human and Markdown forms only.
    let table = || table::Table::new(&diff, old, new);
    // The what-if's line and its figures in full, for a terminal or for a comment.
    let replay = |table: &table::Table,
                  name: fn(&str) -> String,
                  arrow: &str,
                  block: &dyn Fn(&Path, &simulation::Runs) -> String| {
        let (Some(runs), Some(trace)) = (&runs, &args.replay) else { return None };
        let line = whatif::line(runs, trace, table, name, arrow)?;
        Some(review::Replay { line, block: block(trace, runs) })
    };
    let text = match args.format {
        review::DiffFormat::Human => {
            let table = table();
            let replay = replay(&table, escape::line, "->", &|trace, runs| {
                format!("{}:\n{}", escape::line(&replayed(trace)), simulation::side_by_side(runs))
            });
            let later = later::human(&later, &args.against, head, escape::line);
            review::human(&diff, &table, &later, &natives, &git, replay.as_ref())
        }
        review::DiffFormat::Markdown => {
            let table = table();
            let replay = replay(&table, allot_compiler::escape::markdown, "→", &|trace, runs| {
                let heading = allot_compiler::escape::markdown(&replayed(trace));
                format!("#### {heading}\n\n{}", simulation::markdown(runs))
            });
            let later = later::markdown(&later, &args.against, head, allot_compiler::escape::markdown);
            review::markdown(&diff, &table, &later, &natives, &git, replay.as_ref())
        }
        review::DiffFormat::Json => {
            let mut value = review::json(&diff, &natives, &git);
            value["grant_boundaries"] = later::json(&later);
            if let Some(runs) = &runs {
                value["replay"] = simulation::json(runs);
            }
            json(&value)?
        }
        review::DiffFormat::Github => {
            if runs.is_some() {
                eprintln!("note: --replay shows in the human, markdown and json formats, not in annotations");
            }
            review::github(&diff, &git)
        }
    };
    print(&text)?;
    Ok(Exit::changes(args.detailed_exitcode, !diff.is_empty()))
}
