//! The HTML report (the `html` feature): one self-contained page (inline CSS and SVG, no
//! script, nothing fetched) for one audit or several side by side, with a headline per run,
//! four charts drawn by plotters as inline SVG (used against entitled GPU-hours per budget
//! over time, delivered ratio per budget, wait distribution per contract, utilisation per
//! cluster) and the figures as tables.

use std::collections::BTreeMap;

use allot_compiler::escape::html as escape;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    LeafBudget, MAX_RATIO_BARS, Timeline, hex, leaf_budgets, rgb, series_name, several_clusters, shorten,
    trim_number, utilisation_colours, whole_figures, window_utilisation,
};
use crate::figures::{Audit, BudgetFigures, Span};
use crate::render::wait;

/// The width of every chart, in pixels (the page scales them down when narrower).
const CHART_WIDTH: u32 = 1160;
/// Small multiples of used against entitled GPU-hours: the budgets with most entitlement.
const MAX_USAGE_PANELS: usize = 12;
const MAX_WAIT_PANELS: usize = 6;
const PANEL_COLUMNS: usize = 3;
const FONT: &str = "sans-serif";

const INK: RGBColor = RGBColor(34, 34, 34);
const MUTED: RGBColor = RGBColor(110, 110, 110);
const GRID: RGBColor = RGBColor(228, 228, 228);

/// Wait buckets: upper bounds in seconds (exclusive; the first is "no wait at all").
const WAIT_BUCKETS: [(u32, &str); 7] = [
    (1, "0"),
    (60, "<1m"),
    (600, "1–10m"),
    (3_600, "10m–1h"),
    (21_600, "1–6h"),
    (86_400, "6–24h"),
    (u32::MAX, "≥1d"),
];

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// One self-contained HTML page (inline CSS and SVG, no script, nothing fetched) for the
/// audits of `runs`, each with its name.
pub fn html(title: &str, runs: &[(&str, &Audit)]) -> String {
    let timeline = Timeline::of(runs);
    let budgets = leaf_budgets(runs);
    let labels = BudgetLabels::new(&budgets);
    let mut page = String::new();
    page.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<main>\n<h1>{}</h1>\n",
        escape(title),
        escape(title)
    ));
    page.push_str(&run_list(runs));
    page.push_str("<section class=\"headlines\">\n");
    for (index, (name, audit)) in runs.iter().enumerate() {
        page.push_str(&headline(index, name, audit));
    }
    page.push_str("</section>\n");

    page.push_str("<h2>Charts</h2>\n");
    let shown = budgets.len().min(MAX_USAGE_PANELS);
    let usage_note = if budgets.len() > shown {
        format!(
            "The {shown} of {} leaf budgets with the most entitled GPU-hours; the table below has them all.",
            budgets.len()
        )
    } else if budgets.is_empty() {
        "No leaf budget had use or entitlement.".to_string()
    } else {
        format!("Every leaf budget ({}), the most entitled first.", budgets.len())
    };
    section(
        &mut page,
        "usage",
        &format!(
            "{usage_note} Solid: GPU-hours used in the window; dashed: GPU-hours the budget was \
             entitled to (its fair share of the cluster while it had demand). The last window ends with the \
             trace, so it may be shorter than the others."
        ),
        &usage_chart(runs, &timeline, &budgets[..shown], &labels),
    );
    let entitled: Vec<&LeafBudget> = budgets.iter().filter(|b| b.entitled > 0.0).collect();
    let bars = entitled.len().min(MAX_RATIO_BARS);
    section(
        &mut page,
        "delivered",
        &format!(
            "Delivered over entitled GPU-hours over the whole trace: how much of its share a budget got \
             when it asked for it. {}",
            if entitled.len() > bars {
                format!("The {bars} of {} entitled leaf budgets with the most entitlement.", entitled.len())
            } else {
                "Leaf budgets with an entitlement, the most entitled first.".to_string()
            }
        ),
        &ratio_chart(runs, &entitled[..bars], &labels),
    );
    section(
        &mut page,
        "waits",
        "Share of the contract's started jobs by wait (start − submit), in widening buckets.",
        &waits_chart(runs),
    );
    section(
        &mut page,
        "utilisation",
        "GPU-hours used over the cluster's GPU-hours in each window.",
        &utilisation_chart(runs, &timeline),
    );
    page.push_str("<section id=\"figures\">\n<h2>Figures</h2>\n");
    for (index, (name, audit)) in runs.iter().enumerate() {
        page.push_str(&figures_tables(index, name, audit, runs.len() > 1));
    }
    page.push_str(
        "</section>\n<footer>Made by allot from the audit of a trace against the budgets. \
         Percentiles are nearest-rank; GPU-hours are integrated exactly between events.</footer>\n\
         </main>\n</body>\n</html>\n",
    );
    page
}

