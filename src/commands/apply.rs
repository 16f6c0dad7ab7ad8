//! `allot apply slurm PLAN`: a plan saved by `allot plan slurm --live --out PLAN`, applied to
//! the live Slurm it was made against. The live associations are read again first, and the
//! plan is refused when they changed since (each changed record named). The plan is then
//! applied as it was saved: one `sacctmgr load` of what a load does exactly, then
//! `sacctmgr` commands one by one for the rest, in the plan's order; a failure stops them
//! and says what was applied and what was not. Last, the live tree is read once more and
//! planned again: apply ends well only when no change is left.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use allot_targets::slurm::{plan, tree};
use similar::{ChangeTag, TextDiff};

use crate::exit::{Error, Exit, Outcome};
use crate::output::print;
use crate::{sacctmgr, saved_plan};

#[derive(clap::Subcommand)]
pub enum Target {
    /// Apply a plan saved by `allot plan slurm --live --out PLAN` to the live Slurm.
    Slurm(SlurmArgs),
}

#[derive(clap::Args)]
pub struct SlurmArgs {
    /// The saved plan.
    plan: PathBuf,
    /// Apply without asking (for CI); otherwise the plan is shown and a terminal asked.
    #[arg(long)]
    auto_approve: bool,
}

/// The most changed records a refusal names.
const MAX_DRIFT_SHOWN: usize = 50;

pub fn run(target: Target) -> Outcome {
    let Target::Slurm(args) = target;
    let saved = saved_plan::read(&args.plan)?;
    let cluster = &saved.cluster;
    unchanged_since(&saved)?;
    if let Some(revision) = &saved.revision {
        eprintln!("The plan of the budgets at commit {revision} (HEAD when planned):");
    }
    print(&plan::human(&saved.plan))?;
    if saved.plan.is_empty() {
        return Ok(Exit::Success);
    }
    let plan::Application { load, commands } = &saved.application;
    let calls = commands.len() + usize::from(load.is_some());
    if !args.auto_approve {
        if !approved(cluster, calls)? {
            eprintln!("Apply cancelled: nothing was applied.");
            return Ok(Exit::Problems);
        }
        // The cluster may have changed while the plan was read.
        unchanged_since(&saved)?;
    }
    if let Some(load) = load {
        let lines = load.lines().filter(|l| l.starts_with("Account - ") || l.starts_with("User - ")).count();
        eprintln!("sacctmgr -i load: {lines} associations added or changed");
        if let Err(e) = sacctmgr::load(load) {
            eprintln!(
                "error: the load failed: {e}\n  a load may have applied part of its file, and none of the {} commands after it ran; `allot plan slurm --live` shows what remains",
                commands.len()
            );
            return Ok(Exit::Problems);
        }
    }
    for (done, command) in commands.iter().enumerate() {
        eprintln!("{}", command.shell());
        if let Err(e) = sacctmgr::run(&command.arguments()) {
            let left = commands.len() - done;
            let loaded = if load.is_some() { "the load and " } else { "" };
            eprintln!(
                "error: this command failed: {}\n  sacctmgr said: {e}\n\
                 {loaded}{done} of {} commands were applied, the {left} from this one on were not; \
                 `allot plan slurm --live` shows what remains",
                command.shell(),
                commands.len()
            );
            return Ok(Exit::Problems);
        }
    }
    let after = sacctmgr::dump(cluster)?;
    let after = tree::parse(&after)
        .map_err(|e| Error::failed(format!("sacctmgr dump {cluster}, after applying: {e}")))?;
    let left = plan::plan(&saved.desired, &after);
    if left.is_empty() {
        println!(
            "Apply complete in {calls} sacctmgr call{}; Slurm cluster {cluster} now holds the associations the budgets want.",
            if calls == 1 { "" } else { "s" }
        );
        return Ok(Exit::Success);
    }
    eprintln!("error: every command ran, yet these changes did not take:\n{}", plan::human(&left));
    Ok(Exit::Problems)
}

/// Refuses the plan when the live associations are not the ones it was made against.
fn unchanged_since(saved: &saved_plan::SavedPlan) -> Result<(), Error> {
    let cluster = &saved.cluster;
    let now = sacctmgr::dump(cluster)?;
    if saved_plan::fingerprint(&now) == saved.fingerprint {
        return Ok(());
    }
    eprintln!("{}", drift(&saved.live_text, &now));
    Err(Error::failed(format!(
        "the live associations of Slurm cluster {cluster} changed since the plan was made: nothing was applied; plan again"
    )))
}

/// The longest a drift report compares the two dumps line by line.
const DRIFT_DIFF_TIME: Duration = Duration::from_secs(2);

/// The records of the live dump that differ from the plan's, each named once.
fn drift(then: &str, now: &str) -> String {
    let (then, now) = (saved_plan::records(then), saved_plan::records(now));
    let diff = TextDiff::configure().timeout(DRIFT_DIFF_TIME).diff_lines(&then, &now);
    let changed: Vec<String> = diff
        .iter_all_changes()
        .filter_map(|change| match change.tag() {
            ChangeTag::Delete => Some(format!("  at the plan: {}", change.value().trim_end())),
            ChangeTag::Insert => Some(format!("  now:         {}", change.value().trim_end())),
            ChangeTag::Equal => None,
        })
        .collect();
    let mut out =
        format!("Since the plan, the live associations changed ({} lines of the dump):\n", changed.len());
    for line in changed.iter().take(MAX_DRIFT_SHOWN) {
        out.push_str(&allot_compiler::escape::controls(line, true));
        out.push('\n');
    }
    if changed.len() > MAX_DRIFT_SHOWN {
        out.push_str(&format!("  ... and {} more\n", changed.len() - MAX_DRIFT_SHOWN));
    }
    out
}

/// Asks on the terminal whether to apply; only `yes` does.
fn approved(cluster: &str, calls: usize) -> Result<bool, Error> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::failed(
            "no terminal to ask on, and nothing was applied: review the plan and pass --auto-approve",
        ));
    }
    eprint!("Apply these changes to Slurm cluster {cluster} ({calls} sacctmgr calls)? Only `yes` applies: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}
