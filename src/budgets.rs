//! Budgets as the commands read them: a repository on disk or at a git revision, compiled
//! at a moment (now, read here once, or `--at`), with its diagnostics rendered on the way
//! (as `--diagnostics` says). Commands that need a checked model get one here, or nothing
//! when there are errors, already reported.

use std::path::Path;

use allot_compiler::ir::Model;
use allot_compiler::units::Instant;
use allot_compiler::{Compilation, Loader, compile};

use crate::diagnostics::{self, Format};
use crate::input::fs_loader::FsLoader;
use crate::input::git_loader::GitRepo;

/// The clock, read at the edge: the libraries take the moment as a value. Seconds since the
/// epoch: the moment the budgets are taken at by default, and the instant the live commands
/// measure.
pub fn now() -> Instant {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_secs() as Instant)
}

/// Compiles the repository at `path` at the moment `at` and renders its diagnostics; `ok`
/// when the command may go on (no errors, and no warnings when they are denied).
pub fn compiled(
    path: &Path,
    format: Format,
    deny_warnings: bool,
    at: Instant,
) -> std::io::Result<(Compilation, bool)> {
    let (loader, entry) = FsLoader::open(path);
    let compilation = compile(&loader, &entry, at);
    diagnostics::render(format, &compilation.diagnostics, &compilation.sources)?;
    let denied = deny_warnings && !compilation.diagnostics.is_empty();
    let ok = compilation.model.is_some() && !denied;
    if !ok && matches!(format, Format::Fancy | Format::Plain) {
        eprintln!("{}: {}", loader.display_name(&entry), diagnostics::count(&compilation.diagnostics));
    }
    Ok((compilation, ok))
}

/// The checked model of the repository at `path`, at the moment `at`; `None` when it has
/// errors (reported).
pub fn model(path: &Path, format: Format, at: Instant) -> std::io::Result<Option<Model>> {
    let (compilation, ok) = compiled(path, format, false, at)?;
    Ok(compilation.model.filter(|_| ok))
}

/// The checked model of a revision, with its timeline (the shares at every moment, for a
/// replay): see [`revision_compiled`].
pub fn revision_over_time(
    git: &GitRepo,
    path: &Path,
    rev: Option<&str>,
    format: Format,
    at: Instant,
) -> std::io::Result<Option<Model>> {
    Ok(revision_compiled(git, path, rev, format, at)?.and_then(Compilation::over_time))
}

/// The compilation of a revision at the moment `at`: the working tree (`rev` None) or a
/// commit; its diagnostics, rendered, name the revision. `None` when the revision is
/// unknown (said on standard error); its model is `None` when it has errors.
pub fn revision_compiled(
    git: &GitRepo,
    path: &Path,
    rev: Option<&str>,
    format: Format,
    at: Instant,
) -> std::io::Result<Option<Compilation>> {
    let compilation = match rev {
        None => {
            let (loader, entry) = FsLoader::open(path);
            compile(&loader, &entry, at)
        }
        Some(rev) => match git.at(rev) {
            Ok(loader) => compile(&loader, &git.entry, at),
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
    Ok(Some(compilation))
}
