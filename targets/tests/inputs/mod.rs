//! The inputs the targets' tests share: budgets compiled from text and from the example
//! repositories (through allot-compiler's `test-support`), and the shared reference
//! material (CRDs, Hadoop's fixtures).
#![allow(dead_code, reason = "each test file uses its part")]

use std::path::{Path, PathBuf};

use allot_compiler::ir::Model;
use allot_compiler::test_support::model_of;

/// The repository's root folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The model of `examples/<name>`.
pub fn example(name: &str) -> Model {
    model_of(&root().join("examples").join(name))
}

/// Every example repository whose model `keep` accepts, by folder name, in name order.
pub fn examples(keep: impl Fn(&Model) -> bool) -> Vec<(String, Model)> {
    let mut out: Vec<(String, Model)> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("allot.kdl").exists())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), model_of(&p)))
        .filter(|(_, m)| keep(m))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A folder of the shared reference material holding `what` (see
/// [`allot_compiler::test_support::shared`]).
pub fn shared(folder: &str, what: &str) -> Option<PathBuf> {
    allot_compiler::test_support::shared(&root(), folder, what)
}
