//! The live systems allot reads and writes, each behind the bound in time `--timeout` sets
//! ([`timeout`]): a Slurm through its client commands ([`slurm`]), with the lock an apply
//! holds ([`apply_lock`]), the plans it saves ([`saved_plan`]), the floors ([`floors`]) and
//! the drains ([`drains`]) its live views count; a Kueue through the Kubernetes API server
//! ([`kubernetes`]). The commands read and write through these, never one through another.

pub mod apply_lock;
pub mod drains;
pub mod floors;
pub mod kubernetes;
pub mod saved_plan;
pub mod slurm;
pub mod timeout;
