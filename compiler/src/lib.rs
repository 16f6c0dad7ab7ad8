//! allot-compiler: budget files in, a checked and normalised model out.
//!
//! The pipeline, one module per stage, each reading only what the stages before it made:
//! [`source`] (files and spans, read through a [`Loader`]) -> [`syntax`] (KDL) ->
//! [`lower`] (the [`ast`]: the spanned tree) -> [`check`] (coded [`diagnostic`]s) ->
//! [`normalize`] (the [`ir`]: exact shares and guaranteed GPUs at one moment, which the
//! targets, the diff and the verifier read and `allot export` writes). Grants make shares
//! change with time: [`calendar`] knows when.
//!
//! Beside it: [`units`] (durations and percentages) and [`names`] (the names every target
//! can carry), for the stages and the targets alike; [`diff`] (two revisions of the ir),
//! [`owners`] (who approves a change; CODEOWNERS), [`format`](mod@format) (`allot fmt`) and
//! [`escape`] (budget text made safe for terminals, logs and Markdown).

pub mod ast;
pub mod calendar;
pub mod check;
pub mod diagnostic;
pub mod diff;
pub mod escape;
pub mod format;
pub mod ir;
pub mod lower;
pub mod names;
pub mod normalize;
pub mod owners;
pub mod source;
pub mod syntax;
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod units;

pub use diagnostic::{Code, Diagnostic, Severity};
pub use source::{Loader, MemoryLoader, Sources};

/// Everything one run of the compiler produced.
#[derive(Debug)]
pub struct Compilation {
    pub sources: Sources,
    pub budget: ast::Budget,
    /// The normalised model; `None` when there are errors.
    pub model: Option<ir::Model>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The model with its timeline ([`ir::Model::timeline`]: the shares before the first
    /// grant boundary and from each), for replays over time; `None` when there are errors.
    pub fn over_time(self) -> Option<ir::Model> {
        let timeline = calendar::timeline(&self.budget, &self.sources);
        self.model.map(|model| ir::Model { timeline, ..model })
    }

    /// The model, and the grant boundaries around `at` ([`calendar::Around`]: the last with
    /// the shares before it, and the next), for a live view; `None` when there are errors.
    pub fn around(self, at: units::Instant) -> Option<(ir::Model, calendar::Around)> {
        let model = self.model?;
        Some((model, calendar::around(&self.budget, &self.sources, at)))
    }
}

/// Reads the repository from `entry` (a path the loader knows), checks it at the moment
/// `at` and, when it is free of errors, normalises it with the grants in force then. A
/// replay over time also wants the model at every grant boundary:
/// [`Compilation::over_time`].
/// Grants that take a parent beyond 100% at `at` or later are errors; the clock is the
/// caller's.
pub fn compile(loader: &dyn Loader, entry: &str, at: units::Instant) -> Compilation {
    let lower::Lowered { sources, budget, mut diagnostics, complete } = lower::lower(loader, entry);
    if complete {
        diagnostics.extend(check::check(&budget, at));
        if !diagnostics.iter().any(Diagnostic::is_error) {
            diagnostics.extend(calendar::overcommitted_from(&budget, &sources, at));
        }
    }
    diagnostics.sort_by_key(|d| (d.primary_span().map(|s| (s.file, s.offset)), d.code));
    diagnostics.dedup();
    let model = (complete && !diagnostics.iter().any(Diagnostic::is_error))
        .then(|| normalize::normalize(&budget, &sources, at));
    Compilation { sources, budget, model, diagnostics }
}
