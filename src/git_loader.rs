//! The git loader: the budget files of one revision, read straight from the object
//! database (no checkout), through the compiler's `Loader` trait.

use std::path::{Path, PathBuf};

use allot_compiler::source::{LoadError, Loader};

/// Why a git revision of the budgets cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{0}: no such folder")]
    NoFolder(String),
    #[error("{folder} is not inside a git repository: {message}")]
    NotInRepository { folder: String, message: String },
    #[error("the repository has no working tree")]
    Bare,
    #[error("{folder} is outside its repository")]
    Outside { folder: String },
    #[error("{0}")]
    Io(String),
    #[error("unknown revision `{0}`")]
    UnknownRevision(String),
}

/// A budget repository folder inside a git repository.
pub struct GitRepo {
    repo: git2::Repository,
    /// The budget folder relative to the repository root, `/`-separated (`""`: the root).
    pub prefix: String,
    /// The entry file's name in that folder.
    pub entry: String,
}

impl GitRepo {
    /// The git repository holding PATH (a budget folder or a budget file).
    pub fn discover(path: &Path) -> Result<GitRepo, GitError> {
        let (folder, entry) = if path.is_file() {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (path.parent().map(Path::to_path_buf).unwrap_or_default(), name)
        } else {
            (path.to_path_buf(), crate::fs_loader::ENTRY_FILE.to_string())
        };
        let folder = if folder.as_os_str().is_empty() { PathBuf::from(".") } else { folder };
        if !folder.is_dir() {
            return Err(GitError::NoFolder(folder.display().to_string()));
        }
        let shown = || folder.display().to_string();
        let repo = git2::Repository::discover(&folder)
            .map_err(|e| GitError::NotInRepository { folder: shown(), message: e.message().to_string() })?;
        let root =
            repo.workdir().ok_or(GitError::Bare)?.canonicalize().map_err(|e| GitError::Io(e.to_string()))?;
        let absolute = folder.canonicalize().map_err(|e| GitError::Io(format!("{}: {e}", shown())))?;
        let relative = absolute.strip_prefix(&root).map_err(|_| GitError::Outside { folder: shown() })?;
        let prefix =
            relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        Ok(GitRepo { repo, prefix, entry })
    }

    /// The loader of revision `rev` (a branch, tag, commit or `HEAD~1`).
    pub fn at(&self, rev: &str) -> Result<GitLoader<'_>, GitError> {
        let commit = self
            .repo
            .revparse_single(rev)
            .and_then(|o| o.peel_to_commit())
            .map_err(|_| GitError::UnknownRevision(rev.to_string()))?;
        Ok(GitLoader { git: self, rev: rev.to_string(), tree: commit.tree_id() })
    }

    /// The path of a budget file relative to the repository root.
    pub fn repo_path(&self, path: &str) -> String {
        if self.prefix.is_empty() { path.to_string() } else { format!("{}/{path}", self.prefix) }
    }
}

pub struct GitLoader<'r> {
    git: &'r GitRepo,
    rev: String,
    tree: git2::Oid,
}

impl Loader for GitLoader<'_> {
    fn load(&self, path: &str) -> Result<Vec<u8>, LoadError> {
        let tree =
            self.git.repo.find_tree(self.tree).map_err(|e| LoadError::Other(e.message().to_string()))?;
        let entry = match tree.get_path(Path::new(&self.git.repo_path(path))) {
            Ok(entry) => entry,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Err(LoadError::NotFound),
            Err(e) => return Err(LoadError::Other(e.message().to_string())),
        };
        let blob = self.git.repo.find_blob(entry.id()).map_err(|_| LoadError::Other("not a file".into()))?;
        Ok(blob.content().to_vec())
    }

    /// `REV:path/in/repository`, so that diagnostics name the revision.
    fn display_name(&self, path: &str) -> String {
        format!("{}:{}", self.rev, self.git.repo_path(path))
    }
}
