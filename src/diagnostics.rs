//! Rendering diagnostics: `fancy` and `plain` (miette), `json` (one object per line) and
//! `github` (workflow-command annotations).

use std::io::{IsTerminal, Write};

use allot_compiler::source::{Sources, Span};
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

pub fn render(format: Format, diagnostics: &[Diagnostic], sources: &Sources) -> std::io::Result<()> {
    match format {
        Format::Fancy | Format::Plain => {
            let theme = match format {
                Format::Fancy if output::no_color() => GraphicalTheme::unicode_nocolor(),
                Format::Fancy => GraphicalTheme::unicode(),
                _ => GraphicalTheme::none(),
            };
            let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
            let mut text = String::new();
            for d in diagnostics {
                let _ = handler.render_report(&mut text, &d.with_sources(sources));
            }
            std::io::stderr().lock().write_all(text.as_bytes())
        }
        Format::Json => {
            let mut err = std::io::stderr().lock();
            for d in diagnostics {
                writeln!(err, "{}", json(d, sources))?;
            }
            Ok(())
        }
        Format::Github => {
            let mut out = std::io::stdout().lock();
            for d in diagnostics {
                writeln!(out, "{}", github(d, sources))?;
            }
            Ok(())
        }
    }
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
