//! `allot schema`: the JSON Schema of the model `allot export` writes (committed as
//! `schema/allot.schema.json`).

use crate::exit::{Exit, Outcome};
use crate::output::{json, print};

pub fn run() -> Outcome {
    print(&json(&allot_compiler::ir::json_schema())?)?;
    Ok(Exit::Success)
}
