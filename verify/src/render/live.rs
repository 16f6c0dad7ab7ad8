//! What `allot status` prints: every budget of every cluster now, as a tree with a bar of
//! its running GPUs against its entitlement, as Markdown, or as JSON.

use serde_json::{Value, json};

use super::table::{Cell, Column, Table};
use crate::live::{BudgetNow, ClusterNow, Ranking, Standing, Status};

/// The columns of every scheduler's budgets.
const BUDGETS: [Column<'static>; 12] = [
    Column::left().fitted("  ", "BUDGET").heading("budget").key("budget"),
    Column::right().fitted(" ", "SHARE").heading("share").key("share"),
    Column::right().fitted(" ", "GUARANTEED").heading("guaranteed GPUs").key("guaranteed_gpus"),
    Column::right().fitted(" ", "RUNNING").heading("running GPUs").key("running_gpus"),
    Column::right().key("running_jobs"),
    Column::right().fitted(" ", "PENDING").heading("pending GPUs").key("pending_gpus"),
    Column::right().key("pending_jobs"),
    Column::right().fitted(" ", "ENTITLED").heading("entitled GPUs").key("entitled_gpus"),
    Column::left().fitted("  ", ""),
    Column::left().fitted(" ", "STANDING").heading("standing").key("standing"),
    Column::right().fitted(" ", "PROTECTED").heading("protected GPUs").key("protected_gpus"),
    Column::left().fitted(" ", "UNTIL").heading("protected until").key("protected_until"),
];

/// Slurm's: the Fair Tree figures.
const FAIR_TREE: [Column<'static>; 2] = [
    Column::right().fitted(" ", "USAGE/SHARE").heading("window usage / share").key("usage_over_share"),
    Column::right().key("level_fs"),
];

/// Kueue's: the quota reserved and borrowed, and Fair Sharing's weighted share.
const KUEUE: [Column<'static>; 3] = [
    Column::right().fitted(" ", "RESERVED").heading("reserved GPUs").key("reserved_gpus"),
    Column::right().fitted(" ", "BORROWED").heading("borrowed GPUs").key("borrowed_gpus"),
    Column::right().fitted(" ", "WEIGHTED SHARE").heading("weighted share").key("weighted_share"),
];

/// The width of a bar, in characters.
const BAR: usize = 12;

/// Running GPUs against the entitlement, on a scale of the larger of the two: `█` running
/// within it, `▒` running beyond it, `░` entitled and not running.
fn bar(b: &BudgetNow) -> String {
    let (running, entitled) = (b.running_gpus as f64, b.entitled_gpus);
    let scale = running.max(entitled);
    if scale <= 0.0 {
        return String::new();
    }
    let cells = |gpus: f64| ((gpus / scale) * BAR as f64).round() as usize;
    let within = cells(running.min(entitled));
    let beyond = cells(running) - within.min(cells(running));
    let unused = BAR.saturating_sub(within + beyond).min(cells(entitled).saturating_sub(within));
    format!("{}{}{}", "█".repeat(within), "▒".repeat(beyond), "░".repeat(unused))
}

fn row(b: &BudgetNow, indent: bool, kueue: bool) -> Vec<Cell<'_>> {
    let name = if indent { format!("{}{}", "  ".repeat(b.depth), leaf(&b.path)) } else { b.path.clone() };
    let window = b.window;
    let mut row = vec![
        Cell::text(name),
        Cell::Ratio(Some(b.share)),
        Cell::Count(b.guaranteed_gpus),
        Cell::Count(b.running_gpus),
        Cell::Count(b.running_jobs as u64),
        Cell::Count(b.pending_gpus),
        Cell::Count(b.pending_jobs as u64),
        Cell::Gpus(b.entitled_gpus),
        Cell::text(bar(b)),
        Cell::text(b.standing.word()),
        Cell::Count(b.protected_gpus),
        b.protected_until.map_or(Cell::Absent, Cell::Time),
    ];
    let count = |n: Option<u64>| n.map_or(Cell::Absent, Cell::Count);
    if kueue {
        let queue = b.queue;
        row.extend([
            count(queue.and_then(|q| q.reserved_gpus)),
            count(queue.and_then(|q| q.borrowed_gpus)),
            count(queue.and_then(|q| q.weighted_share).map(|w| u64::try_from(w).unwrap_or(0))),
        ]);
    } else {
        row.extend([
            window.map_or(Cell::Absent, |w| {
                Cell::Ratio((w.norm_shares > 0.0).then(|| w.effective_usage / w.norm_shares))
            }),
            window.and_then(|w| w.level_fs).map_or(Cell::Absent, Cell::Number),
        ]);
    }
    row
}

