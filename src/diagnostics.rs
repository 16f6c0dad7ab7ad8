//! Rendering diagnostics: `fancy` and `plain` (miette), `json` (one object per line) and
//! `github` (workflow-command annotations). Text from the budget files never reaches a
//! terminal or a log raw: for miette, control characters in messages, labels, help, file
//! names and the quoted source are shown as visible escapes ([`visible`]); JSON escapes
//! them itself, and annotations percent-encode them ([`github::annotation`]).

use std::io::{IsTerminal, Write};

use allot_compiler::escape;
use allot_compiler::escape::{controls, is_hidden};
use allot_compiler::source::{SourceFile, Sources, Span};
use allot_compiler::{Diagnostic, Severity};
use clap::ValueEnum;
use miette::{GraphicalReportHandler, GraphicalTheme};

use crate::github;
use crate::output::{self, plural};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Colours and Unicode, for a terminal.
    Fancy,
    /// ASCII, no colour: logs and CI.
    Plain,
    /// One JSON object per diagnostic and line.
    Json,
    /// GitHub workflow-command annotations, on standard output.
    Github,
}

impl Format {
    /// `fancy` on a terminal, `plain` when piped or when `CI` is set.
    pub fn detect() -> Format {
        if std::io::stderr().is_terminal() && std::env::var_os("CI").is_none() {
            Format::Fancy
        } else {
            Format::Plain
        }
    }
}

/// The most diagnostics `fancy`, `plain` and `github` show; beyond it they are counted, so
/// that a file of a hundred thousand mistakes is not a hundred thousand reports (`json`
/// lists them all).
pub const MAX_SHOWN: usize = 200;

pub fn render(format: Format, diagnostics: &[Diagnostic], sources: &Sources) -> std::io::Result<()> {
    let shown = if format == Format::Json { diagnostics.len() } else { diagnostics.len().min(MAX_SHOWN) };
    let (diagnostics, hidden) = (&diagnostics[..shown], diagnostics.len() - shown);
    match format {
        Format::Fancy | Format::Plain => {
            let theme = match format {
                Format::Fancy if output::no_color() => GraphicalTheme::unicode_nocolor(),
                Format::Fancy => GraphicalTheme::unicode(),
                _ => GraphicalTheme::none(),
            };
            let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
            let (diagnostics, sources) = visible(diagnostics, sources);
            let mut text = String::new();
            for d in &diagnostics {
                let _ = handler.render_report(&mut text, &d.with_sources(&sources));
            }
            std::io::stderr().lock().write_all(text.as_bytes())?;
        }
        Format::Json => {
            let mut err = std::io::stderr().lock();
            for d in diagnostics {
                writeln!(err, "{}", json(d, sources))?;
            }
        }
        Format::Github => {
            let mut out = std::io::stdout().lock();
            for d in diagnostics {
                writeln!(out, "{}", github(d, sources))?;
            }
        }
    }
    if hidden > 0 {
        writeln!(
            std::io::stderr().lock(),
            "{} not shown (`--diagnostics json` lists them all)",
            plural(hidden, "diagnostic")
        )?;
    }
    Ok(())
}

/// Whether a character of a source file is shown as an escape: a hidden character (see
/// [`is_hidden`]) but a line feed, a tab, or a carriage return ending a line.
fn escaped_in_source(c: char, next: Option<char>) -> bool {
    is_hidden(c) && c != '\n' && c != '\t' && !(c == '\r' && next == Some('\n'))
}

