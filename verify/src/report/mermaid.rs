//! The key charts as Mermaid `xychart-beta` blocks, which GitHub draws in Markdown: the
//! delivered ratio per leaf budget and the utilisation per window, for one audit or several
//! side by side. They need no plotters, so `allot replay simulate --format markdown` and
//! `allot diff --replay` have them without the `html` feature.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    LeafBudget, MAX_RATIO_BARS, PALETTE, Timeline, hex, leaf_budgets, series_name, several_clusters, shorten,
    utilisation_colours, whole_figures, window_utilisation,
};
use crate::figures::{Audit, BudgetFigures};

/// The key charts as Mermaid `xychart-beta` blocks (GitHub renders them in Markdown):
/// delivered ratio per leaf budget (one bar series per run) and utilisation per window (one
/// line per run and cluster). Each block is followed by a line naming its series' colours.
pub fn markdown_charts(runs: &[(&str, &Audit)]) -> String {
    let timeline = Timeline::of(runs);
    let mut out = String::new();
    let budgets: Vec<LeafBudget> =
        leaf_budgets(runs).into_iter().filter(|b| b.entitled > 0.0).take(MAX_RATIO_BARS).collect();
    let run_labels = unique(runs.iter().map(|(name, _)| mermaid_text(name, 40)).collect());
    let palette = mermaid_palette(&(0..runs.len()).collect::<Vec<_>>());
    if budgets.is_empty() {
        out.push_str("_No leaf budget was entitled to GPU-hours: no delivered-ratio chart._\n\n");
    } else {
        let names: Vec<String> = budgets.iter().map(|b| b.label(several_clusters(&budgets))).collect();
        let names = unique(names.iter().map(|n| mermaid_text(n, 18)).collect());
        // Mermaid draws several bar series over one another; one category per budget and run
        // (a series is 0 in the other runs' categories) keeps the bars side by side. Runs are
        // numbered in the labels, named in the caption.
        let categories: Vec<String> = if runs.len() > 1 {
            unique(
                names
                    .iter()
                    .flat_map(|name| (1..=runs.len()).map(move |run| format!("{name} ({run})")))
                    .collect(),
            )
        } else {
            names
        };
        // Horizontal: budget names read along the bars instead of colliding under them.
        out.push_str(&format!(
            "```mermaid\n{palette}xychart-beta horizontal\n    title \"Delivered ratio per budget (%)\"\n"
        ));
        out.push_str(&format!("    x-axis [{}]\n", quoted_list(&categories)));
        out.push_str("    y-axis \"delivered %\" 0 --> 100\n");
        for (index, (_, audit)) in runs.iter().enumerate() {
            let mut values = Vec::new();
            for budget in &budgets {
                let ratio = whole_figures(audit, budget)
                    .and_then(BudgetFigures::delivered_ratio)
                    .map_or(0.0, |r| r * 100.0);
                if runs.len() > 1 {
                    values.extend((0..runs.len()).map(|slot| if slot == index { ratio } else { 0.0 }));
                } else {
                    values.push(ratio);
                }
            }
            out.push_str(&format!("    bar [{}]\n", number_list(&values)));
        }
        out.push_str("```\n\n");
        out.push_str(&format!(
            "Delivered over entitled GPU-hours per leaf budget, the most entitled first{}.{}\n\n",
            if budgets.len() == MAX_RATIO_BARS {
                format!(" (at most {MAX_RATIO_BARS})")
            } else {
                String::new()
            },
            series_caption(&run_labels, &(0..runs.len()).collect::<Vec<_>>(), true)
        ));
    }

    let starts: BTreeSet<i64> =
        runs.iter().flat_map(|(_, audit)| audit.windows.iter().map(|w| w.start)).collect();
    if starts.is_empty() {
        out.push_str("_The audit has no windows: no utilisation chart._\n");
        return out;
    }
    let categories = unique(starts.iter().map(|&t| timeline.short(t)).collect());
    let mut series_labels = Vec::new();
    let mut lines = Vec::new();
    for (run_label, (_, audit)) in run_labels.iter().zip(runs) {
        for cluster in &audit.whole.clusters {
            let by_start: BTreeMap<i64, f64> = audit
                .windows
                .iter()
                .map(|w| (w.start, window_utilisation(w, &cluster.cluster) * 100.0))
                .collect();
            lines.push(starts.iter().map(|t| by_start.get(t).copied().unwrap_or(0.0)).collect::<Vec<_>>());
            series_labels.push(series_name(run_label, &mermaid_text(&cluster.cluster, 40), runs, audit));
        }
    }
    if lines.is_empty() {
        out.push_str("_The audit has no clusters: no utilisation chart._\n");
        return out;
    }
    let colours = utilisation_colours(runs);
    let ceiling = lines.iter().flatten().fold(100.0_f64, |a, &b| a.max(b)).ceil();
    out.push_str(&format!(
        "```mermaid\n{}xychart-beta\n    title \"Utilisation per window (%)\"\n",
        mermaid_palette(&colours)
    ));
    out.push_str(&format!(
        "    x-axis \"{}\" [{}]\n",
        mermaid_text(&timeline.description(), 40),
        quoted_list(&categories)
    ));
    out.push_str(&format!("    y-axis \"utilisation %\" 0 --> {ceiling}\n"));
    for line in &lines {
        out.push_str(&format!("    line [{}]\n", number_list(line)));
    }
    out.push_str("```\n\n");
    out.push_str(&format!(
        "GPU-hours used over the cluster's GPU-hours, per window.{}\n",
        series_caption(&series_labels, &colours, false)
    ));
    out
}

