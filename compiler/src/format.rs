//! Canonical formatting of one budget file, for `allot fmt`: four-space indentation, one
//! space between entries, one node per line, blank lines between groups kept (at most one),
//! every comment kept. Beside the pipeline: text in, text out.

use kdl::{FormatConfig, KdlDocument};

use crate::syntax;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("the file does not parse as KDL 2.0; run `allot check` for details")]
    Syntax,
    #[error("formatting would lose the comment `{0}`; move it onto a line of its own")]
    WouldLoseComment(String),
}

/// The canonical form of `text`.
pub fn format(text: &str) -> Result<String, FormatError> {
    let mut doc = syntax::parse(crate::source::FileId(0), text).map_err(|_| FormatError::Syntax)?;
    prepare(&mut doc);
    doc.autoformat_config(&FormatConfig::builder().indent("    ").build());
    finish(&mut doc);
    let formatted = doc.to_string().trim_start_matches('\n').to_string();

    let before = syntax::comments(text);
    let after = syntax::comments(&formatted);
    if let Some(lost) = before.iter().find(|c| !after.contains(c)) {
        return Err(FormatError::WouldLoseComment((*lost).to_string()));
    }
    if before.len() != after.len() {
        return Err(FormatError::WouldLoseComment(before.join(" ")));
    }
    Ok(formatted)
}

/// Before autoformatting: move end-of-line comments out of the terminator (where the
/// autoformatter drops them), and mark nodes preceded by a blank line.
fn prepare(doc: &mut KdlDocument) {
    for (i, node) in doc.nodes_mut().iter_mut().enumerate() {
        if let Some(format) = node.format_mut() {
            let terminator = format.terminator.trim();
            if terminator.starts_with("//") || terminator.starts_with("/*") {
                format.before_terminator = format!(" {terminator}");
                format.terminator = "\n".into();
            }
            // The previous node's terminator ended its line; a newline first thing here is
            // a blank line.
            let blank_line = format.leading.trim_start_matches([' ', '\t']).starts_with('\n');
            if i > 0 && blank_line {
                // A marker the autoformatter keeps (it only trims whitespace).
                format.leading = format!("\u{0}{}", format.leading);
            }
        }
        if let Some(children) = node.children_mut() {
            prepare(children);
        }
    }
}

/// After autoformatting: end-of-line comments end their line, marked nodes get one blank
/// line before them.
fn finish(doc: &mut KdlDocument) {
    for node in doc.nodes_mut() {
        if let Some(format) = node.format_mut() {
            if format.before_terminator.ends_with('\n') {
                format.before_terminator = format.before_terminator.trim_end().to_string();
            }
            // The autoformatter wrote the marker on a line of its own: "{indent}\0\n{indent}...".
            if let Some(at) = format.leading.find('\u{0}') {
                let after = &format.leading[at + 1..];
                format.leading = format!("\n{}", after.strip_prefix('\n').unwrap_or(after));
            }
        }
        if let Some(children) = node.children_mut() {
            finish(children);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_keeps_comments() {
        let src = "// head\ncluster a   gpus=8 gpu-type=h100 { slurm  cluster=x ; }\n\n\n// group\nproject x share=\"5%\" resumable=#true  // tail\nproject y share=\"5%\" { /* inner */ users a b }\n";
        let out = format(src).unwrap();
        assert_eq!(format(&out).unwrap(), out, "idempotent");
        for comment in ["// head", "// group", "// tail", "/* inner */"] {
            assert!(out.contains(comment), "{comment} kept in:\n{out}");
        }
        assert!(out.contains("cluster a gpus=8 gpu-type=h100 {\n    slurm cluster=x\n}\n"), "{out}");
    }
}
