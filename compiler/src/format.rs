//! Canonical formatting of one budget file, for `allot fmt`: four-space indentation, one
//! space between entries, one node per line, blank lines between groups kept (at most one),
//! every comment and every `/-` (slashdash) kept, and invisible characters in strings written
//! as escapes. Beside the pipeline: text in, text out.
//!
//! [`format`](fn@format) checks its own work before answering: the formatted text parses, means the
//! same document (nodes, entries, values; and the same again with every `/-` removed, so
//! what is commented out is kept too), keeps every comment, and is its own canonical form.
//! It is a pure function, safe to call on any text (a fuzz target calls it).

use std::collections::VecDeque;
use std::fmt::Write as _;

use kdl::{FormatConfig, KdlDocument, KdlEntryFormat, KdlIdentifier, KdlValue};

use crate::syntax;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("the file does not parse as KDL 2.0; run `allot check` for details")]
    Syntax,
    #[error("formatting would lose the comment `{0}`; move it onto a line of its own")]
    // The KDL parser drops a comment that follows a closing `}` on the same line.
    WouldLoseComment(String),
    #[error(
        "formatting would change {0}; the file is left as it is (please report this as a bug of `allot fmt`)"
    )]
    WouldChange(&'static str),
}

/// The canonical form of `text`.
///
/// `Ok(out)` guarantees that `out` parses as KDL 2.0, means the same document as `text`
/// (also with every `/-` removed), keeps every comment, and that `format(out) == Ok(out)`.
pub fn format(text: &str) -> Result<String, FormatError> {
    let formatted = layout(text)?;
    same_document(text, &formatted)?;
    if layout(&formatted).as_deref() != Ok(formatted.as_str()) {
        return Err(FormatError::WouldChange("its layout again on a second run"));
    }
    Ok(formatted)
}

/// The formatted text, unchecked.
fn layout(text: &str) -> Result<String, FormatError> {
    let mut doc = syntax::parse(crate::source::FileId(0), text).map_err(|_| FormatError::Syntax)?;
    let mut saved = VecDeque::new();
    prepare(&mut doc, &mut saved);
    doc.autoformat_config(&FormatConfig::builder().indent(INDENT).build());
    finish(&mut doc, 0, &mut saved);
    if let Some(format) = doc.format_mut() {
        format.trailing = indented_lines(&format.trailing, 0);
    }
    Ok(format!("{}\n", doc.to_string().trim_matches('\n')))
}

/// Requires `after` to parse and to say what `before` says: the same document, the same
/// document with every `/-` removed (what is commented out), the same comments.
fn same_document(before: &str, after: &str) -> Result<(), FormatError> {
    let parsed = |text: &str| KdlDocument::parse_v2(text).ok().map(|doc| meaning(&doc));
    let Some(old) = parsed(before) else { return Err(FormatError::Syntax) };
    if parsed(after) != Some(old) {
        return Err(FormatError::WouldChange("what the file says"));
    }
    // Without `/-` the texts uncommented are the texts themselves, compared above.
    let slashdashes = syntax::slashdashes(before).len();
    if slashdashes != syntax::slashdashes(after).len()
        || (slashdashes > 0 && parsed(&uncommented(before)) != parsed(&uncommented(after)))
    {
        return Err(FormatError::WouldChange("what the file comments out with `/-`"));
    }
    let old = syntax::comments(before);
    let new = syntax::comments(after);
    if let Some(lost) = old.iter().find(|c| !new.contains(c)) {
        return Err(FormatError::WouldLoseComment((*lost).to_string()));
    }
    if old.len() != new.len() {
        return Err(FormatError::WouldLoseComment(old.join(" ")));
    }
    Ok(())
}

/// A document's meaning, spans and formatting left out: each node's type, name, entries
/// (name, type, value) and children, every string quoted by Rust (unambiguous).
fn meaning(doc: &KdlDocument) -> String {
    fn node_list(doc: &KdlDocument, out: &mut String) {
        for node in doc.nodes() {
            let _ = write!(out, "({:?} {:?}", node.ty().map(KdlIdentifier::value), node.name().value());
            for entry in node.entries() {
                let name = entry.name().map(KdlIdentifier::value);
                let ty = entry.ty().map(KdlIdentifier::value);
                let _ = write!(out, " [{name:?} {ty:?} ");
                let _ = match entry.value() {
                    KdlValue::String(s) => write!(out, "s{s:?}]"),
                    KdlValue::Integer(i) => write!(out, "i{i}]"),
                    KdlValue::Float(f) => write!(out, "f{:x}]", f.to_bits()),
                    KdlValue::Bool(b) => write!(out, "b{b}]"),
                    KdlValue::Null => write!(out, "null]"),
                };
            }
            if let Some(children) = node.children() {
                out.push_str(" {");
                node_list(children, out);
                out.push('}');
            }
            out.push(')');
        }
    }
    let mut out = String::new();
    node_list(doc, &mut out);
    out
}

