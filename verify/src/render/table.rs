//! A table built once, as rows of typed cells, and rendered three ways: as aligned text for a
//! terminal, as Markdown for a pull request, and as an array of JSON objects for programs.
//! Its columns say which outputs show them and how text lays them out; its cells say what
//! they hold, so that each output writes a value its own way (GPU-hours with one decimal in
//! text, every digit in JSON; a wait's percentiles as one cell in text, three keys in JSON).

use std::borrow::Cow;
use std::fmt;

use serde_json::{Map, Value, json};

use super::wait;
use crate::figures::Waits;

/// Where a cell sits in its column: numbers to the right, words to the left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}

/// How text lays out a column.
#[derive(Clone, Copy, Debug)]
struct Layout<'a> {
    /// What comes before the cell: spaces, or words such as ` GPUs  used `.
    lead: &'a str,
    /// Its title, on a titled table's first line.
    title: &'a str,
    /// The width the cell is padded to (0: none); `None`: its widest cell's or its title's.
    width: Option<usize>,
}

/// One column: its alignment and what each output makes of it (`None`: left out).
#[derive(Clone, Copy, Debug)]
pub struct Column<'a> {
    align: Align,
    text: Option<Layout<'a>>,
    heading: Option<&'a str>,
    /// The JSON key (a [`Cell::Waits`] has three: `<key>_p50_s`, `<key>_p90_s`, `<key>_p99_s`).
    key: Option<&'a str>,
}

impl<'a> Column<'a> {
    /// A column of words, in no output yet.
    pub const fn left() -> Column<'a> {
        Column { align: Align::Left, text: None, heading: None, key: None }
    }

    /// A column of numbers, in no output yet.
    pub const fn right() -> Column<'a> {
        Column { align: Align::Right, ..Column::left() }
    }

    /// In text, after `lead`, padded to `width` characters, under `title` in a titled table.
    pub const fn text(self, lead: &'a str, title: &'a str, width: usize) -> Column<'a> {
        Column { text: Some(Layout { lead, title, width: Some(width) }), ..self }
    }

    /// In text, after `lead`, as wide as its widest cell or `title`.
    pub const fn fitted(self, lead: &'a str, title: &'a str) -> Column<'a> {
        Column { text: Some(Layout { lead, title, width: None }), ..self }
    }

    /// In Markdown, under `heading`.
    pub const fn heading(self, heading: &'a str) -> Column<'a> {
        Column { heading: Some(heading), ..self }
    }

    /// In JSON, as `key`.
    pub const fn key(self, key: &'a str) -> Column<'a> {
        Column { key: Some(key), ..self }
    }
}

/// What a cell holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell<'a> {
    /// Words: a name, a label.
    Text(Cow<'a, str>),
    /// Jobs, GPUs, preemptions.
    Count(u64),
    /// GPU-hours: one decimal in text.
    GpuHours(f64),
    /// A fraction, as a percentage with one decimal in text; `None` when there was nothing
    /// to divide by.
    Ratio(Option<f64>),
    /// A measure to compare with a threshold: three decimals in text.
    Number(f64),
    /// GPUs, not always whole: one decimal in text.
    Gpus(f64),
    /// An instant, in epoch seconds: RFC 3339 in UTC in text, the seconds in JSON.
    Time(i64),
    /// Nearest-rank p50, p90 and p99 of waits (and in text, how many are censored).
    Waits(&'a Waits),
    /// Whether an expectation is met: `ok` or `FAIL` in text, `met` or `**not met**` in
    /// Markdown.
    Met(bool),
    /// Nothing to show: `-` in text, null in JSON.
    Absent,
}

impl<'a> Cell<'a> {
    /// Words, borrowed or owned.
    pub fn text(text: impl Into<Cow<'a, str>>) -> Cell<'a> {
        Cell::Text(text.into())
    }

    /// The cell in Markdown: words (names from the budgets, the traces, a revision's label)
    /// escaped for Markdown and HTML, so that none adds a row, a link or a mention.
    fn markdown(&self) -> String {
        match self {
            Cell::Text(text) => allot_compiler::escape::markdown(text),
            Cell::Met(true) => "met".to_string(),
            Cell::Met(false) => "**not met**".to_string(),
            other => other.to_string(),
        }
    }

    /// Adds the cell to a JSON object under `key`.
    pub fn json(&self, key: &str, object: &mut Map<String, Value>) {
        let value = match self {
            Cell::Waits(waits) => {
                for p in [50, 90, 99] {
                    object.insert(format!("{key}_p{p}_s"), json!(waits.percentile(f64::from(p))));
                }
                return;
            }
            Cell::Text(text) => json!(text),
            Cell::Count(count) => json!(count),
            Cell::GpuHours(value) | Cell::Number(value) | Cell::Gpus(value) => json!(value),
            Cell::Time(seconds) => json!(seconds),
            Cell::Ratio(ratio) => json!(ratio),
            Cell::Met(met) => json!(met),
            Cell::Absent => Value::Null,
        };
        object.insert(key.to_string(), value);
    }
}

/// The cell as text shows it (and Markdown, but for [`Cell::Met`]).
impl fmt::Display for Cell<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Text(text) => f.write_str(text),
            Cell::Count(count) => write!(f, "{count}"),
            Cell::GpuHours(hours) | Cell::Gpus(hours) => write!(f, "{hours:.1}"),
            Cell::Time(seconds) => f.write_str(&super::time(*seconds)),
            Cell::Ratio(Some(ratio)) => write!(f, "{:.1}%", ratio * 100.0),
            Cell::Number(value) => write!(f, "{value:.3}"),
            Cell::Waits(waits) => {
                let [p50, p90, p99] =
                    [50.0, 90.0, 99.0].map(|p| waits.percentile(p).map_or("-".into(), wait));
                write!(f, "{p50} / {p90} / {p99}")?;
                match waits.censored() {
                    0 => Ok(()),
                    n => write!(f, " ({n} censored)"),
                }
            }
            Cell::Met(true) => f.write_str("ok"),
            Cell::Met(false) => f.write_str("FAIL"),
            Cell::Ratio(None) | Cell::Absent => f.write_str("-"),
        }
    }
}

