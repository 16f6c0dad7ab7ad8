//! Every input a fuzzer once failed on (`fuzz/regressions/<target>/`), replayed through
//! the same oracle as its fuzz target (`fuzz/oracles.rs`): a crash the fuzzers found stays
//! fixed. `scripts/fuzz.sh` says how to add one.

#[path = "../fuzz/oracles.rs"]
mod oracles;

use std::path::Path;

/// The inputs saved for `target`, by file name.
fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions").join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no inputs in {}", folder.display());
    inputs
}

/// Runs `oracle` on each input of `target` as libFuzzer would (a `&str` target skips
/// inputs that are not UTF-8).
fn replay(target: &str, oracle: impl Fn(&[u8])) {
    for (name, input) in regressions(target) {
        eprintln!("{target}/{name}");
        oracle(&input);
    }
}

#[test]
fn trace_reader() {
    replay("trace_reader", oracles::trace_reader);
}

#[test]
fn slurm_dump() {
    replay("slurm_dump", |input| {
        if let Ok(text) = std::str::from_utf8(input) {
            oracles::slurm_dump(text);
        }
    });
}

#[test]
fn fmt_round_trip() {
    replay("fmt_round_trip", |input| {
        if let Ok(text) = std::str::from_utf8(input) {
            oracles::fmt_round_trip(text);
        }
    });
}