/// A series' colour, named for captions.
fn colour_name(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()].1
}

/// Text safe inside a Mermaid quoted label (and a Markdown code block): letters, digits and
/// a few punctuation marks; anything else becomes `_`.
fn mermaid_text(text: &str, max_chars: usize) -> String {
    let safe: String = text
        .chars()
        .map(|c| if c.is_alphanumeric() || " -_./:()+=@·".contains(c) { c } else { '_' })
        .collect();
    shorten(safe.trim(), max_chars)
}

/// `labels` made distinct (shortening can make two alike): later duplicates get `~2`, `~3`.
pub(super) fn unique(labels: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    labels
        .into_iter()
        .map(|label| {
            let mut candidate = label.clone();
            let mut n = 2;
            while !seen.insert(candidate.clone()) {
                candidate = format!("{label}~{n}");
                n += 1;
            }
            candidate
        })
        .collect()
}

fn quoted_list(labels: &[String]) -> String {
    labels.iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(", ")
}

fn number_list(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.1}")).collect::<Vec<_>>().join(", ")
}

/// The init directive giving the series the page's colours (palette indices, in order).
fn mermaid_palette(series: &[usize]) -> String {
    let colours: Vec<String> = series.iter().map(|&i| hex(i)).collect();
    format!(
        "%%{{init: {{\"themeVariables\": {{\"xyChart\": {{\"plotColorPalette\": \"{}\"}}}}}}}}%%\n",
        colours.join(", ")
    )
}

/// " Series: blue (1) base, orange (2) proposed." (numbered as in the labels, if asked).
fn series_caption(names: &[String], colours: &[usize], numbered: bool) -> String {
    if names.len() < 2 {
        return String::new();
    }
    let parts: Vec<String> = names
        .iter()
        .zip(colours)
        .enumerate()
        .map(|(n, (name, &c))| {
            let number = if numbered { format!(" ({})", n + 1) } else { String::new() };
            format!("{}{number} {}", colour_name(c), markdown_text(name))
        })
        .collect();
    format!(" Series: {}.", parts.join(", "))
}

/// Text that Markdown shows as it is: punctuation backslash-escaped.
fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
