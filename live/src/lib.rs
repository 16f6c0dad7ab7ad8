//! allot-live: what a running scheduler says, read into typed facts, and the views over them
//! that measure it against the budgets now. Nothing here runs a command or opens a
//! connection: the command line reads the live system and hands the text or JSON over.
//!
//! - [`squeue`] reads a live Slurm queue (`squeue -O` text) into jobs running and pending,
//!   with their reasons, limits and priorities; [`kueue`] reads a live Kueue (its
//!   ClusterQueues, Cohorts, LocalQueues and Workloads, as the API server lists them) into
//!   quotas and jobs admitted and pending, with Kueue's conditions, its queue order,
//!   preemption candidates, reasons and admission estimate (replaying Kueue's rules with the
//!   simulator's `kueue` policy).
//! - [`standing`] measures a live queue against the budgets now (running and pending GPUs,
//!   entitlement, standing, protection; with Slurm's floors, the GPUs in each budget's floors
//!   and beyond them), and [`render`] shows it as `allot status` prints it.
//! - [`explain`] says why a pending Slurm job waits: the jobs ahead, the jobs it may preempt,
//!   a start estimate.
//! - [`drain`] plans a drain of nodes at the contracts' boundaries: when each job on them may
//!   leave (requeued now, requeued when its protection ends, or run to its end).
//!
//! Data flows from the verifier (traces' jobs, budgets, entitlement) and the simulator (the
//! live start estimate) into this crate, never back.

pub mod drain;
pub mod explain;
pub mod kueue;
pub mod render;
pub mod squeue;
pub mod standing;
