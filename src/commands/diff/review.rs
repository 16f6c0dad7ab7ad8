//! The renderers of `allot diff`: the semantic diff of two revisions for a reviewer
//! (terminal, Markdown for a pull request, JSON, GitHub annotations), and each target's
//! native files diffed when asked. Everything that comes from the budget files (names,
//! paths, members, owners, emitted files) is escaped for where it goes: control
//! characters made visible for a terminal, Markdown and HTML escaped for a comment.

use std::collections::BTreeMap;

use std::io::IsTerminal;

use allot_compiler::diff::{Change, Detail, Diff, Kind};
use allot_compiler::escape::{self, controls};
use allot_compiler::ir::Model;
use clap::ValueEnum;
use serde_json::{Value, json};

use super::moved;
use super::table::{self, Table};
use crate::input::git_loader::GitRepo;
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
                target.emit(m).files.into_iter().map(|f| (f.path, f.contents)).collect();
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

/// `file:line` of the change, as it stands in the budget files (unescaped).
fn location(change: &Change, git: &GitRepo) -> String {
    change.source.as_ref().map_or(String::new(), |l| format!("{}:{}", git.repo_path(&l.file), l.line))
}

/// The approvers, each through `escape`; `maintainers` when there are none.
fn approvers(change: &Change, escape: fn(&str) -> String) -> String {
    if change.approvers.is_empty() {
        "maintainers".into()
    } else {
        change.approvers.iter().map(|a| escape(a)).collect::<Vec<_>>().join(" ")
    }
}

/// Each detail as `field: before -> after`, its values through `escape`.
fn detail_text(change: &Change, escape: fn(&str) -> String) -> Vec<String> {
    let one = |d: &Detail| match (d.before.is_empty(), d.after.is_empty()) {
        (true, _) => format!("{}: {}", d.field, escape(&d.after)),
        (_, true) => format!("{}: {} (removed)", d.field, escape(&d.before)),
        _ => format!("{}: {} -> {}", d.field, escape(&d.before), escape(&d.after)),
    };
    change.details.iter().map(one).collect()
}

/// The subjects of the changes other than to projects: contracts, clusters, policy, expectations.
fn other_changes(diff: &Diff) -> Vec<&str> {
    diff.changes.iter().filter(|c| table::project_of(c).is_none()).map(|c| c.subject.as_str()).collect()
}

/// A simulation of `--replay`: its line for the headline, its figures in full.
pub struct Replay {
    pub line: String,
    pub block: String,
}

/// The headline (with the what-if's line under `--replay`), the table of what moved, each
/// change with its approvers and source, the shares at the coming grant boundaries
/// (`later`, rendered), the budgets moved by rounding only, the simulation's figures in
/// full, the native diffs.
pub fn human(
    diff: &Diff,
    table: &Table,
    later: &str,
    natives: &[NativeDiff],
    git: &GitRepo,
    replay: Option<&Replay>,
) -> String {
    if diff.is_empty() {
        return match replay {
            Some(r) => format!("{}\n{}\n\n{}", diff.summary(), r.line, r.block),
            None => format!("{}\n", diff.summary()),
        };
    }
    let mut lines = moved::headline(table, &other_changes(diff), escape::line);
    lines.extend(replay.map(|r| r.line.clone()));
    let mut out = lines.join("\n");
    out.push('\n');
    let moved = moved::human(table);
    if !moved.is_empty() {
        out.push_str(&format!("\n{moved}"));
    }
    out.push_str("\nChanges:\n");
    for change in &diff.changes {
        out.push_str(&format!(
            "{} {:<44} {:<24} approve: {}\n",
            coloured(change.kind),
            escape::line(&change.subject),
            escape::line(&location(change, git)),
            approvers(change, escape::line)
        ));
        for line in detail_text(change, escape::line) {
            out.push_str(&format!("    {line}\n"));
        }
    }
    if !later.is_empty() {
        out.push_str(&format!("\n{later}"));
    }
    let rest = moved::human_rest(table);
    if !rest.is_empty() {
        out.push_str(&format!("\n{rest}"));
    }
    if let Some(replay) = replay {
        out.push_str(&format!("\n{}", replay.block));
    }
    for n in natives {
        out.push('\n');
        out.push_str(&controls(&n.unified, true));
    }
    out
}

/// The most changes the comment's table of changes lists; a count says how many more.
const MAX_CHANGES: usize = 100;

fn markdown_changes(diff: &Diff, git: &GitRepo) -> String {
    let mut out = String::from("| | change | details | approve | source |\n|---|---|---|---|---|\n");
    for c in diff.changes.iter().take(MAX_CHANGES) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            c.kind.symbol(),
            escape::markdown(&c.subject),
            detail_text(c, escape::markdown).join("<br>"),
            approvers(c, escape::markdown),
            escape::markdown(&location(c, git))
        ));
    }
    if diff.changes.len() > MAX_CHANGES {
        out.push_str(&format!(
            "\n{} more changes: `allot diff --format json` lists every one.\n",
            diff.changes.len() - MAX_CHANGES
        ));
    }
    out
}

