//! The `allot` command line: parses the arguments and dispatches to one module per command
//! ([`commands`]). The commands choose what is read, shown and written, and the exit status
//! ([`exit`], documented in docs/cli.md): files through [`input`], the live systems through
//! [`systems`], the arguments several commands share from [`args`]; the libraries do the
//! rest.

mod args;
mod budgets;
mod commands;
mod diagnostics;
mod exit;
mod github;
mod input;
mod output;
mod simulation;
mod systems;

use std::io::ErrorKind;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{
    apply, build, check, diff, drain, explain, export, fairshare, fmt, grants, import, owners, plan, replay,
    schema, status, tree,
};
use crate::exit::{Error, Exit, Outcome};

/// A compiler for GPU budgets.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// How diagnostics are shown [default: fancy on a terminal, plain otherwise or when CI is set].
    #[arg(long, global = true, value_enum)]
    diagnostics: Option<diagnostics::Format>,
    /// How long to wait for each read of a live system (a Slurm command, a request to the
    /// Kubernetes API server) before stopping it with an error; writes (a Slurm load, an
    /// apply's commands) get ten times as long [default: 30s].
    #[arg(long, global = true, value_name = "DURATION")]
    timeout: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a budget repository and report every problem.
    Check(check::Args),
    /// Show the project tree: shares, effective shares and guaranteed GPUs per cluster.
    Tree(tree::Args),
    /// The calendar of the grants: those in force, and when shares change next.
    Grants(grants::Args),
    /// Write every target's native configuration and its fidelity report.
    Build(build::Args),
    /// What changed between two revisions: the semantic diff, for review.
    Diff(diff::Args),
    /// Write a CODEOWNERS file: each included budget file, owned by its subtree's owners.
    Owners(owners::Args),
    /// The changes that bring a live scheduler to the budgets.
    Plan {
        #[command(subcommand)]
        target: plan::Target,
    },
    /// Apply a saved plan to the live scheduler it was made against.
    Apply {
        #[command(subcommand)]
        target: apply::Target,
    },
    /// Who is over or under budget now, from the live scheduler.
    Status(status::Args),
    /// Why a job waits, and when it may start, from the live scheduler.
    Explain(explain::Args),
    /// Empty broken nodes as soon as each job's contract allows.
    Drain(drain::Args),
    /// Turn a live scheduler's tree into a budget repository.
    Import {
        #[command(subcommand)]
        target: import::Target,
    },
    /// The verifier: replay a job trace against the budgets.
    Replay {
        #[command(subcommand)]
        command: replay::Command,
    },
    /// What Slurm's `sshare -l` shows for an association tree and its usage (Fair Tree).
    Fairshare(fairshare::Args),
    /// Write the normalised model as JSON (its schema: `allot schema`).
    Export(export::Args),
    /// Print the JSON Schema of the exported model.
    Schema,
    /// Format the budget files canonically, keeping comments.
    Fmt(fmt::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.diagnostics.unwrap_or_else(diagnostics::Format::detect);
    match systems::timeout::set(cli.timeout.as_deref()).and_then(|()| run(cli.command, format)) {
        Ok(exit) => exit.into(),
        Err(Error::Io(e)) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            // The message may quote a path or a name from the budget files.
            eprintln!("error: {}", allot_compiler::escape::controls(&e.to_string(), true));
            Exit::Problems.into()
        }
    }
}

fn run(command: Command, format: diagnostics::Format) -> Outcome {
    match command {
        Command::Check(args) => check::run(args, format),
        Command::Tree(args) => tree::run(args, format),
        Command::Grants(args) => grants::run(args, format),
        Command::Build(args) => build::run(args, format),
        Command::Diff(args) => diff::run(args, format),
        Command::Owners(args) => owners::run(args, format),
        Command::Plan { target } => plan::run(target, format),
        Command::Apply { target } => apply::run(target),
        Command::Import { target } => import::run(target),
        Command::Status(args) => status::run(args, format),
        Command::Drain(args) => drain::run(args, format),
        Command::Explain(args) => explain::run(args, format),
        Command::Replay { command } => replay::run(command, format),
        Command::Fairshare(args) => fairshare::run(args, format),
        Command::Export(args) => export::run(args, format),
        Command::Schema => schema::run(),
        Command::Fmt(args) => fmt::run(args, format),
    }
}