const STYLE: &str = "\
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #222; font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 32px 0 6px; }
h3 { font-size: 16px; margin: 20px 0 6px; }
p.runs, p.note, footer { color: #555; margin: 4px 0 12px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.headlines { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 16px; margin-top: 16px; }
.card { background: #fff; border: 1px solid #ddd; border-top: 5px solid #888; border-radius: 6px; padding: 12px 16px; }
.card h3 { margin: 0 0 6px; }
.card .big { font-size: 30px; font-weight: 700; margin: 0; }
.card .big span { font-size: 15px; font-weight: 400; color: #555; }
.card p { margin: 4px 0; }
figure { margin: 0 0 20px; background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px; }
figcaption { color: #555; font-size: 14px; padding: 4px 16px 8px; }
svg.chart { display: block; max-width: 100%; height: auto; }
.chart-error { color: #b00; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; margin-bottom: 12px; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 4px 8px; text-align: left; white-space: nowrap; }
th { background: #eef0f3; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.inner td { color: #555; font-style: italic; }
tr.unbudgeted td { color: #a33; }
tfoot td { font-weight: 700; border-top: 2px solid #ccc; }
.table-wrap { overflow-x: auto; }
footer { margin-top: 32px; font-size: 13px; }
";

/// Chart labels of the budgets: the project path, with the cluster when there are several.
struct BudgetLabels {
    with_cluster: bool,
}

impl BudgetLabels {
    fn new(budgets: &[LeafBudget]) -> BudgetLabels {
        BudgetLabels { with_cluster: several_clusters(budgets) }
    }

    fn of(&self, budget: &LeafBudget, max_chars: usize) -> String {
        shorten(&budget.label(self.with_cluster), max_chars)
    }
}

fn colour(index: usize) -> RGBColor {
    let (red, green, blue) = rgb(index);
    RGBColor(red, green, blue)
}

/// GPU-hours for a table: one decimal, thousands grouped.
fn hours(value: f64) -> String {
    let text = format!("{:.1}", value.abs());
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, "0"));
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let sign = if value < 0.0 && text != "0.0" { "-" } else { "" };
    format!("{sign}{grouped}.{fraction}")
}

/// An axis value: 950, 1.2k, 3.4M.
fn compact(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{}M", trim_number(value / 1e6))
    } else if magnitude >= 1e3 {
        format!("{}k", trim_number(value / 1e3))
    } else {
        trim_number(value)
    }
}

fn percent(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "—".to_string(), |r| format!("{:.1}%", r * 100.0))
}

/// A wait, as every output shows it; "—" for none.
fn duration(seconds: Option<u64>) -> String {
    seconds.map_or_else(|| "—".to_string(), wait)
}

fn run_list(runs: &[(&str, &Audit)]) -> String {
    if runs.is_empty() {
        return "<p class=\"runs\">No audit to show.</p>\n".to_string();
    }
    let names: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            format!("<span class=\"swatch\" style=\"background:{}\"></span>{}", hex(i), escape(name))
        })
        .collect();
    format!(
        "<p class=\"runs\">{}: {}</p>\n",
        if runs.len() == 1 { "Run" } else { "Runs" },
        names.join(" &nbsp; ")
    )
}

/// Leaf budgets' whole-trace sums.
struct LeafTotals {
    used: f64,
    entitled: f64,
    delivered: f64,
    budgets: usize,
    started_jobs: usize,
}

fn leaf_totals(audit: &Audit) -> LeafTotals {
    let leaves: Vec<&BudgetFigures> = audit.leaf_budgets().collect();
    LeafTotals {
        used: leaves.iter().map(|b| b.used_gpu_hours).sum(),
        entitled: leaves.iter().map(|b| b.entitled_gpu_hours).sum(),
        delivered: leaves.iter().map(|b| b.delivered_gpu_hours).sum(),
        budgets: leaves.len(),
        started_jobs: leaves.iter().map(|b| b.waits.jobs()).sum(),
    }
}

fn headline(index: usize, name: &str, audit: &Audit) -> String {
    let totals = leaf_totals(audit);
    let ratio = audit.whole.overall_ratio(&audit.leaves);
    let utilisation: Vec<String> = audit
        .whole
        .clusters
        .iter()
        .map(|c| format!("{} {}", escape(&c.cluster), percent(Some(audit.whole.utilisation(c)))))
        .collect();
    let timeline = Timeline::of(&[(name, audit)]);
    format!(
        "<div class=\"card\" style=\"border-top-color:{}\">\n<h3>{}</h3>\n\
         <p class=\"big\">{} <span>of entitled GPU-hours delivered</span></p>\n\
         <p>{} of {} entitled GPU-hours delivered to {} leaf budgets; {} GPU-hours used.</p>\n\
         <p>{} jobs{}; {} windows over {} {}.</p>\n<p>Utilisation: {}.</p>\n</div>\n",
        hex(index),
        escape(name),
        percent(ratio),
        hours(totals.delivered),
        hours(totals.entitled),
        totals.budgets,
        hours(totals.used),
        audit.jobs,
        if audit.skipped_rows > 0 {
            format!(" ({} rows skipped)", audit.skipped_rows)
        } else {
            String::new()
        },
        audit.windows.len(),
        trim_number(if audit.windows.is_empty() { 0.0 } else { timeline.length }),
        timeline.unit,
        if utilisation.is_empty() { "—".to_string() } else { utilisation.join(", ") },
    )
}

/// A chart with its explanation below it (the chart carries its own title).
fn section(page: &mut String, id: &str, note: &str, chart: &str) {
    page.push_str(&format!(
        "<section id=\"{id}\">\n<figure>\n{chart}<figcaption>{}</figcaption>\n</figure>\n</section>\n",
        escape(note)
    ));
}

fn figures_tables(index: usize, name: &str, audit: &Audit, several: bool) -> String {
    let mut out = String::new();
    if several {
        out.push_str(&format!(
            "<h3><span class=\"swatch\" style=\"background:{}\"></span>{}</h3>\n",
            hex(index),
            escape(name)
        ));
    }
    out.push_str(
        "<div class=\"table-wrap\"><table class=\"budgets\">\n<thead><tr><th>Budget</th><th>Cluster</th>\
         <th class=\"num\">Used GPU-h</th><th class=\"num\">Entitled GPU-h</th><th class=\"num\">Delivered GPU-h</th>\
         <th class=\"num\">Delivered</th><th class=\"num\">Started jobs</th><th class=\"num\">Wait p50</th>\
         <th class=\"num\">p90</th><th class=\"num\">p99</th></tr></thead>\n<tbody>\n",
    );
    for b in audit.whole.budgets.iter().filter(|b| b.has_activity() || audit.is_leaf(&b.project)) {
        let children = format!("{}/", b.project);
        let kind = if audit.is_leaf(&b.project) {
            "leaf"
        } else if b.entitled_gpu_hours > 0.0
            || audit.whole.budgets.iter().any(|c| c.project.starts_with(&children))
        {
            "inner"
        } else {
            "unbudgeted"
        };
        let depth = b.project.matches('/').count();
        out.push_str(&format!(
            "<tr class=\"{kind}\"><td style=\"padding-left:{}px\">{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            8 + 16 * depth,
            escape(&b.project),
            escape(&b.cluster),
            hours(b.used_gpu_hours),
            hours(b.entitled_gpu_hours),
            hours(b.delivered_gpu_hours),
            percent(b.delivered_ratio()),
            // Jobs are counted on leaves only.
            if kind == "inner" { "—".to_string() } else { b.waits.jobs().to_string() },
            duration(b.waits.percentile(50.0)),
            duration(b.waits.percentile(90.0)),
            duration(b.waits.percentile(99.0)),
        ));
    }
    let totals = leaf_totals(audit);
    out.push_str(&format!(
        "</tbody>\n<tfoot><tr><td>All {} leaf budgets</td><td></td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td></td><td></td><td></td></tr></tfoot>\n</table></div>\n",
        totals.budgets,
        hours(totals.used),
        hours(totals.entitled),
        hours(totals.delivered),
        percent(audit.whole.overall_ratio(&audit.leaves)),
        totals.started_jobs,
    ));

    out.push_str(
        "<div class=\"table-wrap\"><table class=\"contracts\">\n<thead><tr><th>Contract</th>\
         <th class=\"num\">Started jobs</th><th class=\"num\">Wait p50</th><th class=\"num\">p90</th>\
         <th class=\"num\">p99</th></tr></thead>\n<tbody>\n",
    );
    for c in &audit.whole.contracts {
        out.push_str(&format!(
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td></tr>\n",
            escape(if c.contract.is_empty() { "(none)" } else { &c.contract }),
            c.waits.jobs(),
            duration(c.waits.percentile(50.0)),
            duration(c.waits.percentile(90.0)),
            duration(c.waits.percentile(99.0)),
        ));
    }
    out.push_str("</tbody>\n</table></div>\n");

    out.push_str(
        "<div class=\"table-wrap\"><table class=\"clusters\">\n<thead><tr><th>Cluster</th><th class=\"num\">GPUs</th>\
         <th class=\"num\">Used GPU-h</th><th class=\"num\">Utilisation</th></tr></thead>\n<tbody>\n",
    );
    for c in &audit.whole.clusters {
        out.push_str(&format!(
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
            escape(&c.cluster),
            c.gpus,
            hours(c.used_gpu_hours),
            percent(Some(audit.whole.utilisation(c))),
        ));
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// Draws one SVG chart into a string, tagged with `id` and the class `chart`; a chart that
/// cannot be drawn becomes a paragraph saying why (with the same id).
fn svg(id: &str, title: &str, size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    let mut buffer = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut buffer, size).into_drawing_area();
        draw(&root).and_then(|()| root.present().map_err(Into::into))
    };
    match drawn {
        Ok(()) => buffer.replacen(
            "<svg ",
            &format!("<svg id=\"{id}\" class=\"chart\" role=\"img\" aria-label=\"{}\" ", escape(title)),
            1,
        ),
        Err(error) => format!(
            "<p class=\"chart-error\" id=\"{id}\">{} could not be drawn: {}</p>\n",
            escape(title),
            escape(&error.to_string())
        ),
    }
}

fn text_style(size: f64, colour: RGBColor, hpos: HPos, vpos: VPos) -> TextStyle<'static> {
    let mut style = TextStyle::from((FONT, size).into_font()).pos(Pos::new(hpos, vpos));
    style.color = colour.to_backend_color();
    style
}

/// How a legend entry is drawn.
#[derive(Clone, Copy)]
enum Mark {
    Line,
    Dashed,
    Block,
}

/// Draws the chart's title and legend on top of `root`; returns the area below them.
fn header<'a>(root: &Area<'a>, title: &str, legend: &[(String, RGBColor, Mark)]) -> Drawn<Area<'a>> {
    root.fill(&WHITE)?;
    // Lay the legend out first: it wraps, and the header's height depends on its lines.
    let mut placed = Vec::new();
    let (mut x, mut line) = (16_i32, 0_i32);
    for (label, colour, mark) in legend {
        let label = shorten(label, 40);
        let width = 34 + (label.chars().count() as i32) * 8 + 22;
        if x + width > CHART_WIDTH as i32 - 16 && x > 16 {
            x = 16;
            line += 1;
        }
        placed.push((x, line, label, *colour, *mark));
        x += width;
    }
    let height = if legend.is_empty() { 46 } else { 52 + 22 * (line + 1) };
    let (top, body) = root.split_vertically(height);
    top.draw(&Text::new(
        title.to_string(),
        (16, 12),
        TextStyle::from((FONT, 24).into_font().style(FontStyle::Bold)).color(&INK),
    ))?;
    for (x, line, label, colour, mark) in placed {
        let y = 52 + 22 * line;
        match mark {
            Mark::Line => top.draw(&PathElement::new(vec![(x, y), (x + 28, y)], colour.stroke_width(3)))?,
            Mark::Dashed => {
                for start in [x, x + 11, x + 22] {
                    top.draw(&PathElement::new(vec![(start, y), (start + 6, y)], colour.stroke_width(3)))?;
                }
            }
            Mark::Block => top.draw(&Rectangle::new([(x + 4, y - 7), (x + 24, y + 7)], colour.filled()))?,
        }
        top.draw(&Text::new(label, (x + 34, y), text_style(16.0, INK, HPos::Left, VPos::Center)))?;
    }
    Ok(body)
}

