//! `allot replay audit` and `allot fairshare`: the verifier's command line. Reads traces and
//! usage from disk, runs the verifier (allot-verify) or Slurm's Fair Tree (allot-targets),
//! prints what they render and turns the budgets' expectations into the exit code.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use allot_compiler::normalize::Model;
use allot_targets::slurm::fair_tree::FairTree;
use allot_targets::slurm::tree;
use allot_targets::slurm::usage::Usage;
use allot_verify::audit::audit;
use allot_verify::trace::{Format, Merged, Reader};
use allot_verify::{expectations, render};
use clap::ValueEnum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceFormat {
    Csv,
    Jsonl,
    Sacct,
    Itp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Human,
    Markdown,
    Json,
}

pub(crate) fn fail(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(1)
}

/// The readers of a trace: one file, or every `.csv` file of a folder (an ITP trace: one
/// file per budget, named after it), merged in submit order.
pub(crate) fn readers(
    path: &Path,
    format: Option<TraceFormat>,
) -> Result<Vec<Reader<BufReader<File>>>, String> {
    let files: Vec<std::path::PathBuf> = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "csv" || x == "jsonl"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        return Err(format!("{}: no trace files", path.display()));
    }
    files
        .iter()
        .map(|file| {
            let open =
                || File::open(file).map(BufReader::new).map_err(|e| format!("{}: {e}", file.display()));
            let detected = match format {
                Some(TraceFormat::Csv) => Format::Csv,
                Some(TraceFormat::Jsonl) => Format::Jsonl,
                Some(TraceFormat::Sacct) => Format::Sacct,
                Some(TraceFormat::Itp) => Format::Itp,
                None => {
                    let mut first = String::new();
                    std::io::BufRead::read_line(&mut open()?, &mut first).map_err(|e| e.to_string())?;
                    Format::detect(&first)
                }
            };
            let budget = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            Reader::new(open()?, detected, &budget).map_err(|e| format!("{}: {e}", file.display()))
        })
        .collect()
}

/// A trace to read, as the replay commands take it.
#[derive(clap::Args)]
pub struct TraceInput {
    /// The trace: a file, or a folder of ITP files (one per budget).
    #[arg(long)]
    pub trace: PathBuf,
    /// The trace's format [default: detected from its first line].
    #[arg(long, value_enum)]
    pub trace_format: Option<TraceFormat>,
    /// Count and skip rows that do not parse instead of stopping.
    #[arg(long)]
    pub skip_bad_rows: bool,
}

impl TraceInput {
    /// A trace file or folder in a detected format, stopping at a bad row.
    pub fn at(trace: &Path) -> TraceInput {
        TraceInput { trace: trace.to_path_buf(), trace_format: None, skip_bad_rows: false }
    }

    pub(crate) fn jobs(&self) -> Result<Merged<BufReader<File>>, String> {
        Ok(Merged::new(readers(&self.trace, self.trace_format)?))
    }
}

pub fn run_audit(
    model: &Model,
    input: &TraceInput,
    window: Option<u64>,
    format: ReportFormat,
) -> std::io::Result<ExitCode> {
    let jobs = match input.jobs() {
        Ok(jobs) => jobs,
        Err(message) => return Ok(fail(message)),
    };
    let window = window.unwrap_or(model.policy.window_seconds);
    let result = match audit(model, jobs, window, input.skip_bad_rows) {
        Ok(result) => result,
        Err(error) => return Ok(fail(format!("{}: {error}", input.trace.display()))),
    };
    let verdicts = expectations::check(model, &result);
    let text = match format {
        ReportFormat::Human => render::audit::text(&result, &verdicts),
        ReportFormat::Markdown => render::audit::markdown(&result, &verdicts),
        ReportFormat::Json => {
            format!("{}\n", serde_json::to_string_pretty(&render::audit::json(&result, &verdicts))?)
        }
    };
    crate::print(&text)?;
    let failed = verdicts.iter().filter(|v| !v.met).count();
    if failed > 0 {
        eprintln!("{failed} expectation{} not met", if failed == 1 { "" } else { "s" });
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The association tree: a `sacctmgr dump`, or the budgets (their first Slurm cluster,
/// with Slurm's own root user beside the top accounts).
fn association_tree(path: &Path, model: Option<&Model>) -> Result<tree::Tree, String> {
    if let Some(model) = model {
        let cluster =
            tree::slurm_clusters(model).into_iter().next().ok_or("the budgets bind no Slurm cluster")?;
        let mut desired = tree::desired(model, &cluster);
        desired.users.push(tree::User {
            name: "root".into(),
            account: "root".into(),
            fairshare: 1,
            ..tree::User::default()
        });
        return Ok(desired);
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    tree::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn run_fairshare(
    tree_path: &Path,
    model: Option<&Model>,
    usage_path: &Path,
) -> std::io::Result<ExitCode> {
    let tree = match association_tree(tree_path, model) {
        Ok(tree) => tree,
        Err(message) => return Ok(fail(message)),
    };
    let usage = match std::fs::read_to_string(usage_path) {
        Ok(text) => match Usage::parse(&text) {
            Ok(usage) => usage,
            Err(e) => return Ok(fail(format!("{} {e}", usage_path.display()))),
        },
        Err(e) => return Ok(fail(format!("{}: {e}", usage_path.display()))),
    };
    match FairTree::compute(&usage.associations(&tree)) {
        Ok(fair_tree) => {
            crate::print(&fair_tree.to_sshare_parsable())?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(fail(e.to_string())),
    }
}
