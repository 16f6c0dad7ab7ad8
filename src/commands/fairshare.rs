//! `allot fairshare`: what Slurm's `sshare -l` shows for an association tree (the budgets,
//! or a `sacctmgr dump`) and a file of usage, by Slurm's Fair Tree arithmetic.

use std::path::{Path, PathBuf};

use allot_compiler::ir::Model;
use allot_targets::slurm::fair_tree::FairTree;
use allot_targets::slurm::tree::{self, Tree};
use allot_targets::slurm::usage::Usage;

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::output::print;

#[derive(clap::Args)]
pub struct Args {
    /// A budgets folder or file, or a `sacctmgr dump` file.
    tree: PathBuf,
    /// CSV `account,user,raw_usage` (user empty for an account's own usage).
    #[arg(long)]
    usage: PathBuf,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let tree = match dump(&args.tree) {
        Some(text) => {
            tree::parse(&text).map_err(|e| Error::failed(format!("{}: {e}", args.tree.display())))?
        }
        None => {
            let Some(model) = budgets::model(&args.tree, format)? else { return Ok(Exit::Problems) };
            budgets_tree(&model)?
        }
    };
    let text = crate::read::read_text(&args.usage, crate::read::MAX_INPUT_BYTES)
        .map_err(|e| Error::failed(format!("{}: {e}", args.usage.display())))?;
    let usage = Usage::parse(&text).map_err(|e| Error::failed(format!("{} {e}", args.usage.display())))?;
    let fair_tree =
        FairTree::compute(&usage.associations(&tree)).map_err(|e| Error::failed(e.to_string()))?;
    print(&fair_tree.to_sshare_parsable())?;
    Ok(Exit::Success)
}

/// The text of a `sacctmgr dump` file (told by its `Cluster - ` line); `None` for budgets.
fn dump(path: &Path) -> Option<String> {
    let text =
        path.is_file().then(|| crate::read::read_text(path, crate::read::MAX_INPUT_BYTES).ok()).flatten()?;
    text.lines().any(|l| l.trim_start().starts_with("Cluster - ")).then_some(text)
}

/// The budgets' association tree on their first Slurm cluster, with Slurm's own root user
/// beside the top accounts.
fn budgets_tree(model: &Model) -> Result<Tree, Error> {
    let cluster = tree::slurm_clusters(model)
        .into_iter()
        .next()
        .ok_or_else(|| Error::failed("the budgets bind no Slurm cluster"))?;
    let mut desired = tree::desired(model, &cluster);
    desired.users.push(tree::User {
        name: "root".into(),
        account: "root".into(),
        fairshare: 1,
        ..tree::User::default()
    });
    Ok(desired)
}
