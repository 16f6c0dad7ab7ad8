//! The headline and the table of what moved ([`super::table::Table`]), for a terminal and
//! for a pull request's comment: the same layout in both, the names through the escape of
//! where they go (control characters visible; Markdown and HTML escaped).

use allot_compiler::escape;

use super::table::{Cell, MAX_ROWS, Row, Table};

/// The folded rows of a comment stop here, with a count of the rest (never a cut table).
const REST_BUDGET: usize = 20_000;

/// `358 -> 307 (-51)`, `absent`, `12`; with the cluster's own share first where it differs.
fn cell_text(cell: &Cell, arrow: &str) -> String {
    let gpus = |g: Option<u64>| g.map_or("absent".to_string(), |g| g.to_string());
    let figures = match (cell.before, cell.after) {
        (None, None) => return "absent".into(),
        (b, a) if b == a => gpus(a),
        (b, a) => format!("{} {arrow} {} ({:+})", gpus(b), gpus(a), cell.delta()),
    };
    match &cell.share {
        Some(share) => format!("{share}: {figures}"),
        None => figures,
    }
}

/// `3 projects changed; GPUs moving between budgets: jupiter 51, ceres 13, titan 4.`; the
/// other changes named when there are three or fewer (`contract debug changed`).
fn first_line(table: &Table, others: &[&str], name: fn(&str) -> String) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    if table.projects_changed > 0 {
        parts.push(format!("{} changed", plural(table.projects_changed, "project")));
    }
    match others.len() {
        0 => {}
        1..=3 => {
            parts.push(format!("{} changed", others.iter().map(|o| name(o)).collect::<Vec<_>>().join(", ")))
        }
        n => parts.push(plural(n, "other change")),
    }
    let moving: Vec<String> = table
        .clusters
        .iter()
        .zip(&table.moving)
        .filter(|(_, n)| **n > 0)
        .map(|(c, n)| format!("{} {n}", name(c)))
        .collect();
    let moving = if moving.is_empty() {
        "no GPUs move between budgets.".to_string()
    } else {
        format!("GPUs moving between budgets: {}.", moving.join(", "))
    };
    format!("{}; {moving}", parts.join(", "))
}

/// `Approve: @a, @b, maintainers.`
fn approve_line(table: &Table, name: fn(&str) -> String) -> String {
    let names: Vec<String> =
        table.approvers.iter().map(|a| a.as_deref().map_or("maintainers".to_string(), name)).collect();
    format!("Approve: {}.", names.join(", "))
}

/// The headline's lines, each through `name` for what comes from the budget files.
pub fn headline(table: &Table, others: &[&str], name: fn(&str) -> String) -> Vec<String> {
    vec![first_line(table, others, name), approve_line(table, name)]
}

/// The rows of a table as text columns: kind, budget (indented name or path), share, clusters.
fn text_rows(table: &Table, rows: &[Row], paths: bool) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            let name = if paths {
                escape::line(&r.path)
            } else {
                format!("{}{}", "  ".repeat(r.depth()), escape::line(r.name()))
            };
            let mut cols = vec![
                r.kind.map_or("", |k| k.symbol()).to_string(),
                name,
                escape::line(&r.share.join(" -> ")),
            ];
            if r.context() {
                cols.extend(table.clusters.iter().map(|_| String::new()));
            } else {
                cols.extend(r.cells.iter().map(|c| cell_text(c, "->")));
            }
            cols
        })
        .collect()
}

/// Columns padded to their widest cell, the figures right-aligned.
fn aligned(header: Vec<String>, rows: Vec<Vec<String>>) -> String {
    let all: Vec<&Vec<String>> = std::iter::once(&header).chain(&rows).collect();
    let widths: Vec<usize> =
        (0..header.len()).map(|i| all.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in all {
        let cells: Vec<String> =
            row.iter()
                .enumerate()
                .map(|(i, c)| {
                    if i >= 3 { format!("{c:>w$}", w = widths[i]) } else { format!("{c:<w$}", w = widths[i]) }
                })
                .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn text_header(table: &Table) -> Vec<String> {
    let mut header = vec![String::new(), "budget".into(), "share".into()];
    header.extend(table.clusters.iter().map(|c| escape::line(c)));
    header
}

/// The table of what moved, for a terminal.
pub fn human(table: &Table) -> String {
    if table.rows.is_empty() {
        return String::new();
    }
    aligned(text_header(table), text_rows(table, &table.rows, false))
}

/// The other budgets that moved, for a terminal: every one, by path.
pub fn human_rest(table: &Table) -> String {
    if table.rest.is_empty() {
        return String::new();
    }
    format!("{}:\n{}", rest_title(table), aligned(text_header(table), text_rows(table, &table.rest, true)))
}

/// `12 more budgets moved: 10 by rounding only, 2 beyond the top 40`
fn rest_title(table: &Table) -> String {
    let rounding = table.rest.len() - table.cut;
    let mut parts = Vec::new();
    if rounding > 0 {
        parts.push(format!("{rounding} by rounding only"));
    }
    if table.cut > 0 {
        parts.push(format!("{} beyond the top {MAX_ROWS} by GPUs moved", table.cut));
    }
    let n = table.rest.len();
    format!("{n} more budget{} moved ({})", if n == 1 { "" } else { "s" }, parts.join(", "))
}

fn markdown_header(table: &Table) -> String {
    let names: String = table.clusters.iter().map(|c| format!(" {} |", escape::markdown(c))).collect();
    let align: String = table.clusters.iter().map(|_| "---:|").collect();
    format!("| | budget | share |{names}\n|---|---|---|{align}\n")
}

fn markdown_row(table: &Table, r: &Row, paths: bool) -> String {
    let name = if paths {
        escape::markdown(&r.path)
    } else {
        let indent = "&nbsp;&nbsp;&nbsp;&nbsp;".repeat(r.depth());
        let name = escape::markdown(r.name());
        if r.kind.is_some() { format!("{indent}**{name}**") } else { format!("{indent}{name}") }
    };
    let cells: String = if r.context() {
        table.clusters.iter().map(|_| " |").collect()
    } else {
        r.cells.iter().map(|c| format!(" {} |", escape::markdown(&cell_text(c, "→")))).collect()
    };
    format!(
        "| {} | {name} | {} |{cells}\n",
        r.kind.map_or("", |k| k.symbol()),
        r.share.iter().map(|s| escape::markdown(s)).collect::<Vec<_>>().join(" → ")
    )
}

/// The table of what moved, for a comment, with a line saying where the rest is.
pub fn markdown(table: &Table) -> String {
    if table.rows.is_empty() {
        return String::new();
    }
    let mut out = markdown_header(table);
    for r in &table.rows {
        out.push_str(&markdown_row(table, r, false));
    }
    if !table.rest.is_empty() {
        out.push_str(&format!("\n{}, folded below.\n", rest_title(table)));
    }
    out
}

/// The other budgets that moved, folded, by path: as many rows as fit, then a count.
pub fn markdown_rest(table: &Table) -> String {
    if table.rest.is_empty() {
        return String::new();
    }
    let mut body = markdown_header(table);
    let mut shown = 0;
    for r in &table.rest {
        let row = markdown_row(table, r, true);
        if body.len() + row.len() > REST_BUDGET {
            break;
        }
        body.push_str(&row);
        shown += 1;
    }
    if shown < table.rest.len() {
        body.push_str(&format!(
            "\n{} more: `allot diff --format json` lists every one.\n",
            table.rest.len() - shown
        ));
    }
    format!("\n<details><summary>{}</summary>\n\n{body}\n</details>\n", rest_title(table))
}
