//! `allot tree`: the project tree as a table at a moment (`--at`, default now), with each
//! project's share as written and the grants in force then, and, per cluster, its
//! effective share and guaranteed GPUs; then the GPUs left unallocated and those each
//! contract's reserve holds.

use allot_compiler::ir::{Model, Project, ShareSpec};
use allot_compiler::units::{Instant, format_instant};

use crate::args;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::print;

/// The repository to read (`PATH`) and the moment (`--at`).
pub type Args = args::RepositoryAt;

pub fn run(args: Args, format: Format) -> Outcome {
    let at = args.moment.instant();
    let Some(model) = args.repository.model_at(format, at)? else { return Ok(Exit::Problems) };
    print(&render(&model, at))?;
    Ok(Exit::Success)
}

fn render(model: &Model, at: Instant) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["PROJECT".to_string(), "SHARE".to_string()];
    for c in &model.clusters {
        header.push(format!("{} ({} {})", c.name, c.gpus, c.gpu_type));
        header.push("GPUS".to_string());
    }
    rows.push(header);
    for project in &model.projects {
        rows_of(model, project, 0, at, &mut rows);
    }
    let mut unallocated = vec!["(unallocated)".to_string(), String::new()];
    for c in &model.clusters {
        unallocated.push(String::new());
        unallocated.push(c.unallocated_gpus.to_string());
    }
    rows.push(unallocated);
    // Reserved GPUs are lent to the budgets while the contract's jobs leave them free: a
    // row of their own, not taken from the guaranteed GPUs above.
    for contract in &model.contracts {
        let Some(reserve) = contract.reserve_gpus else { continue };
        let mut row = vec![format!("(reserved: {})", contract.name), String::new()];
        for _ in &model.clusters {
            row.push(String::new());
            row.push(reserve.to_string());
        }
        rows.push(row);
    }
    table(&rows)
}

fn rows_of(model: &Model, project: &Project, depth: usize, at: Instant, rows: &mut Vec<Vec<String>>) {
    let mut written = share(project.share);
    for grant in project.grants.iter().filter(|g| g.in_force(at)) {
        written.push_str(&format!(" {}", grant.amount));
        if let Some(cluster) = &grant.cluster {
            written.push_str(&format!(" on {cluster}"));
        }
        written.push_str(&format!(" until {}", format_instant(grant.until)));
    }
    let mut row = vec![format!("{}{}", "  ".repeat(depth), project.name), written];
    for c in &model.clusters {
        match project.clusters.get(&c.name) {
            Some(a) => {
                row.push(format!("{:.3}%", a.effective_share * 100.0));
                row.push(a.guaranteed_gpus.to_string());
            }
            None => {
                row.push("-".to_string());
                row.push("-".to_string());
            }
        }
    }
    rows.push(row);
    for child in &project.children {
        rows_of(model, child, depth + 1, at, rows);
    }
}

/// `35%` for a percentage, `w3` for a weight.
fn share(share: ShareSpec) -> String {
    match share {
        ShareSpec::Percent(p) => format!("{p}%"),
        ShareSpec::Weight(w) => format!("w{w}"),
    }
}

/// Left-aligned first column, right-aligned numbers, two spaces apart.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i == 0 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str("  ");
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
