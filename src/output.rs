//! What the command line writes: results on standard output ([`print()`], [`json()`]), files
//! replaced atomically ([`write_atomically`]), and the [`Format`] of reports that come as
//! text, Markdown or JSON.

use std::io::Write;
use std::path::Path;

use clap::ValueEnum;

/// How a report is shown (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned text, for a terminal.
    Human,
    /// Markdown, for a pull request or a job summary.
    Markdown,
    /// Indented JSON, for programs.
    Json,
}

/// `NO_COLOR` is set (to anything but nothing): no colours, even on a terminal.
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// `1 error`, `2 errors`: a count and its noun.
pub fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// Writes to standard output; a closed pipe ends the program quietly (see `main`).
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// `value` as indented JSON and a newline.
pub fn json(value: &impl serde::Serialize) -> std::io::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// Writes `contents` to a temporary file beside `path`, then renames it over `path`: a
/// failed run leaves the old file intact.
pub fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut temporary = tempfile::NamedTempFile::new_in(folder)?;
    temporary.write_all(contents.as_bytes())?;
    if let Ok(metadata) = std::fs::metadata(path) {
        temporary.as_file().set_permissions(metadata.permissions())?;
    }
    temporary.persist(path).map_err(|e| e.error)?;
    Ok(())
}
