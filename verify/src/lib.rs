//! allot-verify: the verifier. [`trace`] reads job traces, [`entitlement`] divides a
//! cluster's GPUs among the budgets that have demand by hierarchical weighted max-min fair
//! share, [`audit`] measures a trace against the budgets, [`simulate`] replays its
//! submissions under a policy, and [`report`] draws the figures.

pub mod audit;
pub mod entitlement;
pub mod report;
pub mod simulate;
pub mod trace;
