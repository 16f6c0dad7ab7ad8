//! `allot grants`: the calendar of the grants. The grants in force at a moment (`--at`,
//! default now) and every later moment at which one starts or ends, with the guaranteed
//! GPUs and effective shares that move then; `--next` prints only the next such moment,
//! for a scheduled workflow.

use allot_compiler::calendar::{self, Boundary};
use allot_compiler::diff::{ShareMove, Standing};
use allot_compiler::escape::{self, markdown};
use allot_compiler::ir::Grant;
use allot_compiler::units::{Instant, format_instant};
use serde_json::json;

use crate::args;
use crate::budgets;
use crate::diagnostics::Format;
use crate::exit::{Exit, Outcome};
use crate::output::{self, json, print};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    budgets: args::RepositoryAt,
    /// Print only the next moment at which a share changes (nothing when none will).
    #[arg(long)]
    next: bool,
    #[arg(long, value_enum, default_value = "human")]
    format: output::Format,
}

pub fn run(args: Args, format: Format) -> Outcome {
    let at = args.budgets.moment.instant();
    let (compilation, ok) = budgets::compiled(&args.budgets.repository.path, format, false, at)?;
    let Some(model) = compilation.model.as_ref().filter(|_| ok) else { return Ok(Exit::Problems) };
    let calendar = calendar::calendar(&compilation.budget, &compilation.sources, at);
    if args.next {
        let next = calendar.first().map(|b| format_instant(b.at));
        match args.format {
            output::Format::Json => print(&json(&json!({ "next": next }))?)?,
            _ => print(&next.map(|n| format!("{n}\n")).unwrap_or_default())?,
        }
        return Ok(Exit::Success);
    }
    let in_force: Vec<(String, &Grant)> =
        calendar::grants(model).into_iter().filter(|(_, g)| g.in_force(at)).collect();
    let text = match args.format {
        output::Format::Human => human(at, &in_force, &calendar),
        output::Format::Markdown => markdown_text(at, &in_force, &calendar),
        output::Format::Json => json(&json_value(at, &in_force, &calendar))?,
    };
    print(&text)?;
    Ok(Exit::Success)
}

/// `ml/nlp +10% on jupiter from 2027-01-10 until 2027-02-01: ACL deadline`, the names and
/// the reason made safe with `safe`.
fn grant_line(path: &str, grant: &Grant, safe: fn(&str) -> String) -> String {
    let mut line = format!("{} {}", safe(path), grant.amount);
    if let Some(cluster) = &grant.cluster {
        line.push_str(&format!(" on {}", safe(cluster)));
    }
    if let Some(from) = grant.from {
        line.push_str(&format!(" from {}", format_instant(from)));
    }
    line.push_str(&format!(" until {}", format_instant(grant.until)));
    format!("{line}: {}", safe(&grant.reason))
}

/// A move's guaranteed GPUs and effective share (in percent), before and after; none on a
/// side where the budget is not.
fn figures(m: &ShareMove) -> (u64, u64, f64, f64) {
    let gpus = |s: Option<Standing>| s.map_or(0, |s| s.guaranteed_gpus);
    let share = |s: Option<Standing>| s.map_or(0.0, |s| s.effective_share * 100.0);
    (gpus(m.before), gpus(m.after), share(m.before), share(m.after))
}

/// `7 → 13 GPUs (10.789% → 21.000% of jupiter)`.
fn moved(m: &ShareMove) -> String {
    let (gpus_before, gpus_after, before, after) = figures(m);
    format!("{gpus_before} → {gpus_after} GPUs ({before:.3}% → {after:.3}% of {})", escape::line(&m.cluster))
}

fn human(at: Instant, in_force: &[(String, &Grant)], calendar: &[Boundary]) -> String {
    let mut out = format!("Grants in force at {}:", format_instant(at));
    if in_force.is_empty() {
        out.push_str(" none\n");
    } else {
        out.push('\n');
        for (path, grant) in in_force {
            out.push_str(&format!("  {}\n", grant_line(path, grant, escape::line)));
        }
    }
    if calendar.is_empty() {
        out.push_str("No share changes after that.\n");
    }
    for boundary in calendar {
        out.push_str(&format!("\n{}\n", format_instant(boundary.at)));
        for (path, grant) in &boundary.starting {
            out.push_str(&format!("  starts: {}\n", grant_line(path, grant, escape::line)));
        }
        for (path, grant) in &boundary.ending {
            out.push_str(&format!("  ends:   {}\n", grant_line(path, grant, escape::line)));
        }
        if boundary.moves.is_empty() {
            out.push_str("  no guaranteed GPUs or effective shares move\n");
        }
        let projects: Vec<String> = boundary.moves.iter().map(|m| escape::line(&m.project)).collect();
        let width = projects.iter().map(|p| p.chars().count()).max().unwrap_or(0);
        for (project, m) in projects.iter().zip(&boundary.moves) {
            out.push_str(&format!("    {project:width$}  {}\n", moved(m)));
        }
    }
    out
}

fn markdown_text(at: Instant, in_force: &[(String, &Grant)], calendar: &[Boundary]) -> String {
    let mut out = format!("**Grants in force at {}:**", format_instant(at));
    if in_force.is_empty() {
        out.push_str(" none\n");
    } else {
        out.push_str("\n\n");
        for (path, grant) in in_force {
            out.push_str(&format!("- {}\n", grant_line(path, grant, markdown)));
        }
    }
    if calendar.is_empty() {
        out.push_str("\nNo share changes after that.\n");
    }
    for boundary in calendar {
        out.push_str(&format!("\n**{}**\n\n", format_instant(boundary.at)));
        for (path, grant) in &boundary.starting {
            out.push_str(&format!("- starts: {}\n", grant_line(path, grant, markdown)));
        }
        for (path, grant) in &boundary.ending {
            out.push_str(&format!("- ends: {}\n", grant_line(path, grant, markdown)));
        }
        if boundary.moves.is_empty() {
            out.push_str("\nNo guaranteed GPUs or effective shares move.\n");
        } else {
            out.push_str(
                "\n| project | cluster | guaranteed GPUs | effective share |\n|---|---|---:|---:|\n",
            );
            for m in &boundary.moves {
                let (gpus_before, gpus_after, before, after) = figures(m);
                out.push_str(&format!(
                    "| {} | {} | {gpus_before} → {gpus_after} | {before:.3}% → {after:.3}% |\n",
                    markdown(&m.project),
                    markdown(&m.cluster)
                ));
            }
        }
    }
    out
}

fn json_value(at: Instant, in_force: &[(String, &Grant)], calendar: &[Boundary]) -> serde_json::Value {
    let grant = |path: &str, g: &Grant| json!({ "project": path, "grant": g });
    let standing = |s: Option<Standing>| {
        s.map(|s| json!({ "guaranteed_gpus": s.guaranteed_gpus, "effective_share": s.effective_share }))
    };
    json!({
        "at": format_instant(at),
        "in_force": in_force.iter().map(|(p, g)| grant(p, g)).collect::<Vec<_>>(),
        "boundaries": calendar.iter().map(|b| json!({
            "at": format_instant(b.at),
            "starting": b.starting.iter().map(|(p, g)| grant(p, g)).collect::<Vec<_>>(),
            "ending": b.ending.iter().map(|(p, g)| grant(p, g)).collect::<Vec<_>>(),
            "moves": b.moves.iter().map(|m| json!({
                "project": m.project,
                "cluster": m.cluster,
                "before": standing(m.before),
                "after": standing(m.after),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
