//! The shares at the grant boundaries of the coming days: how the two revisions differ at
//! each moment a grant of either starts or ends, so that a reviewer sees what a grant does
//! when it starts, not only what the change does now.

use allot_compiler::diff::ShareMove;
use allot_compiler::units::{Instant, format_instant};
use serde_json::{Value, json};

/// How far ahead a review looks for grant boundaries.
pub const HORIZON_DAYS: i64 = 30;

/// Each boundary with the budgets whose guaranteed GPUs or effective shares differ then.
pub type Later = [(Instant, Vec<ShareMove>)];

fn gpus(m: &ShareMove) -> (String, String) {
    let side = |s: Option<allot_compiler::diff::Standing>| {
        s.map_or("-".to_string(), |s| s.guaranteed_gpus.to_string())
    };
    (side(m.before), side(m.after))
}

/// For a terminal: a line per boundary, then one per budget that differs.
pub fn human(later: &Later, against: &str, head: &str, plain: fn(&str) -> String) -> String {
    if later.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "At the grant boundaries of the next {HORIZON_DAYS} days, guaranteed GPUs at {} -> at {}:\n",
        plain(against),
        plain(head)
    );
    for (at, moves) in later {
        if moves.is_empty() {
            out.push_str(&format!("  {}: the same\n", format_instant(*at)));
            continue;
        }
        out.push_str(&format!("  {}:\n", format_instant(*at)));
        let width = moves.iter().map(|m| m.project.chars().count()).max().unwrap_or(0);
        for m in moves {
            let (before, after) = gpus(m);
            out.push_str(&format!("    {:width$}  {before} -> {after} on {}\n", m.project, m.cluster));
        }
    }
    out
}

/// For a comment: a table per boundary.
pub fn markdown(later: &Later, against: &str, head: &str, escape: fn(&str) -> String) -> String {
    if later.is_empty() {
        return String::new();
    }
    let mut out = format!("\n#### At the grant boundaries of the next {HORIZON_DAYS} days\n");
    for (at, moves) in later {
        if moves.is_empty() {
            out.push_str(&format!("\n**{}**: the same at both revisions.\n", format_instant(*at)));
            continue;
        }
        out.push_str(&format!(
            "\n**{}**\n\n| budget | cluster | guaranteed GPUs at {} | at {} |\n|---|---|---:|---:|\n",
            format_instant(*at),
            escape(against),
            escape(head)
        ));
        for m in moves {
            let (before, after) = gpus(m);
            out.push_str(&format!(
                "| {} | {} | {before} | {after} |\n",
                escape(&m.project),
                escape(&m.cluster)
            ));
        }
    }
    out
}

pub fn json(later: &Later) -> Value {
    let standing = |s: Option<allot_compiler::diff::Standing>| {
        s.map(|s| json!({ "guaranteed_gpus": s.guaranteed_gpus, "effective_share": s.effective_share }))
    };
    later
        .iter()
        .map(|(at, moves)| {
            json!({
                "at": format_instant(*at),
                "share_moves": moves.iter().map(|m| json!({
                    "project": m.project,
                    "cluster": m.cluster,
                    "before": standing(m.before),
                    "after": standing(m.after),
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}
