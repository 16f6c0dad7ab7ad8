//! Checks: the meaning of a lowered [`Budget`], one module per concern, each returning
//! coded diagnostics. Together they guarantee what `normalize` relies on.

mod clusters;
mod contracts;
mod grants;
mod limits;
mod members;
mod names;
mod owners;
mod references;
mod shares;

use crate::ast::Budget;
use crate::diagnostic::Diagnostic;
use crate::units::Instant;

/// The checks, at the moment `at` (a grant ended by then is said to be).
pub fn check(budget: &Budget, at: Instant) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    names::check(budget, &mut diagnostics);
    clusters::check(budget, &mut diagnostics);
    contracts::check(budget, &mut diagnostics);
    references::check(budget, &mut diagnostics);
    shares::check(budget, &mut diagnostics);
    grants::check(budget, at, &mut diagnostics);
    limits::check(budget, &mut diagnostics);
    members::check(budget, &mut diagnostics);
    owners::check(budget, &mut diagnostics);
    diagnostics
}
