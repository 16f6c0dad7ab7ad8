//! The filesystem loader: a budget repository folder on disk, read through the compiler's
//! `Loader` trait.
//!
//! A budget file is read only where it really is inside the repository folder: its path
//! is resolved through every symbolic link, and one that leads outside the folder or into
//! a `.git` folder is refused without being read (its text would show in diagnostics).
//! Only regular files of at most [`MAX_FILE_BYTES`] are read (see [`crate::input::read`]).

use std::path::{Component, Path, PathBuf};

use allot_compiler::source::{ENTRY_FILE, LoadError, Loader, is_git_folder};
use allot_compiler::syntax::MAX_FILE_BYTES;

use crate::input::read::{Links, ReadError, read_regular};

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

impl FsLoader {
    /// Where the file at `path` really is, if that is inside the repository folder and
    /// outside any `.git` folder.
    fn real_path(&self, path: &str) -> Result<PathBuf, LoadError> {
        let io = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => LoadError::NotFound,
            _ => LoadError::Other(e.to_string()),
        };
        if path.split('/').any(is_git_folder) {
            return Err(LoadError::Outside("is inside a `.git` folder".into()));
        }
        let root = if self.root.as_os_str().is_empty() { Path::new(".") } else { &self.root };
        let root = root.canonicalize().map_err(io)?;
        let real = self.disk_path(path).canonicalize().map_err(io)?;
        let Ok(inside) = real.strip_prefix(&root) else {
            return Err(LoadError::Outside(format!(
                "is a symbolic link that leads outside the repository, to {}",
                real.display()
            )));
        };
        if inside
            .components()
            .any(|c| matches!(c, Component::Normal(n) if is_git_folder(&n.to_string_lossy())))
        {
            return Err(LoadError::Outside(format!(
                "is a symbolic link that leads into a `.git` folder, to {}",
                inside.display()
            )));
        }
        Ok(real)
    }
}

impl Loader for FsLoader {
    fn load(&self, path: &str) -> Result<Vec<u8>, LoadError> {
        let real = self.real_path(path)?;
        // The real path has no link left; one that appears since is refused, not followed.
        read_regular(&real, MAX_FILE_BYTES as u64, Links::Refuse).map_err(|e| match e {
            ReadError::NotFound => LoadError::NotFound,
            ReadError::TooLarge { size, .. } => LoadError::TooLarge(size),
            e => LoadError::Other(e.to_string()),
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
