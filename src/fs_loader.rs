//! The filesystem loader: a budget repository folder on disk, read through the compiler's
//! `Loader` trait.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use allot_compiler::source::{LoadError, Loader};

/// The entry file in a budget repository folder.
pub const ENTRY_FILE: &str = "allot.kdl";

pub struct FsLoader {
    root: PathBuf,
}

impl FsLoader {
    /// From the user's PATH (a folder holding `allot.kdl`, or a file): the loader and the
    /// entry file's path inside it.
    pub fn open(path: &Path) -> (FsLoader, String) {
        if path.is_file() {
            let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let entry = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (FsLoader { root }, entry)
        } else {
            (FsLoader { root: path.to_path_buf() }, ENTRY_FILE.to_string())
        }
    }

    /// Where a repository path lives on disk.
    pub fn disk_path(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }
}

impl Loader for FsLoader {
    fn load(&self, path: &str) -> Result<Vec<u8>, LoadError> {
        std::fs::read(self.disk_path(path)).map_err(|e| match e.kind() {
            ErrorKind::NotFound => LoadError::NotFound,
            _ => LoadError::Other(e.to_string()),
        })
    }

    fn display_name(&self, path: &str) -> String {
        if self.root.as_os_str().is_empty() || self.root == Path::new(".") {
            path.to_string()
        } else {
            self.disk_path(path).to_string_lossy().into_owned()
        }
    }
}