/// `text` with its `/-` markers removed, so that what they comment out counts, except
/// before a children block (a node may have only one).
fn uncommented(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for at in syntax::slashdashes(text) {
        if text[at + 2..].trim_start().starts_with('{') {
            continue;
        }
        out.push_str(&text[from..at]);
        out.push_str("  ");
        from = at + 2;
    }
    out.push_str(&text[from..]);
    out
}

/// How a string, name or type is written: bare when KDL allows it and every character is
/// visible, else quoted with escapes for every control, invisible, bidirectional or
/// non-ASCII space character, so that review sees what the file holds.
fn string_repr(value: &str) -> String {
    let bare = KdlValue::String(value.to_string()).to_string();
    if !bare.starts_with('"') && !value.chars().any(needs_escape) {
        return bare;
    }
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:X}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A character a reader would not see as itself: controls (NUL included), spaces other
/// than U+0020, line and paragraph separators, bidirectional controls (U+202A–U+202E,
/// U+2066–U+2069, U+200E, U+200F, U+061C), zero-width and other default-ignorable or
/// format characters.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061C}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// What a node had before autoformatting that the autoformatter drops or flattens, kept
/// aside in the order [`prepare`] and [`finish`] both walk the nodes.
#[derive(Default)]
struct Saved {
    /// The lines before the node (comments, nodes commented out with `/-`), indented
    /// relative to each other; an empty line is a blank line.
    leading: Vec<String>,
    /// The text before each entry (comments, entries commented out with `/-`).
    entries: Vec<String>,
    /// The text between the last entry and the children block.
    before_children: String,
}

/// Before autoformatting: move end-of-line comments out of the terminator (where the
/// autoformatter drops them), and keep aside what the autoformatter would drop or flatten.
fn prepare(doc: &mut KdlDocument, saved: &mut VecDeque<Saved>) {
    for (i, node) in doc.nodes_mut().iter_mut().enumerate() {
        let entries =
            node.entries().iter().map(|e| e.format().map(|f| f.leading.clone()).unwrap_or_default());
        let mut keep = Saved { entries: entries.collect(), ..Saved::default() };
        if let Some(format) = node.format_mut() {
            let terminator = format.terminator.trim();
            if terminator.starts_with("//") || terminator.starts_with("/*") {
                format.before_terminator = format!(" {terminator}");
                format.terminator = "\n".into();
            }
            keep.leading = relative_lines(&format.leading, i == 0);
            keep.before_children = format.before_children.clone();
        }
        saved.push_back(keep);
        if let Some(children) = node.children_mut() {
            keep_comment_after_brace(children);
            prepare(children, saved);
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

/// The lines of the text before a node, without their common indentation (a node
/// commented out with `/-` keeps its shape), each run of blank lines as one empty line.
///
/// The text starts on a fresh line after an earlier node, but mid-line for the first node
/// of a block (after `{`) or at the start of a file, where leading blank lines are dropped.
fn relative_lines(leading: &str, first: bool) -> Vec<String> {
    let mut segments: Vec<&str> = leading.split('\n').collect();
    if segments.last().is_some_and(|s| s.trim().is_empty()) {
        segments.pop(); // the node's own indentation
    }
    let indent = common_indent(segments.iter().skip(1).copied());
    let mut lines = Vec::new();
    let mut after_blank = first;
    for (i, segment) in segments.into_iter().enumerate() {
        if segment.trim().is_empty() {
            if !after_blank {
                lines.push(String::new());
            }
            after_blank = true;
        } else {
            let line = if i == 0 { segment.trim_start() } else { &segment[indent.len()..] };
            lines.push(line.trim_end().to_string());
            after_blank = false;
        }
    }
    lines
}

/// The longest run of leading spaces and tabs that every non-blank line starts with.
fn common_indent<'t>(lines: impl Iterator<Item = &'t str>) -> &'t str {
    let mut common: Option<&str> = None;
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let indent = &line[..line.len() - line.trim_start_matches([' ', '\t']).len()];
        common = Some(match common {
            None => indent,
            Some(c) => {
                let same = c.bytes().zip(indent.bytes()).take_while(|(a, b)| a == b).count();
                &c[..same]
            }
        });
    }
    common.unwrap_or("")
}

