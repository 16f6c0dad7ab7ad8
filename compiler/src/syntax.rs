//! Syntax: one file's text to a KDL 2.0 document with spans, or coded diagnostics.
//!
//! Guards run before the KDL parser: the parser recurses once per level of braces, so a
//! file nested deeper than [`MAX_BRACE_DEPTH`] is refused rather than parsed.

use kdl::KdlDocument;

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{FileId, Span};

/// Largest file allot reads.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Deepest nesting of `{` in one file.
pub const MAX_BRACE_DEPTH: usize = 32;

/// Parses one file, or explains why it cannot be read.
pub fn parse(file: FileId, text: &str) -> Result<KdlDocument, Vec<Diagnostic>> {
    if let Some(offset) = too_deep_at(text) {
        let span = Span { file, offset, len: 1 };
        return Err(vec![
            Diagnostic::error(Code::SizeTooDeep, format!("braces nest deeper than {MAX_BRACE_DEPTH} levels"))
                .label(span, format!("level {} starts here", MAX_BRACE_DEPTH + 1))
                .help("split the tree over files with `include`, or flatten it"),
        ]);
    }
    KdlDocument::parse_v2(text)
        .map_err(|error| error.diagnostics.iter().map(|d| syntax_diagnostic(file, text, d)).collect())
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

/// The offset of the first `{` beyond [`MAX_BRACE_DEPTH`].
///
/// A conservative scan: it only has to keep the parser's recursion bounded.
fn too_deep_at(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for token in Scanner::new(text) {
        match token {
            Token::Open(offset) => {
                depth += 1;
                if depth > MAX_BRACE_DEPTH {
                    return Some(offset);
                }
            }
            Token::Close => depth = depth.saturating_sub(1),
            Token::Comment(_) | Token::Slashdash(_) => {}
        }
    }
    None
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
        assert_eq!(too_deep_at(&src), None);
        let src = format!("{}{}", "a {".repeat(MAX_BRACE_DEPTH + 1), "}".repeat(MAX_BRACE_DEPTH + 1));
        assert_eq!(too_deep_at(&src), Some(3 * MAX_BRACE_DEPTH + 2));
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
