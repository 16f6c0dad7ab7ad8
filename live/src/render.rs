//! What `allot status` prints: every budget of every cluster now, as a tree with a bar of
//! its running GPUs against its entitlement, as Markdown, or as JSON. On a cluster with
//! floors (Slurm), each budget's floor GPUs in use and its GPUs beyond them too.

use allot_verify::render::table::{Cell, Column, Table};
use serde_json::{Value, json};

use crate::standing::{BudgetNow, ClusterNow, Ranking, Standing, Status};

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

/// On a cluster with floors: the GPUs in use of the budget's floors, and its GPUs beyond them
/// (in JSON, `floor_gpus`, `in_floor_gpus` and `over_gpus`, present only where it has a floor).
const FLOORS: [Column<'static>; 2] = [
    Column::right().fitted(" ", "FLOOR").heading("floor GPUs in use"),
    Column::right().fitted(" ", "BEYOND").heading("GPUs beyond the floor"),
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

fn row(b: &BudgetNow, indent: bool, kueue: bool, floors: bool) -> Vec<Cell<'_>> {
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
    if floors {
        row.extend(match b.floor {
            Some(f) => [Cell::text(format!("{} of {}", f.in_floor_gpus, f.gpus)), Cell::Count(f.over_gpus)],
            None => [Cell::Absent, Cell::Absent],
        });
    }
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

/// Whether a budget of the cluster has a floor.
fn has_floors(cluster: &ClusterNow) -> bool {
    cluster.budgets.iter().any(|b| b.floor.is_some())
}

fn table(cluster: &ClusterNow, ranking: Ranking, indent: bool) -> Table<'_> {
    let kueue = ranking == Ranking::Kueue;
    let floors = !kueue && has_floors(cluster);
    let mut columns = BUDGETS.to_vec();
    if floors {
        columns.extend_from_slice(&FLOORS);
    }
    columns.extend_from_slice(if kueue { &KUEUE[..] } else { &FAIR_TREE[..] });
    Table::new(columns, cluster.budgets.iter().map(|b| row(b, indent, kueue, floors)).collect()).titled()
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
        if status.clusters.iter().any(has_floors) {
            out.push_str(LEGEND_FLOORS);
        }
        out.push_str(LEGEND_FAIR_TREE);
    }
    out
}

const LEGEND: &str = "
ENTITLED: the cluster's GPUs divided now among the budgets with work running or pending
  (bar: █ running within it, ▒ running beyond it, ░ entitled and not running).
PROTECTED UNTIL: when the last running job's minimum runtime ends.
";

const LEGEND_FLOORS: &str =
    "FLOOR: GPUs running in the budget's floors (its own and its sub-budgets'), where nothing is
  preempted, of the floors' GPUs.
BEYOND: GPUs of its jobs in the bound partition, beyond the floors: a job in a floor with
  room preempts them once past their protection, the youngest first.
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
/// seconds; a budget with a floor has `floor_gpus`, `in_floor_gpus` and `over_gpus`.
pub fn json(status: &Status) -> Value {
    let clusters: Vec<Value> = status
        .clusters
        .iter()
        .map(|c| {
            let mut budgets = table(c, status.ranking, false).json();
            if let Value::Array(rows) = &mut budgets {
                for (value, b) in rows.iter_mut().zip(&c.budgets) {
                    value["depth"] = json!(b.depth);
                    if let (Some(f), false) = (b.floor, status.ranking == Ranking::Kueue) {
                        value["floor_gpus"] = json!(f.gpus);
                        value["in_floor_gpus"] = json!(f.in_floor_gpus);
                        value["over_gpus"] = json!(f.over_gpus);
                    }
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
            floor: None,
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

    #[test]
    fn floors_show_their_gpus_in_use_and_the_gpus_beyond_them() {
        use crate::standing::{FloorPartition, Holder, status_with_floors};
        use allot_verify::trace::Job;
        // 8 GPUs bound to partition gpu; a and b have floors of 4 (their guaranteed GPUs).
        // b runs 3 + 1 GPUs in its floor and 2 in gpu, started at 500 under batch (protected
        // an hour: until 4,100); a waits for 4 in its floor or gpu.
        let model = allot_compiler::test_support::model(
            "cluster c gpus=8 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=s partition=gpu\n}\n\
             contract batch min-runtime=\"1h\" default=#true\n\
             project a share=\"50%\"\nproject b share=\"50%\"\n",
        );
        let floor = |budget: &str| FloorPartition {
            cluster: "c".into(),
            holder: Holder::Budget(budget.into()),
            partition: format!("gpu-floor-{budget}"),
            over: "gpu".into(),
            gpus: 4,
        };
        let job = |id: &str, project: &str, partition: &str, gpus: u32, start: Option<i64>| Job {
            id: id.into(),
            project: project.into(),
            cluster: "s".into(),
            partition: partition.into(),
            gpus,
            start,
            contract: "batch".into(),
            ..Job::default()
        };
        let jobs = [
            job("1", "b", "gpu-floor-b", 3, Some(0)),
            job("2", "b", "gpu-floor-b", 1, Some(100)),
            job("3", "b", "gpu", 2, Some(500)),
            job("4", "a", "gpu,gpu-floor-a", 4, None),
            // Work no budget covers has no floor.
            job("5", "x", "gpu", 1, None),
        ];
        let mut status = status_with_floors(&model, &jobs, 1_000, &[floor("a"), floor("b")]).unwrap();
        let text = text(&status);
        // b: 4 of its floor's 4 GPUs in use, 2 beyond it; a: none of its 4 yet.
        for line in [
            "  BUDGET       SHARE GUARANTEED RUNNING PENDING ENTITLED               STANDING PROTECTED UNTIL                 FLOOR BEYOND USAGE/SHARE\n",
            "  a            50.0%          4       0       4      4.0  ░░░░░░░░░░░░ under            0 -                    0 of 4      0           -\n",
            "  b            50.0%          4       6       0      4.0  ████████▒▒▒▒ over             6 1970-01-01T01:08:20Z 4 of 4      2           -\n",
            "  (unbudgeted)  0.0%          0       0       1      0.0               within           0 -                         -      -           -\n",
            "FLOOR: GPUs running in the budget's floors",
            "BEYOND: GPUs of its jobs in the bound partition, beyond the floors",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
        let markdown = markdown(&status);
        assert!(
            markdown.contains("| floor GPUs in use | GPUs beyond the floor |")
                && markdown.contains("| 1970-01-01T01:08:20Z | 4 of 4 | 2 | - |"),
            "{markdown}"
        );
        let value = json(&status);
        let rows = value["clusters"][0]["budgets"].as_array().unwrap();
        let floor_of = |row: &Value| {
            ["floor_gpus", "in_floor_gpus", "over_gpus"].map(|key| row.get(key).and_then(Value::as_u64))
        };
        assert_eq!(
            rows.iter().map(|r| (r["budget"].as_str().unwrap(), floor_of(r))).collect::<Vec<_>>(),
            [
                ("a", [Some(4), Some(0), Some(0)]),
                ("b", [Some(4), Some(4), Some(2)]),
                ("(unbudgeted)", [None, None, None])
            ],
            "the fields are absent for a budget without a floor"
        );
        // Kueue has no floors: neither columns nor fields.
        status.ranking = Ranking::Kueue;
        assert!(!super::text(&status).contains("FLOOR"));
        assert!(json(&status)["clusters"][0]["budgets"][1].get("floor_gpus").is_none());
    }
}
