//! Fidelity reports: what of the policy a scheduler carries, approximates or loses. Each
//! target builds a [`Report`] from the model (rows for the aspects of the policy, then
//! notes such as per-contract tables); [`Report::to_markdown`] renders it as the
//! `FIDELITY.md` that `allot build` writes beside the target's files and prints.

use allot_compiler::ir::Model;

/// The contracts' reserves as a report names them (`` `debug` (8 GPUs) ``); none when no
/// contract holds one.
pub fn reserves(model: &Model) -> Option<String> {
    let held: Vec<String> = model
        .contracts
        .iter()
        .filter_map(|c| Some(format!("`{}` ({} GPUs)", c.name, c.reserve_gpus?)))
        .collect();
    (!held.is_empty()).then(|| held.join(", "))
}

/// The row of a target that does not emit the contracts' reserves, when a contract holds
/// one; `where_they_go` says what becomes of the reserved GPUs on it.
pub fn reserve_lost(model: &Model, where_they_go: &str) -> Option<Row> {
    reserves(model).map(|held| {
        Row::lost(
            "reserve per contract",
            format!(
                "not emitted: nothing holds GPUs for {held}, whose jobs queue and are preempted as other jobs; {where_they_go}"
            ),
        )
    })
}

/// How far integers a scheduler carries are from the shares they stand for: the worst
/// relative error of one sibling's part of the whole (`carried[i] / sum` against
/// `wanted[i] / sum`), 0 when every ratio is kept. A sibling carried as 0 has lost all of
/// its share (error 1).
pub fn ratio_error(wanted: &[f64], carried: &[u64]) -> f64 {
    let wanted_sum: f64 = wanted.iter().sum();
    let carried_sum: f64 = carried.iter().map(|&c| c as f64).sum();
    if wanted_sum <= 0.0 || !wanted_sum.is_finite() {
        return 0.0;
    }
    wanted
        .iter()
        .zip(carried)
        .filter(|(w, _)| **w > 0.0)
        .map(|(w, &c)| {
            let want = w / wanted_sum;
            let got = if carried_sum > 0.0 { c as f64 / carried_sum } else { 0.0 };
            (got - want).abs() / want
        })
        .fold(0.0, f64::max)
}

/// Ratios kept within this relative error count as carried: decimal fractions such as
/// 1/3 cannot be written exactly, and a part in 10,000 changes no scheduling decision.
pub const RATIO_TOLERANCE: f64 = 1e-4;

/// `0.5%`, `3.2%`, `120%`: a relative error as the fidelity reports say it.
pub fn percent_error(error: f64) -> String {
    let percent = error * 100.0;
    if percent >= 10.0 { format!("{percent:.0}%") } else { format!("{percent:.2}%") }
}

/// How faithfully a scheduler carries one aspect of the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fidelity {
    Exact,
    Approximated,
    Lost,
}

impl Fidelity {
    pub fn as_str(self) -> &'static str {
        match self {
            Fidelity::Exact => "exact",
            Fidelity::Approximated => "approximated",
            Fidelity::Lost => "lost",
        }
    }
}

/// One aspect of the policy on the scheduler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The aspect, as the policy names it: `shares`, `minimum runtime per contract`.
    pub aspect: String,
    /// The scheduler's native form of it.
    pub native: String,
    pub fidelity: Fidelity,
    /// How far the fidelity holds: exact *to one GPU*, lost *on the queues*.
    pub qualifier: Option<String>,
    /// What it takes: approximated: *jobs must carry the annotation*.
    pub caveat: Option<String>,
}

impl Row {
    pub fn exact(aspect: impl Into<String>, native: impl Into<String>) -> Row {
        Row::new(aspect, native, Fidelity::Exact)
    }

    pub fn approximated(aspect: impl Into<String>, native: impl Into<String>) -> Row {
        Row::new(aspect, native, Fidelity::Approximated)
    }

    pub fn lost(aspect: impl Into<String>, native: impl Into<String>) -> Row {
        Row::new(aspect, native, Fidelity::Lost)
    }

    fn new(aspect: impl Into<String>, native: impl Into<String>, fidelity: Fidelity) -> Row {
        Row { aspect: aspect.into(), native: native.into(), fidelity, qualifier: None, caveat: None }
    }

    pub fn qualified(self, qualifier: impl Into<String>) -> Row {
        Row { qualifier: Some(qualifier.into()), ..self }
    }

    pub fn caveat(self, caveat: impl Into<String>) -> Row {
        Row { caveat: Some(caveat.into()), ..self }
    }

    /// `exact`, `exact to one GPU`, `approximated: jobs must carry the annotation`.
    fn fidelity_text(&self) -> String {
        let mut text = self.fidelity.as_str().to_string();
        if let Some(qualifier) = &self.qualifier {
            text.push_str(&format!(" {qualifier}"));
        }
        if let Some(caveat) = &self.caveat {
            text.push_str(&format!(": {caveat}"));
        }
        text
    }
}

/// Markdown after the table of rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A second-level heading.
    Heading(String),
    Paragraph(String),
    Table {
        header: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    List(Vec<String>),
}

impl Note {
    pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> Note {
        Note::Table { header: header.iter().map(|h| h.to_string()).collect(), rows }
    }
}

/// What a scheduler makes of the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The scheduler as the title names it: `KAI Scheduler`.
    pub scheduler: &'static str,
    /// Its short name, for the table's column: `on KAI`.
    pub short_name: &'static str,
    pub rows: Vec<Row>,
    /// In order, each after a blank line.
    pub notes: Vec<Note>,
}

impl Report {
    /// The report as `FIDELITY.md`: a title, the table of rows, the notes.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("# {}: what the budgets lose\n\n", self.scheduler);
        let header = ["policy".to_string(), format!("on {}", self.short_name), "fidelity".to_string()];
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| vec![row.aspect.clone(), row.native.clone(), row.fidelity_text()])
            .collect();
        table(&mut out, &header, &rows);
        for note in &self.notes {
            out.push('\n');
            match note {
                Note::Heading(heading) => out.push_str(&format!("## {}\n", one_line(heading))),
                Note::Paragraph(text) => out.push_str(&format!("{}\n", one_line(text))),
                Note::Table { header, rows } => table(&mut out, header, rows),
                Note::List(items) => {
                    for item in items {
                        out.push_str(&format!("- {}\n", one_line(item)));
                    }
                }
            }
        }
        out
    }
}

/// A report's text is Markdown the targets write (code spans, emphasis), with names the
/// checks keep to `[a-z0-9-]`; as a second guard, nothing in it may end its line early.
fn one_line(text: &str) -> String {
    allot_compiler::escape::line(text)
}

/// A table; no cell can end its row or add a column (`|` escaped, line breaks visible).
fn table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    let cell = |text: &String| one_line(text).replace('|', "\\|");
    let line = |cells: &[String]| format!("| {} |\n", cells.iter().map(cell).collect::<Vec<_>>().join(" | "));
    out.push_str(&line(header));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for row in rows {
        out.push_str(&line(row));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_errors() {
        assert_eq!(ratio_error(&[60.0, 40.0], &[3, 2]), 0.0);
        assert!(ratio_error(&[1.0, 1.0, 1.0], &[33334, 33333, 33333]) < RATIO_TOLERANCE);
        assert_eq!(ratio_error(&[1.0, 1e12], &[0, 100_000]), 1.0);
        assert!(ratio_error(&[1.0, 1e12], &[1, 2_147_483_646]) > 400.0);
        assert_eq!(percent_error(0.0123), "1.23%");
        assert_eq!(percent_error(4.5), "450%");
    }
}