/// A message in the middle of an empty chart.
fn empty(area: &Area<'_>, message: &str) -> Drawn {
    let (width, height) = area.dim_in_pixel();
    area.draw(&Text::new(
        message.to_string(),
        ((width / 2) as i32, (height / 2) as i32),
        text_style(18.0, MUTED, HPos::Center, VPos::Center),
    ))?;
    Ok(())
}

/// A line's points: (time in the timeline's units, value).
type Steps = Vec<(f64, f64)>;

/// A per-window value as steps: flat over each window.
fn steps(timeline: &Timeline, windows: &[Span], value: impl Fn(&Span) -> f64) -> Steps {
    windows
        .iter()
        .flat_map(|w| {
            let v = value(w);
            [(timeline.at(w.start), v), (timeline.at(w.end), v)]
        })
        .collect()
}

/// Earlier series are drawn wider, so a later one lying on top leaves them visible.
fn line_width(series: usize, count: usize) -> u32 {
    2 + count.saturating_sub(series + 1).min(3) as u32
}

/// An axis' upper end: a little above the largest value, never zero.
fn ceiling(largest: f64, floor: f64) -> f64 {
    if largest.is_finite() && largest > 0.0 { (largest * 1.12).max(floor) } else { floor }
}

fn panel_grid(panels: usize) -> (usize, usize) {
    let columns = panels.clamp(1, PANEL_COLUMNS);
    (panels.div_ceil(columns).max(1), columns)
}

