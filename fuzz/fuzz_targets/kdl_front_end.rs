//! The whole front end on one budget file: KDL parsing, lowering, the checks and
//! normalisation; when the file is valid, every target's emitter and its validation too.
//! A panic, an overflow or a stack overflow anywhere is a finding.

#![no_main]

use allot_compiler::{MemoryLoader, compile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let loader = MemoryLoader::new([("allot.kdl", text)]);
    let compilation = compile(&loader, "allot.kdl");
    let Some(model) = compilation.model else { return };
    for target in allot_targets::registry() {
        let files = target.emit(&model);
        target.validate(&model, &files);
        target.fidelity(&model).to_markdown();
    }
});
