//! The git loader: the budget files of one revision, read straight from the object
//! database (no checkout), through the compiler's `Loader` trait.

use std::path::{Path, PathBuf};

use allot_compiler::source::{LoadError, Loader};
use allot_compiler::syntax::MAX_FILE_BYTES;

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
            (path.to_path_buf(), allot_compiler::source::ENTRY_FILE.to_string())
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

/// Git's file modes of tree entries.
const MODE_FOLDER: i32 = 0o040000;
const MODE_LINK: i32 = 0o120000;
const MODE_SUBMODULE: i32 = 0o160000;

impl Loader for GitLoader<'_> {
    /// Walks the revision's tree one component at a time, so that a symbolic link or a
    /// submodule on the way is named as such (git stores a link as a blob of its target's
    /// path, which must not be read as KDL), and reads the blob only after its size, from
    /// the object's header, is known to be within the limit.
    fn load(&self, path: &str) -> Result<Vec<u8>, LoadError> {
        let git = |e: git2::Error| LoadError::Other(e.message().to_string());
        let repo = &self.git.repo;
        let full = self.git.repo_path(path);
        let parts: Vec<&str> = full.split('/').collect();
        let mut tree = repo.find_tree(self.tree).map_err(git)?;
        let mut blob = None;
        for (i, part) in parts.iter().enumerate() {
            let Some((mode, id)) = tree.get_name(part).map(|e| (e.filemode(), e.id())) else {
                return Err(LoadError::NotFound);
            };
            let last = i + 1 == parts.len();
            // The file itself ("is a ..."), or the folder on its way that is not one.
            let shown = || {
                if last { "is".to_string() } else { format!("its folder {} is", parts[..=i].join("/")) }
            };
            match mode {
                MODE_LINK => {
                    return Err(LoadError::Other(format!(
                        "{} a symbolic link; allot reads only regular files from a git revision",
                        shown()
                    )));
                }
                MODE_SUBMODULE => {
                    return Err(LoadError::Other(format!(
                        "{} a git submodule; allot does not read submodules",
                        shown()
                    )));
                }
                MODE_FOLDER if last => return Err(LoadError::Other("is a folder".into())),
                MODE_FOLDER => tree = repo.find_tree(id).map_err(git)?,
                _ if last => blob = Some(id),
                _ => return Err(LoadError::Other(format!("{} a file, not a folder", shown()))),
            }
        }
        let id = blob.ok_or(LoadError::NotFound)?;
        let (size, _) = repo.odb().and_then(|odb| odb.read_header(id)).map_err(git)?;
        if size > MAX_FILE_BYTES {
            return Err(LoadError::TooLarge(size as u64));
        }
        Ok(repo.find_blob(id).map_err(git)?.content().to_vec())
    }

    /// `REV:path/in/repository`, so that diagnostics name the revision.
    fn display_name(&self, path: &str) -> String {
        format!("{}:{}", self.rev, self.git.repo_path(path))
    }
}
