//! Budgets as the commands read them: a repository on disk or at a git revision, compiled,
//! with its diagnostics rendered on the way (as `--diagnostics` says). Commands that need a
//! checked model get one here, or nothing when there are errors, already reported.

use std::path::{Path, PathBuf};

use allot_compiler::ir::Model;
use allot_compiler::{Compilation, Loader, compile};

use crate::diagnostics::{self, Format};
use crate::fs_loader::FsLoader;
use crate::git_loader::GitRepo;

/// The budget repository a command reads (`PATH`).
#[derive(clap::Args)]
pub struct Repository {
    /// A folder holding allot.kdl, or a budget file.
    #[arg(default_value = ".")]
    pub path: PathBuf,
}

impl Repository {
    /// Its checked model; `None` when it has errors (reported).
    pub fn model(&self, format: Format) -> std::io::Result<Option<Model>> {
        model(&self.path, format)
    }
}

/// Compiles the repository at `path` and renders its diagnostics; `ok` when the command
/// may go on (no errors, and no warnings when they are denied).
pub fn compiled(path: &Path, format: Format, deny_warnings: bool) -> std::io::Result<(Compilation, bool)> {
    let (loader, entry) = FsLoader::open(path);
    let compilation = compile(&loader, &entry);
    diagnostics::render(format, &compilation.diagnostics, &compilation.sources)?;
    let denied = deny_warnings && !compilation.diagnostics.is_empty();
    let ok = compilation.model.is_some() && !denied;
    if !ok && matches!(format, Format::Fancy | Format::Plain) {
        eprintln!("{}: {}", loader.display_name(&entry), diagnostics::count(&compilation.diagnostics));
    }
    Ok((compilation, ok))
}

/// The checked model of the repository at `path`; `None` when it has errors (reported).
pub fn model(path: &Path, format: Format) -> std::io::Result<Option<Model>> {
    let (compilation, ok) = compiled(path, format, false)?;
    Ok(compilation.model.filter(|_| ok))
}

/// The checked model of a revision: the working tree (`rev` None) or a commit; its
/// diagnostics, rendered, name the revision. `None` when it has errors or the revision is
/// unknown (said on standard error).
pub fn revision(
    git: &GitRepo,
    path: &Path,
    rev: Option<&str>,
    format: Format,
) -> std::io::Result<Option<Model>> {
    let compilation = match rev {
        None => {
            let (loader, entry) = FsLoader::open(path);
            compile(&loader, &entry)
        }
        Some(rev) => match git.at(rev) {
            Ok(loader) => compile(&loader, &git.entry),
            Err(message) => {
                eprintln!("error: {message}");
                return Ok(None);
            }
        },
    };
    diagnostics::render(format, &compilation.diagnostics, &compilation.sources)?;
    if compilation.model.is_none() {
        eprintln!("{}: {}", rev.unwrap_or("the working tree"), diagnostics::count(&compilation.diagnostics));
    }
    Ok(compilation.model)
}
