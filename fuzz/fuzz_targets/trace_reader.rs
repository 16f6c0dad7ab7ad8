//! The trace readers: the first byte chooses the format, the rest is the trace. Every row
//! is read to the end (an error ends the file, as `replay` does without --skip-bad-rows).

#![no_main]

use allot_verify::trace::{Format, Reader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
});
