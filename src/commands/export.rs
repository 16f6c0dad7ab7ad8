//! `allot export`: the normalised model as indented JSON (its schema: `allot schema`).

use std::path::PathBuf;

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::{json, print};

#[derive(clap::Args)]
pub struct Args {
    /// A folder holding allot.kdl, or a budget file.
    #[arg(default_value = ".")]
    path: PathBuf,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = budgets::model(&args.path, format)? else { return Ok(Exit::Problems) };
    print(&json(&model)?)?;
    Ok(Exit::Success)
}
