//! The `sacctmgr dump` parser, and what allot does with a dump it accepted: a plan of the
//! tree against itself must change nothing, and `allot import slurm`'s KDL, when import
//! accepts the tree, must be a budget file that checks without errors.

#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|text: &str| oracles::slurm_dump(text));
