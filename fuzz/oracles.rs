//! What each fuzz target requires of allot, shared by the fuzz targets (`fuzz_targets/`)
//! and by the test that replays every input the fuzzers once failed on
//! (`tests/fuzz_regressions.rs`, over `fuzz/regressions/<target>/`). Each function panics
//! when allot breaks its promise; any other panic, overflow or stack overflow inside allot
//! is a finding too.

// Each fuzz target uses one of these, and the replay test those with saved inputs.
#![allow(dead_code)]

use allot_compiler::source::{ENTRY_FILE, FileId};
use allot_compiler::{MemoryLoader, compile, format, syntax};
use allot_targets::slurm::{import, plan, tree};
use allot_verify::trace::{Format, Reader};

/// The moment budgets are compiled at: fixed, so that a finding replays alike.
const AT: allot_compiler::units::Instant = 1_767_225_600;

/// The whole front end on one budget file: KDL parsing, lowering, the checks and
/// normalisation; when the file is valid, every target's emitter (with its rules) and fidelity.
pub fn kdl_front_end(text: &str) {
    let loader = MemoryLoader::new([("allot.kdl", text)]);
    let compilation = compile(&loader, "allot.kdl", AT);
    let Some(model) = compilation.model else { return };
    for target in allot_targets::registry() {
        target.emit(&model);
        target.fidelity(&model).to_markdown();
    }
}

/// The trace readers: the first byte chooses the format, the rest is the trace, read row
/// by row to the end (an error ends the file, as `replay` does without --skip-bad-rows).
pub fn trace_reader(data: &[u8]) {
    let Some((&selector, trace)) = data.split_first() else { return };
    let format = match selector % 4 {
        0 => Format::Csv,
        1 => Format::Jsonl,
        2 => Format::Sacct,
        _ => Format::Itp,
    };
    let Ok(mut reader) = Reader::new(trace, format, "fuzz") else { return };
    while let Some(row) = reader.next_job() {
        if row.is_err() {
            break;
        }
    }
}

/// The `sacctmgr dump` parser, and what allot does with a dump it accepted: a plan of the
/// tree against itself changes nothing, and `allot import slurm`'s KDL, when import
/// accepts the tree, is a budget file that checks without errors.
pub fn slurm_dump(text: &str) {
    let Ok(live) = tree::parse(text) else { return };
    let unchanged = plan::plan(&live, &live);
    assert!(unchanged.is_empty(), "a tree planned against itself changes: {}", plan::human(&unchanged));
    let options = import::Options { gpus: 1024, gpu_type: "h100".to_string(), gpus_per_node: 8 };
    let Ok(files) = import::to_repository(&live, &options) else { return };
    let loader = MemoryLoader::new(files.iter().map(|(path, text)| (path.as_str(), text.as_str())));
    let compilation = compile(&loader, ENTRY_FILE, AT);
    assert!(
        !compilation.has_errors(),
        "import wrote budget files that do not check:\n{files:?}\n{:#?}",
        compilation.diagnostics
    );
}

/// `allot fmt`: what it writes parses, is already in canonical form (formatting it again
/// changes nothing), and keeps every comment of the input.
pub fn fmt_round_trip(text: &str) {
    let Ok(formatted) = format::format(text) else { return };
    assert!(syntax::parse(FileId(0), &formatted).is_ok(), "fmt wrote text that does not parse:\n{formatted}");
    assert_eq!(format::format(&formatted).as_deref(), Ok(formatted.as_str()), "fmt is not idempotent");
    for comment in syntax::comments(text) {
        assert!(formatted.contains(comment.trim()), "fmt lost the comment {comment:?}");
    }
}
