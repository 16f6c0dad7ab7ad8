//! The arguments several commands share: the budget repository and the moment its shares
//! are taken at, and the live scheduler read.

use std::path::PathBuf;

use allot_compiler::calendar::Around;
use allot_compiler::ir::Model;
use allot_compiler::units::{Instant, parse_instant};

use crate::budgets::{compiled, model, now};
use crate::diagnostics::Format;

/// The schedulers `--live` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheduler {
    Slurm,
    Kueue,
}

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
