//! What the workspace's tests share (the `test-support` feature, for tests only): budgets
//! compiled from text or from a folder, every file under a folder, and the shared reference
//! material (CRDs, Hadoop's fixtures, traces). Unlike the rest of the compiler it reads
//! files, and it panics: a test input that does not compile is a broken test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ir::Model;
use crate::units::Instant;
use crate::{MemoryLoader, compile};

/// The moment tests compile at unless they say otherwise: 2026-01-01T00:00:00Z.
pub const AT: Instant = 1_767_225_600;

/// The model of a budget written as one `allot.kdl`, at [`AT`].
pub fn model(text: &str) -> Model {
    model_at(text, AT)
}

/// The model of a budget written as one `allot.kdl`, with the grants in force at `at`, and
/// its timeline (for replays).
pub fn model_at(text: &str, at: Instant) -> Model {
    let compilation = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl", at);
    let diagnostics = compilation.diagnostics.clone();
    compilation.over_time().unwrap_or_else(|| panic!("{diagnostics:?}"))
}

/// The model of the budget repository in `dir` (its `allot.kdl` and what that includes).
pub fn model_of(dir: &Path) -> Model {
    let mut loader = MemoryLoader::default();
    loader.files.extend(files_under(dir).into_iter().filter(|(path, _)| path.ends_with(".kdl")));
    let compilation = compile(&loader, "allot.kdl", AT);
    compilation.model.unwrap_or_else(|| panic!("{}: {:?}", dir.display(), compilation.diagnostics))
}

/// Every file under `dir`, by its `/`-separated path relative to `dir`.
pub fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
                files.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// The folder `folder` of the shared reference material (`ALLOT_SHARED_DIR`, or `shared/`
/// beside the repository at `root`), holding `what`; `None`, said on stderr, when it is
/// absent, unless `ALLOT_REQUIRE_SHARED` is set (CI sets it), when it panics.
pub fn shared(root: &Path, folder: &str, what: &str) -> Option<PathBuf> {
    let shared =
        std::env::var_os("ALLOT_SHARED_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("../shared"));
    let dir = shared.join(folder);
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("ALLOT_REQUIRE_SHARED").is_none(), "no {what} at {}", dir.display());
    eprintln!("skipped: no {what} at {} (set ALLOT_SHARED_DIR)", dir.display());
    None
}
