//! How a command ends: [`Exit`], the status it reports, and [`Error`], the one failure type
//! of the command line (said on standard error as `error: ...`, status 1). `main` turns
//! both into the process's exit code; the table is in docs/cli.md.

use std::process::ExitCode;

/// The outcome of a command that ran to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: done, nothing to report.
    Success,
    /// 1: problems found: errors in the budgets, unmet expectations, unformatted files.
    Problems,
    /// 2, with `--detailed-exitcode` (Terraform's meaning): done, and there are changes.
    /// The argument parser also exits 2, for bad usage.
    Changes,
}

impl Exit {
    /// `Success` when `ok`, else `Problems`.
    pub fn from_ok(ok: bool) -> Exit {
        if ok { Exit::Success } else { Exit::Problems }
    }

    /// `Changes` when changes are asked to show in the status and there are some.
    pub fn changes(detailed_exitcode: bool, changed: bool) -> Exit {
        if detailed_exitcode && changed { Exit::Changes } else { Exit::Success }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        match exit {
            Exit::Success => ExitCode::SUCCESS,
            Exit::Problems => ExitCode::from(1),
            Exit::Changes => ExitCode::from(2),
        }
    }
}

/// A command that could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing failed; a closed standard output ends the program quietly.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A git revision of the budgets that cannot be read.
    #[error(transparent)]
    Git(#[from] crate::input::git_loader::GitError),
    /// A failure explained in words (a file that does not parse, an unknown revision...).
    #[error("{0}")]
    Failed(String),
}

impl Error {
    pub fn failed(message: impl Into<String>) -> Error {
        Error::Failed(message.into())
    }
}

/// What every command returns.
pub type Outcome = Result<Exit, Error>;