/// Columns and rows of cells, one cell per column.
pub struct Table<'a> {
    columns: Vec<Column<'a>>,
    rows: Vec<Vec<Cell<'a>>>,
    /// Text starts with a line of the columns' titles.
    titled: bool,
    /// The first column names a row and every other is a run: cells unlike the first run's
    /// are marked (a `*` after the row in text, bold in Markdown).
    compared: bool,
}

impl<'a> Table<'a> {
    pub fn new(columns: Vec<Column<'a>>, rows: Vec<Vec<Cell<'a>>>) -> Table<'a> {
        Table { columns, rows, titled: false, compared: false }
    }

    /// The same table, its titles printed over it in text.
    pub fn titled(self) -> Table<'a> {
        Table { titled: true, ..self }
    }

    /// The same table, as a comparison of runs.
    pub fn compared(self) -> Table<'a> {
        Table { compared: true, ..self }
    }

    /// A line per row, each cell after its column's lead and padded to its width.
    pub fn text(&self) -> String {
        let layouts: Vec<(usize, Align, Layout<'a>)> = self
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.text.map(|layout| (i, c.align, layout)))
            .collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                layouts.iter().map(|&(i, ..)| row.get(i).map_or_else(String::new, Cell::to_string)).collect()
            })
            .collect();
        let widths: Vec<usize> = layouts
            .iter()
            .enumerate()
            .map(|(shown, (_, _, layout))| {
                layout.width.unwrap_or_else(|| {
                    let cells = rows.iter().filter_map(|row| row.get(shown)).map(|c| c.chars().count());
                    cells.chain([layout.title.chars().count()]).max().unwrap_or(0)
                })
            })
            .collect();
        let line = |cells: &[String], marked: bool| {
            let mut line = String::new();
            for ((cell, width), (_, align, layout)) in cells.iter().zip(&widths).zip(&layouts) {
                line.push_str(layout.lead);
                line.push_str(&match align {
                    Align::Left => format!("{cell:<width$}"),
                    Align::Right => format!("{cell:>width$}"),
                });
            }
            line.push_str(if marked { "  *\n" } else { "\n" });
            line
        };
        let mut out = String::new();
        if self.titled {
            let titles: Vec<String> = layouts.iter().map(|(_, _, layout)| layout.title.to_string()).collect();
            out.push_str(&line(&titles, false));
        }
        for cells in &rows {
            out.push_str(&line(cells, self.compared && runs_differ(cells)));
        }
        out
    }

    /// A heading line, an alignment line and a line per row.
    pub fn markdown(&self) -> String {
        let shown: Vec<(usize, Align, &str)> =
            self.columns.iter().enumerate().filter_map(|(i, c)| c.heading.map(|h| (i, c.align, h))).collect();
        let mut out =
            markdown_line(shown.iter().map(|(_, _, heading)| allot_compiler::escape::markdown(heading)));
        out.push('|');
        for (_, align, _) in &shown {
            out.push_str(if *align == Align::Right { "---:|" } else { "---|" });
        }
        out.push('\n');
        for row in &self.rows {
            let cells: Vec<String> =
                shown.iter().map(|&(i, ..)| row.get(i).map_or_else(String::new, Cell::markdown)).collect();
            let first_run = cells.get(1).cloned();
            let marked = cells.into_iter().enumerate().map(|(i, cell)| {
                if self.compared && i > 0 && Some(&cell) != first_run.as_ref() {
                    format!("**{cell}**")
                } else {
                    cell
                }
            });
            out.push_str(&markdown_line(marked));
        }
        out
    }

    /// An object per row, with the keyed columns.
    pub fn json(&self) -> Value {
        let objects = self.rows.iter().map(|row| {
            let mut object = Map::new();
            for (column, cell) in self.columns.iter().zip(row) {
                if let Some(key) = column.key {
                    cell.json(key, &mut object);
                }
            }
            Value::Object(object)
        });
        Value::Array(objects.collect())
    }
}

