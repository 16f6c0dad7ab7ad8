//! The simulator on schedules checked by hand, and its invariants on generated traces.

use std::collections::BTreeMap;

use allot_compiler::ir::Model;
use allot_verify::simulate::{Policy, Simulation, simulate};
use allot_verify::trace::Job;
use proptest::prelude::*;

use allot_compiler::test_support::model;

/// A job as a trace records it: `runtime` seconds of work, run (somewhere) once.
fn job(id: usize, project: &str, gpus: u32, submit: i64, runtime: i64, contract: &str) -> Job {
    Job {
        id: id.to_string(),
        project: project.into(),
        gpus,
        submit,
        start: Some(submit),
        end: Some(submit + runtime),
        contract: contract.into(),
        ..Job::default()
    }
}

fn run(model: &Model, jobs: &[Job], policy: Policy) -> Simulation {
    simulate(model, jobs.iter().cloned().map(Ok), policy, false, &mut |_| {}).unwrap()
}

const PAIR: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"1h\" default=#true\n\
    contract checkpointed min-runtime=\"1h\" resumable=#true\n\
    project a share=1\nproject b share=1\n";

fn wait_of(sim: &Simulation, project: &str) -> Option<u64> {
    sim.audit.whole.budgets.iter().find(|b| b.project == project)?.waits.percentile(100.0)
}

#[test]
fn an_under_served_budget_preempts_once_the_minimum_runtime_is_over() {
    // a holds the whole node from 0 for 10 h; b asks for 4 GPUs at 600 s. Each is entitled
    // to 4: a's job is protected until 3600, then preempted; not resumable, it restarts when
    // b's hour ends at 7200 and runs its 10 h again.
    let jobs = [job(1, "a", 8, 0, 36_000, "batch"), job(2, "b", 4, 600, 3600, "batch")];
    let sim = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 1);
    assert!((sim.lost_gpu_hours - 8.0).abs() < 1e-9, "{}", sim.lost_gpu_hours);
    assert_eq!(wait_of(&sim, "b"), Some(3000));
    let last = sim.runs.iter().find(|r| &*r.id == "1" && !r.preempted).unwrap();
    assert_eq!((last.start, last.end, last.attempt), (7200, 43_200, 2));
    // The audit counts a's wait once, from its first start.
    assert_eq!(wait_of(&sim, "a"), Some(0));
}

#[test]
fn a_resumable_job_keeps_its_progress() {
    let jobs = [job(1, "a", 8, 0, 36_000, "checkpointed"), job(2, "b", 4, 600, 3600, "batch")];
    let sim = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!((sim.preemptions, sim.lost_gpu_hours), (1, 0.0));
    let last = sim.runs.iter().find(|r| &*r.id == "1" && !r.preempted).unwrap();
    assert_eq!((last.start, last.end), (7200, 7200 + 36_000 - 3600));
}

#[test]
fn priorities_preempt_without_protection() {
    // a's 8 GPUs exceed its cap of 4 (half the cluster), so they run low; b's 4 are within
    // its cap: high, and it preempts a at once.
    let jobs = [job(1, "a", 8, 0, 36_000, "batch"), job(2, "b", 4, 600, 3600, "batch")];
    let sim = run(&model(PAIR), &jobs, Policy::Priority);
    assert_eq!(sim.preemptions, 1);
    assert_eq!(wait_of(&sim, "b"), Some(0));
    assert!((sim.lost_gpu_hours - 8.0 * 600.0 / 3600.0).abs() < 1e-9);
}

#[test]
fn within_its_cap_a_job_is_never_preempted() {
    let jobs = [job(1, "a", 4, 0, 36_000, "batch"), job(2, "b", 8, 600, 3600, "batch")];
    let sim = run(&model(PAIR), &jobs, Policy::Priority);
    assert_eq!(sim.preemptions, 0);
    assert_eq!(wait_of(&sim, "b"), Some(36_000 - 600));
}

