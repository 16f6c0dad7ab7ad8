//! allot-targets: the normalised model ([`allot_compiler::ir`]) to each scheduler's native
//! configuration.
//!
//! A target is one module implementing [`Target`]: it emits files, checks what it puts in
//! them against the scheduler's rules, and says in a [`fidelity::Report`] what of the
//! policy they lose. [`registry`] lists them. What is emitted (`allot build`, the diff's
//! native files, the Action) is reached only through this registry, so adding a scheduler
//! is adding a module and a registry line. Two targets also serve the commands that meet a
//! live scheduler, through their modules' own functions: [`slurm`] (the association tree
//! read from a dump, the plan and its script, import, Fair Tree's arithmetic, the QOS and
//! floors allot wants) and [`kubernetes`] (the Kueue objects and queue names allot writes,
//! for the drift of a live cluster, its live views and the simulator's `kueue` policy).
//!
//! The rules are checked once, on what a target builds (objects, an association tree,
//! properties), before it is written; never on the text read back. That the text reads
//! back as what was checked is for the tests to show (for YAML, debug builds assert it of
//! every file).

pub mod fidelity;
pub mod kubernetes;
pub mod slurm;
pub mod text;
pub mod yarn;

use allot_compiler::ir::{Location, Model};

use crate::fidelity::Report;

/// A file a target writes, relative to the target's output folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFile {
    pub path: String,
    pub contents: String,
}

/// A rule of the scheduler that an emitted file breaks, with the KDL that caused it when
/// that is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub message: String,
    pub locations: Vec<Location>,
}

impl Violation {
    pub fn new(path: &str, message: impl Into<String>) -> Violation {
        Violation { path: path.to_string(), message: message.into(), locations: Vec::new() }
    }

    pub fn at(path: &str, message: impl Into<String>, locations: Vec<Location>) -> Violation {
        Violation { path: path.to_string(), message: message.into(), locations }
    }
}

/// What a target emits: its files, and the rules of the scheduler that what they hold
/// breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emitted {
    pub files: Vec<OutputFile>,
    pub violations: Vec<Violation>,
}

impl Emitted {
    /// Adds a file, with the rules broken by what it holds.
    pub fn add(&mut self, path: String, contents: String, problems: Vec<String>) {
        self.violations.extend(problems.into_iter().map(|message| Violation::new(&path, message)));
        self.files.push(OutputFile { path, contents });
    }
}

/// One scheduler family's emitter.
pub trait Target {
    /// The name of the target's output folder and of `--target`.
    fn name(&self) -> &'static str;
    /// The native files for every cluster bound to this target (none when none is), and
    /// the scheduler's own rules that they break, checked on what was built before it was
    /// written (the model says which KDL a problem comes from).
    fn emit(&self, model: &Model) -> Emitted;
    /// What of the policy the scheduler carries, approximates or cannot express.
    fn fidelity(&self, model: &Model) -> Report;
}

/// Every target allot can emit, in output order.
pub fn registry() -> Vec<Box<dyn Target>> {
    vec![
        Box::new(slurm::Slurm),
        Box::new(kubernetes::kueue::Kueue),
        Box::new(kubernetes::kai::Kai),
        Box::new(kubernetes::volcano::Volcano),
        Box::new(kubernetes::yunikorn::YuniKorn),
        Box::new(yarn::Yarn),
    ]
}
