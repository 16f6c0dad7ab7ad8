//! `allot tree`: the project tree as a table, with each project's share as written and,
//! per cluster, its effective share and guaranteed GPUs.

use allot_compiler::ir::{Model, Project, ShareSpec};

use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::print;

/// The repository to read (`PATH`).
pub type Args = budgets::Repository;

pub fn run(args: Args, format: Format) -> Outcome {
    let Some(model) = args.model(format)? else { return Ok(Exit::Problems) };
    print(&render(&model))?;
    Ok(Exit::Success)
}

fn render(model: &Model) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["PROJECT".to_string(), "SHARE".to_string()];
    for c in &model.clusters {
        header.push(format!("{} ({} {})", c.name, c.gpus, c.gpu_type));
        header.push("GPUS".to_string());
    }
    rows.push(header);
    for project in &model.projects {
        rows_of(model, project, 0, &mut rows);
    }
    let mut unallocated = vec!["(unallocated)".to_string(), String::new()];
    for c in &model.clusters {
        unallocated.push(String::new());
        unallocated.push(c.unallocated_gpus.to_string());
    }
    rows.push(unallocated);
    table(&rows)
}

fn rows_of(model: &Model, project: &Project, depth: usize, rows: &mut Vec<Vec<String>>) {
    let mut row = vec![format!("{}{}", "  ".repeat(depth), project.name), share(project.share)];
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
        rows_of(model, child, depth + 1, rows);
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
