//! What the commands read from files: every file as a regular file, without blocking and
//! within a limit ([`read`]); budget files from disk ([`fs_loader`]) or a git revision
//! ([`git_loader`]); traces for the verifier ([`traces`]); a cluster's own Kueue objects and
//! Configuration ([`kueue_files`]); a Slurm dump or usage file ([`dump`]).

pub mod dump;
pub mod fs_loader;
pub mod git_loader;
pub mod kueue_files;
pub mod read;
pub mod traces;
