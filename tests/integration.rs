//! The command line's tests, every suite a module of one test binary (one build and link
//! instead of one per suite). A suite is `tests/<name>.rs`; what they share is in
//! `tests/common/`. Run one suite with `cargo test --test integration <name>::`; under
//! cargo-nextest the suites that start a real Slurm run one at a time
//! (`.config/nextest.toml`), and under `cargo test` their Slurm is held by one test at a
//! time (`common::slurm::Slurm`).

mod common;

mod action;
mod apply;
mod bad_inputs;
mod build;
mod cli;
mod diff;
mod drain;
mod fuzz_regressions;
mod grants;
mod hostile_dumps;
mod hostile_files;
mod hostile_names;
mod hostile_review;
mod hostile_writes;
mod kueue_live;
mod kueue_oracle;
mod live;
mod replay;
mod report_html;
mod schedule;
mod simulate;
mod simulate_kueue_objects;
mod slurm_faults;
mod slurm_floors_real;
mod slurm_live;
mod slurm_real;
mod slurm_replay;
