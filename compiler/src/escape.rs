//! Escaping text that comes from budget files (or dumps and traces) for the places allot
//! shows it: terminals and CI logs ([`controls`]), where a raw control character could move
//! the cursor, rewrite a line or start a GitHub workflow command; and Markdown and HTML
//! ([`markdown`]: pull request comments, reports), where it could add links, images,
//! headings, mentions or table rows. Every renderer that writes such text passes it
//! through here, whatever the checks already refused.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is shown as an escape: C0 and C1 controls and DEL, the Unicode line and
/// paragraph separators, and the bidirectional formatting characters (which reorder what a
/// reader sees).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The visible escape of a hidden character: `\n`, `\r`, `\t`, else `\u{1b}`.
fn visible(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `text` with every hidden character (see [`is_hidden`]) written as a visible escape
/// (`\r`, `\u{1b}`), for a terminal or a log; line feeds too unless `keep_newlines`.
pub fn controls(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    let hidden = |c: char| is_hidden(c) && !(keep_newlines && c == '\n');
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) { visible(c, &mut out) } else { out.push(c) }
    }
    Cow::Owned(out)
}

/// `text` as one line for a terminal, a log or an annotation: every hidden character, line
/// feeds included, as a visible escape. The one way untrusted text (names, messages from a
/// live system or a file) is shown on a line of its own or inside one.
pub fn line(text: &str) -> String {
    controls(text, false).into_owned()
}

/// `text` as inline Markdown that GitHub shows as it is, on one line: hidden characters as
/// visible escapes (so a table cell keeps its row), `&` `<` `>` `"` as HTML entities (no
/// tag, no entity), the punctuation Markdown reads (`\` `` ` `` `*` `_` `[` `]` `|` `#`
/// `!` `~` `$`) backslash-escaped, and `@` followed by a zero-width space, so that no
/// user or team is mentioned (as Dependabot writes handles). For text inside a line, not
/// at its start.
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' | '<' | '>' | '"' => out.push_str(entity(c)),
            '@' => out.push_str("@&#8203;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '!' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c if is_hidden(c) => {
                // The escape's backslash, escaped in turn so that Markdown shows it.
                out.push('\\');
                visible(c, &mut out);
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` for HTML content and attribute values: `&` `<` `>` `"` `'` as entities.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' | '<' | '>' | '"' | '\'' => out.push_str(entity(c)),
            other => out.push(other),
        }
    }
    out
}

/// The HTML entity of one of `&` `<` `>` `"` `'`.
fn entity(c: char) -> &'static str {
    match c {
        '&' => "&amp;",
        '<' => "&lt;",
        '>' => "&gt;",
        '"' => "&quot;",
        _ => "&#39;",
    }
}

/// A fence for a code block holding `text`: three backticks, or more than its longest run
/// of backticks, so that nothing inside closes the block.
pub fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible() {
        assert_eq!(controls("a\rb\x1b[2Jc\u{9b}d", true), "a\\rb\\u{1b}[2Jc\\u{9b}d");
        assert_eq!(controls("one\ntwo", true), "one\ntwo");
        assert_eq!(controls("one\ntwo", false), "one\\ntwo");
        assert_eq!(controls("evil\u{202e}txt", true), "evil\\u{202e}txt");
        assert!(matches!(controls("plain text", true), Cow::Borrowed(_)));
        // One line: line feeds visible too.
        assert_eq!(line("job 7\nerror: \x1b[31mforged"), "job 7\\nerror: \\u{1b}[31mforged");
    }

    #[test]
    fn markdown_shows_text_as_it_is() {
        assert_eq!(markdown("a|b"), "a\\|b");
        assert_eq!(markdown("<img src=x onerror=alert(1)>"), "&lt;img src=x onerror=alert(1)&gt;");
        assert_eq!(markdown("[click](https://evil)"), "\\[click\\](https://evil)");
        assert_eq!(markdown("x\n### Fake summary"), "x\\\\n\\#\\#\\# Fake summary");
        assert_eq!(markdown("@org/team"), "@&#8203;org/team");
        assert_eq!(markdown("&#64;everyone"), "&amp;\\#64;everyone");
        assert_eq!(markdown("a`b`"), "a\\`b\\`");
        assert_eq!(markdown("olmo-pretrain 60%"), "olmo-pretrain 60%");
    }

    #[test]
    fn a_fence_is_longer_than_any_run_inside() {
        assert_eq!(fence("no ticks"), "```");
        assert_eq!(fence("a ``` b"), "````");
        assert_eq!(fence("`````"), "``````");
    }
}
