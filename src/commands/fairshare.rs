//! `allot fairshare`: what Slurm's `sshare -l` shows for an association tree (the budgets,
//! or a `sacctmgr dump`) and a file of usage, by Slurm's Fair Tree arithmetic.

use std::path::{Path, PathBuf};

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::replay;

#[derive(clap::Args)]
pub struct Args {
    /// A budgets folder or file, or a `sacctmgr dump` file.
    tree: PathBuf,
    /// CSV `account,user,raw_usage` (user empty for an account's own usage).
    #[arg(long)]
    usage: PathBuf,
}

pub fn run(args: Args, format: Format) -> Outcome {
    if is_dump(&args.tree) {
        return replay::run_fairshare(&args.tree, None, &args.usage);
    }
    let Some(model) = budgets::model(&args.tree, format)? else { return Ok(Exit::Problems) };
    replay::run_fairshare(&args.tree, Some(&model), &args.usage)
}

/// A `sacctmgr dump` file, told by its `Cluster - ` line.
fn is_dump(path: &Path) -> bool {
    path.is_file()
        && std::fs::read_to_string(path)
            .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("Cluster - ")))
}
