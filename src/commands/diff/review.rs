//! The renderers of `allot diff`: the semantic diff of two revisions for a reviewer
//! (terminal, Markdown for a pull request, JSON, GitHub annotations), and each target's
//! native files diffed when asked.

use std::collections::BTreeMap;

use std::io::IsTerminal;

use allot_compiler::diff::{Change, Diff, Kind, Standing};
use allot_compiler::ir::Model;
use clap::ValueEnum;
use serde_json::{Value, json};

use crate::git_loader::GitRepo;
use crate::{github, output};

/// GitHub refuses comments above 65,536 characters; stay under with room for a note.
const MARKDOWN_LIMIT: usize = 60_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    Human,
    Markdown,
    Json,
    Github,
}

/// One emitted file that differs between the revisions.
pub struct NativeDiff {
    pub target: &'static str,
    pub path: String,
    pub unified: String,
}

/// Every target's files at both revisions, diffed file by file.
pub fn native(old: &Model, new: &Model) -> Vec<NativeDiff> {
    let mut out = Vec::new();
    for target in allot_targets::registry() {
        let files = |m: &Model| -> BTreeMap<String, String> {
            let mut files: BTreeMap<String, String> =
                target.emit(m).into_iter().map(|f| (f.path, f.contents)).collect();
            if !files.is_empty() {
                files.insert("FIDELITY.md".into(), target.fidelity(m).to_markdown());
            }
            files
        };
        let (before, after) = (files(old), files(new));
        let paths: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        for path in paths {
            let (a, b) =
                (before.get(path).map_or("", String::as_str), after.get(path).map_or("", String::as_str));
            if a == b {
                continue;
            }
            let name = format!("{}/{path}", target.name());
            let unified = similar::TextDiff::from_lines(a, b)
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{name}"), &format!("b/{name}"))
                .to_string();
            out.push(NativeDiff { target: target.name(), path: path.clone(), unified });
        }
    }
    out
}

fn percent(v: f64) -> String {
    format!("{:.3}%", v * 100.0)
}

/// Normalised share, effective share and GPUs as text (`-` when absent).
fn standing(value: Option<Standing>) -> (String, String, String) {
    value.map_or(("-".into(), "-".into(), "-".into()), |s| {
        (percent(s.normalized_share), percent(s.effective_share), s.guaranteed_gpus.to_string())
    })
}

/// `+` green, `-` red, `~` yellow: on a terminal, unless NO_COLOR is set.
fn coloured(kind: Kind) -> String {
    let plain = !std::io::stdout().is_terminal() || output::no_color();
    let code = match kind {
        Kind::Added => "32",
        Kind::Removed => "31",
        _ => "33",
    };
    if plain { kind.symbol().to_string() } else { format!("\x1b[{code}m{}\x1b[0m", kind.symbol()) }
}

fn location(change: &Change, git: &GitRepo) -> String {
    change.source.as_ref().map_or(String::new(), |l| format!("{}:{}", git.repo_path(&l.file), l.line))
}

fn approvers(change: &Change) -> String {
    if change.approvers.is_empty() { "maintainers".into() } else { change.approvers.join(" ") }
}

fn detail_text(change: &Change) -> Vec<String> {
    change
        .details
        .iter()
        .map(|d| match (d.before.is_empty(), d.after.is_empty()) {
            (true, _) => format!("{}: {}", d.field, d.after),
            (_, true) => format!("{}: {} (removed)", d.field, d.before),
            _ => format!("{}: {} -> {}", d.field, d.before, d.after),
        })
        .collect()
}

pub fn human(diff: &Diff, natives: &[NativeDiff], git: &GitRepo) -> String {
    let mut out = String::new();
    for change in &diff.changes {
        out.push_str(&format!(
            "{} {:<44} {:<24} approve: {}\n",
            coloured(change.kind),
            change.subject,
            location(change, git),
            approvers(change)
        ));
        for line in detail_text(change) {
            out.push_str(&format!("    {line}\n"));
        }
    }
    if !diff.share_moves.is_empty() {
        out.push_str("\nShare of the parent, of the cluster (change), guaranteed GPUs:\n");
        for m in &diff.share_moves {
            let ((nb, sb, gb), (na, sa, ga)) = (standing(m.before), standing(m.after));
            out.push_str(&format!(
                "  {:<12} {:<32} {:>8} -> {:>8}  {:>8} -> {:>8} ({:+.3} pp)  {:>5} -> {:>5}\n",
                m.cluster,
                m.project,
                nb,
                na,
                sb,
                sa,
                m.points(),
                gb,
                ga
            ));
        }
    }
    for n in natives {
        out.push('\n');
        out.push_str(&n.unified);
    }
    out.push_str(&format!("\n{}\n", diff.summary()));
    out
}

