//! Syntax: one file's text to a KDL 2.0 document with spans, or coded diagnostics.
//!
//! Guards run before the KDL parser, which recurses: once per level of braces, and in a
//! block comment once per nested comment and per `*` or `/` in it. A file nested deeper
//! than [`MAX_BRACE_DEPTH`] braces or [`MAX_COMMENT_DEPTH`] comments, or with a block
//! comment of more than [`MAX_COMMENT_MARKS`] such characters, is refused rather than
//! parsed. The parser also recurses on each error it recovers from, which no scan can
//! bound beforehand; it runs on a thread of its own with a stack of
//! [`PARSER_STACK_BYTES`] (taken from memory only as it is used), where a broken file of
//! realistic size never reaches the end of it.

use kdl::{KdlDocument, KdlError};

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{FileId, Span};

/// Largest file allot reads.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Deepest nesting of `{` in one file.
pub const MAX_BRACE_DEPTH: usize = 32;
/// Deepest nesting of block comments (`/* /* */ */`) in one file.
pub const MAX_COMMENT_DEPTH: usize = 32;
/// Most `*` and `/` characters in one block comment, nested ones included.
pub const MAX_COMMENT_MARKS: usize = 1024;
/// The stack of the thread that runs the KDL parser.
pub const PARSER_STACK_BYTES: usize = 256 << 20;

/// Parses one file, or explains why it cannot be read.
pub fn parse(file: FileId, text: &str) -> Result<KdlDocument, Vec<Diagnostic>> {
    if let Some(deep) = too_deep(text) {
        let span = Span { file, offset: deep.offset, len: deep.len };
        let (message, label, help) = match deep.what {
            Deep::Braces => (
                format!("braces nest deeper than {MAX_BRACE_DEPTH} levels"),
                format!("level {} starts here", MAX_BRACE_DEPTH + 1),
                "split the tree over files with `include`, or flatten it",
            ),
            Deep::Comments => (
                format!("block comments nest deeper than {MAX_COMMENT_DEPTH} levels"),
                format!("level {} starts here", MAX_COMMENT_DEPTH + 1),
                "use `//` line comments, or fewer nested `/*`",
            ),
            Deep::Marks => (
                format!("a block comment holds more than {MAX_COMMENT_MARKS} `*` and `/` characters"),
                "this comment".to_string(),
                "the KDL parser reads each `*` and `/` of a block comment one level deeper; use `//` line comments",
            ),
        };
        return Err(vec![Diagnostic::error(Code::SizeTooDeep, message).label(span, label).help(help)]);
    }
    parse_kdl(text)
        .map_err(|error| error.diagnostics.iter().map(|d| syntax_diagnostic(file, text, d)).collect())
}

/// The KDL parse, on a thread with a stack of [`PARSER_STACK_BYTES`].
fn parse_kdl(text: &str) -> Result<KdlDocument, KdlError> {
    std::thread::scope(|scope| {
        let parser = std::thread::Builder::new()
            .name("kdl parser".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || KdlDocument::parse_v2(text));
        match parser {
            Ok(parser) => parser.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to be had (a process limit): parse here; the guards still hold.
            Err(_) => KdlDocument::parse_v2(text),
        }
    })
}

fn syntax_diagnostic(file: FileId, text: &str, d: &kdl::KdlDiagnostic) -> Diagnostic {
    let span = Span::new(file, d.span);
    let covered = text.get(span.offset..span.offset + span.len).unwrap_or("");
    let word = covered.trim().split(|c: char| !c.is_ascii_alphabetic()).next().unwrap_or("");
    let message = d.message.clone().unwrap_or_else(|| "invalid KDL".to_string());
    let label = d.label.clone().unwrap_or_default();
    if let Some(v2) = v2_keyword(word) {
        return Diagnostic::error(Code::SyntaxKdlV1, format!("`{word}` is KDL 1 syntax"))
            .label(span, format!("write `{v2}`"))
            .help(format!(
                "allot reads KDL 2.0, where keywords start with `#`: write `{v2}` instead of `{word}`"
            ));
    }
    let diagnostic = Diagnostic::error(Code::SyntaxKdl, message).label(span, label);
    match &d.help {
        Some(help) => diagnostic.help(help.clone()),
        None => diagnostic.help("see https://kdl.dev for the KDL 2.0 syntax"),
    }
}

fn v2_keyword(word: &str) -> Option<&'static str> {
    match word {
        "true" => Some("#true"),
        "false" => Some("#false"),
        "null" => Some("#null"),
        _ => None,
    }
}