fn usage_chart(
    runs: &[(&str, &Audit)],
    timeline: &Timeline,
    budgets: &[LeafBudget],
    labels: &BudgetLabels,
) -> String {
    const TITLE: &str = "Used and entitled GPU-hours per window";
    let (rows, columns) = panel_grid(budgets.len());
    let legend: Vec<(String, RGBColor, Mark)> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, (name, _))| {
            let prefix = if runs.len() > 1 { format!("{name}: ") } else { String::new() };
            [
                (format!("{prefix}used"), colour(i), Mark::Line),
                (format!("{prefix}entitled"), colour(i), Mark::Dashed),
            ]
        })
        .collect();
    let height = 100 + 250 * rows as u32;
    svg("chart-usage", TITLE, (CHART_WIDTH, height), |root| {
        let body = header(root, TITLE, &legend)?;
        if budgets.is_empty() {
            return empty(&body, "No leaf budget had use or entitlement.");
        }
        let panels = body.split_evenly((rows, columns));
        for (budget, area) in budgets.iter().zip(&panels) {
            let series: Vec<(Steps, Steps)> = runs
                .iter()
                .map(|(_, audit)| {
                    let value = |w: &Span, of: fn(&BudgetFigures) -> f64| {
                        w.budgets.iter().find(|b| budget.matches(b)).map_or(0.0, of)
                    };
                    (
                        steps(timeline, &audit.windows, |w| value(w, |b| b.used_gpu_hours)),
                        steps(timeline, &audit.windows, |w| value(w, |b| b.entitled_gpu_hours)),
                    )
                })
                .collect();
            let largest =
                series.iter().flat_map(|(u, e)| u.iter().chain(e)).map(|p| p.1).fold(0.0_f64, f64::max);
            let mut chart = ChartBuilder::on(area)
                .caption(labels.of(budget, 44), TextStyle::from((FONT, 17).into_font()).color(&INK))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(56)
                .build_cartesian_2d(0.0..timeline.length.max(1e-9), 0.0..ceiling(largest, 1.0))?;
            chart
                .configure_mesh()
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .axis_style(MUTED)
                .x_labels(6)
                .y_labels(5)
                .x_label_formatter(&|v| trim_number(*v))
                .y_label_formatter(&|v| compact(*v))
                .label_style(TextStyle::from((FONT, 14).into_font()).color(&INK))
                .axis_desc_style(TextStyle::from((FONT, 14).into_font()).color(&MUTED))
                .x_desc(timeline.description())
                .y_desc("GPU-hours")
                .draw()?;
            for (i, (used, entitled)) in series.into_iter().enumerate() {
                let width = line_width(i, runs.len());
                chart.draw_series(LineSeries::new(used, colour(i).stroke_width(width)))?;
                chart.draw_series(DashedLineSeries::new(entitled, 7, 5, colour(i).stroke_width(width)))?;
            }
        }
        Ok(())
    })
}

