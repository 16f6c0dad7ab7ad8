//! `allot replay audit` and `allot fairshare`: the verifier's command line. Reads traces and
//! usage from disk, runs the verifier (allot-verify) or Slurm's Fair Tree (allot-targets),
//! renders the figures and turns the budgets' expectations into the exit code.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use allot_compiler::normalize::Model;
use allot_targets::slurm::fair_tree::FairTree;
use allot_targets::slurm::tree;
use allot_targets::slurm::usage::Usage;
use allot_verify::audit::audit;
use allot_verify::figures::{Audit, BudgetFigures, Span, Waits};
use allot_verify::trace::{Format, Merged, Reader};
use clap::ValueEnum;
use serde_json::{Value, json};

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
    let verdicts = expectations(model, &result);
    let text = match format {
        ReportFormat::Human => human(&result, &verdicts),
        ReportFormat::Markdown => markdown(&result, &verdicts),
        ReportFormat::Json => {
            format!("{}\n", serde_json::to_string_pretty(&json_report(&result, &verdicts))?)
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

/// One expectation of the budgets, checked.
pub struct Verdict {
    pub expectation: String,
    pub subject: String,
    pub value: f64,
    pub threshold: f64,
    pub met: bool,
}

pub(crate) fn expectations(model: &Model, audit: &Audit) -> Vec<Verdict> {
    let mut out = Vec::new();
    let e = &model.expectations;
    if let Some(threshold) = e.delivered_per_budget {
        for b in audit.whole.budgets.iter().filter(|b| audit.leaves.contains(&b.project)) {
            if let Some(ratio) = b.delivered_ratio() {
                out.push(Verdict {
                    expectation: "delivered per budget".into(),
                    subject: format!("{} on {}", b.project, b.cluster),
                    value: ratio,
                    threshold,
                    met: ratio + 1e-12 >= threshold,
                });
            }
        }
    }
    if let (Some(threshold), Some(ratio)) = (e.delivered_overall, audit.whole.overall_ratio(&audit.leaves)) {
        out.push(Verdict {
            expectation: "delivered overall".into(),
            subject: "all budgets".into(),
            value: ratio,
            threshold,
            met: ratio + 1e-12 >= threshold,
        });
    }
    for wait in &e.waits {
        let Some(contract) = audit.whole.contracts.iter().find(|c| c.contract == wait.contract) else {
            continue;
        };
        for (p, limit) in [(50.0, wait.p50_seconds), (90.0, wait.p90_seconds), (99.0, wait.p99_seconds)] {
            if let (Some(limit), Some(value)) = (limit, contract.waits.percentile(p)) {
                out.push(Verdict {
                    expectation: format!("p{p} wait"),
                    subject: format!("contract {}", wait.contract),
                    value: value as f64,
                    threshold: limit as f64,
                    met: value <= limit,
                });
            }
        }
    }
    out
}

pub(crate) fn hours(h: f64) -> String {
    format!("{h:.1}")
}

pub(crate) fn ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{:.1}%", r * 100.0))
}

pub(crate) fn waits_text(w: &Waits) -> String {
    let p = |q| w.percentile(q).map_or("-".into(), crate::seconds_text);
    format!("{} / {} / {}", p(50.0), p(90.0), p(99.0))
}

/// A budget with nothing to show (no use, no entitlement, no job) is left out of reports.
fn shown(b: &&BudgetFigures) -> bool {
    b.used_gpu_hours > 0.0 || b.entitled_gpu_hours > 0.0 || b.waits.jobs() > 0
}

fn budget_row(b: &BudgetFigures) -> String {
    format!(
        "  {:<10} {:<34} {:>10} {:>10} {:>10} {:>7}  {}\n",
        b.cluster,
        b.project,
        hours(b.used_gpu_hours),
        hours(b.entitled_gpu_hours),
        hours(b.delivered_gpu_hours),
        ratio(b.delivered_ratio()),
        waits_text(&b.waits)
    )
}

fn human(audit: &Audit, verdicts: &[Verdict]) -> String {
    let whole = &audit.whole;
    let mut out = format!(
        "Audit of {} jobs from {} to {} ({} rows skipped); waits are nearest-rank p50 / p90 / p99\n\n",
        audit.jobs, whole.start, whole.end, audit.skipped_rows
    );
    out.push_str(&format!(
        "  {:<10} {:<34} {:>10} {:>10} {:>10} {:>7}  {}\n",
        "CLUSTER", "BUDGET", "USED GPUh", "ENTITLED", "DELIVERED", "RATIO", "WAIT"
    ));
    for b in whole.budgets.iter().filter(shown) {
        out.push_str(&budget_row(b));
    }
    out.push_str("\nContracts:\n");
    for c in &whole.contracts {
        out.push_str(&format!(
            "  {:<16} {:>8} jobs  wait {}\n",
            c.contract,
            c.waits.jobs(),
            waits_text(&c.waits)
        ));
    }
    out.push_str("\nClusters:\n");
    for c in &whole.clusters {
        out.push_str(&format!(
            "  {:<16} {:>6} GPUs  used {:>10} GPUh  utilisation {:.1}%\n",
            c.cluster,
            c.gpus,
            hours(c.used_gpu_hours),
            whole.utilisation(c) * 100.0
        ));
    }
    out.push_str(&format!("\nDelivered overall: {}\n", ratio(whole.overall_ratio(&audit.leaves))));
    if !verdicts.is_empty() {
        out.push_str("\nExpectations:\n");
        for v in verdicts {
            out.push_str(&format!(
                "  {} {:<22} {:<34} {:.3} against {:.3}\n",
                if v.met { "ok  " } else { "FAIL" },
                v.expectation,
                v.subject,
                v.value,
                v.threshold
            ));
        }
    }
    out
}

fn markdown(audit: &Audit, verdicts: &[Verdict]) -> String {
    let whole = &audit.whole;
    let failed = verdicts.iter().filter(|v| !v.met).count();
    let mut out = format!(
        "### allot: audit of {} jobs\n\n**Delivered overall: {}; {} of {} expectations met.**\n\n",
        audit.jobs,
        ratio(whole.overall_ratio(&audit.leaves)),
        verdicts.len() - failed,
        verdicts.len()
    );
    out.push_str("| cluster | budget | used GPU-h | entitled GPU-h | delivered GPU-h | delivered | wait p50 / p90 / p99 |\n|---|---|---:|---:|---:|---:|---|\n");
    for b in whole.budgets.iter().filter(shown) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            b.cluster,
            b.project,
            hours(b.used_gpu_hours),
            hours(b.entitled_gpu_hours),
            hours(b.delivered_gpu_hours),
            ratio(b.delivered_ratio()),
            waits_text(&b.waits)
        ));
    }
    out.push_str("\n| contract | jobs | wait p50 / p90 / p99 (nearest rank) |\n|---|---:|---|\n");
    for c in &whole.contracts {
        out.push_str(&format!("| {} | {} | {} |\n", c.contract, c.waits.jobs(), waits_text(&c.waits)));
    }
    if !verdicts.is_empty() {
        out.push_str("\n| expectation | subject | value | threshold | |\n|---|---|---:|---:|---|\n");
        for v in verdicts {
            out.push_str(&format!(
                "| {} | {} | {:.3} | {:.3} | {} |\n",
                v.expectation,
                v.subject,
                v.value,
                v.threshold,
                if v.met { "met" } else { "**not met**" }
            ));
        }
    }
    out
}

