//! `allot export`: the normalised model as indented JSON (its schema: `allot schema`).

use crate::args;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::{json, print};

/// The repository to read (`PATH`) and the moment (`--at`).
pub type Args = args::RepositoryAt;

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.model(format)? else { return Ok(Exit::Problems) };
    print(&json(&model)?)?;
    Ok(Exit::Success)
}
