//! Sources: the files of a budget repository, the spans that point into them, and the
//! `Loader` trait through which the compiler reads them (the compiler itself does no I/O).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The file a budget repository folder starts from.
pub const ENTRY_FILE: &str = "allot.kdl";

/// Index of a loaded file in [`Sources`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub u32);

/// A byte range in one loaded file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub file: FileId,
    pub offset: usize,
    pub len: usize,
}

impl Span {
    pub fn new(file: FileId, span: miette::SourceSpan) -> Span {
        Span { file, offset: span.offset(), len: span.len() }
    }

    pub fn source_span(self) -> miette::SourceSpan {
        (self.offset, self.len).into()
    }
}

/// A value with the span of the KDL text it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Spanned<U> {
        Spanned { value: f(self.value), span: self.span }
    }
}

/// One loaded file: its path inside the repository, the name shown to users, its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Normalised, `/`-separated path relative to the repository root.
    pub path: String,
    /// What diagnostics call the file (for the filesystem: the path as the user sees it).
    pub name: String,
    pub text: Arc<str>,
    /// The byte offset at which each line starts, computed on first use.
    line_starts: OnceLock<Vec<usize>>,
}

/// A 1-based line and column (in characters) of a byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineColumn {
    pub line: usize,
    pub column: usize,
}

impl SourceFile {
    pub fn new(path: String, name: String, text: Arc<str>) -> SourceFile {
        SourceFile { path, name, text, line_starts: OnceLock::new() }
    }

    /// The line and column of `offset` (a position inside a character counts as that
    /// character). The line starts are found once per file; each position then costs a
    /// binary search and a count of the characters before it on its line.
    pub fn line_column(&self, offset: usize) -> LineColumn {
        let offset = floor_char_boundary(&self.text, offset);
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(0).chain(self.text.match_indices('\n').map(|(i, _)| i + 1)).collect()
        });
        // The last line starting at or before `offset` (`starts[0]` is 0, so there is one).
        let line = starts.partition_point(|&start| start <= offset);
        let line_start = starts[line - 1];
        LineColumn { line, column: self.text[line_start..offset].chars().count() + 1 }
    }
}

fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Every file read during one compilation, in the order they were read.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
}

impl Sources {
    pub fn add(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        FileId(u32::try_from(self.files.len() - 1).unwrap_or(u32::MAX))
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        (0u32..).map(FileId).zip(&self.files)
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The text a span covers (empty if the span is stale).
    pub fn text(&self, span: Span) -> &str {
        self.get(span.file).and_then(|f| f.text.get(span.offset..span.offset + span.len)).unwrap_or("")
    }

    pub fn location(&self, span: Span) -> Option<(&SourceFile, LineColumn)> {
        let file = self.get(span.file)?;
        Some((file, file.line_column(span.offset)))
    }
}

/// Why a file could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("no such file")]
    NotFound,
    /// The path resolves, through symbolic links, outside the repository or into `.git`;
    /// the text says where (the file is not read).
    #[error("{0}")]
    Outside(String),
    /// The file has this many bytes, more than [`crate::syntax::MAX_FILE_BYTES`] (it is
    /// not read).
    #[error("has {0} bytes")]
    TooLarge(u64),
    #[error("{0}")]
    Other(String),
}

/// Reads the files of a budget repository by their repository-relative path.
///
/// The filesystem loader lives in the command line; a git-revision loader reads the same
/// paths from a commit.
pub trait Loader {
    /// The bytes of the file at `path` (normalised, `/`-separated, relative to the root).
    fn load(&self, path: &str) -> Result<Vec<u8>, LoadError>;
    /// The name diagnostics show for `path`.
    fn display_name(&self, path: &str) -> String {
        path.to_string()
    }
}

/// A loader over files held in memory, for tests and for callers that already have text.
#[derive(Clone, Debug, Default)]
pub struct MemoryLoader {
    pub files: BTreeMap<String, Vec<u8>>,
}

impl MemoryLoader {
    pub fn new<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        MemoryLoader {
            files: files.into_iter().map(|(p, t)| (p.to_string(), t.as_bytes().to_vec())).collect(),
        }
    }
}

impl Loader for MemoryLoader {
    fn load(&self, path: &str) -> Result<Vec<u8>, LoadError> {
        self.files.get(path).cloned().ok_or(LoadError::NotFound)
    }
}

/// Why an include path is refused (the text follows "include path").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("is absolute")]
    Absolute,
    #[error("leaves the repository")]
    OutsideRoot,
    #[error("is empty")]
    Empty,
    #[error("names a `.git` folder")]
    GitFolder,
}

/// Whether a path component is git's own folder (`.git`, in any case: some filesystems
/// ignore it), which budget files must never read: it holds credentials and hooks.
pub fn is_git_folder(component: &str) -> bool {
    component.eq_ignore_ascii_case(".git")
}

/// Resolves `target`, written in the file at `from`, to a normalised repository path.
pub fn resolve_include(from: &str, target: &str) -> Result<String, PathError> {
    if target.trim().is_empty() {
        return Err(PathError::Empty);
    }
    if target.starts_with('/') || target.starts_with('\\') || target.get(1..2) == Some(":") {
        return Err(PathError::Absolute);
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop(); // the including file's own name
    for part in target.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathError::OutsideRoot);
                }
            }
            other if is_git_folder(other) => return Err(PathError::GitFolder),
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_resolve_relative_to_the_including_file() {
        assert_eq!(resolve_include("allot.kdl", "teams/a.kdl"), Ok("teams/a.kdl".into()));
        assert_eq!(resolve_include("teams/a.kdl", "b.kdl"), Ok("teams/b.kdl".into()));
        assert_eq!(resolve_include("teams/a.kdl", "../c.kdl"), Ok("c.kdl".into()));
        assert_eq!(resolve_include("teams/a.kdl", "./x/../d.kdl"), Ok("teams/d.kdl".into()));
        assert_eq!(resolve_include("allot.kdl", "../x.kdl"), Err(PathError::OutsideRoot));
        assert_eq!(resolve_include("allot.kdl", "/etc/x.kdl"), Err(PathError::Absolute));
        assert_eq!(resolve_include("allot.kdl", "C:/x.kdl"), Err(PathError::Absolute));
        assert_eq!(resolve_include("allot.kdl", ".git/config"), Err(PathError::GitFolder));
        assert_eq!(resolve_include("teams/a.kdl", "../.GIT/config"), Err(PathError::GitFolder));
    }

    #[test]
    fn line_and_column_count_characters() {
        let file = SourceFile::new("a".into(), "a".into(), "ab\nßc d\n".into());
        assert_eq!(file.line_column(0), LineColumn { line: 1, column: 1 });
        assert_eq!(file.line_column(2), LineColumn { line: 1, column: 3 });
        assert_eq!(file.line_column(3), LineColumn { line: 2, column: 1 });
        assert_eq!(file.line_column(4), LineColumn { line: 2, column: 1 });
        assert_eq!(file.line_column(6), LineColumn { line: 2, column: 3 });
        assert_eq!(file.line_column(9), LineColumn { line: 3, column: 1 });
        assert_eq!(file.line_column(100), LineColumn { line: 3, column: 1 });
        let empty = SourceFile::new("e".into(), "e".into(), "".into());
        assert_eq!(empty.line_column(5), LineColumn { line: 1, column: 1 });
    }
}