/// What goes between a node's entries: one space, or the comments and `/-` entries the
/// source had there, on one line; text that spans lines (a line comment, a line
/// continuation inside) is kept as it was.
fn space_between(original: &str) -> String {
    let kept = trim_space(original);
    if kept.is_empty() {
        " ".into()
    } else if kept.contains('\n') || syntax::comments(kept).iter().any(|c| c.starts_with("//")) {
        original.to_string()
    } else {
        format!(" {kept} ")
    }
}

/// `text` without the spaces and line continuations (`\\`) at either end.
fn trim_space(text: &str) -> &str {
    let mut text = text.trim();
    loop {
        let trimmed = text.strip_prefix('\\').unwrap_or(text).trim_start();
        let trimmed = trimmed.strip_suffix('\\').unwrap_or(trimmed).trim_end();
        if trimmed.len() == text.len() {
            return text;
        }
        text = trimmed;
    }
}

/// After autoformatting: put back what [`prepare`] kept aside, write strings, names and
/// types with their escapes, end end-of-line comments their line, and sit comments at the
/// start and end of a block where a reader expects them.
fn finish(doc: &mut KdlDocument, depth: usize, saved: &mut VecDeque<Saved>) {
    let indent = INDENT.repeat(depth);
    for node in doc.nodes_mut() {
        let keep = saved.pop_front().unwrap_or_default();
        if let Some(format) = node.format_mut() {
            if format.before_terminator.ends_with('\n') {
                format.before_terminator = format.before_terminator.trim_end().to_string();
            }
            let mut leading = String::new();
            for line in &keep.leading {
                if !line.is_empty() {
                    leading.push_str(&indent);
                    leading.push_str(line);
                }
                leading.push('\n');
            }
            leading.push_str(&indent);
            format.leading = leading;
            format.before_children = space_between(&keep.before_children);
        }
        let name = string_repr(node.name().value());
        node.name_mut().set_repr(name);
        if let Some(ty) = node.ty_mut() {
            ty.set_repr(string_repr(ty.value()));
        }
        for (i, entry) in node.entries_mut().iter_mut().enumerate() {
            let value_repr = match entry.value() {
                KdlValue::String(s) => string_repr(s),
                other => other.to_string(),
            };
            let leading = space_between(keep.entries.get(i).map_or("", String::as_str));
            entry.set_format(KdlEntryFormat { leading, value_repr, ..KdlEntryFormat::default() });
            if let Some(name) = entry.name_mut() {
                name.set_repr(string_repr(name.value()));
            }
            if let Some(ty) = entry.ty_mut() {
                ty.set_repr(string_repr(ty.value()));
            }
        }
        if let Some(children) = node.children_mut() {
            finish(children, depth + 1, saved);
            if let Some(format) = children.format_mut() {
                let first = format.leading.trim();
                format.leading = if first.is_empty() {
                    "\n".into()
                } else if first.starts_with("//") && !first.contains('\n') {
                    // A comment right after `{` stays on that line.
                    format!(" {first}\n")
                } else {
                    format!("\n{}", indented_lines(first, depth + 1))
                };
                // Comments after the last child keep the children's indentation.
                let last = indented_lines(&format.trailing, depth + 1);
                format.trailing = format!("{last}{indent}");
            }
        }
    }
}

const INDENT: &str = "    ";

