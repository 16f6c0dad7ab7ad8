//! The figures as pictures, for one audit or several side by side (a budget policy and a
//! priority baseline, a base and a proposed budget): [`markdown_charts`] draws the key
//! charts as Mermaid `xychart-beta` blocks for a pull-request comment, and, with the `html`
//! feature (plotters), `html` renders one self-contained HTML page of charts and tables.
//! Here is what both share: the time axis, the leaf budgets in the order they are shown,
//! the series and their colours.
//!
//! Pure functions: no I/O and no clock, so the same audits give the same bytes. Every name
//! shown comes from users (projects, clusters, contracts, runs) and is escaped.

#[cfg(feature = "html")]
mod html;
mod mermaid;

use std::collections::{BTreeMap, BTreeSet};

use crate::figures::{Audit, BudgetFigures, Span};

#[cfg(feature = "html")]
pub use html::html;
pub use mermaid::markdown_charts;

/// The most budgets a delivered-ratio chart shows.
const MAX_RATIO_BARS: usize = 30;

/// Series colours, one per run (or per run and cluster), with their names for captions.
const PALETTE: [((u8, u8, u8), &str); 8] = [
    ((31, 119, 180), "blue"),
    ((255, 127, 14), "orange"),
    ((44, 160, 44), "green"),
    ((214, 39, 40), "red"),
    ((148, 103, 189), "purple"),
    ((140, 86, 75), "brown"),
    ((227, 119, 194), "pink"),
    ((23, 190, 207), "cyan"),
];

/// The red, green and blue of a series' colour.
fn rgb(index: usize) -> (u8, u8, u8) {
    PALETTE[index % PALETTE.len()].0
}

/// A series' colour as `#rrggbb`.
fn hex(index: usize) -> String {
    let (red, green, blue) = rgb(index);
    format!("#{red:02x}{green:02x}{blue:02x}")
}

/// The time axis shared by every run's windows.
struct Timeline {
    origin: i64,
    seconds_per_unit: f64,
    unit: &'static str,
    /// From the origin to the last window's end, in units (the page's axes).
    #[cfg(feature = "html")]
    length: f64,
}

impl Timeline {
    fn of(runs: &[(&str, &Audit)]) -> Timeline {
        let windows = || runs.iter().flat_map(|(_, audit)| audit.windows.iter());
        let origin = windows().map(|w| w.start).min().unwrap_or(0);
        let end = windows().map(|w| w.end).max().unwrap_or(origin);
        let seconds = (end.saturating_sub(origin)).max(1) as f64;
        // Days once the trace is longer than three of them; hours read better below.
        let (unit, seconds_per_unit) =
            if seconds > 3.0 * 86_400.0 { ("days", 86_400.0) } else { ("hours", 3_600.0) };
        Timeline {
            origin,
            seconds_per_unit,
            unit,
            #[cfg(feature = "html")]
            length: seconds / seconds_per_unit,
        }
    }

    fn at(&self, seconds: i64) -> f64 {
        seconds.saturating_sub(self.origin) as f64 / self.seconds_per_unit
    }

    /// The axis' description: units since the first window's start.
    fn description(&self) -> String {
        // Small origins are relative times (traces in seconds from 0), not dates.
        if self.origin >= 1_000_000_000
            && let Ok(instant) = jiff::Timestamp::from_second(self.origin)
        {
            format!("{} since {}", self.unit, instant.strftime("%Y-%m-%d %H:%M UTC"))
        } else {
            format!("{} since t = {} s", self.unit, self.origin)
        }
    }

    /// A short label for an instant: "7d", "1.5h".
    fn short(&self, seconds: i64) -> String {
        format!("{}{}", trim_number(self.at(seconds)), &self.unit[..1])
    }
}

/// A leaf budget on a cluster, with its largest whole-trace entitlement among the runs.
#[derive(Clone, Debug)]
struct LeafBudget {
    project: String,
    cluster: String,
    entitled: f64,
}

impl LeafBudget {
    fn label(&self, with_cluster: bool) -> String {
        if with_cluster { format!("{} ({})", self.project, self.cluster) } else { self.project.clone() }
    }

    fn matches(&self, figures: &BudgetFigures) -> bool {
        figures.project == self.project && figures.cluster == self.cluster
    }
}

/// The leaf budgets of every run, the most entitled first (then by name, for stable output).
fn leaf_budgets(runs: &[(&str, &Audit)]) -> Vec<LeafBudget> {
    let mut entitled: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for (_, audit) in runs {
        for figures in audit.leaf_budgets() {
            let slot = entitled.entry((&figures.project, &figures.cluster)).or_insert(0.0);
            *slot = slot.max(figures.entitled_gpu_hours);
        }
    }
    let mut budgets: Vec<LeafBudget> = entitled
        .into_iter()
        .map(|((project, cluster), entitled)| LeafBudget {
            project: project.to_string(),
            cluster: cluster.to_string(),
            entitled,
        })
        .collect();
    budgets.sort_by(|a, b| {
        b.entitled
            .total_cmp(&a.entitled)
            .then_with(|| (&a.project, &a.cluster).cmp(&(&b.project, &b.cluster)))
    });
    budgets
}

/// Whether the budgets are on several clusters (then their labels name the cluster).
fn several_clusters(budgets: &[LeafBudget]) -> bool {
    budgets.iter().map(|b| &b.cluster).collect::<BTreeSet<_>>().len() > 1
}

fn whole_figures<'a>(audit: &'a Audit, budget: &LeafBudget) -> Option<&'a BudgetFigures> {
    audit.whole.budgets.iter().find(|b| budget.matches(b))
}

/// At most `max_chars` characters, with an ellipsis when cut.
fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// A number without trailing zeros: 7, 1.5, 0.25.
fn trim_number(value: f64) -> String {
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".to_string() } else { text.to_string() }
}

fn window_utilisation(window: &Span, cluster: &str) -> f64 {
    window.clusters.iter().find(|c| c.cluster == cluster).map_or(0.0, |c| window.utilisation(c))
}

/// A series' name: the cluster with one run, the run with one cluster, else both.
fn series_name(run: &str, cluster: &str, runs: &[(&str, &Audit)], audit: &Audit) -> String {
    match (runs.len() > 1, audit.whole.clusters.len() > 1) {
        (false, _) => cluster.to_string(),
        (true, false) => run.to_string(),
        (true, true) => format!("{run} · {cluster}"),
    }
}

/// The palette index of each utilisation series (runs in order, each run's clusters in
/// order): the run's colour when no run has several clusters, else one colour per series.
fn utilisation_colours(runs: &[(&str, &Audit)]) -> Vec<usize> {
    let by_run = runs.iter().all(|(_, audit)| audit.whole.clusters.len() <= 1);
    let per_run =
        runs.iter().enumerate().flat_map(|(r, (_, audit))| audit.whole.clusters.iter().map(move |_| r));
    per_run.enumerate().map(|(series, run)| if by_run { run } else { series }).collect()
}
