//! allot-verify: the verifier. [`trace`] reads job traces; [`budgets`] places each job on
//! its cluster, budget and contract, each cluster's budgets an [`entitlement`] hierarchy
//! that divides its GPUs among the budgets with demand; [`audit`] measures a trace against
//! the budgets and [`simulate`] replays its submissions under a policy, both into
//! [`figures`]; and [`report`] draws them.

pub mod audit;
pub mod budgets;
pub mod entitlement;
pub mod expectations;
pub mod figures;
pub mod render;
pub mod report;
pub mod simulate;
pub mod trace;