/// The simulation's figures and charts, folded.
fn folded_replay(replay: &Replay) -> String {
    format!("\n<details><summary>The simulation in full</summary>\n\n{}\n</details>\n", replay.block)
}

/// The comment: the headline (three lines at most, the what-if's the third), the table of
/// what moved, the changes, the shares at the coming grant boundaries (`later`, rendered);
/// folded, the rest of what moved, the simulation in full and the native diffs.
pub fn markdown(
    diff: &Diff,
    table: &Table,
    later: &str,
    natives: &[NativeDiff],
    git: &GitRepo,
    replay: Option<&Replay>,
) -> String {
    let mut out = String::from("### allot: budget changes\n\n");
    if diff.is_empty() {
        out.push_str(&format!("**{}**\n", diff.summary()));
        if let Some(replay) = replay {
            out.push_str(&format!("\n{}\n{}", replay.line, folded_replay(replay)));
        }
        return out;
    }
    let mut lines = moved::headline(table, &other_changes(diff), escape::markdown);
    lines[0] = format!("**{}**", lines[0]);
    lines.extend(replay.map(|r| r.line.clone()));
    out.push_str(&lines.join("\\\n"));
    out.push('\n');
    let moved = moved::markdown(table);
    if !moved.is_empty() {
        out.push_str(&format!("\n#### What moved (guaranteed GPUs)\n\n{moved}"));
    }
    out.push_str(&format!("\n#### Changes\n\n{}", markdown_changes(diff, git)));
    out.push_str(later);
    out.push_str(&moved::markdown_rest(table));
    if let Some(replay) = replay {
        out.push_str(&folded_replay(replay));
    }
    let mut by_target: BTreeMap<&str, Vec<&NativeDiff>> = BTreeMap::new();
    for n in natives {
        by_target.entry(n.target).or_default().push(n);
    }
    for (target, files) in by_target {
        // The emitted files hold text from the budget files: a fence longer than any run of
        // backticks in them, so that no line closes the block; control characters visible.
        let body: String = files.iter().map(|f| controls(&f.unified, true)).collect();
        let fence = escape::fence(&body);
        out.push_str(&format!(
            "\n<details><summary>{}: {} file{} change</summary>\n\n{fence}diff\n{body}{fence}\n\n</details>\n",
            escape::markdown(target),
            files.len(),
            if files.len() == 1 { "" } else { "s" }
        ));
    }
    truncate(out)
}

/// The fence of the code block still open at the end of `text`, if one is.
fn open_fence(text: &str) -> Option<&str> {
    let mut open: Option<&str> = None;
    for line in text.lines() {
        let ticks = &line[..line.len() - line.trim_start_matches('`').len()];
        match open {
            None if ticks.len() >= 3 => open = Some(ticks),
            Some(fence) if line.trim_end() == fence => open = None,
            _ => {}
        }
    }
    open
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
    if let Some(fence) = open_fence(&kept).map(str::to_string) {
        kept.push_str(&format!("\n{fence}\n"));
    }
    // Close the folds it cut into, so that the note shows (the comment's own folds: a line
    // that opens one, a line that closes one).
    let opened = kept.lines().filter(|l| l.starts_with("<details>")).count();
    let closed = kept.lines().filter(|l| l.trim_end() == "</details>").count();
    kept.push_str(&"\n</details>\n".repeat(opened.saturating_sub(closed)));
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
            escape::line(&c.subject),
            c.kind.word(),
            detail_text(c, escape::line).join("; "),
            approvers(c, escape::line)
        );
        out.push_str(&github::annotation("notice", &properties, &message));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_report_closes_the_code_block_it_cuts() {
        let report = format!("intro\n\n````diff\n{}````\n", "+User - '```':Fairshare=1\n".repeat(5_000));
        assert_eq!(open_fence(&report), None);
        let cut = truncate(report);
        assert!(
            cut.len() < MARKDOWN_LIMIT + 500 && cut.contains("> **Truncated**"),
            "{}",
            &cut[cut.len() - 300..]
        );
        assert_eq!(open_fence(&cut), None, "{}", &cut[cut.len() - 300..]);
        assert_eq!(open_fence("a\n```diff\n+x\n"), Some("```"));
    }

    #[test]
    fn a_cut_report_closes_the_fold_it_cuts() {
        // A fold closed, then one opened whose code block the cut falls in: the block and
        // the open fold are closed, and the note comes after both.
        let report = format!(
            "<details><summary>a</summary>\n\nx\n</details>\n\n<details><summary>b</summary>\n\n```diff\n{}```\n</details>\n",
            "+line\n".repeat(20_000)
        );
        let cut = truncate(report);
        let tail = &cut[cut.len() - 200..];
        let (fence, fold, note) = (
            tail.find("\n```\n").unwrap(),
            tail.find("</details>").unwrap(),
            tail.find("> **Truncated**").unwrap(),
        );
        assert!(fence < fold && fold < note, "{tail}");
        assert_eq!(cut.matches("</details>").count(), 2, "{tail}");
    }
}