pub(crate) fn waits_json(w: &Waits) -> (Value, Value, Value) {
    (json!(w.percentile(50.0)), json!(w.percentile(90.0)), json!(w.percentile(99.0)))
}

fn span_json(span: &Span) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let budgets = span
        .budgets
        .iter()
        .map(|b| {
            let (p50, p90, p99) = waits_json(&b.waits);
            json!({
                "project": b.project,
                "cluster": b.cluster,
                "used_gpu_hours": b.used_gpu_hours,
                "entitled_gpu_hours": b.entitled_gpu_hours,
                "delivered_gpu_hours": b.delivered_gpu_hours,
                "delivered_ratio": b.delivered_ratio(),
                "jobs": b.waits.jobs(),
                "wait_p50_s": p50, "wait_p90_s": p90, "wait_p99_s": p99,
            })
        })
        .collect();
    let contracts = span
        .contracts
        .iter()
        .map(|c| {
            let (p50, p90, p99) = waits_json(&c.waits);
            json!({ "contract": c.contract, "jobs": c.waits.jobs(), "wait_p50_s": p50, "wait_p90_s": p90, "wait_p99_s": p99 })
        })
        .collect();
    let clusters = span
        .clusters
        .iter()
        .map(|c| json!({ "cluster": c.cluster, "gpus": c.gpus, "used_gpu_hours": c.used_gpu_hours, "utilisation": span.utilisation(c) }))
        .collect();
    (budgets, contracts, clusters)
}

pub(crate) fn json_report(audit: &Audit, verdicts: &[Verdict]) -> Value {
    let (budgets, contracts, clusters) = span_json(&audit.whole);
    let leaves = |f: fn(&BudgetFigures) -> f64| -> f64 {
        audit.whole.budgets.iter().filter(|b| audit.leaves.contains(&b.project)).map(f).sum()
    };
    let windows: Vec<Value> = audit
        .windows
        .iter()
        .map(|w| {
            let (budgets, contracts, clusters) = span_json(w);
            json!({ "start": w.start, "end": w.end, "budgets": budgets, "contracts": contracts, "clusters": clusters })
        })
        .collect();
    json!({
        "percentiles": "nearest-rank",
        "start": audit.whole.start,
        "end": audit.whole.end,
        "budgets": budgets,
        "contracts": contracts,
        "clusters": clusters,
        "totals": {
            "jobs": audit.jobs,
            "skipped_rows": audit.skipped_rows,
            "used_gpu_hours": leaves(|b| b.used_gpu_hours),
            "entitled_gpu_hours": leaves(|b| b.entitled_gpu_hours),
            "delivered_gpu_hours": leaves(|b| b.delivered_gpu_hours),
            "delivered_ratio": audit.whole.overall_ratio(&audit.leaves),
        },
        "windows": windows,
        "expectations": verdicts.iter().map(|v| json!({
            "expectation": v.expectation, "subject": v.subject, "value": v.value, "threshold": v.threshold, "met": v.met,
        })).collect::<Vec<_>>(),
    })
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