pub fn markdown(diff: &Diff, natives: &[NativeDiff], git: &GitRepo) -> String {
    let mut out = format!("### allot: budget changes\n\n**{}**\n\n", diff.summary());
    if !diff.changes.is_empty() {
        out.push_str("| | change | details | approve | source |\n|---|---|---|---|---|\n");
        for c in &diff.changes {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                c.kind.symbol(),
                c.subject,
                detail_text(c).join("<br>").replace('|', "\\|"),
                approvers(c),
                location(c, git)
            ));
        }
    }
    if !diff.share_moves.is_empty() {
        out.push_str("\n#### Shares\n\n| cluster | project | of parent | of cluster | change | guaranteed GPUs |\n|---|---|---:|---:|---:|---:|\n");
        for m in &diff.share_moves {
            let ((nb, sb, gb), (na, sa, ga)) = (standing(m.before), standing(m.after));
            out.push_str(&format!(
                "| {} | {} | {nb} → {na} | {sb} → {sa} | {:+.3} pp | {gb} → {ga} |\n",
                m.cluster,
                m.project,
                m.points()
            ));
        }
    }
    let mut by_target: BTreeMap<&str, Vec<&NativeDiff>> = BTreeMap::new();
    for n in natives {
        by_target.entry(n.target).or_default().push(n);
    }
    for (target, files) in by_target {
        out.push_str(&format!(
            "\n<details><summary>{target}: {} file{} change</summary>\n\n```diff\n",
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        ));
        for f in files {
            out.push_str(&f.unified);
        }
        out.push_str("```\n\n</details>\n");
    }
    truncate(out)
}

/// Keeps a Markdown report within GitHub's comment limit, saying so when it cuts.
fn truncate(text: String) -> String {
    if text.len() <= MARKDOWN_LIMIT {
        return text;
    }
    let mut cut = MARKDOWN_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut kept = text[..cut].to_string();
    // Close an open code block so the note renders.
    if kept.matches("```").count() % 2 == 1 {
        kept.push_str("\n```\n");
    }
    kept.push_str(&format!(
        "\n\n> **Truncated**: the report has {} characters, more than a GitHub comment holds; run `allot diff` locally for all of it.\n",
        text.len()
    ));
    kept
}

pub fn json(diff: &Diff, natives: &[NativeDiff], git: &GitRepo) -> Value {
    let changes: Vec<Value> = diff
        .changes
        .iter()
        .map(|c| {
            json!({
                "kind": c.kind.word(),
                "subject": c.subject,
                "details": c.details.iter().map(|d| json!({ "field": d.field, "before": d.before, "after": d.after })).collect::<Vec<_>>(),
                "source": c.source.as_ref().map(|l| json!({ "file": git.repo_path(&l.file), "line": l.line, "column": l.column })),
                "approvers": c.approvers,
            })
        })
        .collect();
    let moves: Vec<Value> = diff
        .share_moves
        .iter()
        .map(|m| {
            json!({
                "project": m.project,
                "cluster": m.cluster,
                "normalized_share_before": m.before.map(|b| b.normalized_share),
                "normalized_share_after": m.after.map(|a| a.normalized_share),
                "effective_share_before": m.before.map(|b| b.effective_share),
                "effective_share_after": m.after.map(|a| a.effective_share),
                "guaranteed_gpus_before": m.before.map(|b| b.guaranteed_gpus),
                "guaranteed_gpus_after": m.after.map(|a| a.guaranteed_gpus),
                "points": m.points(),
            })
        })
        .collect();
    let natives: Vec<Value> =
        natives.iter().map(|n| json!({ "target": n.target, "path": n.path, "diff": n.unified })).collect();
    json!({ "summary": diff.summary(), "changes": changes, "share_moves": moves, "native": natives })
}

/// `::notice` annotations on the changed KDL lines (removals on no line).
pub fn github(diff: &Diff, git: &GitRepo) -> String {
    let mut out = String::new();
    for c in &diff.changes {
        let mut properties = Vec::new();
        if let Some(l) = c.source.as_ref().filter(|_| c.kind != Kind::Removed) {
            properties.extend([
                ("file", git.repo_path(&l.file)),
                ("line", l.line.to_string()),
                ("col", l.column.to_string()),
            ]);
        }
        properties.push(("title", "allot diff".to_string()));
        let message = format!(
            "{} {}: {} (approve: {})",
            c.subject,
            c.kind.word(),
            detail_text(c).join("; "),
            approvers(c)
        );
        out.push_str(&github::annotation("notice", &properties, &message));
        out.push('\n');
    }
    out
}
