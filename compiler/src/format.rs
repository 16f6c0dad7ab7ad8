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
    doc.autoformat_config(&FormatConfig::builder().indent(INDENT).build());
    finish(&mut doc, 0);
    if let Some(format) = doc.format_mut() {
        format.trailing = indented_lines(&format.trailing, 0);
    }
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
            keep_comment_after_brace(children);
            prepare(children);
        }
    }
}

/// The parser gives a line comment right after `{` to the first child; hand it to the
/// block, whose leading text `finish` keeps on the brace's line.
fn keep_comment_after_brace(children: &mut KdlDocument) {
    let Some(first) = children.nodes_mut().first_mut().and_then(|n| n.format_mut()) else {
        return;
    };
    let Some((line, rest)) = first.leading.split_once('\n') else { return };
    let comment = line.trim();
    if !comment.starts_with("//") {
        return;
    }
    let comment = comment.to_string();
    first.leading = rest.to_string();
    if let Some(block) = children.format_mut() {
        block.leading = format!("{comment}\n{}", block.leading.trim_start());
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

/// After autoformatting: end-of-line comments end their line, marker lines become blank,
/// and comments at the start and end of a block sit where a reader expects them.
fn finish(doc: &mut KdlDocument, depth: usize) {
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
            finish(children, depth + 1);
            if let Some(format) = children.format_mut() {
                // A comment right after `{` stays on that line.
                let first = format.leading.trim();
                format.leading = if first.is_empty() { "\n".into() } else { format!(" {first}\n") };
                // Comments after the last child keep the children's indentation.
                let last = indented_lines(&format.trailing, depth + 1);
                format.trailing = format!("{last}{}", INDENT.repeat(depth));
            }
        }
    }
}

const INDENT: &str = "    ";

/// The non-blank lines of `text`, trimmed and indented `depth` levels.
fn indented_lines(text: &str, depth: usize) -> String {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| format!("{}{line}\n", INDENT.repeat(depth)))
        .collect()
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
    fn comments_at_the_edges_of_blocks_stay_in_place() {
        let src = "a { // first\n  b\n      // last\n}\nc { // only\n}\n  // end\n";
        let out = format(src).unwrap();
        assert_eq!(out, "a { // first\n    b\n    // last\n}\nc { // only\n}\n// end\n");
        assert_eq!(format(&out).unwrap(), out);
    }

    #[test]
    fn refuses_to_drop_a_comment_after_a_closing_brace() {
        let error = format("a {\n    b\n} // end of a\n").unwrap_err();
        assert_eq!(error, FormatError::WouldLoseComment("// end of a".into()));
    }
}