/// A project path's last name.
fn leaf(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn table(cluster: &ClusterNow, ranking: Ranking, indent: bool) -> Table<'_> {
    let kueue = ranking == Ranking::Kueue;
    let mut columns = BUDGETS.to_vec();
    columns.extend_from_slice(if kueue { &KUEUE[..] } else { &FAIR_TREE[..] });
    Table::new(columns, cluster.budgets.iter().map(|b| row(b, indent, kueue)).collect()).titled()
}

fn headline(cluster: &ClusterNow) -> String {
    let top = cluster.budgets.iter().filter(|b| b.depth == 0);
    let (running, pending) = top.fold((0, 0), |(r, p), b| (r + b.running_gpus, p + b.pending_gpus));
    let over = cluster.budgets.iter().filter(|b| b.standing == Standing::Over).count();
    let under = cluster.budgets.iter().filter(|b| b.standing == Standing::Under).count();
    let budgets = |n: usize| if n == 1 { "1 budget".to_string() } else { format!("{n} budgets") };
    format!(
        "cluster {}: {} GPUs, {running} running, {pending} pending; {} over their entitlement, {} under",
        cluster.name,
        cluster.gpus,
        budgets(over),
        budgets(under)
    )
}

/// For a terminal: each cluster's headline and its budgets as a tree.
pub fn text(status: &Status) -> String {
    let mut out = format!("Budgets at {}\n", Cell::Time(status.now));
    for cluster in &status.clusters {
        out.push_str(&format!("\n{}\n", headline(cluster)));
        out.push_str(&table(cluster, status.ranking, true).text());
    }
    out.push_str(LEGEND);
    if status.ranking == Ranking::Kueue {
        out.push_str(LEGEND_KUEUE);
    } else {
        out.push_str(LEGEND_FAIR_TREE);
    }
    out
}

const LEGEND: &str = "
ENTITLED: the cluster's GPUs divided now among the budgets with work running or pending
  (bar: █ running within it, ▒ running beyond it, ░ entitled and not running).
PROTECTED UNTIL: when the last running job's minimum runtime ends.
";

const LEGEND_FAIR_TREE: &str =
    "USAGE/SHARE: usage over the fair-share window against the share (above 100%: more than it).\n";

const LEGEND_KUEUE: &str =
    "RESERVED, BORROWED: GPUs of the ClusterQueue's admitted workloads, and of them beyond its quota.
WEIGHTED SHARE: Kueue's Fair Sharing measure of borrowing for the weight (0: within quota;
  the highest is preempted first and served last).
";

/// For a pull request or a chat: each cluster's headline and its budgets.
pub fn markdown(status: &Status) -> String {
    let mut out = format!("### allot: budgets at {}\n", Cell::Time(status.now));
    for cluster in &status.clusters {
        out.push_str(&format!("\n**{}**\n\n", allot_compiler::escape::markdown(&headline(cluster))));
        out.push_str(&table(cluster, status.ranking, false).markdown());
    }
    out
}

/// For programs: `{now, clusters: [{cluster, gpus, budgets: [...]}]}`, times in epoch
/// seconds.
pub fn json(status: &Status) -> Value {
    let clusters: Vec<Value> = status
        .clusters
        .iter()
        .map(|c| {
            let mut budgets = table(c, status.ranking, false).json();
            if let Value::Array(rows) = &mut budgets {
                for (value, b) in rows.iter_mut().zip(&c.budgets) {
                    value["depth"] = json!(b.depth);
                }
            }
            json!({ "cluster": c.name, "gpus": c.gpus, "budgets": budgets })
        })
        .collect();
    json!({ "now": status.now, "clusters": clusters })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(running: u64, entitled: f64) -> BudgetNow {
        BudgetNow {
            path: "a".into(),
            depth: 0,
            share: 0.5,
            guaranteed_gpus: 4,
            running_gpus: running,
            running_jobs: 1,
            pending_gpus: 0,
            pending_jobs: 0,
            entitled_gpus: entitled,
            standing: Standing::Within,
            protected_gpus: 0,
            protected_until: None,
            window: None,
            queue: None,
        }
    }

    #[test]
    fn a_bar_shows_running_against_entitled() {
        // 8 running, 3.2 entitled: on a scale of 8, 3.2 is 4.8 of 12 cells (5), the rest beyond.
        assert_eq!(bar(&budget(8, 3.2)), "█████▒▒▒▒▒▒▒");
        // Nothing running of 4.8: all entitled and unused.
        assert_eq!(bar(&budget(0, 4.8)), "░░░░░░░░░░░░");
        // 3 running of 6: half and half.
        assert_eq!(bar(&budget(3, 6.0)), "██████░░░░░░");
        assert_eq!(bar(&budget(0, 0.0)), "");
    }
}
