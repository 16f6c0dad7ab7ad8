//! allot-compiler: budget files in, a checked and normalised model out.
//!
//! The pipeline, one module per stage: [`source`] (files and spans, read through a
//! [`Loader`]) -> [`syntax`] (KDL) -> [`lower`] (the [`model`]) -> [`check`] (coded
//! [`diagnostic`]s) -> [`normalize`] (exact shares and guaranteed GPUs).

pub mod check;
pub mod diagnostic;
pub mod diff;
pub mod format;
pub mod lower;
pub mod model;
pub mod normalize;
pub mod source;
pub mod syntax;

pub use diagnostic::{Code, Diagnostic, Severity};
pub use source::{Loader, MemoryLoader, Sources};

/// Everything one run of the compiler produced.
#[derive(Debug)]
pub struct Compilation {
    pub sources: Sources,
    pub budget: model::Budget,
    /// The normalised model; `None` when there are errors.
    pub model: Option<normalize::Model>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Reads the repository from `entry` (a path the loader knows), checks it and, when it is
/// free of errors, normalises it.
pub fn compile(loader: &dyn Loader, entry: &str) -> Compilation {
    let (sources, budget, mut diagnostics, complete) = lower::lower(loader, entry);
    if complete {
        diagnostics.extend(check::check(&budget));
    }
    diagnostics.sort_by_key(|d| (d.primary_span().map(|s| (s.file, s.offset)), d.code));
    diagnostics.dedup();
    let model = (complete && !diagnostics.iter().any(Diagnostic::is_error))
        .then(|| normalize::normalize(&budget, &sources));
    Compilation { sources, budget, model, diagnostics }
}
