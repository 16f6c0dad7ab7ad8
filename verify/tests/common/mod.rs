//! What the verifier's tests share: budgets compiled from the text of one budget file.

use allot_compiler::normalize::Model;
use allot_compiler::{MemoryLoader, compile};

/// The normalised model of `text`; the test fails with the diagnostics when it has errors.
pub fn model(text: &str) -> Model {
    let compilation = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl");
    compilation.model.unwrap_or_else(|| panic!("{:?}", compilation.diagnostics))
}