fn ratio_chart(runs: &[(&str, &Audit)], budgets: &[&LeafBudget], labels: &BudgetLabels) -> String {
    const TITLE: &str = "Delivered ratio per budget";
    let legend: Vec<(String, RGBColor, Mark)> =
        runs.iter().enumerate().map(|(i, (name, _))| (name.to_string(), colour(i), Mark::Block)).collect();
    let bar_height = 16;
    let row = (runs.len().max(1) as u32 * bar_height + 12).max(26);
    let height = 150 + row * budgets.len().max(4) as u32;
    let names: Vec<String> = budgets.iter().map(|b| labels.of(b, 36)).collect();
    let label_width =
        names.iter().map(|n| n.chars().count() as u32 * 8 + 20).max().unwrap_or(80).clamp(80, 320);
    svg("chart-delivered", TITLE, (CHART_WIDTH, height), |root| {
        let body = header(root, TITLE, if runs.len() > 1 { &legend } else { &[] })?;
        if budgets.is_empty() {
            return empty(&body, "No leaf budget was entitled to GPU-hours.");
        }
        let count = budgets.len() as f64;
        let largest = runs
            .iter()
            .flat_map(|(_, audit)| budgets.iter().filter_map(|b| whole_figures(audit, b)?.delivered_ratio()))
            .fold(1.0_f64, f64::max);
        let mut chart = ChartBuilder::on(&body)
            .margin(10)
            .margin_right(56)
            .x_label_area_size(46)
            .y_label_area_size(label_width)
            .build_cartesian_2d(0.0..largest, 0.0..count)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(MUTED)
            .x_labels(11)
            .x_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .label_style(TextStyle::from((FONT, 14).into_font()).color(&INK))
            .axis_desc_style(TextStyle::from((FONT, 14).into_font()).color(&MUTED))
            .x_desc("delivered / entitled GPU-hours, whole trace")
            .draw()?;
        // The most entitled budget on top: budget i spans [count - i - 1, count - i].
        let group = 0.7;
        for (i, (budget, name)) in budgets.iter().zip(&names).enumerate() {
            let bottom = count - i as f64 - 1.0;
            chart.draw_series(std::iter::once(
                EmptyElement::at((0.0, bottom + 0.5))
                    + Text::new(name.clone(), (-10, 0), text_style(15.0, INK, HPos::Right, VPos::Center)),
            ))?;
            let bar = group / runs.len().max(1) as f64;
            for (r, (_, audit)) in runs.iter().enumerate() {
                let top = bottom + 0.5 + group / 2.0 - bar * r as f64;
                let (low, middle) = (top - bar * 0.9, top - bar / 2.0);
                let ratio = whole_figures(audit, budget).and_then(BudgetFigures::delivered_ratio);
                let text = match ratio {
                    Some(ratio) => {
                        chart.draw_series(std::iter::once(Rectangle::new(
                            [(0.0, low), (ratio, top)],
                            colour(r).filled(),
                        )))?;
                        format!("{:.0}%", ratio * 100.0)
                    }
                    None => "no entitlement".to_string(),
                };
                chart.draw_series(std::iter::once(
                    EmptyElement::at((ratio.unwrap_or(0.0), middle))
                        + Text::new(text, (5, 0), text_style(13.0, INK, HPos::Left, VPos::Center)),
                ))?;
            }
        }
        Ok(())
    })
}

