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
    // The KDL parser drops a comment that follows a closing `}` on the same line.
    WouldLoseComment(String),
}

/// The canonical form of `text`.
pub fn format(text: &str) -> Result<String, FormatError> {
    let mut doc = syntax::parse(crate::source::FileId(0), text).map_err(|_| FormatError::Syntax)?;
    prepare(&mut doc);
    doc.autoformat_config(&FormatConfig::builder().indent("    ").build());
    finish(&mut doc);
    let formatted = format!("{}\n", doc.to_string().trim_matches('\n'));

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

/// Marks a blank line through the autoformatter, which drops empty lines but keeps others.
const BLANK: &str = "\u{0}";

/// Before autoformatting: move end-of-line comments out of the terminator (where the
/// autoformatter drops them), and mark the blank lines before each node.
fn prepare(doc: &mut KdlDocument) {
    for (i, node) in doc.nodes_mut().iter_mut().enumerate() {
        if let Some(format) = node.format_mut() {
            let terminator = format.terminator.trim();
            if terminator.starts_with("//") || terminator.starts_with("/*") {
                format.before_terminator = format!(" {terminator}");
                format.terminator = "\n".into();
            }
            format.leading = mark_blank_lines(&format.leading, i == 0);
        }
        if let Some(children) = node.children_mut() {
            prepare(children);
        }
    }
}

/// The text before a node, with each run of blank lines turned into one marker line.
///
/// The text starts on a fresh line after an earlier node, but mid-line for the first node
/// of a block (after `{`) or at the start of a file, where leading blank lines are dropped.
fn mark_blank_lines(leading: &str, first: bool) -> String {
    let mut lines: Vec<&str> = leading.split('\n').collect();
    let indent = lines.pop().unwrap_or("");
    let mut out = String::new();
    let mut after_blank = first;
    for line in lines {
        if line.trim().is_empty() {
            if !after_blank {
                out.push_str(BLANK);
                out.push('\n');
            }
            after_blank = true;
        } else {
            out.push_str(line);
            out.push('\n');
            after_blank = false;
        }
    }
    out.push_str(indent);
    out
}

/// After autoformatting: end-of-line comments end their line, marker lines become blank.
fn finish(doc: &mut KdlDocument) {
    for node in doc.nodes_mut() {
        if let Some(format) = node.format_mut() {
            if format.before_terminator.ends_with('\n') {
                format.before_terminator = format.before_terminator.trim_end().to_string();
            }
            let lines: Vec<&str> = format.leading.split('\n').collect();
            format.leading = lines
                .iter()
                .map(|line| if line.trim() == BLANK { "" } else { line })
                .collect::<Vec<_>>()
                .join("\n");
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
        let src = "// head\n\n// more\ncluster a   gpus=8 gpu-type=h100 { slurm  cluster=x ; }\n\n\n// group\nproject x share=\"5%\" resumable=#true  // tail\nproject y share=\"5%\" { /* inner */ users a b }\n";
        let out = format(src).unwrap();
        assert_eq!(format(&out).unwrap(), out, "idempotent");
        assert!(out.starts_with("// head\n\n// more\ncluster"), "{out}");
        assert!(out.contains("}\n\n// group\nproject x"), "{out}");
        for comment in ["// head", "// group", "// tail", "/* inner */"] {
            assert!(out.contains(comment), "{comment} kept in:\n{out}");
        }
        assert!(out.contains("cluster a gpus=8 gpu-type=h100 {\n    slurm cluster=x\n}\n"), "{out}");
    }

    #[test]
    fn refuses_to_drop_a_comment_after_a_closing_brace() {
        let error = format("a {\n    b\n} // end of a\n").unwrap_err();
        assert_eq!(error, FormatError::WouldLoseComment("// end of a".into()));
    }
}