/// The non-blank lines of `text`, indented `depth` levels, keeping their indentation
/// relative to each other (the first line may start mid-line, and is trimmed).
fn indented_lines(text: &str, depth: usize) -> String {
    let indent = common_indent(text.lines().skip(1));
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let line = if i == 0 { line.trim_start() } else { &line[indent.len()..] };
            format!("{}{}\n", INDENT.repeat(depth), line.trim_end())
        })
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

    #[test]
    fn slashdashes_are_kept_for_entries_nodes_and_blocks() {
        let src = "a 1  /-2 3 k=v   /-j=w {\n  b\n  /-c x=1\n}\n/-project old share=1 {\n  users   x\n    // why\n}\nd /-{ e }\nf {\n /-g\n}\n";
        let out = format(src).unwrap();
        assert_eq!(
            out,
            "a 1 /-2 3 k=v /-j=w {\n    b\n    /-c x=1\n}\n/-project old share=1 {\n  users   x\n    // why\n}\nd /-{ e }\nf {\n    /-g\n}\n"
        );
    }

    #[test]
    fn comments_between_entries_are_kept() {
        assert_eq!(format("a 1 /* one */   2\n").unwrap(), "a 1 /* one */ 2\n");
        let src = "a 1 \\ // more\n    2\n";
        assert_eq!(format(src).unwrap(), src, "a line comment inside a node keeps its line");
    }

    #[test]
    fn invisible_characters_stay_escapes() {
        let src = "a \"\\u{0}x\" \"\\u{202E}y\" \"\\u{200B}z\" \"\\u{2066}\" \"t\\tq\" k=\"\\u{A0}\"\n";
        let out = format(src).unwrap();
        assert_eq!(
            out,
            "a \"\\u{0}x\" \"\\u{202E}y\" \"\\u{200B}z\" \"\\u{2066}\" \"t\\tq\" k=\"\\u{A0}\"\n"
        );
        // Bare text KDL allows but a reader cannot see, in values and names, gets quoted.
        let out = format("a\u{200B} b\u{AD}c \"x\u{200D}\"=1 (t\u{2060})2\n").unwrap();
        assert_eq!(out, "\"a\\u{200B}\" \"b\\u{AD}c\" \"x\\u{200D}\"=1 (\"t\\u{2060}\")2\n");
        assert!(KdlDocument::parse_v2(&out).is_ok());
    }

    #[test]
    fn visible_text_is_written_as_before() {
        let src = "project \"@alice\" \"@org/team\" \"caf\u{e9} \u{1F680}\" \"a\\\"b\" #\"raw\\n\"#\n";
        assert_eq!(
            format(src).unwrap(),
            "project @alice \"@org/team\" \"caf\u{e9} \u{1F680}\" \"a\\\"b\" \"raw\\\\n\"\n"
        );
    }

    #[test]
    fn the_same_document_is_required() {
        assert_eq!(same_document("a 1\n", "a 2\n"), Err(FormatError::WouldChange("what the file says")));
        assert_eq!(
            same_document("a 1 /-2\n", "a 1 /-3\n"),
            Err(FormatError::WouldChange("what the file comments out with `/-`"))
        );
        assert_eq!(
            same_document("a 1 /-2\n", "a 1\n"),
            Err(FormatError::WouldChange("what the file comments out with `/-`"))
        );
        assert_eq!(
            same_document("a 1\n", "a 1 \"\u{0}\"\n"),
            Err(FormatError::WouldChange("what the file says"))
        );
        assert_eq!(same_document("a 1 // c\n", "a 1\n"), Err(FormatError::WouldLoseComment("// c".into())));
        assert_eq!(same_document("a #nan\n", "a #nan\n"), Ok(()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        #[test]
        fn formatting_keeps_the_document_and_is_stable(
            text in r##"(a|b|k=|"x"|"\\u\{0\}"|"\\u\{202E\}"|"\\u\{200B\}"|"\\t"|"""\n  q\n  """|#"r"#|\(t\)|1|2\.5|#true|#null|/-|//c\n|/\*c\*/|\\\n|[{};\n ]|\u{200B}|é){0,40}"##
        ) {
            if let Ok(out) = format(&text) {
                let before = KdlDocument::parse_v2(&text).expect("formatted text parsed before");
                let after = KdlDocument::parse_v2(&out).expect("the formatted text parses");
                proptest::prop_assert_eq!(meaning(&before), meaning(&after));
                // Escapes stay escapes: no invisible character appears that was not there as
                // itself (where KDL allows it bare, in a comment or in what `/-` comments out).
                let raw = |t: &str| t.chars().filter(|&c| c != '\n' && needs_escape(c)).count();
                proptest::prop_assert!(raw(&out) <= raw(&text), "{:?}", out);
                proptest::prop_assert_eq!(format(&out), Ok(out.clone()));
            }
        }
    }
}