/// The contracts with started jobs, the busiest first.
fn busiest_contracts(runs: &[(&str, &Audit)]) -> Vec<String> {
    let mut jobs: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, audit) in runs {
        for c in &audit.whole.contracts {
            let slot = jobs.entry(&c.contract).or_insert(0);
            *slot = (*slot).max(c.waits.jobs());
        }
    }
    let mut contracts: Vec<(&str, usize)> = jobs.into_iter().filter(|&(_, n)| n > 0).collect();
    contracts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    contracts.into_iter().map(|(c, _)| c.to_string()).collect()
}

/// The share of `waits` in each bucket.
fn wait_shares(waits: &[u32]) -> [f64; WAIT_BUCKETS.len()] {
    let mut counts = [0_usize; WAIT_BUCKETS.len()];
    for &wait in waits {
        let bucket =
            WAIT_BUCKETS.iter().position(|&(bound, _)| wait < bound).unwrap_or(WAIT_BUCKETS.len() - 1);
        counts[bucket] += 1;
    }
    let total = waits.len().max(1) as f64;
    counts.map(|n| n as f64 / total)
}

fn waits_chart(runs: &[(&str, &Audit)]) -> String {
    const TITLE: &str = "Wait distribution per contract";
    let contracts = busiest_contracts(runs);
    let shown = &contracts[..contracts.len().min(MAX_WAIT_PANELS)];
    let (rows, columns) = panel_grid(shown.len());
    let legend: Vec<(String, RGBColor, Mark)> =
        runs.iter().enumerate().map(|(i, (name, _))| (name.to_string(), colour(i), Mark::Block)).collect();
    let height = 100 + 270 * rows as u32;
    let note = if contracts.len() > shown.len() {
        format!("{TITLE} (the {} busiest of {} contracts)", shown.len(), contracts.len())
    } else {
        TITLE.to_string()
    };
    svg("chart-waits", TITLE, (CHART_WIDTH, height), |root| {
        let body = header(root, &note, if runs.len() > 1 { &legend } else { &[] })?;
        if shown.is_empty() {
            return empty(&body, "No job started: there are no waits.");
        }
        let panels = body.split_evenly((rows, columns));
        for (contract, area) in shown.iter().zip(&panels) {
            let waits: Vec<&[u32]> = runs
                .iter()
                .map(|(_, audit)| {
                    audit
                        .whole
                        .contracts
                        .iter()
                        .find(|c| &c.contract == contract)
                        .map_or(&[][..], |c| c.waits.values())
                })
                .collect();
            let shares: Vec<[f64; WAIT_BUCKETS.len()]> = waits.iter().map(|w| wait_shares(w)).collect();
            let largest = shares.iter().flatten().fold(0.0_f64, |a, &b| a.max(b));
            let counts: Vec<String> = waits.iter().map(|w| w.len().to_string()).collect();
            let caption = format!(
                "{} · {} jobs",
                shorten(if contract.is_empty() { "(none)" } else { contract }, 28),
                counts.join("/")
            );
            let buckets = WAIT_BUCKETS.len() as f64;
            let mut chart = ChartBuilder::on(area)
                .caption(caption, TextStyle::from((FONT, 17).into_font()).color(&INK))
                .margin(10)
                .x_label_area_size(46)
                .y_label_area_size(52)
                .build_cartesian_2d(0.0..buckets, 0.0..ceiling(largest, 0.1).min(1.0))?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(0)
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .axis_style(MUTED)
                .y_labels(5)
                .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
                .label_style(TextStyle::from((FONT, 14).into_font()).color(&INK))
                .axis_desc_style(TextStyle::from((FONT, 14).into_font()).color(&MUTED))
                .x_desc("wait (start − submit)")
                .y_desc("jobs")
                .draw()?;
            for (b, (_, label)) in WAIT_BUCKETS.iter().enumerate() {
                chart.draw_series(std::iter::once(
                    EmptyElement::at((b as f64 + 0.5, 0.0))
                        + Text::new(
                            label.to_string(),
                            (0, 6),
                            text_style(13.0, INK, HPos::Center, VPos::Top),
                        ),
                ))?;
            }
            let width = 0.8 / runs.len().max(1) as f64;
            for (r, share) in shares.iter().enumerate() {
                chart.draw_series(share.iter().enumerate().filter(|(_, s)| **s > 0.0).map(|(b, &s)| {
                    let left = b as f64 + 0.1 + width * r as f64;
                    Rectangle::new([(left, 0.0), (left + width * 0.92, s)], colour(r).filled())
                }))?;
            }
        }
        Ok(())
    })
}