/// Whether a compared row's runs (its cells after the first) are not all alike.
fn runs_differ(cells: &[String]) -> bool {
    match cells.get(1..).and_then(<[String]>::split_first) {
        Some((first, others)) => others.iter().any(|c| c != first),
        None => false,
    }
}

/// `| a | b |`; an empty cell is `| |`.
fn markdown_line(cells: impl Iterator<Item = String>) -> String {
    let mut line = String::from("|");
    for cell in cells {
        if !cell.is_empty() {
            line.push(' ');
            line.push_str(&cell);
        }
        line.push_str(" |");
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table<'static> {
        let columns = vec![
            Column::left().fitted("", "").heading(""),
            Column::right().fitted("  ", "base").heading("base").key("base"),
            Column::right().fitted("   ", "head").heading("head").key("head"),
        ];
        let rows = vec![
            vec![Cell::Text("jobs".into()), Cell::Count(12), Cell::Count(12)],
            vec![Cell::Text("delivered".into()), Cell::Ratio(Some(0.5)), Cell::Ratio(None)],
        ];
        Table::new(columns, rows)
    }

    #[test]
    fn text_pads_and_marks() {
        let text = table().titled().compared().text();
        assert_eq!(text, "            base   head\njobs          12     12\ndelivered  50.0%      -  *\n");
        let fixed = Table::new(
            vec![Column::left().text("  ", "NAME", 6), Column::right().text(" ", "N", 4).key("n")],
            vec![vec![Cell::Text("a".into()), Cell::GpuHours(2.0)]],
        );
        assert_eq!(fixed.titled().text(), "  NAME      N\n  a       2.0\n");
    }

    #[test]
    fn markdown_bolds_what_differs_from_the_first_run() {
        assert_eq!(
            table().compared().markdown(),
            "| | base | head |\n|---|---:|---:|\n| jobs | 12 | 12 |\n| delivered | 50.0% | **-** |\n"
        );
    }

    #[test]
    fn json_keeps_every_digit() {
        let mut waits = Waits::default();
        waits.push(30);
        let table = Table::new(
            vec![Column::left().key("wait"), Column::right().key("hours"), Column::right().text("", "", 0)],
            vec![vec![Cell::Waits(&waits), Cell::GpuHours(0.125), Cell::Met(false)]],
        );
        assert_eq!(
            table.json(),
            json!([{"wait_p50_s": 30, "wait_p90_s": 30, "wait_p99_s": 30, "hours": 0.125}])
        );
        assert_eq!(Cell::Met(false).markdown(), "**not met**");
        assert_eq!(Cell::text("a|b\n<img>").markdown(), "a\\|b\\\\n&lt;img&gt;");
    }
}
