//! Micro-benchmarks, each at two sizes so that the growth shows: water-filling from scratch
//! (`Hierarchy::allocate`, what the audit's and the simulator's `Division` keeps up to date
//! level by level), Fair Tree's ranking (`allot fairshare`), the line index of diagnostics,
//! and whole small simulations (their audit included, on its own thread). `cargo bench -p allot-bench` (`scripts/bench.sh` runs the whole
//! commands). Inputs are generated with fixed seeds.

use std::sync::Arc;

use allot_compiler::source::SourceFile;
use allot_simulate::{Policy, simulate};
use allot_targets::slurm::fair_tree::{Association, FairTree, Shares};
use allot_verify::entitlement::{Hierarchy, Node, NodeId};
use allot_verify::trace::Job;

fn main() {
    divan::main();
}

/// A small deterministic generator (xorshift), so that every run measures the same input.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below.max(1)
    }
}

/// `tops` top-level budgets of `per_top` leaves each, and a demand for every leaf.
fn tree(tops: usize, per_top: usize) -> (Hierarchy, Vec<f64>) {
    let mut random = Seeded(7);
    let mut nodes = Vec::new();
    let mut demand = Vec::new();
    for t in 0..tops {
        let top = NodeId(nodes.len());
        nodes.push(Node::new(&format!("t{t}"), None, 1.0 + random.next(100) as f64));
        demand.push(0.0);
        for l in 0..per_top {
            nodes.push(Node::new(&format!("t{t}/l{l}"), Some(top), 1.0 + random.next(1000) as f64));
            demand.push(random.next(64) as f64);
        }
    }
    (Hierarchy::new(nodes).expect("a valid tree"), demand)
}

#[divan::bench(args = [(10, 100), (100, 100)])]
fn water_filling(bencher: divan::Bencher, (tops, per_top): (usize, usize)) {
    let (hierarchy, demand) = tree(tops, per_top);
    let capacity = (tops * per_top * 16) as f64;
    bencher.bench(|| hierarchy.allocate(divan::black_box(capacity), &demand).expect("finite"));
}

/// Accounts under root, `per_account` users each, with usage.
fn associations(accounts: usize, per_account: usize) -> Vec<Association> {
    let mut random = Seeded(11);
    let mut out = Vec::new();
    for a in 0..accounts {
        let account = format!("a{a}");
        out.push(Association::account(&account, "root", Shares::Count(1 + random.next(100) as u32)));
        for u in 0..per_account {
            let user = Association::user(&format!("u{a}x{u}"), &account, Shares::Count(1));
            out.push(user.with_usage(random.next(10_000) as f64));
        }
    }
    out
}

#[divan::bench(args = [(100, 10), (1000, 10)])]
fn fair_tree_ranking(bencher: divan::Bencher, (accounts, per_account): (usize, usize)) {
    let associations = associations(accounts, per_account);
    bencher.bench(|| FairTree::compute(divan::black_box(&associations)).expect("a valid tree"));
}

/// The line and column of every 64th byte of a file of `lines` lines.
#[divan::bench(args = [1_000, 10_000], sample_count = 10)]
fn line_index(bencher: divan::Bencher, lines: usize) {
    let text: String =
        (0..lines).map(|i| format!("    project p{i} share={} {{ users u{i} }}\n", i % 97 + 1)).collect();
    let file = SourceFile::new("allot.kdl".into(), "allot.kdl".into(), Arc::from(text.as_str()));
    let offsets: Vec<usize> = (0..text.len()).step_by(64).collect();
    bencher.bench(|| offsets.iter().map(|&o| file.line_column(o).line).sum::<usize>());
}

/// A busy trace on ten equal budgets of 64 GPUs: `jobs` jobs of 1 to 8 GPUs and 1 to 30
/// minutes, a few seconds apart.
fn busy(jobs: usize) -> Vec<Job> {
    let mut random = Seeded(13);
    let mut submit = 0;
    (0..jobs)
        .map(|i| {
            submit += random.next(20) as i64;
            Job {
                id: i.to_string().into(),
                project: format!("b{}", random.next(10)).into(),
                gpus: 1 << random.next(4),
                submit,
                duration: Some(60 + random.next(1740) as i64),
                ..Job::default()
            }
        })
        .collect()
}

#[divan::bench(args = [1_000, 10_000], sample_count = 10)]
fn scheduling_passes(bencher: divan::Bencher, jobs: usize) {
    let mut text = String::from(
        "cluster c gpus=64 gpu-type=h100 gpus-per-node=8\ncontract batch min-runtime=\"10m\" resumable=#true default=#true\n",
    );
    for b in 0..10 {
        text.push_str(&format!("project b{b} share=1\n"));
    }
    let model = allot_compiler::test_support::model(&text);
    let trace = busy(jobs);
    bencher.bench(|| {
        simulate(&model, trace.iter().cloned().map(Ok), Policy::Budget, false, &mut |_| {})
            .expect("simulates")
    });
}
