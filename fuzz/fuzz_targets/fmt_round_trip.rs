//! `allot fmt`: what it writes parses, is already in canonical form (formatting it again
//! changes nothing), and keeps every comment of the input.

#![no_main]

use allot_compiler::format::format;
use allot_compiler::source::FileId;
use allot_compiler::syntax;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(formatted) = format(text) else { return };
    assert!(syntax::parse(FileId(0), &formatted).is_ok(), "fmt wrote text that does not parse:\n{formatted}");
    assert_eq!(format(&formatted).as_deref(), Ok(formatted.as_str()), "fmt is not idempotent");
    for comment in syntax::comments(text) {
        assert!(formatted.contains(comment.trim()), "fmt lost the comment {comment:?}");
    }
});