fn utilisation_chart(runs: &[(&str, &Audit)], timeline: &Timeline) -> String {
    const TITLE: &str = "Cluster utilisation per window";
    let mut series = Vec::new();
    for (name, audit) in runs {
        for cluster in &audit.whole.clusters {
            let points = steps(timeline, &audit.windows, |w| window_utilisation(w, &cluster.cluster));
            series.push((series_name(name, &cluster.cluster, runs, audit), points));
        }
    }
    let colours = utilisation_colours(runs);
    let legend: Vec<(String, RGBColor, Mark)> =
        series.iter().zip(&colours).map(|((name, _), &c)| (name.clone(), colour(c), Mark::Line)).collect();
    let has_windows = runs.iter().any(|(_, audit)| !audit.windows.is_empty());
    svg("chart-utilisation", TITLE, (CHART_WIDTH, 460), |root| {
        let body = header(root, TITLE, &legend)?;
        if !has_windows {
            return empty(&body, "The audit has no windows.");
        }
        let largest =
            series.iter().flat_map(|(_, points)| points.iter().map(|p| p.1)).fold(1.0_f64, f64::max);
        let mut chart = ChartBuilder::on(&body)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(46)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..timeline.length.max(1e-9), 0.0..largest * 1.05)?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(MUTED)
            .x_labels(12)
            .y_labels(6)
            .x_label_formatter(&|v| trim_number(*v))
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .label_style(TextStyle::from((FONT, 14).into_font()).color(&INK))
            .axis_desc_style(TextStyle::from((FONT, 14).into_font()).color(&MUTED))
            .x_desc(timeline.description())
            .y_desc("utilisation")
            .draw()?;
        for (i, ((_, points), &c)) in series.iter().zip(&colours).enumerate() {
            let style = colour(c).stroke_width(line_width(i, series.len()));
            chart.draw_series(LineSeries::new(points.iter().copied(), style))?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::audit;
    use crate::figures::ClusterFigures;
    use crate::report::markdown_charts;
    use crate::report::mermaid::unique;
    use crate::trace::{Format, Reader};
    use allot_compiler::test_support::model;

    const BUDGETS: &str = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
        contract batch min-runtime=\"1h\" default=#true\ncontract debug min-runtime=\"0s\"\n\
        project a share=1\nproject b share=1\n";

    fn audited(trace: &str) -> Audit {
        let model = model(BUDGETS);
        let mut reader = Reader::new(trace.as_bytes(), Format::Csv, "").unwrap();
        audit(&model, std::iter::from_fn(move || reader.next_job()), 3_600, false).unwrap()
    }

    fn sample() -> Audit {
        audited(
            "id,project,gpus,submit,start,end,contract\n1,a,10,0,0,3600,batch\n\
             2,b,5,1800,3600,5400,debug\n3,a,2,4000,4100,9000,debug\n",
        )
    }

    fn hostile() -> Audit {
        let mut audit = sample();
        for span in std::iter::once(&mut audit.whole).chain(&mut audit.windows) {
            for b in &mut span.budgets {
                if b.project == "a" {
                    b.project = "<script>alert('a')</script>&".into();
                }
            }
            for c in &mut span.clusters {
                c.cluster = "c\"><img src=x>".into();
            }
            for b in &mut span.budgets {
                b.cluster = "c\"><img src=x>".into();
            }
        }
        for leaf in &mut audit.leaves {
            if leaf == "a" {
                *leaf = "<script>alert('a')</script>&".into();
            }
        }
        audit
    }

    #[test]
    fn names_are_escaped() {
        let audit = hostile();
        let page = html("<b>title</b>", &[("run <1>", &audit)]);
        assert!(!page.contains("<script>") && !page.contains("<img") && !page.contains("<b>title"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;a&#39;)&lt;/script&gt;&amp;"));
        assert!(page.contains("<title>&lt;b&gt;title&lt;/b&gt;</title>"));
        assert!(page.contains("run &lt;1&gt;"));
        // In the SVG too (plotters escapes its text itself).
        assert!(page.contains("&lt;script&gt;alert(&apos;a&apos;)"), "{page}");
        let markdown = markdown_charts(&[("<b>", &audit)]);
        assert!(!markdown.contains('<') && !markdown.contains("\"><"), "{markdown}");
    }

    #[test]
    fn one_run_has_four_charts_and_the_figures() {
        let audit = sample();
        let page = html("Audit", &[("budget policy", &audit)]);
        assert_eq!(page.matches("<svg ").count(), 4, "{page}");
        for id in ["chart-usage", "chart-delivered", "chart-waits", "chart-utilisation"] {
            assert_eq!(page.matches(&format!("<svg id=\"{id}\" class=\"chart\"")).count(), 1, "{id}");
        }
        for title in
            ["Used and entitled GPU-hours per window", "Delivered ratio per budget", "Cluster utilisation"]
        {
            assert!(page.contains(&format!(">\n{title}")) || page.contains(&format!(">{title}")), "{title}");
        }
        assert!(!page.contains("class=\"chart-error\"") && !page.contains("<script"));
        // b: entitled 2.5 + 2.5, delivered 2.5: 50%; its one wait 1800 s.
        assert!(page.contains("<td class=\"num\">50.0%</td>"), "{page}");
        assert!(page.contains("30m00s"));
    }

    #[test]
    fn two_runs_are_side_by_side() {
        let (policy, baseline) = (sample(), audited("id,project,gpus,submit,start,end\n1,a,10,0,0,3600\n"));
        let runs = [("budget policy", &policy), ("priority baseline", &baseline)];
        let page = html("Policy against baseline", &runs);
        assert_eq!(page.matches("<svg ").count(), 4);
        assert!(page.contains("budget policy: used") && page.contains("priority baseline: entitled"));
        assert_eq!(page.matches("<table class=\"budgets\">").count(), 2);
        // Both runs' series colours are drawn.
        assert!(page.contains("#1F77B4") && page.contains("#FF7F0E"));
        let markdown = markdown_charts(&runs);
        assert_eq!(markdown.matches("```mermaid").count(), 2, "{markdown}");
        assert!(markdown.contains("x-axis [\"a (1)\", \"a (2)\", \"b (1)\", \"b (2)\"]"), "{markdown}");
        assert_eq!(markdown.matches("    bar [").count(), 2);
        assert!(
            markdown.contains("Series: blue (1) budget policy, orange (2) priority baseline."),
            "{markdown}"
        );
    }

    #[test]
    fn output_is_deterministic() {
        let (one, two) = (sample(), sample());
        assert_eq!(html("t", &[("x", &one), ("y", &two)]), html("t", &[("x", &two), ("y", &one)]));
        assert_eq!(markdown_charts(&[("x", &one)]), markdown_charts(&[("x", &two)]));
    }

    #[test]
    fn mermaid_blocks_are_well_formed() {
        let audit = sample();
        let markdown = markdown_charts(&[("run", &audit)]);
        assert!(markdown.contains("xychart-beta horizontal\n    title \"Delivered ratio per budget (%)\"\n"));
        assert!(markdown.contains("    x-axis [\"a\", \"b\"]\n"), "{markdown}");
        assert!(
            markdown.contains("    x-axis \"hours since t = 0 s\" [\"0h\", \"1h\", \"2h\"]\n"),
            "{markdown}"
        );
        assert_eq!(markdown.matches("    line [").count(), 1);
        assert_eq!(markdown.matches("```").count(), 4);
    }

    #[test]
    fn empty_audits_do_not_panic() {
        let nothing = Audit::default();
        let clusters_only = Audit {
            whole: Span {
                start: 0,
                end: 0,
                clusters: vec![ClusterFigures { cluster: "c".into(), gpus: 0, used_gpu_hours: 0.0 }],
                ..Span::default()
            },
            windows: vec![Span { start: 5, end: 5, ..Span::default() }],
            ..Audit::default()
        };
        for runs in
            [vec![], vec![("empty", &nothing)], vec![("empty", &nothing), ("clusters", &clusters_only)]]
        {
            let page = html("Nothing", &runs);
            assert_eq!(page.matches("<svg ").count(), 4, "{page}");
            assert!(!page.contains("class=\"chart-error\""), "{page}");
            let markdown = markdown_charts(&runs);
            assert!(markdown.contains("no delivered-ratio chart"), "{markdown}");
        }
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(hours(1_234_567.891), "1,234,567.9");
        assert_eq!(hours(0.04), "0.0");
        assert_eq!(compact(1_500.0), "1.5k");
        assert_eq!(trim_number(2.0), "2");
        assert_eq!(duration(Some(3_725)), "1h02m");
        assert_eq!(duration(None), "—");
        assert_eq!(wait_shares(&[0, 30, 30, 100_000]), [0.25, 0.5, 0.0, 0.0, 0.0, 0.0, 0.25]);
        assert_eq!(unique(vec!["a".into(), "a".into(), "a~2".into()]), ["a", "a~2", "a~2~2"]);
    }
}
