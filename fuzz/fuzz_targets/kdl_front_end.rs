//! The whole front end on one budget file: KDL parsing, lowering, the checks and
//! normalisation; when the file is valid, every target's emitter, with the rules it checks, too.
//! A panic, an overflow or a stack overflow anywhere is a finding.

#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|text: &str| oracles::kdl_front_end(text));
