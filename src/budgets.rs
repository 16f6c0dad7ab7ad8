//! Budgets as the commands read them: a repository on disk or at a git revision, compiled
//! at a moment (now, read here once, or `--at`), with its diagnostics rendered on the way
//! (as `--diagnostics` says). Commands that need a checked model get one here, or nothing
//! when there are errors, already reported.

use std::path::{Path, PathBuf};

use allot_compiler::calendar::Around;
use allot_compiler::ir::Model;
use allot_compiler::units::{Instant, parse_instant};
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
    /// Its checked model now; `None` when it has errors (reported).
    pub fn model(&self, format: Format) -> std::io::Result<Option<Model>> {
        model(&self.path, format, now())
    }

    /// Its checked model with the grants in force at `at`.
    pub fn model_at(&self, format: Format, at: Instant) -> std::io::Result<Option<Model>> {
        model(&self.path, format, at)
    }

    /// Its checked model at `at`, and the grant boundaries around `at`: when the shares
    /// changed last (and what they were before) and when they change next.
    pub fn model_around(&self, format: Format, at: Instant) -> std::io::Result<Option<(Model, Around)>> {
        let (compilation, ok) = compiled(&self.path, format, false, at)?;
        Ok(compilation.around(at).filter(|_| ok))
    }

    /// Its checked model at `at`, with its timeline: the shares at every moment, for a
    /// replay.
    pub fn model_over_time(&self, format: Format, at: Instant) -> std::io::Result<Option<Model>> {
        let (compilation, ok) = compiled(&self.path, format, false, at)?;
        Ok(compilation.over_time().filter(|_| ok))
    }
}

/// A repository and the moment whose shares a command takes from it (`PATH`, `--at`).
#[derive(clap::Args)]
pub struct RepositoryAt {
    #[command(flatten)]
    pub repository: Repository,
    #[command(flatten)]
    pub moment: Moment,
}

impl RepositoryAt {
    /// Its checked model at `--at`, or now; `None` when it has errors (reported).
    pub fn model(&self, format: Format) -> std::io::Result<Option<Model>> {
        self.repository.model_at(format, self.moment.instant())
    }
}

/// The moment whose shares a command takes (`--at`).
#[derive(clap::Args)]
pub struct Moment {
    /// Take the shares in force at this moment: a date ("2027-01-10", its first second in
    /// UTC) or an RFC 3339 time with its offset [default: now].
    #[arg(long, value_name = "DATE", value_parser = moment)]
    pub at: Option<Instant>,
}

impl Moment {
    /// `--at`, or now.
    pub fn instant(&self) -> Instant {
        self.at.unwrap_or_else(now)
    }
}

fn moment(text: &str) -> Result<Instant, String> {
    parse_instant(text).ok_or_else(|| {
        "expected a date (2027-01-10) or an RFC 3339 time with its offset (2027-01-10T09:00:00+01:00), years 1970 to 9999".to_string()
    })
}

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