/// What nests too deep, and where.
#[derive(Debug, PartialEq, Eq)]
struct TooDeep {
    offset: usize,
    len: usize,
    what: Deep,
}

#[derive(Debug, PartialEq, Eq)]
enum Deep {
    Braces,
    Comments,
    Marks,
}

/// The first place where the parser would recurse beyond the limits: a `{` beyond
/// [`MAX_BRACE_DEPTH`], a `/*` beyond [`MAX_COMMENT_DEPTH`], a block comment with more
/// than [`MAX_COMMENT_MARKS`] `*` and `/`.
///
/// A conservative scan: it only has to keep the parser's recursion bounded.
fn too_deep(text: &str) -> Option<TooDeep> {
    let mut depth = 0usize;
    for token in Scanner::new(text) {
        match token {
            Token::Open(offset) => {
                depth += 1;
                if depth > MAX_BRACE_DEPTH {
                    return Some(TooDeep { offset, len: 1, what: Deep::Braces });
                }
            }
            Token::Close => depth = depth.saturating_sub(1),
            Token::Comment(range) if text.as_bytes()[range.start..].starts_with(b"/*") => {
                if let Some(deep) = comment_too_deep(text.as_bytes(), range) {
                    return Some(deep);
                }
            }
            Token::Comment(_) | Token::Slashdash(_) => {}
        }
    }
    None
}

/// In the block comment at `range`: a `/*` nested beyond [`MAX_COMMENT_DEPTH`], or more
/// than [`MAX_COMMENT_MARKS`] `*` and `/`.
fn comment_too_deep(bytes: &[u8], range: std::ops::Range<usize>) -> Option<TooDeep> {
    let comment = &bytes[range.clone()];
    let mut depth = 0usize;
    let mut i = 0;
    while i + 1 < comment.len() {
        match &comment[i..i + 2] {
            b"/*" => {
                depth += 1;
                if depth > MAX_COMMENT_DEPTH {
                    return Some(TooDeep { offset: range.start + i, len: 2, what: Deep::Comments });
                }
                i += 2;
            }
            b"*/" => {
                depth = depth.saturating_sub(1);
                i += 2;
            }
            _ => i += 1,
        }
    }
    let marks = comment.iter().filter(|&&b| b == b'*' || b == b'/').count();
    (marks > MAX_COMMENT_MARKS).then_some(TooDeep { offset: range.start, len: 2, what: Deep::Marks })
}

/// The comments of a file, in order (for `fmt`, which must keep every one).
pub fn comments(text: &str) -> Vec<&str> {
    Scanner::new(text)
        .filter_map(|t| match t {
            Token::Comment(range) => text.get(range).map(str::trim),
            _ => None,
        })
        .collect()
}

/// The offsets of the `/-` (slashdash) markers of a file, outside strings and comments (for
/// `fmt`, which must keep every one).
pub fn slashdashes(text: &str) -> Vec<usize> {
    Scanner::new(text)
        .filter_map(|t| match t {
            Token::Slashdash(offset) => Some(offset),
            _ => None,
        })
        .collect()
}

/// What the lexical scan reports: braces, comments and slashdashes outside strings.
enum Token {
    Open(usize),
    Close,
    Comment(std::ops::Range<usize>),
    Slashdash(usize),
}

/// A lexical scan of KDL text that skips strings, raw strings and comments.
struct Scanner<'t> {
    bytes: &'t [u8],
    at: usize,
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str) -> Self {
        Scanner { bytes: text.as_bytes(), at: 0 }
    }
}

impl Iterator for Scanner<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        let bytes = self.bytes;
        while self.at < bytes.len() {
            let i = self.at;
            self.at += 1;
            match bytes[i] {
                b'{' => return Some(Token::Open(i)),
                b'}' => return Some(Token::Close),
                b'"' => self.at = skip_string(bytes, i, 0) + 1,
                b'#' => {
                    let hashes = bytes[i..].iter().take_while(|&&b| b == b'#').count();
                    self.at = if bytes.get(i + hashes) == Some(&b'"') {
                        skip_string(bytes, i + hashes, hashes) + 1
                    } else {
                        i + hashes
                    };
                }
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    let end = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| i + p);
                    self.at = end;
                    return Some(Token::Comment(i..end));
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    let end = (skip_block_comment(bytes, i) + 1).min(bytes.len());
                    self.at = end;
                    return Some(Token::Comment(i..end));
                }
                b'/' if bytes.get(i + 1) == Some(&b'-') => {
                    self.at = i + 2;
                    return Some(Token::Slashdash(i));
                }
                _ => {}
            }
        }
        None
    }
}

