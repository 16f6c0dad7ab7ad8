//! allot-verify: the verifier. It replays a job trace against the budgets' normalised
//! model (from allot-compiler) and measures how well the budgets were served, or would be.
//!
//! The data flows one way, a module per stage:
//! - [`trace`] reads a trace (allot's CSV or JSON Lines, `sacct` output, the ITP layout) as
//!   a stream of [`Job`](trace::Job)s from any reader; opening the files is the caller's.
//! - [`budgets`] places each job on its cluster, budget and contract, and holds each
//!   cluster's budgets as an [`entitlement`] hierarchy, which divides the cluster's GPUs
//!   among the budgets with demand and integrates the GPU-hours each is entitled to.
//! - [`audit`] measures the recorded schedule against those entitlements; [`simulate`]
//!   makes a schedule of its own under a policy (the budget rule, Slurm with allot's
//!   configuration, or static priorities) and audits it, ranking budgets by usage
//!   [`decay`]ed as Slurm decays it. Both give [`figures`]: GPU-hours used, entitled and
//!   delivered, and waits, per budget, contract, cluster and window. [`schedule`] writes a
//!   simulation's runs out as a trace of allot's CSV, which the audit reads back to the
//!   simulation's own figures.
//! - [`live`] measures a live queue (from [`squeue`], or Kueue's [`workloads`]) against the
//!   budgets now: GPUs running and pending per budget, and what each is entitled to.
//! - [`drain`] plans a drain of nodes at the contracts' boundaries: when each job on them
//!   may leave (requeued now, requeued when its protection ends, or run to its end).
//! - [`expectations`] checks the figures against the budgets' `expect` block.
//! - [`render`] lays the figures and the verdicts out as text, Markdown and JSON, and
//!   [`report`] draws them: Mermaid charts, and with the `html` feature an HTML page.
//!
//! Nothing here reads files, a clock or the terminal: the command line does.

pub mod audit;
pub mod budgets;
pub mod decay;
pub mod drain;
pub mod entitlement;
pub mod expectations;
pub mod explain;
pub mod figures;
pub mod live;
pub mod render;
pub mod report;
pub mod schedule;
pub mod simulate;
pub mod slurm_settings;
pub mod squeue;
pub mod trace;
pub mod workloads;
