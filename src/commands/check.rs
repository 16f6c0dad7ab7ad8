//! `allot check`: validates a budget repository, reports every problem at once, and on
//! success prints a one-line summary of what it holds.

use allot_compiler::{Compilation, ast};

use crate::args;
use crate::budgets;
use crate::diagnostics::{self, Format};
use crate::exit::{Exit, Outcome};
use crate::output::{plural, print};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    repository: args::Repository,
    /// Fail on warnings too.
    #[arg(long)]
    deny_warnings: bool,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let (compilation, ok) =
        budgets::compiled(&args.repository.path, format, args.deny_warnings, budgets::now())?;
    if ok {
        print(&summary(&compilation))?;
    }
    Ok(Exit::from_ok(ok))
}

/// `ok: 3 clusters, 3 contracts, 22 projects (15 budgets), 3 files; 0 errors, 0 warnings`
fn summary(compilation: &Compilation) -> String {
    let Some(model) = &compilation.model else { return String::new() };
    let mut projects = 0;
    let mut leaves = 0;
    ast::walk(&compilation.budget.projects, &mut |_, p| {
        projects += 1;
        leaves += usize::from(p.children.is_empty());
    });
    format!(
        "ok: {}, {}, {} ({}), {}; {}\n",
        plural(model.clusters.len(), "cluster"),
        plural(model.contracts.len(), "contract"),
        plural(projects, "project"),
        plural(leaves, "budget"),
        plural(compilation.sources.len(), "file"),
        diagnostics::count(&compilation.diagnostics)
    )
}
