//! Bounded reading of the files allot is given: budget files, `sacctmgr` dumps, usage
//! files and traces. Every one is untrusted (a pull request can make any path a symbolic
//! link, a named pipe or a link to `/dev/zero`), so a file is opened without blocking,
//! checked on the opened handle to be a regular file, and read up to a limit only.
//!
//! Budget files are opened without following a symbolic link in the last component (the
//! loader resolves links itself and refuses those that leave the repository); files the
//! user names on the command line follow links, since the user chose them.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::Path;

/// Whether a symbolic link as the last component of the path is followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    Follow,
    Refuse,
}

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no such file")]
    NotFound,
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("has {size} bytes; allot reads at most {}", bytes(*.limit))]
    TooLarge { size: u64, limit: u64 },
    #[error("is not UTF-8 text")]
    NotText,
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for ReadError {
    fn from(error: std::io::Error) -> ReadError {
        if error.kind() == ErrorKind::NotFound { ReadError::NotFound } else { ReadError::Io(error) }
    }
}

/// Opens `path` for reading if it is a regular file. Opening never blocks (a named pipe
/// is refused, not waited on), and the file type is that of the opened handle, so the file
/// checked is the file read.
pub fn open_regular(path: &Path, links: Links) -> Result<File, ReadError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = if links == Links::Refuse { libc::O_NOFOLLOW } else { 0 };
        options.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        // O_NOFOLLOW on a link: ELOOP.
        #[cfg(unix)]
        Err(e) if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ReadError::NotRegular("a symbolic link"));
        }
        Err(e) => return Err(e.into()),
    };
    let kind = file.metadata()?.file_type();
    if kind.is_file() { Ok(file) } else { Err(ReadError::NotRegular(describe(&kind))) }
}

/// The bytes of the regular file at `path`, at most `limit` of them.
pub fn read_regular(path: &Path, limit: u64, links: Links) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path, links)?;
    let size = file.metadata()?.len();
    if size > limit {
        return Err(ReadError::TooLarge { size, limit });
    }
    read_at_most(file, limit)
}

/// The text of the regular file at `path` (followed if a link), at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read_regular(path, limit, Links::Follow)?).map_err(|_| ReadError::NotText)
}

/// Standard input as text, at most `limit` bytes.
pub fn read_stdin(limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read_at_most(std::io::stdin().lock(), limit)?).map_err(|_| ReadError::NotText)
}

/// Reads to the end, refusing (without holding them) more than `limit` bytes: a file that
/// grows while it is read is caught here, not by its size before.
fn read_at_most(input: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    input.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(ReadError::TooLarge { size: read, limit });
    }
    Ok(bytes)
}

/// "a folder", "a named pipe (FIFO)"...
fn describe(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

/// "64 MiB", "1 MiB", "4096 bytes".
pub fn bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) { format!("{} MiB", n >> 20) } else { format!("{n} bytes") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "12345").unwrap();
        assert_eq!(read_regular(&path, 5, Links::Refuse).unwrap(), b"12345");
        let error = read_regular(&path, 4, Links::Refuse).unwrap_err();
        assert_eq!(error.to_string(), "has 5 bytes; allot reads at most 4 bytes");
        assert!(matches!(read_regular(&dir.path().join("none"), 5, Links::Refuse), Err(ReadError::NotFound)));
        assert_eq!(
            read_regular(dir.path(), 5, Links::Follow).unwrap_err().to_string(),
            "is a folder, not a regular file"
        );
    }

    #[cfg(unix)]
    #[test]
    fn devices_pipes_and_links_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let error = read_regular(&zero, 1 << 20, Links::Follow).unwrap_err();
        assert_eq!(error.to_string(), "is a character device, not a regular file");
        let error = read_regular(&zero, 1 << 20, Links::Refuse).unwrap_err();
        assert_eq!(error.to_string(), "is a symbolic link, not a regular file");

        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let error = read_regular(&fifo, 1 << 20, Links::Follow).unwrap_err();
        assert_eq!(error.to_string(), "is a named pipe (FIFO), not a regular file");
    }

    #[test]
    fn a_growing_input_is_cut_at_the_limit() {
        let error = read_at_most(std::io::repeat(b'x'), 1 << 10).unwrap_err();
        assert!(matches!(error, ReadError::TooLarge { size: 1025, limit: 1024 }));
        assert_eq!(bytes(64 << 20), "64 MiB");
    }
}
