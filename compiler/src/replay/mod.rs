//! The verifier's arithmetic, free of I/O: [`fair_tree`] computes what Slurm's `sshare -l`
//! shows for an association tree and its usage (so a replay can be checked against a real
//! Slurm), and [`entitlement`] divides a cluster's GPUs among the budgets that have demand
//! by hierarchical weighted max-min fair share and integrates entitled and delivered
//! GPU-hours between events.

pub mod audit;
pub mod entitlement;
pub mod fair_tree;
pub mod report;
pub mod simulate;
pub mod trace;
