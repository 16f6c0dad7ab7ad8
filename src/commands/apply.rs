//! `allot apply slurm PLAN`: a plan saved by `allot plan slurm --live --out PLAN`, applied to
//! the live Slurm it was made against. The live state (associations, and QOS when the plan
//! read them) is read again first, and the plan is refused when it changed since (each
//! changed record named). The plan is then applied step by step as it was saved
//! ([`plan::Application`]): the QOS, one `sacctmgr load` of what it adds, the settings of
//! existing associations side by side, then the rest in order; a failed step stops it and
//! says what was applied and what was not. Last, the live state is read once more and
//! planned again: apply ends well only when no change is left.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use allot_targets::slurm::plan;
use similar::{ChangeTag, TextDiff};

use crate::exit::{Error, Exit, Outcome};
use crate::output::print;
use crate::systems::{apply_lock, saved_plan, slurm};

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
    /// The most `sacctmgr` commands run at once where the plan allows it (1: one by one).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=64))]
    parallel: u16,
    /// Take over the apply lock another apply left (QOS `allot-apply-lock-...`): only when that
    /// apply no longer runs. A lock left on this machine by a process that is gone is taken
    /// over without it.
    #[arg(long)]
    break_lock: bool,
}

/// The most changed records a refusal names.
const MAX_DRIFT_SHOWN: usize = 50;

pub fn run(target: Target) -> Outcome {
    let Target::Slurm(args) = target;
    let saved = saved_plan::read(&args.plan)?;
    let cluster = &saved.cluster;
    // Held until apply returns: one apply at a time on this Slurm.
    let _lock = if saved.plan.is_empty() { None } else { Some(apply_lock::Lock::take(args.break_lock)?) };
    unchanged_since(&saved)?;
    if let Some(revision) = &saved.revision {
        eprintln!("The plan of the budgets at commit {revision} (HEAD when planned):");
    }
    print(&plan::human(&saved.plan))?;
    if saved.plan.is_empty() {
        return Ok(Exit::Success);
    }
    let calls = saved.application.calls();
    if !args.auto_approve {
        if !approved(cluster, calls)? {
            eprintln!("Apply cancelled: nothing was applied.");
            return Ok(Exit::Problems);
        }
        // The cluster may have changed while the plan was read.
        unchanged_since(&saved)?;
    }
    let steps = &saved.application.steps;
    for (done, step) in steps.iter().enumerate() {
        eprintln!("step {} of {}: {}", done + 1, steps.len(), step_said(step, args.parallel));
        if let Err(failure) = apply(step, usize::from(args.parallel)) {
            eprintln!(
                "error: step {} of {} failed: {failure}\n  the {done} step{} before it {} applied, the {} after it not run; \
                 `allot plan slurm --live` shows what remains",
                done + 1,
                steps.len(),
                if done == 1 { "" } else { "s" },
                if done == 1 { "was" } else { "were" },
                steps.len() - done - 1,
            );
            return Ok(Exit::Problems);
        }
    }
    // Every step ran: what remains, if anything, only a new plan can tell if this fails.
    let checked = |e: String| {
        Error::failed(format!(
            "every step was applied, but the live state of Slurm cluster {cluster} could not be read back to check it: {e}\n  `allot plan slurm --live` shows whether anything remains"
        ))
    };
    let after =
        saved_plan::Live::read(cluster, saved.live.qos.is_some()).map_err(|e| checked(e.to_string()))?;
    let after = after.tree().map_err(|e| checked(e.to_string()))?;
    let left = plan::plan(&saved.desired, &after);
    if left.is_empty() {
        println!(
            "Apply complete in {calls} sacctmgr call{}; Slurm cluster {cluster} now holds what the budgets want.",
            if calls == 1 { "" } else { "s" }
        );
        return Ok(Exit::Success);
    }
    eprintln!("error: every command ran, yet these changes did not take:\n{}", plan::human(&left));
    Ok(Exit::Problems)
}

/// What a step does, in a line of progress.
fn step_said(step: &plan::Step, parallel: u16) -> String {
    match step {
        plan::Step::Load(text) => {
            let added =
                text.lines().filter(|l| l.starts_with("Account - ") || l.starts_with("User - ")).count();
            format!("one `sacctmgr -i load` adding {}", crate::output::plural(added, "association"))
        }
        plan::Step::InOrder(commands) => {
            format!("{} in order", crate::output::plural(commands.len(), "command"))
        }
        plan::Step::Together(commands) => {
            format!(
                "{} side by side, up to {parallel} at once",
                crate::output::plural(commands.len(), "command")
            )
        }
    }
}

