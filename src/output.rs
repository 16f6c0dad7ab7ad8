//! What the command line writes: results on standard output ([`print()`], [`json()`]), files
//! replaced atomically and only when allot can replace them whole ([`write_atomically`],
//! [`AtomicFile`] for a file written as a stream, [`unreplaceable`]), and the [`Format`] of
//! reports that come as text, Markdown or JSON.

use std::io::Write;
use std::path::{Path, PathBuf};

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

/// Writes `contents` to a temporary file beside `path` (named `.allot-*`, removed on
/// failure), then renames it over `path`: a failed run leaves the old file intact. An
/// existing file keeps its permissions and owner; a new one gets the permissions any new
/// file gets (read and write for all, less the umask), not a temporary file's private ones.
/// A file allot cannot replace whole (see [`unreplaceable`]) is an error naming it, and is
/// left as it is.
pub fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.file().write_all(contents.as_bytes())?;
    file.commit()
}

/// A file written whole in place of another, as [`write_atomically`] writes one, for a
/// writer that streams into it: [`create`](Self::create) opens the temporary file beside
/// `path`, [`file`](Self::file) is written (and may be rewritten from its start), and
/// [`commit`](Self::commit) renames it over `path`. Dropped without a commit (a run that
/// failed), the temporary file is removed and `path` is left as it was.
pub struct AtomicFile {
    path: PathBuf,
    temporary: tempfile::NamedTempFile,
}

impl AtomicFile {
    /// The temporary file for `path`, in its folder; an error naming `path` when allot
    /// cannot replace it whole (see [`unreplaceable`]).
    pub fn create(path: &Path) -> std::io::Result<AtomicFile> {
        refuse_unreplaceable(path)?;
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut builder = tempfile::Builder::new();
        builder.prefix(".allot-");
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        Ok(AtomicFile { path: path.to_path_buf(), temporary: builder.tempfile_in(folder)? })
    }

    /// The temporary file, to write.
    pub fn file(&mut self) -> &mut std::fs::File {
        self.temporary.as_file_mut()
    }

    /// Gives the temporary file the permissions and owner of the file it replaces, syncs it
    /// and renames it over `path`. `path` is checked again: it may have changed while the
    /// file was written.
    pub fn commit(self) -> std::io::Result<()> {
        let AtomicFile { path, temporary } = self;
        refuse_unreplaceable(&path)?;
        if let Ok(metadata) = std::fs::symlink_metadata(&path) {
            temporary.as_file().set_permissions(metadata.permissions())?;
            keep_owner(temporary.as_file(), &metadata).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: cannot keep its owner: {e}", path.display()))
            })?;
        }
        temporary.as_file().sync_all()?;
        temporary.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// An error naming `path` when allot cannot replace it whole (see [`unreplaceable`]).
fn refuse_unreplaceable(path: &Path) -> std::io::Result<()> {
    match unreplaceable(path)? {
        Some(reason) => Err(std::io::Error::other(format!("{}: {reason}", path.display()))),
        None => Ok(()),
    }
}

/// Why allot will not replace the file at `path`, or `None` when it may (also when there
/// is no file yet): a symbolic link (writing through it, or replacing it with a regular
/// file, changes what the link's owner meant), anything but a regular file, a read-only
/// file, a file allot may not write, or a file with other hard links (a new file would
/// split them).
pub fn unreplaceable(path: &Path) -> std::io::Result<Option<String>> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let reason = if metadata.file_type().is_symlink() {
        "is a symbolic link; allot neither writes through a link nor replaces one"
    } else if !metadata.is_file() {
        "is not a regular file; allot only replaces regular files"
    } else if metadata.permissions().readonly() {
        "is read-only; allot leaves it as it is (make it writable to let allot replace it)"
    } else if std::fs::OpenOptions::new().write(true).open(path).is_err() {
        "cannot be opened for writing; allot leaves it as it is"
    } else if hard_links(&metadata) > 1 {
        "has other hard links, which a new file would not replace; allot leaves it as it is"
    } else {
        return Ok(None);
    };
    Ok(Some(reason.to_string()))
}

#[cfg(unix)]
fn hard_links(metadata: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(metadata)
}

#[cfg(not(unix))]
fn hard_links(_: &std::fs::Metadata) -> u64 {
    1
}

/// Gives `file` the owner and group of the file it replaces, when they differ.
#[cfg(unix)]
fn keep_owner(file: &std::fs::File, replaced: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let now = file.metadata()?;
    if (now.uid(), now.gid()) == (replaced.uid(), replaced.gid()) {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, Some(replaced.uid()), Some(replaced.gid()))
}

#[cfg(not(unix))]
fn keep_owner(_: &std::fs::File, _: &std::fs::Metadata) -> std::io::Result<()> {
    Ok(())
}
