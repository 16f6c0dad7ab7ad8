//! allot-verify: the verifier. It replays a job trace against the budgets' normalised
//! model (from allot-compiler) and measures how well the budgets were served.
//!
//! The data flows one way, a module per stage:
//! - [`trace`] reads a trace (allot's CSV or JSON Lines, `sacct` output, the ITP layout) as
//!   a stream of [`Job`](trace::Job)s from any reader; opening the files is the caller's.
//! - [`budgets`] places each job on its cluster, budget and contract, and holds each
//!   cluster's budgets as an [`entitlement`] hierarchy, which divides the cluster's GPUs
//!   among the budgets with demand and integrates the GPU-hours each is entitled to.
//! - [`audit`] measures a recorded schedule against those entitlements and gives
//!   [`figures`]: GPU-hours used, entitled and delivered, and waits, per budget, contract,
//!   cluster and window. The simulator (allot-simulate) makes schedules of its own and
//!   measures them with the same audit; the live views (allot-live) divide the budgets now
//!   with the same entitlement.
//! - [`expectations`] checks the figures against the budgets' `expect` block.
//! - [`render`] lays the figures and the verdicts out as text, Markdown and JSON, and
//!   [`report`] draws them: Mermaid charts, and with the `html` feature an HTML page.
//!
//! Nothing here reads files, a clock or the terminal: the command line does.

pub mod audit;
pub mod budgets;
pub mod entitlement;
pub mod expectations;
pub mod figures;
pub mod render;
pub mod report;
pub mod trace;