/// A file's text with its hidden characters escaped, and where each escape grew it: the
/// original offset of each escaped character and the bytes added up to and including it.
fn visible_text(text: &str) -> (String, Vec<(usize, usize)>) {
    let mut out = String::with_capacity(text.len());
    let mut grown = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((offset, c)) = chars.next() {
        if escaped_in_source(c, chars.peek().map(|&(_, n)| n)) {
            let escape = escape::line(c.encode_utf8(&mut [0; 4]));
            out.push_str(&escape);
            let before = grown.last().map_or(0, |&(_, g)| g);
            grown.push((offset, before + escape.len() - c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    (out, grown)
}

/// `offset` in a text grown as `grown` says: moved by the growth of the escapes before it.
fn moved(offset: usize, grown: &[(usize, usize)]) -> usize {
    let before = grown.partition_point(|&(at, _)| at < offset);
    offset + before.checked_sub(1).map_or(0, |i| grown[i].1)
}

/// The diagnostics and their sources as miette shows them: every control character from
/// the budget files (a lone `\r`, ESC, C1 controls, bidirectional overrides) written as a
/// visible escape, and the spans moved to match.
fn visible(diagnostics: &[Diagnostic], sources: &Sources) -> (Vec<Diagnostic>, Sources) {
    let mut shown = Sources::default();
    let mut growth = Vec::new();
    for (_, file) in sources.files() {
        let (text, grown) = visible_text(&file.text);
        shown.add(SourceFile::new(file.path.clone(), escape::line(&file.name), text.into()));
        growth.push(grown);
    }
    let span = |span: Span| match growth.get(span.file.0 as usize) {
        Some(grown) => {
            let (start, end) = (moved(span.offset, grown), moved(span.offset + span.len, grown));
            Span { file: span.file, offset: start, len: end - start }
        }
        None => span,
    };
    let diagnostics = diagnostics
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.message = escape::line(&d.message);
            d.help = d.help.map(|h| controls(&h, true).into_owned());
            d.file_name = d.file_name.map(|f| escape::line(&f));
            for label in &mut d.labels {
                label.span = span(label.span);
                label.text = escape::line(&label.text);
            }
            d
        })
        .collect();
    (diagnostics, shown)
}

/// The 1-based start and end (line, column) of a span.
fn range(sources: &Sources, span: Span) -> Option<(usize, usize, usize, usize)> {
    let file = sources.get(span.file)?;
    let start = file.line_column(span.offset);
    let end = file.line_column(span.offset + span.len);
    Some((start.line, start.column, end.line, end.column))
}

/// One diagnostic as a JSON object (the schema is in docs/diagnostics.md).
pub fn json(d: &Diagnostic, sources: &Sources) -> serde_json::Value {
    let labels: Vec<serde_json::Value> = d
        .labels
        .iter()
        .filter_map(|l| {
            let (line, column, end_line, end_column) = range(sources, l.span)?;
            let file = sources.get(l.span.file).map(|f| f.name.as_str());
            Some(serde_json::json!({
                "message": l.text, "file": file, "line": line, "column": column,
                "end_line": end_line, "end_column": end_column,
            }))
        })
        .collect();
    let start = d.primary_span().and_then(|s| range(sources, s));
    serde_json::json!({
        "code": d.code.as_str(),
        "severity": severity(d.severity),
        "message": d.message,
        "file": d.file_name(sources),
        "line": start.map(|s| s.0),
        "column": start.map(|s| s.1),
        "end_line": start.map(|s| s.2),
        "end_column": start.map(|s| s.3),
        "labels": labels,
        "help": d.help,
    })
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// `::error file=F,line=L,col=C,endLine=L,endColumn=C,title=CODE::MESSAGE`
pub fn github(d: &Diagnostic, sources: &Sources) -> String {
    let mut properties = Vec::new();
    if let Some(file) = d.file_name(sources) {
        properties.push(("file", file.to_string()));
    }
    if let Some((line, column, end_line, end_column)) = d.primary_span().and_then(|s| range(sources, s)) {
        properties.extend([
            ("line", line.to_string()),
            ("col", column.to_string()),
            ("endLine", end_line.to_string()),
            ("endColumn", end_column.to_string()),
        ]);
    }
    properties.push(("title", d.code.as_str().to_string()));
    let mut message = d.message.clone();
    if let Some(label) = d.labels.first().filter(|l| !l.text.is_empty()) {
        message.push_str(&format!(": {}", label.text));
    }
    if let Some(help) = &d.help {
        message.push_str(&format!("\nhelp: {help}"));
    }
    github::annotation(severity(d.severity), &properties, &message)
}

/// `2 errors, 1 warning`
pub fn count(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    format!("{}, {}", plural(errors, "error"), plural(warnings, "warning"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_a_source_are_escaped_and_spans_follow() {
        let text = "a\rb\x1bc\r\nname";
        let (shown, grown) = visible_text(text);
        assert_eq!(shown, "a\\rb\\u{1b}c\r\nname");
        // `name` starts at byte 7 and moves by the 1 + 5 bytes the two escapes added.
        assert_eq!(&shown[moved(7, &grown)..moved(11, &grown)], "name");
        // A span on the escaped character covers its whole escape.
        assert_eq!(&shown[moved(3, &grown)..moved(4, &grown)], "\\u{1b}");
    }
}