#[test]
fn fair_tree_serves_the_budget_with_less_usage_first() {
    // a has used the cluster for an hour; when both queue at once, b goes first.
    let jobs = [
        job(1, "a", 8, 0, 3600, "batch"),
        job(2, "a", 8, 100, 3600, "batch"),
        job(3, "b", 8, 200, 3600, "batch"),
    ];
    let sim = run(&model(PAIR), &jobs, Policy::Budget);
    let start = |id: &str| sim.runs.iter().find(|r| &*r.id == id).unwrap().start;
    assert_eq!((start("3"), start("2")), (3600, 7200));
}

#[test]
fn jobs_larger_than_a_node_wait_for_whole_nodes() {
    let text = "cluster c gpus=16 gpu-type=h100 gpus-per-node=8\ncontract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    // One GPU on each node leaves 14 free but no idle node: the 9-GPU job waits for both.
    let jobs = [
        job(1, "a", 8, 0, 100, "batch"),
        job(2, "a", 1, 0, 1000, "batch"),
        job(3, "a", 1, 50, 500, "batch"),
        job(4, "a", 9, 60, 100, "batch"),
    ];
    let sim = run(&model(text), &jobs, Policy::Budget);
    let four = sim.runs.iter().find(|r| &*r.id == "4").unwrap();
    assert_eq!(four.start, 1000);
    assert_eq!(four.nodes.len(), 2);
    assert_eq!(sim.largest.min_gpus, 9);
}

#[test]
fn the_maximum_runtime_ends_a_job() {
    let text = "cluster c gpus=8 gpu-type=h100\ncontract short min-runtime=\"0s\" max-runtime=\"1h\" default=#true\nproject a share=1\n";
    let sim = run(&model(text), &[job(1, "a", 1, 0, 7200, "short")], Policy::Budget);
    assert_eq!(sim.runs[0].end, 3600);
}

const TREE: &str = "cluster c gpus=24 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"30m\" default=#true\n\
    contract checkpointed min-runtime=\"10m\" resumable=#true\n\
    contract debug min-runtime=\"0s\" max-runtime=\"1h\"\n\
    project lab share=3 {\n  project vision share=2\n  project nlp share=1\n}\nproject infra share=1\n";

const PROJECTS: [&str; 4] = ["vision", "nlp", "infra", "nobody"];
const CONTRACTS: [&str; 3] = ["batch", "checkpointed", "debug"];

fn trace() -> impl Strategy<Value = Vec<Job>> {
    prop::collection::vec((0..4usize, 1..=20u32, 0..3usize, 0..4000i64, 1..20_000i64), 1..60).prop_map(
        |rows| {
            let mut submit = 0;
            rows.into_iter()
                .enumerate()
                .map(|(i, (p, gpus, c, gap, runtime))| {
                    submit += gap;
                    job(i, PROJECTS[p], gpus, submit, runtime, CONTRACTS[c])
                })
                .collect()
        },
    )
}

#[test]
fn budgets_do_not_take_turns_preempting_each_other() {
    // Found by the property tests below: with the rule "closer to the budgets than now",
    // vision's and nlp's jobs preempted each other every 30 minutes for ever (each exchange
    // kept the GPUs within entitlements level and lowered those beyond; then starts on the
    // GPUs left idle raised them again). With "closer than the best since demand changed"
    // the simulation ends, every job done once.
    let jobs = [
        job(5, "nlp", 13, 8135, 27909 - 8135, "batch"),
        job(6, "nobody", 7, 12114, 18727 - 12114, "debug"),
        job(8, "infra", 3, 15231, 27743 - 15231, "batch"),
        job(13, "infra", 19, 25245, 42128 - 25245, "debug"),
        job(15, "vision", 17, 27797, 39444 - 27797, "checkpointed"),
        job(17, "vision", 2, 29561, 37070 - 29561, "checkpointed"),
        job(18, "vision", 15, 29860, 31990 - 29860, "debug"),
        job(21, "nobody", 15, 38443, 52695 - 38443, "checkpointed"),
        job(24, "nlp", 18, 42791, 59228 - 42791, "checkpointed"),
    ];
    let model = model(TREE);
    let sim = run(&model, &jobs, Policy::Budget);
    check_invariants(&model, &jobs, &sim, Policy::Budget).unwrap();
    // A ceiling, not a figure worked out by hand: the schedule itself still has flaws of
    // its own (job 13 is started and preempted in the same instant).
    assert!(sim.preemptions <= 10, "{} preemptions", sim.preemptions);
}