/// Applies one step, up to `parallel` commands at once where it allows; on failure, what
/// failed and what of the step was applied.
fn apply(step: &plan::Step, parallel: usize) -> Result<(), String> {
    match step {
        plan::Step::Load(text) => slurm::load(text)
            .map_err(|e| format!("the load failed: {e}\n  a load may have applied part of its file")),
        plan::Step::InOrder(commands) => {
            for (done, command) in commands.iter().enumerate() {
                eprintln!("  {}", command.shell());
                if let Err(e) = slurm::run(&command.arguments()) {
                    return Err(format!(
                        "this command failed: {}\n  {e}\n  \
                         in its step, the {done} command{} before it {} applied, the {} after it not run",
                        command.shell(),
                        if done == 1 { "" } else { "s" },
                        if done == 1 { "was" } else { "were" },
                        commands.len() - done - 1
                    ));
                }
            }
            Ok(())
        }
        plan::Step::Together(commands) => {
            for command in commands {
                eprintln!("  {}", command.shell());
            }
            let results = together(commands, parallel);
            let failed: Vec<String> = commands
                .iter()
                .zip(&results)
                .filter_map(|(command, result)| {
                    let e = result.as_ref().err()?;
                    Some(format!("  {}\n    {e}", command.shell()))
                })
                .collect();
            if failed.is_empty() {
                return Ok(());
            }
            Err(format!(
                "{} of {} commands run side by side failed, and the other {} were applied:\n{}",
                failed.len(),
                commands.len(),
                commands.len() - failed.len(),
                failed.join("\n")
            ))
        }
    }
}

/// Runs the commands with up to `width` at once; each one's result, in their order.
fn together(commands: &[plan::Command], width: usize) -> Vec<Result<(), Error>> {
    let next = AtomicUsize::new(0);
    let results: Vec<OnceLock<Result<(), Error>>> = commands.iter().map(|_| OnceLock::new()).collect();
    std::thread::scope(|scope| {
        for _ in 0..width.min(commands.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(command) = commands.get(i) else { break };
                    let _ = results[i].set(slurm::run(&command.arguments()));
                }
            });
        }
    });
    results.into_iter().map(|r| r.into_inner().expect("every command ran")).collect()
}

/// Refuses the plan when the live state is not the one it was made against.
fn unchanged_since(saved: &saved_plan::SavedPlan) -> Result<(), Error> {
    let cluster = &saved.cluster;
    let now = saved_plan::Live::read(cluster, saved.live.qos.is_some())
        .map_err(|e| Error::failed(format!("{e}\n  nothing was applied")))?;
    if now.fingerprint() == saved.live.fingerprint() {
        return Ok(());
    }
    eprintln!("{}", drift(&saved.live, &now));
    Err(Error::failed(format!(
        "the live associations or QOS of Slurm cluster {cluster} changed since the plan was made: nothing was applied; plan again"
    )))
}

/// The longest a drift report compares the two dumps line by line.
const DRIFT_DIFF_TIME: Duration = Duration::from_secs(2);

/// The records of the live state that differ from the plan's, each named once.
fn drift(then: &saved_plan::Live, now: &saved_plan::Live) -> String {
    let (then, now) = (then.records(), now.records());
    let diff = TextDiff::configure().timeout(DRIFT_DIFF_TIME).diff_lines(&then, &now);
    let changed: Vec<String> = diff
        .iter_all_changes()
        .filter_map(|change| match change.tag() {
            ChangeTag::Delete => Some(format!("  at the plan: {}", change.value().trim_end())),
            ChangeTag::Insert => Some(format!("  now:         {}", change.value().trim_end())),
            ChangeTag::Equal => None,
        })
        .collect();
    let mut out = format!("Since the plan, the live state changed ({} records):\n", changed.len());
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
    let calls = crate::output::plural(calls, "sacctmgr call");
    eprint!("Apply these changes to Slurm cluster {cluster} ({calls})? Only `yes` applies: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}