/// From the opening quote at `start`, the index of the last byte of the string.
fn skip_string(bytes: &[u8], start: usize, hashes: usize) -> usize {
    let multiline = bytes[start..].starts_with(b"\"\"\"");
    let quote: &[u8] = if multiline { b"\"\"\"" } else { b"\"" };
    let mut i = start + quote.len();
    while i < bytes.len() {
        if hashes == 0 && bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(quote)
            && bytes[i + quote.len()..].iter().take(hashes).filter(|&&b| b == b'#').count() == hashes
        {
            return i + quote.len() + hashes - 1;
        }
        i += 1;
    }
    bytes.len()
}

/// From `/*` at `start`, the index of the last byte of the (nested) block comment.
fn skip_block_comment(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < bytes.len() {
        if bytes[i] == b'/' && bytes[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if bytes[i] == b'*' && bytes[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i - 1;
            }
        } else {
            i += 1;
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_in_strings_and_comments_do_not_count() {
        let deep = "{".repeat(MAX_BRACE_DEPTH);
        let src = format!("a \"{deep}{{\" // {deep}\n/* {deep} /* {deep} */ */ b #\"{deep}\"# {{ }}");
        assert_eq!(too_deep(&src), None);
        let src = format!("{}{}", "a {".repeat(MAX_BRACE_DEPTH + 1), "}".repeat(MAX_BRACE_DEPTH + 1));
        let offset = 3 * MAX_BRACE_DEPTH + 2;
        assert_eq!(too_deep(&src), Some(TooDeep { offset, len: 1, what: Deep::Braces }));
    }

    #[test]
    fn block_comments_are_bounded_in_depth_and_marks() {
        let nested = |n: usize| format!("a\n{}{}", "/*".repeat(n), "*/".repeat(n));
        assert_eq!(too_deep(&nested(MAX_COMMENT_DEPTH)), None);
        let deep = too_deep(&nested(MAX_COMMENT_DEPTH + 1)).unwrap();
        assert_eq!((deep.offset, deep.what), (2 + 2 * MAX_COMMENT_DEPTH, Deep::Comments));
        let stars = |n: usize| format!("a /*{}*/", "* ".repeat(n));
        assert_eq!(too_deep(&stars(MAX_COMMENT_MARKS - 4)), None);
        assert_eq!(too_deep(&stars(MAX_COMMENT_MARKS - 3)).map(|d| d.what), Some(Deep::Marks));
        // Either way the parser is not reached: the 4,000 levels give a diagnostic.
        let errors = parse(FileId(0), &nested(4000)).unwrap_err();
        assert_eq!(errors[0].code, Code::SizeTooDeep);
    }

    #[test]
    fn a_realistic_broken_file_parses_to_diagnostics_on_the_parser_thread() {
        // Each of these recurses once per error in the KDL parser: 1,500 levels, beyond a
        // test thread's 2 MiB stack (in a debug build) but within the parser thread's.
        for garbage in ["}", "= "] {
            let errors = parse(FileId(0), &format!("a\n{}", garbage.repeat(1_500))).unwrap_err();
            assert!(errors.iter().all(|e| e.code == Code::SyntaxKdl), "{garbage}: {errors:?}");
        }
    }

    #[test]
    fn comments_are_found_outside_strings() {
        let src = "a \"// no\" // one\n/* two /* nested */ */ b #\"/* no */\"# // three";
        assert_eq!(comments(src), vec!["// one", "/* two /* nested */ */", "// three"]);
    }

    #[test]
    fn slashdashes_are_found_outside_strings_and_comments() {
        let src = "/-a \"/-no\" // /-no\nb /-1 #\"/-no\"# /* /-no */ /-{ }";
        assert_eq!(slashdashes(src), vec![0, 21, 45]);
    }

    #[test]
    fn kdl1_keywords_get_a_hint() {
        let errors = parse(FileId(0), "contract batch resumable=true\n").unwrap_err();
        assert_eq!(errors[0].code, Code::SyntaxKdlV1);
        let errors = parse(FileId(0), "contract batch \"unclosed\n").unwrap_err();
        assert_eq!(errors[0].code, Code::SyntaxKdl);
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let src = format!("{}{}", "p {\n".repeat(10_000), "}\n".repeat(10_000));
        let errors = parse(FileId(0), &src).unwrap_err();
        assert_eq!(errors[0].code, Code::SizeTooDeep);
    }
}
