//! `allot fairshare`: what Slurm's `sshare -l` shows for an association tree (the budgets,
//! or a `sacctmgr dump`) and a file of usage, by Slurm's Fair Tree arithmetic.

use std::path::{Path, PathBuf};

use allot_compiler::ir::Model;
use allot_targets::slurm::fair_tree::{FairTree, SiblingOrder};
use allot_targets::slurm::tree::{self, Tree};
use allot_targets::slurm::usage::Usage;

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Error, Exit, Outcome};
use crate::input::dump;
use crate::output::print;

#[derive(clap::Args)]
pub struct Args {
    /// A budgets folder or file, or a `sacctmgr dump` file.
    tree: PathBuf,
    /// CSV `account,user,raw_usage` (user empty for an account's own usage).
    #[arg(long)]
    usage: PathBuf,
    /// The Slurm whose order of siblings tied on Level FS to follow: 22.05 (to 23.02: users
    /// first, then by name) or 23.11 (and later: by lineage).
    #[arg(long, value_enum, default_value = "22.05")]
    slurm_version: SlurmVersion,
}

/// The Slurm versions whose Fair Tree tie order differs.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum SlurmVersion {
    #[value(name = "22.05")]
    Slurm22,
    #[value(name = "23.11")]
    Slurm23,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let tree = match dump(&args.tree)? {
        Some(text) => {
            tree::parse(&text).map_err(|e| Error::failed(format!("{}: {e}", args.tree.display())))?
        }
        None => {
            let Some(model) = budgets::model(&args.tree, format, budgets::now())? else {
                return Ok(Exit::Problems);
            };
            budgets_tree(&model)?
        }
    };
    let text = dump::read(&args.usage)?;
    let usage = Usage::parse(&text).map_err(|e| Error::failed(format!("{} {e}", args.usage.display())))?;
    let order = match args.slurm_version {
        SlurmVersion::Slurm22 => SiblingOrder::Slurm22,
        SlurmVersion::Slurm23 => SiblingOrder::Slurm23,
    };
    let fair_tree =
        FairTree::compute_in(&usage.associations(&tree), order).map_err(|e| Error::failed(e.to_string()))?;
    print(&fair_tree.to_sshare_parsable())?;
    eprintln!("allot fairshare: {}", order.describe());
    Ok(Exit::Success)
}

/// The text of a `sacctmgr dump` file (told by its `Cluster - ` line), read within the
/// dump's size limit; `None` for budgets (a folder, or a file without that line).
fn dump(path: &Path) -> Result<Option<String>, Error> {
    if !path.is_file() || path.extension().is_some_and(|e| e == "kdl") {
        return Ok(None);
    }
    let text = dump::read(path)?;
    Ok(text.lines().any(|l| l.trim_start().starts_with("Cluster - ")).then_some(text))
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
