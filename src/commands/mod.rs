//! One module per command: each has its clap `Args` and a `run` that returns the
//! command's [`Outcome`](crate::exit::Outcome).

pub mod apply;
pub mod build;
pub mod check;
pub mod diff;
pub mod drain;
pub mod explain;
pub mod export;
pub mod fairshare;
pub mod fmt;
pub mod grants;
pub mod import;
pub mod owners;
pub mod plan;
pub mod replay;
pub mod schema;
pub mod status;
pub mod tree;
