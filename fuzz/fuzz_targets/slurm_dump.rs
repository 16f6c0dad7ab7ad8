//! The `sacctmgr dump` parser, and what allot does with a dump it accepted: a plan of the
//! tree against itself must change nothing, and `allot import slurm`'s KDL, when import
//! accepts the tree, must be a budget file that checks without errors.

#![no_main]

use allot_compiler::{MemoryLoader, compile};
use allot_targets::slurm::{import, plan, tree};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(live) = tree::parse(text) else { return };
    let unchanged = plan::plan(&live, &live);
    assert!(unchanged.is_empty(), "a tree planned against itself changes: {}", plan::human(&unchanged));
    let options = import::Options { gpus: 1024, gpu_type: "h100".to_string(), gpus_per_node: 8 };
    let Ok(kdl) = import::to_kdl(&live, &options) else { return };
    let loader = MemoryLoader::new([("allot.kdl", kdl.as_str())]);
    let compilation = compile(&loader, "allot.kdl");
    assert!(
        !compilation.has_errors(),
        "import wrote a budget file that does not check:\n{kdl}\n{:#?}",
        compilation.diagnostics
    );
});