fn check_invariants(
    model: &Model,
    jobs: &[Job],
    sim: &Simulation,
    policy: Policy,
) -> Result<(), TestCaseError> {
    let by_id: BTreeMap<&str, &Job> = jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let contract = |name: &str| model.contracts.iter().find(|c| c.name == name).unwrap();
    // No GPU is used twice: on each node, GPUs held at any instant stay within the node.
    let mut changes: BTreeMap<u32, Vec<(i64, i64)>> = BTreeMap::new();
    for run in &sim.runs {
        for &(node, gpus) in &run.nodes {
            changes
                .entry(node)
                .or_default()
                .extend([(run.end, -i64::from(gpus)), (run.start, i64::from(gpus))]);
        }
    }
    for (node, mut deltas) in changes {
        deltas.sort();
        let mut held = 0;
        for (at, delta) in deltas {
            held += delta;
            prop_assert!(held <= 8, "node {node} holds {held} GPUs at {at}");
        }
    }
    let mut work: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    let mut lost = 0.0;
    for run in &sim.runs {
        let job = by_id[&*run.id];
        let terms = contract(&run.contract);
        // No job runs before its submission.
        prop_assert!(run.start >= job.submit && run.queued >= job.submit && run.start >= run.queued);
        prop_assert_eq!(run.gpus, job.gpus);
        if run.preempted {
            // No protected job is preempted inside its minimum runtime (the priority
            // baseline has no contracts to protect anyone).
            if policy == Policy::Budget {
                prop_assert!(run.end - run.start >= terms.min_runtime_seconds as i64, "{run:?}");
            }
            if !terms.resumable {
                lost += (run.end - run.start) as f64 * f64::from(run.gpus) / 3600.0;
            }
        }
        let entry = work.entry(&*run.id).or_default();
        if run.preempted && !terms.resumable {
            continue;
        }
        entry.0 += run.end - run.start;
        entry.1 += i64::from(!run.preempted);
    }
    // GPU-hours are conserved: every job finishes once, having done its work exactly (cut at
    // the maximum runtime), and the redone work is what the simulation reports lost.
    for job in jobs {
        let terms = contract(&job.contract);
        let needed = (job.end.unwrap() - job.start.unwrap())
            .min(terms.max_runtime_seconds.map_or(i64::MAX, |m| m as i64));
        prop_assert_eq!(work.get(job.id.as_str()).copied(), Some((needed, 1)), "job {}", job.id);
    }
    prop_assert!((lost - sim.lost_gpu_hours).abs() < 1e-6);
    let used: f64 = sim.audit.whole.clusters.iter().map(|c| c.used_gpu_hours).sum();
    let ran: f64 = sim.runs.iter().map(|r| (r.end - r.start) as f64 * f64::from(r.gpus) / 3600.0).sum();
    prop_assert!((used - ran).abs() < 1e-6, "the audit counts {used} GPU-hours, the runs {ran}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_budget_policy_keeps_the_invariants(jobs in trace()) {
        let model = model(TREE);
        let sim = run(&model, &jobs, Policy::Budget);
        check_invariants(&model, &jobs, &sim, Policy::Budget)?;
    }

    #[test]
    fn the_priority_policy_keeps_the_invariants(jobs in trace()) {
        let model = model(TREE);
        let sim = run(&model, &jobs, Policy::Priority);
        check_invariants(&model, &jobs, &sim, Policy::Priority)?;
    }
}
