//! The inputs the targets' tests share: budgets compiled from text and from the example
//! repositories, and the shared reference material (CRDs, Hadoop's fixtures).
#![allow(dead_code, reason = "each test file uses its part")]

use std::path::{Path, PathBuf};

use allot_compiler::ir::Model;
use allot_compiler::{MemoryLoader, compile};

/// The repository's root folder.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The model of a budget written as one `allot.kdl`.
pub fn model(text: &str) -> Model {
    let compilation = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl");
    compilation.model.unwrap_or_else(|| panic!("{:?}", compilation.diagnostics))
}

/// The model of a budget repository on disk.
pub fn model_of(dir: &Path) -> Model {
    let mut loader = MemoryLoader::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "kdl") {
                let relative = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
                loader.files.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let compilation = compile(&loader, "allot.kdl");
    compilation.model.unwrap_or_else(|| panic!("{}: {:?}", dir.display(), compilation.diagnostics))
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

/// A folder of the shared reference material (`ALLOT_SHARED_DIR` overrides `../shared`)
/// holding `what`; `None`, said on stderr, when it is absent, unless `ALLOT_REQUIRE_SHARED`
/// is set (CI sets it).
pub fn shared(folder: &str, what: &str) -> Option<PathBuf> {
    let shared =
        std::env::var_os("ALLOT_SHARED_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared"));
    let dir = shared.join(folder);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("ALLOT_REQUIRE_SHARED").is_none(), "no {what} at {}", dir.display());
    eprintln!("skipped: no {what} at {} (set ALLOT_SHARED_DIR)", dir.display());
    None
}
