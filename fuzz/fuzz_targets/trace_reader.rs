//! The trace readers: the first byte chooses the format, the rest is the trace. Every row
//! is read to the end (an error ends the file, as `replay` does without --skip-bad-rows).

#![no_main]

#[path = "../oracles.rs"]
mod oracles;

libfuzzer_sys::fuzz_target!(|data: &[u8]| oracles::trace_reader(data));
