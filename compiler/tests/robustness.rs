//! No input panics the compiler: random KDL-like text, odd Unicode, empty files.

use allot_compiler::{Code, MemoryLoader, compile};

use proptest::prelude::*;

/// The moment compiled at.
const AT: allot_compiler::units::Instant = 1_767_225_600;

fn compile_text(text: &str) -> Vec<Code> {
    let compilation = compile(&MemoryLoader::new([("allot.kdl", text)]), "allot.kdl", AT);
    compilation.diagnostics.iter().map(|d| d.code).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn kdl_like_text_never_panics(text in r#"(project|cluster|contract|include|on|users|share=|gpus=|"[a-z%0-9./]{0,6}"|#true|true|[{};\n /*#=-]|[0-9]{1,3}|ß|🚀|\u{202e}){0,60}"#) {
        compile_text(&text);
    }

    #[test]
    fn any_text_never_panics(text in "\\PC{0,200}") {
        compile_text(&text);
    }
}

#[test]
fn an_empty_file_says_what_is_missing() {
    assert_eq!(compile_text(""), vec![Code::ClusterMissing, Code::ContractNoDefault]);
}

#[test]
fn a_missing_entry_file_is_reported() {
    let compilation = compile(&MemoryLoader::default(), "allot.kdl", AT);
    let codes: Vec<Code> = compilation.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, vec![Code::SourceUnreadable]);
}
