//! `allot fmt`: what it writes parses, is already in canonical form (formatting it again
//! changes nothing), and keeps every comment of the input.

#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|text: &str| oracles::fmt_round_trip(text));
