//! `allot export`: the normalised model as indented JSON (its schema: `allot schema`).

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::{json, print};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    repository: budgets::Repository,
    #[command(flatten)]
    moment: budgets::Moment,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.repository.model_at(format, args.moment.instant())? else {
        return Ok(Exit::Problems);
    };
    print(&json(&model)?)?;
    Ok(Exit::Success)
}
