//! The simulator on schedules checked by hand, and its invariants on generated traces.

use std::collections::BTreeMap;

use allot_compiler::ir::Model;
use allot_simulate::{Policy, Run, Simulation, SlurmSettings, simulate, simulate_with_runs};
use allot_verify::audit::AuditError;
use allot_verify::entitlement::{Hierarchy, Node, NodeId};
use allot_verify::trace::Job;
use proptest::prelude::*;

use allot_compiler::test_support::model;

/// A job as a trace records it: `runtime` seconds of work, run (somewhere) once.
fn job(id: usize, project: &str, gpus: u32, submit: i64, runtime: i64, contract: &str) -> Job {
    Job {
        id: id.to_string().into(),
        project: project.into(),
        gpus,
        submit,
        start: Some(submit),
        end: Some(submit + runtime),
        contract: contract.into(),
        ..Job::default()
    }
}

/// The simulation and its runs, in the order they ended.
fn run(model: &Model, jobs: &[Job], policy: Policy) -> (Simulation, Vec<Run>) {
    simulate_with_runs(model, jobs.iter().cloned().map(Ok), policy, false).unwrap()
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
    let (sim, runs) = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 1);
    assert!((sim.lost_gpu_hours - 8.0).abs() < 1e-9, "{}", sim.lost_gpu_hours);
    assert_eq!(wait_of(&sim, "b"), Some(3000));
    let last = runs.iter().find(|r| &*r.id == "1" && !r.preempted()).unwrap();
    assert_eq!((last.start, last.end, last.attempt), (7200, 43_200, 2));
    // a's wait is all the time it was queued: none before its first start, then 3600 s
    // from its preemption to its restart; counted once, with its first run.
    assert_eq!(wait_of(&sim, "a"), Some(3600));
    let a = sim.audit.whole.budgets.iter().find(|b| b.project == "a").unwrap();
    assert_eq!(a.waits.jobs(), 1);
    // The largest jobs (the 99th percentile of [4, 8] GPUs: 8) are a's: 3600 s. The short
    // jobs (an hour of work at most) are b's: 3000 s.
    assert_eq!((sim.largest.min_gpus, sim.largest.waits.values()), (8, &[3600][..]));
    assert_eq!(sim.short_jobs.values(), &[3000]);
}

#[test]
fn a_resumable_job_keeps_its_progress() {
    let jobs = [job(1, "a", 8, 0, 36_000, "checkpointed"), job(2, "b", 4, 600, 3600, "batch")];
    let (sim, runs) = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!((sim.preemptions, sim.lost_gpu_hours), (1, 0.0));
    let last = runs.iter().find(|r| &*r.id == "1" && !r.preempted()).unwrap();
    assert_eq!((last.start, last.end), (7200, 7200 + 36_000 - 3600));
}

#[test]
fn priorities_preempt_without_protection() {
    // a's 8 GPUs exceed its cap of 4 (half the cluster), so they run low; b's 4 are within
    // its cap: high, and it preempts a at once.
    let jobs = [job(1, "a", 8, 0, 36_000, "batch"), job(2, "b", 4, 600, 3600, "batch")];
    let (sim, _) = run(&model(PAIR), &jobs, Policy::Priority);
    assert_eq!(sim.preemptions, 1);
    assert_eq!(wait_of(&sim, "b"), Some(0));
    assert!((sim.lost_gpu_hours - 8.0 * 600.0 / 3600.0).abs() < 1e-9);
}

#[test]
fn within_its_cap_a_job_is_never_preempted() {
    let jobs = [job(1, "a", 4, 0, 36_000, "batch"), job(2, "b", 8, 600, 3600, "batch")];
    let (sim, _) = run(&model(PAIR), &jobs, Policy::Priority);
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
    let (_, runs) = run(&model(PAIR), &jobs, Policy::Budget);
    let start = |id: &str| runs.iter().find(|r| &*r.id == id).unwrap().start;
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
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    let four = runs.iter().find(|r| &*r.id == "4").unwrap();
    assert_eq!(four.start, 1000);
    assert_eq!(four.nodes.len(), 2);
    assert_eq!(sim.largest.min_gpus, 9);
}

#[test]
fn the_maximum_runtime_ends_a_job() {
    let text = "cluster c gpus=8 gpu-type=h100\ncontract short min-runtime=\"0s\" max-runtime=\"1h\" default=#true\nproject a share=1\n";
    let (_, runs) = run(&model(text), &[job(1, "a", 1, 0, 7200, "short")], Policy::Budget);
    assert_eq!(runs[0].end, 3600);
}

/// Each preempted run: (job, when it was preempted, the job it made room for).
fn preemptions(runs: &[Run]) -> Vec<(&str, i64, Option<&str>)> {
    runs.iter()
        .filter(|r| r.preempted())
        .map(|r| (&*r.id, r.end, r.preempted_for.as_ref().map(|(id, _)| &**id)))
        .collect()
}

fn start_of(runs: &[Run], id: &str) -> i64 {
    runs.iter().filter(|r| &*r.id == id).map(|r| r.start).min().unwrap()
}

#[test]
fn a_preemption_takes_no_victim_it_can_spare() {
    // a fills the one 8-GPU node with three jobs started at 0: 2 GPUs (job 1), 4 (job 2),
    // 2 (job 3). b asks for 4 at 3600, when their protection (1 h) is over; each budget is
    // entitled to 4. Newest first, job 3 (2 GPUs) then job 2 (4) free room enough; job 2
    // alone does too, so job 3 is spared: one preemption, of job 2, which restarts when
    // b's job ends at 7200 (4 GPUs × 3600 s lost).
    let jobs = [
        job(1, "a", 2, 0, 36_000, "batch"),
        job(2, "a", 4, 0, 36_000, "batch"),
        job(3, "a", 2, 0, 36_000, "batch"),
        job(4, "b", 4, 3600, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 1);
    let preempted: Vec<&str> = runs.iter().filter(|r| r.preempted()).map(|r| &*r.id).collect();
    assert_eq!(preempted, ["2"]);
    assert_eq!(start_of(&runs, "4"), 3600);
    assert!((sim.lost_gpu_hours - 4.0).abs() < 1e-9, "{}", sim.lost_gpu_hours);
    let restart = runs.iter().find(|r| &*r.id == "2" && !r.preempted()).unwrap();
    assert_eq!((restart.start, restart.end), (7200, 43_200));
}

#[test]
fn gpus_a_preemption_frees_are_used_in_the_same_instant() {
    // a's 8-GPU job (1) holds the node from 0; b asks for 4 GPUs (job 2) and 2 (job 3) at
    // 600: entitled to 4 each. At 3600 a's protection ends, b (no usage) ranks first, job 2
    // preempts job 1 and starts; the pass runs again in that instant and job 3 starts on
    // the 4 GPUs left free (before, it waited for the next event, 7200). Both of b's jobs
    // end at 7200, when job 1 restarts.
    let jobs = [
        job(1, "a", 8, 0, 36_000, "batch"),
        job(2, "b", 4, 600, 3600, "batch"),
        job(3, "b", 2, 600, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 1);
    assert_eq!((start_of(&runs, "2"), start_of(&runs, "3")), (3600, 3600));
    let restart = runs.iter().find(|r| &*r.id == "1" && !r.preempted()).unwrap();
    assert_eq!(restart.start, 7200);
}

#[test]
fn a_budget_never_runs_more_than_its_max_gpus() {
    // An idle 16-GPU cluster; a is capped at 4 GPUs and asks for ten 1-GPU jobs of 100 s at
    // 0: four run at 0, four at 100, two at 200, under either policy. A 5-GPU job of a can
    // never run: it is counted unplaceable.
    let text = "cluster c gpus=16 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\n\
        project a share=1 max-gpus=4\nproject b share=1\n";
    let mut jobs: Vec<Job> = (0..10).map(|i| job(i, "a", 1, 0, 100, "batch")).collect();
    jobs.push(job(10, "a", 5, 0, 100, "batch"));
    for policy in [Policy::Budget, Policy::Priority] {
        let (sim, runs) = run(&model(text), &jobs, policy.clone());
        let mut starts: Vec<i64> = runs.iter().map(|r| r.start).collect();
        starts.sort_unstable();
        assert_eq!(starts, [0, 0, 0, 0, 100, 100, 100, 100, 200, 200], "{policy:?}");
        assert_eq!((sim.unplaceable, sim.preemptions), (1, 0), "{policy:?}");
    }
}

#[test]
fn backfill_starts_small_jobs_that_do_not_delay_the_head() {
    // One 8-GPU node, one budget, no protection. Job 1 (6 GPUs) runs 0..1000. Job 2 (8 GPUs,
    // at 10) heads the queue and cannot start: it holds a reservation at 1000, when job 1
    // ends, on the whole node. Job 3 (2 GPUs, 500 s, at 20) ends at 520, before 1000: it
    // starts at once (strict FIFO made it wait for job 2, to 2000). Job 4 (2 GPUs, 2000 s,
    // at 30) would still run at 1000 on GPUs job 2 needs: it waits, starting when job 2
    // ends at 2000. Job 2 starts at 1000 as reserved.
    //
    // The priority baseline serves jobs that would run high first: the cap is all 8 GPUs,
    // so job 2 (6 + 8 > 8) would run low and job 3 high (6 + 2): job 3 starts at 20 either
    // way; when it ends at 520, job 4 would run high and goes before job 2: it starts at
    // 520, and job 2, reserved behind it, at 2520.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    let jobs = [
        job(1, "a", 6, 0, 1000, "batch"),
        job(2, "a", 8, 10, 1000, "batch"),
        job(3, "a", 2, 20, 500, "batch"),
        job(4, "a", 2, 30, 2000, "batch"),
    ];
    for (policy, expected) in [(Policy::Budget, [0, 1000, 20, 2000]), (Policy::Priority, [0, 2520, 20, 520])]
    {
        let (sim, runs) = run(&model(text), &jobs, policy.clone());
        let starts: Vec<i64> = ["1", "2", "3", "4"].iter().map(|id| start_of(&runs, id)).collect();
        assert_eq!(starts, expected, "{policy:?}");
        assert_eq!(sim.preemptions, 0);
    }
}

/// One 8-GPU node, one budget, one contract without a maximum runtime.
const ONE_NODE: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";

/// A job that asked for `limit` seconds.
fn limited(job: Job, limit: i64) -> Job {
    Job { time_limit: Some(limit), ..job }
}

/// Each run of `id` as (start, end), in order.
fn runs_of(runs: &[Run], id: &str) -> Vec<(i64, i64)> {
    let mut of: Vec<(i64, i64)> = runs.iter().filter(|r| &*r.id == id).map(|r| (r.start, r.end)).collect();
    of.sort_unstable();
    of
}

#[test]
fn slurm_blocks_behind_the_first_job_and_backfills_by_time_limits() {
    // One 8-GPU node, one budget, Slurm's defaults (backfill every 30 s, plans in minutes),
    // preemption by QOS (under floors the budget's floor, the whole node, would let job 3
    // pass job 2, whose floor record is held by the floor's cap: see the test after).
    // Job 1 (6 GPUs, 1000 s of work, asked for 1200) starts at 0. Job 2 (8 GPUs, at 10)
    // cannot start: the main scheduler stops there. Job 3 (2 GPUs, 100 s, asked for 300, at
    // 20) waits for the backfill run at 30: job 2 is planned when job 1's limit ends (1200,
    // holding the node to 2400); job 3 would end by 330 (300 in whole minutes, rounded down
    // as Slurm rounds), before 1200: it starts at 30. Job 4 (2 GPUs, 100 s of work but asked for 1200, at 40) would
    // hold GPUs past 1200 by its limit: it waits (planned after job 2, from 2400), though it
    // would end by 160. Job 1 ends at 1000 and job 2 starts; job 4 when job 2 ends, at 2000.
    // A job that asks for less than its work is ended at its limit (job 5, at 3000).
    let jobs = [
        limited(job(1, "a", 6, 0, 1000, "batch"), 1200),
        limited(job(2, "a", 8, 10, 1000, "batch"), 1200),
        limited(job(3, "a", 2, 20, 100, "batch"), 300),
        limited(job(4, "a", 2, 40, 100, "batch"), 1200),
        limited(job(5, "a", 1, 3000, 500, "batch"), 300),
    ];
    let (sim, runs) = run(&model(ONE_NODE), &jobs, Policy::Slurm(preempt_qos()));
    let starts: Vec<i64> = ["1", "2", "3", "4", "5"].iter().map(|id| start_of(&runs, id)).collect();
    assert_eq!(starts, [0, 1000, 30, 2000, 3000]);
    assert_eq!(runs_of(&runs, "5"), [(3000, 3300)]);
    assert_eq!(sim.preemptions, 0);
    // The budget policy's backfill knows the work: job 4 starts as soon as GPUs are free,
    // when job 3 (started at 20) ends at 120.
    let (_, runs) = run(&model(ONE_NODE), &jobs, Policy::Budget);
    assert_eq!(start_of(&runs, "4"), 120);
}

#[test]
fn under_floors_the_preemptible_qos_runs_beyond_the_floors_unprotected() {
    // b's job 1 (QOS preemptible, 6 GPUs, from 0) runs in `over` only, though b's floor is
    // empty, and is protected by nothing (the QOS sets no PreemptExemptTime; Slurm's global
    // one is 0), unlike `batch`'s 2 minutes. a's job 2 (4 GPUs at 10) has room in a's floor
    // and 2 GPUs free: it preempts job 1 at once. Job 1, held to 131, does not fit beside
    // job 2 (4 free); it starts over (no contract of its own) when job 2 ends, at 3610.
    let jobs = [job(1, "b", 6, 0, 3600, "preemptible"), job(2, "a", 4, 10, 3600, "batch")];
    let (sim, runs) = run(&model(FLOORS), &jobs, floors());
    assert_eq!(runs_of(&runs, "2"), [(10, 3610)]);
    assert_eq!(runs_of(&runs, "1"), [(0, 10), (3610, 7210)]);
    assert_eq!(sim.preemptions, 1);
}

#[test]
fn under_floors_a_job_its_floor_cannot_hold_waits_in_over_and_smaller_ones_pass_it() {
    // The jobs of the test above, under floors: the budget's floor is the whole node (8).
    // Job 2 (8 GPUs, at 10) finds 6 of the floor's 8 taken by job 1: its floor's cap holds
    // it (Slurm passes over such a job, `ESLURM_ACCOUNTING_POLICY`), and in `over` it does
    // not fit, which ends the pass. Job 3 (2 GPUs, at 20) fits in the floor: it starts at
    // once, not at the backfill run at 30. Job 4 (at 40) finds the floor full; when job 3
    // ends (120) it fits there and starts: the main scheduler does not read the backfill's
    // plan for job 2. Job 2 starts when job 1 ends (1000).
    let jobs = [
        limited(job(1, "a", 6, 0, 1000, "batch"), 1200),
        limited(job(2, "a", 8, 10, 1000, "batch"), 1200),
        limited(job(3, "a", 2, 20, 100, "batch"), 300),
        limited(job(4, "a", 2, 40, 100, "batch"), 1200),
        limited(job(5, "a", 1, 3000, 500, "batch"), 300),
    ];
    let (sim, runs) = run(&model(ONE_NODE), &jobs, floors());
    let starts: Vec<i64> = ["1", "2", "3", "4", "5"].iter().map(|id| start_of(&runs, id)).collect();
    assert_eq!(starts, [0, 1000, 20, 120, 3000]);
    assert_eq!(sim.preemptions, 0);
}

#[test]
fn backfill_counts_the_jobs_it_passes_over_against_bf_max_job_test() {
    // One 8-GPU node, one budget, no time limits (contract batch has no max-runtime): a
    // running job never ends in the backfill's plan. Job 1 (6 GPUs, 1000 s) starts at 0;
    // job 2 (8 GPUs, 100 s, at 10) blocks the main scheduler. The backfill run at 30 looks
    // at job 2 (never fits in the plan: nothing held), job 3 (4 GPUs: the same), and jobs 4
    // and 5, which are like job 3 and passed over, each counted against bf_max_job_test.
    // Job 6 (1 GPU, asked for 300 s) fits beside job 1: it is the fifth job looked at, so it
    // starts at 30 when bf_max_job_test is 5 and waits when it is 4 (until job 2 has run,
    // 1000..1100, and jobs 3 and 4 after it, 1100..1200: at 1200 beside job 5).
    let jobs = [
        job(1, "a", 6, 0, 1000, "batch"),
        job(2, "a", 8, 10, 100, "batch"),
        job(3, "a", 4, 11, 100, "batch"),
        job(4, "a", 4, 12, 100, "batch"),
        job(5, "a", 4, 13, 100, "batch"),
        limited(job(6, "a", 1, 14, 100, "batch"), 300),
    ];
    for (tested, expected) in [(5, [0, 1000, 1100, 1100, 1200, 30]), (4, [0, 1000, 1100, 1100, 1200, 1200])] {
        let settings = SlurmSettings { backfill_max_jobs: tested, ..preempt_qos() };
        let (_, runs) = run(&model(ONE_NODE), &jobs, Policy::Slurm(settings));
        let starts: Vec<i64> = ["1", "2", "3", "4", "5", "6"].iter().map(|id| start_of(&runs, id)).collect();
        assert_eq!(starts, expected, "bf_max_job_test={tested}");
    }
}

#[test]
fn slurm_serves_the_preemptible_qos_last_and_preempts_only_it() {
    // One 8-GPU node. Job 1 (a, QOS preemptible, 8 GPUs, 1000 s) starts at 0. Job 2 (b,
    // batch, 4 GPUs, 500 s, asked for 600) at 100 does not fit: batch may preempt the
    // preemptible QOS, so job 1 is requeued (held 121 s, to 221) and job 2 starts. Job 3
    // (a, preemptible, 4 GPUs, 100 s, asked for 200) at 110 fits beside job 2 and starts;
    // job 4 (a, batch, 4 GPUs, 100 s) at 120 preempts it (held to 241) and runs to 220.
    // From 221 job 1 heads the queue and does not fit (job 2 holds 4 GPUs): it is planned
    // from job 2's limit (700, 660 in whole minutes) and the main scheduler stops at it.
    // Job 3, back at 241, is backfilled at 270: it would end by 470, before 660; it starts
    // over (no contract of its own: not resumable). Job 2 ends at 600 and job 1 starts over
    // then. Protection is the contract QOS's PreemptExemptTime: it never matters here,
    // since no QOS may preempt a contract's.
    let jobs = [
        job(1, "a", 8, 0, 1000, "preemptible"),
        limited(job(2, "b", 4, 100, 500, "batch"), 600),
        limited(job(3, "a", 4, 110, 100, "preemptible"), 200),
        limited(job(4, "a", 4, 120, 100, "batch"), 200),
    ];
    let (sim, runs) = run(&model(PAIR), &jobs, Policy::Slurm(preempt_qos()));
    assert_eq!(runs_of(&runs, "1"), [(0, 100), (600, 1600)]);
    assert_eq!(runs_of(&runs, "2"), [(100, 600)]);
    assert_eq!(runs_of(&runs, "3"), [(110, 120), (270, 370)]);
    assert_eq!(runs_of(&runs, "4"), [(120, 220)]);
    assert_eq!(sim.preemptions, 2);
    assert!((sim.lost_gpu_hours - (8.0 * 100.0 + 4.0 * 10.0) / 3600.0).abs() < 1e-9);
}

/// Two budgets with floors of 4 on one 8-GPU node, and a contract protected for 2 minutes.
const FLOORS: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"2m\" resumable=#true default=#true\n\
    project a share=\"50%\"\nproject b share=\"50%\"\n";

/// The configuration `allot build` writes for Slurm: floors, `sched_interval=10`.
fn floors() -> Policy {
    Policy::Slurm(SlurmSettings::default())
}

/// The configuration allot wrote before floors: `PreemptType=preempt/qos`, Slurm's
/// `sched_interval`; only QOS `preemptible` is preempted.
fn preempt_qos() -> SlurmSettings {
    SlurmSettings { floors: false, sched_interval: 60, ..SlurmSettings::default() }
}

#[test]
fn a_budget_under_its_floor_takes_gpus_back_from_over_once_their_protection_ends() {
    // b submits eight 1-GPU jobs at 0 (1 h each): jobs 1-4 fill b's floor (4 GPUs), 5-8 run
    // in `over`, protected to 120. a submits two at 10 (9, 10): a's floor has room, no GPU
    // is free, and nothing in `over` may be preempted yet: they wait. The protection ends
    // at 120; the main scheduler's next periodic pass (every 10 s) comes at 130 and
    // preempts the youngest jobs of `over` (all started at 0: the last submitted first),
    // 8 for job 9 and 7 for job 10, which start in a's floor. 7 and 8 are held for
    // `cred_expire` + 1 (121 s), back in the queue at 251; b's floor is full, nothing is
    // free: they wait. a submits four more at 300 (11-14): 11 and 12 fill a's floor by
    // preempting 6 and then 5 (past their protection: at once); 13 and 14 find a's floor
    // full and nothing free in `over`: they wait. At 3600 b's first four end: b's floor
    // has room again, and b's requeued jobs take it (resumable: 7 and 8 have 3470 s left,
    // 5 and 6 3300); a's 13 and 14 start when 9 and 10 end (3730), in a's floor.
    let mut jobs: Vec<Job> = (1..=8).map(|i| job(i, "b", 1, 0, 3600, "batch")).collect();
    jobs.extend((9..=10).map(|i| job(i, "a", 1, 10, 3600, "batch")));
    jobs.extend((11..=14).map(|i| job(i, "a", 1, 300, 3600, "batch")));
    let (sim, runs) = run(&model(FLOORS), &jobs, floors());
    for id in ["1", "2", "3", "4"] {
        assert_eq!(runs_of(&runs, id), [(0, 3600)], "b's floor is untouched: job {id}");
    }
    assert_eq!(runs_of(&runs, "8"), [(0, 130), (3600, 7070)]);
    assert_eq!(runs_of(&runs, "7"), [(0, 130), (3600, 7070)]);
    assert_eq!(runs_of(&runs, "6"), [(0, 300), (3600, 6900)]);
    assert_eq!(runs_of(&runs, "5"), [(0, 300), (3600, 6900)]);
    assert_eq!(runs_of(&runs, "9"), [(130, 3730)]);
    assert_eq!(runs_of(&runs, "10"), [(130, 3730)]);
    assert_eq!(runs_of(&runs, "11"), [(300, 3900)]);
    assert_eq!(runs_of(&runs, "12"), [(300, 3900)]);
    assert_eq!(runs_of(&runs, "13"), [(3730, 7330)]);
    assert_eq!(runs_of(&runs, "14"), [(3730, 7330)]);
    assert_eq!(sim.preemptions, 4);
    let victims: Vec<(&str, Option<&str>)> = runs
        .iter()
        .filter(|r| r.preempted())
        .map(|r| (&*r.id, r.preempted_for.as_ref().map(|(id, _)| &**id)))
        .collect();
    assert_eq!(victims.len(), 4);
    for pair in [("8", "9"), ("7", "10"), ("6", "11"), ("5", "12")] {
        assert!(victims.contains(&(pair.0, Some(pair.1))), "{pair:?} in {victims:?}");
    }
}

#[test]
fn under_floors_a_reserve_is_a_partition_of_the_highest_tier_for_its_contract() {
    // 8 GPUs, 2 held for debug: a's and b's floors are 3 each, of the other 6. a runs three
    // jobs (1-3) in its floor; b five (4-8): 4-6 in its floor, 7 and 8 in `over`, protected
    // to 120. b's debug job 9 comes at 10: the reserve has room, no GPU is free, nothing in
    // `over` may go yet; at the pass after the protection ends (130) it preempts the
    // youngest, 8, and runs in the reserve to 730. a's debug jobs 10 and 11 come at 300: 10
    // takes the reserve's other GPU from 7 (past its protection: at once) and runs to 900;
    // 11 finds the reserve full and a's floor full: it waits for 9 and starts in the reserve
    // at 730. 8 and 7 (held 121 s) wait in `over`: 8 (back at 251) takes 10's GPU at 900,
    // 7 (back at 421) takes 11's at 1330, each resuming its 3470 and 3300 s left. No floor
    // job is touched.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract debug min-runtime=\"0s\" max-gpus=1 reserve=2\n\
        contract batch min-runtime=\"2m\" resumable=#true default=#true\n\
        project a share=\"50%\"\nproject b share=\"50%\"\n";
    let mut jobs: Vec<Job> = (1..=3).map(|i| job(i, "a", 1, 0, 3600, "batch")).collect();
    jobs.extend((4..=8).map(|i| job(i, "b", 1, 0, 3600, "batch")));
    jobs.push(job(9, "b", 1, 10, 600, "debug"));
    jobs.extend((10..=11).map(|i| job(i, "a", 1, 300, 600, "debug")));
    let (sim, runs) = run(&model(text), &jobs, floors());
    for id in ["1", "2", "3", "4", "5", "6"] {
        assert_eq!(runs_of(&runs, id), [(0, 3600)], "the floors are untouched: job {id}");
    }
    assert_eq!(runs_of(&runs, "9"), [(130, 730)]);
    assert_eq!(runs_of(&runs, "10"), [(300, 900)]);
    assert_eq!(runs_of(&runs, "11"), [(730, 1330)]);
    assert_eq!(runs_of(&runs, "8"), [(0, 130), (900, 4370)]);
    assert_eq!(runs_of(&runs, "7"), [(0, 300), (1330, 4630)]);
    assert_eq!(sim.preemptions, 2);
    // Without the reserve, the floors are 4 each (b's jobs 4-7; 8 in `over`): b's debug
    // job 9 waits, b's floor full and `over` preempting nothing, while a's debug jobs take
    // the last GPU of a's floor in turn (10 from 8 at 300, then 11 at 900); it starts when
    // 11 ends, at 1500.
    let (_, runs) = run(&model(&text.replace(" reserve=2", "")), &jobs, floors());
    assert_eq!(runs_of(&runs, "10"), [(300, 900)]);
    assert_eq!(runs_of(&runs, "11"), [(900, 1500)]);
    assert_eq!(runs_of(&runs, "9"), [(1500, 2100)]);
}

#[test]
fn backfill_leaves_the_reserved_nodes_free() {
    // Two 8-GPU nodes. Job 1 (6 GPUs, 0..1000) goes on node 0; job 2 (4 GPUs, 0..5000,
    // budget b) best-fits on node 1. Job 3 (8 GPUs, at 10) fits no node: reserved at 1000 on
    // node 0 (8 free then; node 1 has 4). Job 4 (1 GPU, 5000 s, at 20) runs past 1000 but
    // fits on node 1, which the reservation does not need: it starts at 20 there. Job 5 (4
    // GPUs, at 30) fits no node now (2 free on node 0, 3 on node 1): it waits for job 3
    // (node 0 at 2000).
    let text = "cluster c gpus=16 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=1\nproject b share=1\n";
    let jobs = [
        job(1, "a", 6, 0, 1000, "batch"),
        job(2, "b", 4, 0, 5000, "batch"),
        job(3, "a", 8, 10, 1000, "batch"),
        job(4, "a", 1, 20, 5000, "batch"),
        job(5, "a", 4, 30, 100, "batch"),
    ];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    let first = |id: &str| runs.iter().find(|r| &*r.id == id).unwrap();
    assert_eq!((first("1").nodes.clone(), first("2").nodes.clone()), (vec![(0, 6)], vec![(1, 4)]));
    assert_eq!((first("3").start, first("3").nodes.clone()), (1000, vec![(0, 8)]));
    assert_eq!((first("4").start, first("4").nodes.clone()), (20, vec![(1, 1)]));
    assert_eq!(first("5").start, 2000);
    assert_eq!(sim.preemptions, 0);
}

#[test]
fn priority_caps_are_the_guaranteed_gpus() {
    // Shares of 30% and 30% of 10 GPUs guarantee 3 each (renormalised weights made them 5).
    // a starts ten 1-GPU jobs at 0: three high, seven low. At 600 b asks for five 1-GPU
    // jobs: three are within its 3 and preempt a's newest low jobs (one victim each, at
    // once); the other two would run low and wait: they start when b's first three end, at
    // 4200, high again.
    let text = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
        contract batch min-runtime=\"0s\" default=#true\n\
        project a share=\"30%\"\nproject b share=\"30%\"\n";
    let mut jobs: Vec<Job> = (0..10).map(|i| job(i, "a", 1, 0, 36_000, "batch")).collect();
    jobs.extend((10..15).map(|i| job(i, "b", 1, 600, 3600, "batch")));
    let (sim, runs) = run(&model(text), &jobs, Policy::Priority);
    assert_eq!(sim.preemptions, 3);
    let mut preempted: Vec<&str> = runs.iter().filter(|r| r.preempted()).map(|r| &*r.id).collect();
    preempted.sort_unstable();
    assert_eq!(preempted, ["7", "8", "9"]);
    let b: Vec<i64> = (10..15).map(|i| start_of(&runs, &i.to_string())).collect();
    assert_eq!(b, [600, 600, 600, 4200, 4200]);
}

#[test]
fn fair_tree_ties_are_served_by_submit_time() {
    // Unbudgeted work (protected for its whole 1000 s) fills the node from 0. a asks at 20,
    // b at 10, for the whole node each. Neither has usage: they are tied, with the same
    // rank, so b's job, submitted first, starts first (at 1000), a's at 2000. (Ranked by
    // declaration, a's went first.)
    let jobs = [
        job(1, "nobody", 8, 0, 1000, "batch"),
        job(3, "b", 8, 10, 1000, "batch"),
        job(2, "a", 8, 20, 1000, "batch"),
    ];
    let (_, runs) = run(&model(PAIR), &jobs, Policy::Budget);
    assert_eq!((start_of(&runs, "3"), start_of(&runs, "2")), (1000, 2000));
}

#[test]
fn fair_tree_ties_reach_into_a_tied_account() {
    // lab and c are tied (no usage) and so are lab's x and y: Slurm 22.05 visits the leaf c
    // before the account lab, and lab's first child is tied with c, so all three share one
    // rank and their jobs go by submit time: y's (10), c's (20), x's (30), each at 1000 after
    // the other, behind the unbudgeted job protected until its end at 1000.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"1h\" default=#true\n\
        project lab share=2 {\n  project x share=1\n  project y share=1\n}\nproject c share=1\n";
    let jobs = [
        job(1, "nobody", 8, 0, 1000, "batch"),
        job(2, "y", 8, 10, 1000, "batch"),
        job(3, "c", 8, 20, 1000, "batch"),
        job(4, "x", 8, 30, 1000, "batch"),
    ];
    let (_, runs) = run(&model(text), &jobs, Policy::Budget);
    let starts: Vec<i64> = ["2", "3", "4"].iter().map(|id| start_of(&runs, id)).collect();
    assert_eq!(starts, [1000, 2000, 3000]);
}

#[test]
fn a_job_enters_its_queue_when_eligible() {
    // One node, a blocker until 1000. Job 2 is submitted at 0 but eligible at 500; job 3 is
    // submitted (and eligible) at 100: job 3 is queued first and starts first, at 1000; job
    // 2 at 2000, having waited 1500 s from its eligibility.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    let mut late = job(2, "a", 8, 0, 1000, "batch");
    late.eligible = Some(500);
    let jobs = [job(1, "a", 8, 0, 1000, "batch"), late, job(3, "a", 8, 100, 1000, "batch")];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    assert_eq!((start_of(&runs, "3"), start_of(&runs, "2")), (1000, 2000));
    let two = runs.iter().find(|r| &*r.id == "2").unwrap();
    assert_eq!((two.submit, two.queued), (0, 500));
    assert_eq!(wait_of(&sim, "a"), Some(1500));
}

#[test]
fn submissions_and_durations_alone_simulate() {
    // No start, no end: the duration is the work. Two 8-GPU jobs on one node: 0..600 and
    // 600..1200 (the second waited 590 s).
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    let row = |id: &str, submit: i64| Job {
        id: id.into(),
        project: "a".into(),
        gpus: 8,
        submit,
        duration: Some(600),
        ..Job::default()
    };
    let (sim, runs) = run(&model(text), &[row("1", 0), row("2", 10)], Policy::Budget);
    assert_eq!((start_of(&runs, "1"), start_of(&runs, "2")), (0, 600));
    assert_eq!((sim.audit.jobs, wait_of(&sim, "a")), (2, Some(590)));
}

#[test]
fn a_simulation_of_no_usable_job_is_an_error() {
    let text = "cluster c gpus=8 gpu-type=h100\ncontract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    let never_ran = Job { id: "1".into(), project: "a".into(), gpus: 1, ..Job::default() };
    let too_large = job(2, "a", 9, 0, 100, "batch");
    let result = simulate(
        &model(text),
        [never_ran, too_large].into_iter().map(Ok),
        Policy::Budget,
        false,
        &mut |_| {},
    );
    match result {
        Err(AuditError::NoJobs(why)) => {
            assert!(why.contains("1 without a runtime") && why.contains("1 larger"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    let empty = simulate(&model(text), std::iter::empty(), Policy::Budget, false, &mut |_| {});
    assert!(matches!(empty, Err(AuditError::NoJobs(_))));
}

#[test]
fn a_row_of_an_unknown_cluster_is_a_bad_row() {
    let text = "cluster c gpus=8 gpu-type=h100\ncontract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    let mut stray = job(1, "a", 1, 0, 100, "batch");
    stray.cluster = "elsewhere".into();
    let jobs = [stray, job(2, "a", 1, 0, 100, "batch")];
    let skipped =
        simulate(&model(text), jobs.iter().cloned().map(Ok), Policy::Budget, true, &mut |_| {}).unwrap();
    assert_eq!((skipped.audit.skipped_rows, skipped.audit.jobs), (1, 1));
    let refused = simulate(&model(text), jobs.iter().cloned().map(Ok), Policy::Budget, false, &mut |_| {});
    assert!(matches!(refused, Err(AuditError::Job { ref id, .. }) if id == "1"), "{refused:?}");
}

#[test]
fn the_simulation_runs_on_after_its_audit_stops_and_its_own_error_comes_first() {
    // With a window of a second, the first job's 150,000 s of work fill more windows than an
    // audit keeps: the audit stops at the second run it reads, in the first batch of runs.
    // The simulation goes on through more runs than the batches handed over ahead of the
    // audit hold, to a row out of order: its error is the one said, as when the simulation
    // ran before its audit.
    let text = "cluster c gpus=8 gpu-type=h100\ncontract batch min-runtime=\"0s\" default=#true\n\
        policy window=\"1s\"\nproject a share=1\n";
    let mut jobs = vec![job(0, "a", 1, 0, 150_000, "batch")];
    jobs.extend((1..40_000).map(|i| job(i, "a", 1, 150_000 + i as i64, 1, "batch")));
    jobs.push(job(40_000, "a", 1, 10, 1, "batch"));
    let audited = allot_verify::audit::audit(&model(text), jobs[..2].iter().cloned().map(Ok), 1, false);
    assert!(matches!(audited, Err(AuditError::TooManyWindows { .. })), "{audited:?}");
    let result = simulate(&model(text), jobs.into_iter().map(Ok), Policy::Budget, false, &mut |_| {});
    assert!(matches!(result, Err(AuditError::NotSorted { ref id, .. }) if id == "40000"), "{result:?}");
}

const TREE: &str = "cluster c gpus=24 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"30m\" default=#true\n\
    contract checkpointed min-runtime=\"10m\" resumable=#true\n\
    contract debug min-runtime=\"0s\" max-runtime=\"1h\"\n\
    project lab share=3 {\n  project vision share=2\n  project nlp share=1\n}\nproject infra share=1\n";

/// TREE with `max-gpus`: lab (vision and nlp) at most 20 GPUs, nlp at most 10.
const CAPPED_TREE: &str = "cluster c gpus=24 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"30m\" default=#true\n\
    contract checkpointed min-runtime=\"10m\" resumable=#true\n\
    contract debug min-runtime=\"0s\" max-runtime=\"1h\"\n\
    project lab share=3 max-gpus=20 {\n  project vision share=2\n  project nlp share=1 max-gpus=10\n}\n\
    project infra share=1\n";
const CAPS: [(&str, u64); 2] = [("lab", 20), ("lab/nlp", 10)];

const PROJECTS: [&str; 4] = ["vision", "nlp", "infra", "nobody"];
const CONTRACTS: [&str; 3] = ["batch", "checkpointed", "debug"];

fn trace() -> impl Strategy<Value = Vec<Job>> {
    traces(20)
}

/// Traces of jobs of 1 to `most` GPUs.
fn traces(most: u32) -> impl Strategy<Value = Vec<Job>> {
    traces_of(&PROJECTS, most)
}

/// Traces of jobs of 1 to `most` GPUs for `projects`.
fn traces_of(projects: &'static [&'static str], most: u32) -> impl Strategy<Value = Vec<Job>> {
    prop::collection::vec((0..projects.len(), 1..=most, 0..3usize, 0..4000i64, 1..20_000i64), 1..60).prop_map(
        move |rows| {
            let mut submit = 0;
            rows.into_iter()
                .enumerate()
                .map(|(i, (p, gpus, c, gap, runtime))| {
                    submit += gap;
                    job(i, projects[p], gpus, submit, runtime, CONTRACTS[c])
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
    let (sim, runs) = run(&model, &jobs, Policy::Budget);
    check_invariants(&model, &jobs, &sim, &runs, Policy::Budget, &[]).unwrap();
    // A ceiling, not a figure worked out by hand: the schedule itself still has flaws of
    // its own (job 13 is started and preempted in the same instant).
    assert!(sim.preemptions <= 10, "{} preemptions", sim.preemptions);
}

fn check_invariants(
    model: &Model,
    jobs: &[Job],
    sim: &Simulation,
    runs: &[Run],
    policy: Policy,
    caps: &[(&str, u64)],
) -> Result<(), TestCaseError> {
    let held = match policy {
        Policy::Slurm(settings) => settings.requeue_delay,
        _ => 0,
    };
    check_instants(runs, caps, matches!(policy, Policy::Slurm(_)), held)?;
    let by_id: BTreeMap<&str, &Job> = jobs.iter().map(|j| (j.id.as_str(), j)).collect();
    let contract = |name: &str| model.contracts.iter().find(|c| c.name == name).unwrap();
    // No GPU is used twice: on each node, GPUs held at any instant stay within the node.
    let mut changes: BTreeMap<u32, Vec<(i64, i64)>> = BTreeMap::new();
    for run in runs {
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
    for run in runs {
        let job = by_id[&*run.id];
        let terms = contract(&run.contract);
        // No job runs before its submission.
        prop_assert!(run.start >= job.submit && run.queued >= job.submit && run.start >= run.queued);
        prop_assert_eq!(run.gpus, job.gpus);
        if run.preempted() {
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
        if run.preempted() && !terms.resumable {
            continue;
        }
        entry.0 += run.end - run.start;
        entry.1 += i64::from(!run.preempted());
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
    // A job's last run is the one that finishes.
    for job in jobs {
        let last = runs.iter().filter(|r| *r.id == *job.id).max_by_key(|r| (r.start, r.attempt)).unwrap();
        prop_assert!(!last.preempted(), "job {}: its last run is preempted", job.id);
    }
    // Waits are counted once per job: the audit has one wait per job, its first run's.
    let waits: usize = sim.audit.whole.contracts.iter().map(|c| c.waits.jobs()).sum();
    prop_assert_eq!(waits, jobs.len());
    let used: f64 = sim.audit.whole.clusters.iter().map(|c| c.used_gpu_hours).sum();
    let ran: f64 = runs.iter().map(|r| (r.end - r.start) as f64 * f64::from(r.gpus) / 3600.0).sum();
    prop_assert!((used - ran).abs() < 1e-6, "the audit counts {used} GPU-hours, the runs {ran}");
    Ok(())
}

/// The schedule at every instant (after the instant's scheduling: runs with start <= t < end
/// run, runs with queued <= t < start wait), on the 8-GPU nodes of the test clusters:
/// - no budget with a `max-gpus` in `caps` (a path and its subtree) runs more;
/// - no job waits that fits the free GPUs now and is within its caps, unless another
///   waiting job within its caps does not fit (the reservation that may hold it back is
///   such a job's: a sound, weaker form of "no idle GPU while a job that would not delay
///   the reservation waits"). Under Slurm's backfill (`planned`) the job that holds nodes may
///   be beyond its caps now: it was planned within them, before later jobs of the same run
///   started and took its budget's room, and Slurm keeps such a plan for the run. A
///   preempted job waits from the end of its hold (`held` seconds: Slurm's requeue).
fn check_instants(runs: &[Run], caps: &[(&str, u64)], planned: bool, held: i64) -> Result<(), TestCaseError> {
    let mut instants: Vec<i64> = runs.iter().flat_map(|r| [r.queued, r.start, r.end]).collect();
    instants.sort_unstable();
    instants.dedup();
    let under = |project: &str, cap: &str| project == cap || project.starts_with(&format!("{cap}/"));
    for t in instants {
        let running: Vec<&Run> = runs.iter().filter(|r| r.start <= t && t < r.end).collect();
        // A preempted job waits once its hold is over.
        let waiting: Vec<&Run> = runs
            .iter()
            .filter(|r| r.queued + if r.attempt > 1 { held } else { 0 } <= t && t < r.start)
            .collect();
        let mut free = [8u32; 3];
        for run in &running {
            for &(node, gpus) in &run.nodes {
                free[node as usize] -= gpus;
            }
        }
        let held = |cap: &str| -> u64 {
            running.iter().filter(|r| under(&r.project, cap)).map(|r| u64::from(r.gpus)).sum()
        };
        for &(cap, most) in caps {
            prop_assert!(held(cap) <= most, "{cap} runs {} GPUs at {t}, beyond its {most}", held(cap));
        }
        let within = |run: &Run| {
            caps.iter()
                .all(|&(cap, most)| !under(&run.project, cap) || held(cap) + u64::from(run.gpus) <= most)
        };
        let fits = |gpus: u32| {
            if gpus <= 8 {
                free.iter().any(|&f| f >= gpus)
            } else {
                free.iter().filter(|&&f| f == 8).count() as u32 * 8 >= gpus
            }
        };
        for w in &waiting {
            if within(w) && fits(w.gpus) {
                let held_back =
                    waiting.iter().any(|o| o.id != w.id && (planned || within(o)) && !fits(o.gpus));
                prop_assert!(held_back, "job {} waits at {t} though it fits and nothing holds it back", w.id);
            }
        }
    }
    Ok(())
}

/// Instants at which demand changes: a job enters its queue or finishes.
fn demand_changes(jobs: &[Job], runs: &[Run]) -> usize {
    let mut changes: Vec<i64> = jobs.iter().map(|j| j.submit).collect();
    changes.extend(runs.iter().filter(|r| !r.preempted()).map(|r| r.end));
    changes.sort_unstable();
    changes.dedup();
    changes.len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Budgets do not take turns. The argument (`closer_to_budgets`): while demand is
    /// unchanged every accepted preemption raises the best standing (GPUs within, then fewer
    /// beyond), GPUs within never fall, and at equal GPUs within the GPUs beyond fall by at
    /// least one; so between two demand changes there are finitely many preemptions, at most
    /// (C + 1) for each value the GPUs within take (C the cluster's GPUs). That bound is far
    /// above what schedules do; this property checks a ceiling of one preemption per demand
    /// change over the whole trace (on 2,000 traces the most seen was 0.61 per change, and 7
    /// in one stretch of unchanged demand), which a return of turn-taking breaks at once.
    #[test]
    fn preemptions_stay_below_one_per_demand_change(jobs in trace()) {
        let model = model(TREE);
        for policy in [Policy::Budget, Policy::Priority] {
            let (sim, runs) = run(&model, &jobs, policy.clone());
            let changes = demand_changes(&jobs, &runs);
            prop_assert!(sim.preemptions as usize <= changes, "{policy:?}: {} preemptions, {changes} demand changes", sim.preemptions);
        }
    }

    #[test]
    fn caps_hold_under_the_budget_policy(jobs in traces(12)) {
        let model = model(CAPPED_TREE);
        let jobs: Vec<Job> = jobs.into_iter().filter(|j| j.project != "nlp" || j.gpus <= 10).collect();
        prop_assume!(!jobs.is_empty());
        let (sim, runs) = run(&model, &jobs, Policy::Budget);
        check_invariants(&model, &jobs, &sim, &runs, Policy::Budget, &CAPS)?;
    }

    #[test]
    fn caps_hold_under_the_priority_policy(jobs in traces(12)) {
        let model = model(CAPPED_TREE);
        let jobs: Vec<Job> = jobs.into_iter().filter(|j| j.project != "nlp" || j.gpus <= 10).collect();
        prop_assume!(!jobs.is_empty());
        let (sim, runs) = run(&model, &jobs, Policy::Priority);
        check_invariants(&model, &jobs, &sim, &runs, Policy::Priority, &CAPS)?;
    }


    #[test]
    fn the_budget_policy_keeps_the_invariants(jobs in trace()) {
        let model = model(TREE);
        let (sim, runs) = run(&model, &jobs, Policy::Budget);
        check_invariants(&model, &jobs, &sim, &runs, Policy::Budget, &[])?;
    }

    #[test]
    fn the_slurm_policy_keeps_the_invariants(jobs in trace()) {
        let model = model(TREE);
        let policy = Policy::Slurm(preempt_qos());
        let (sim, runs) = run(&model, &jobs, policy.clone());
        check_invariants(&model, &jobs, &sim, &runs, policy, &[])?;
    }

    #[test]
    fn the_slurm_policy_with_floors_keeps_the_invariants(jobs in trace()) {
        let model = model(TREE);
        let policy = floors();
        let (sim, runs) = run(&model, &jobs, policy.clone());
        check_invariants(&model, &jobs, &sim, &runs, policy, &[])?;
        // Only a job past its protection (its contract's PreemptExemptTime) is preempted.
        for r in runs.iter().filter(|r| r.preempted()) {
            let min_runtime = model.contracts.iter().find(|c| *c.name == *r.contract).unwrap().min_runtime_seconds;
            prop_assert!(r.end - r.start >= min_runtime as i64, "job {} preempted at {} inside its protection", r.id, r.end);
        }
    }

    #[test]
    fn caps_hold_under_the_slurm_policy(jobs in traces(12)) {
        let model = model(CAPPED_TREE);
        let jobs: Vec<Job> = jobs.into_iter().filter(|j| j.project != "nlp" || j.gpus <= 10).collect();
        prop_assume!(!jobs.is_empty());
        let policy = Policy::Slurm(SlurmSettings::default());
        let (sim, runs) = run(&model, &jobs, policy.clone());
        check_invariants(&model, &jobs, &sim, &runs, policy, &CAPS)?;
    }

    #[test]
    fn the_priority_policy_keeps_the_invariants(jobs in trace()) {
        let model = model(TREE);
        let (sim, runs) = run(&model, &jobs, Policy::Priority);
        check_invariants(&model, &jobs, &sim, &runs, Policy::Priority, &[])?;
    }
}

/// 100 GPUs on one node, two equal budgets, resumable work with no minimum runtime.
const HUNDRED: &str = "cluster c gpus=100 gpu-type=h100 gpus-per-node=100\n\
    contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
    project a share=1\nproject b share=1\n";

#[test]
fn work_beyond_a_budget_gives_way_only_to_a_budget_within_its_own() {
    // b runs two 50-GPU jobs from 0 (10 h each). At 10, a asks for 60 GPUs (10 h): demand
    // 60 and 100, entitlements 50 and 50. 60 would take a beyond its 50: it may not preempt,
    // and, larger than a's entitlement, holds no reservation. At 11 a asks for 10 (1 h):
    // 0 + 10 <= 50, so it preempts one of b's jobs (b runs 100, keeps 50 covered without
    // either; the newest of the two equal ones goes, job 2). 40 GPUs stay idle: job 2 (50) does not
    // fit, a's 60 neither. At 3611 job 4 ends: 50 idle, job 2 comes back (its 35,989 s
    // left, to 39,600); the 60-GPU job still does not fit. Job 1 ends at 36,000 (50 idle,
    // too few), job 2 at 39,600: job 3 starts then and ends at 75,600. One preemption.
    let jobs = [
        job(1, "b", 50, 0, 36_000, "batch"),
        job(2, "b", 50, 0, 36_000, "batch"),
        job(3, "a", 60, 10, 36_000, "batch"),
        job(4, "a", 10, 11, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(HUNDRED), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 1);
    assert_eq!(runs_of(&runs, "2"), [(0, 11), (3611, 39_600)]);
    assert_eq!(runs_of(&runs, "4"), [(11, 3611)]);
    assert_eq!(runs_of(&runs, "3"), [(39_600, 75_600)]);
    assert_eq!(runs_of(&runs, "1"), [(0, 36_000)]);
}

/// A 12-GPU node: p (half, split evenly between c1 and c2) and q (a quarter); the last
/// quarter is unbudgeted work's. `batch` has no protection, `long` 10 h of it.
const NESTED: &str = "cluster c gpus=12 gpu-type=h100 gpus-per-node=12\n\
    contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
    contract long min-runtime=\"10h\" resumable=#true\n\
    project p share=\"50%\" {\n  project c1 share=\"50%\"\n  project c2 share=\"50%\"\n}\n\
    project q share=\"25%\"\n";

#[test]
fn a_sub_project_beyond_its_entitlement_gives_way_to_its_sibling_not_to_another_project() {
    // At 0: c1 runs two 3-GPU jobs (1, 2), q one of 1 GPU (3), unbudgeted work 5 GPUs under
    // `long` (4, protected to 36,000): the node is full. Demand c1 6, q 1, unbudgeted 5: p's
    // 6 all go to c1 (c2 has none), q 1, unbudgeted 5. Nobody is beyond.
    // At 100 c2 asks for 4 GPUs (5): p's 6 split 3 and 3; c1 is 3 beyond, job 2 beyond (with
    // job 1 before it, 6 > 3). Job 5 would take c2 to 4 > 3: it may not preempt.
    // At 200 q asks for 2 (6): demand q 3, its entitlement 3 (a quarter); 1 + 2 <= 3, so it
    // may preempt. Unbudgeted work is protected; job 2 is beyond c1's entitlement, but p
    // runs 6, its entitlement, and would fall: c1's excess is p's, for c2, not for q. Job 6
    // waits.
    // At 300 c2 asks for 3 (7): 0 + 3 <= 3, and p does not fall (job 2 out, job 7 in): job 2
    // is preempted for job 7. One preemption in all until the first job ends.
    let jobs = [
        job(1, "p/c1", 3, 0, 36_000, "batch"),
        job(2, "p/c1", 3, 0, 36_000, "batch"),
        job(3, "q", 1, 0, 36_000, "batch"),
        job(4, "nobody", 5, 0, 36_000, "long"),
        job(5, "p/c2", 4, 100, 3600, "batch"),
        job(6, "q", 2, 200, 3600, "batch"),
        job(7, "p/c2", 3, 300, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(NESTED), &jobs, Policy::Budget);
    let preempted = preemptions(&runs);
    assert_eq!(preempted, [("2", 300, Some("7"))]);
    assert_eq!(start_of(&runs, "7"), 300);
    // Job 7 ends at 3900 (3 GPUs free): job 2 (c1, beyond) or job 6 (q, within)? q ranks
    // before c1 (less usage): job 6 starts at 3900 on 2 of them, ending at 7500.
    assert_eq!(runs_of(&runs, "6"), [(3900, 7500)]);
    assert_eq!(sim.preemptions, 1);
}

#[test]
fn a_project_beyond_its_entitlement_gives_way_by_the_sub_project_beyond_its_own() {
    // 12 GPUs, p and q halves (6 each), c1 and c2 halves of p (3 each). c2 runs two 3-GPU
    // jobs from 0 (1, 2), q one (3); c1 one from 10 (4): p runs 9, beyond its 6, though c1
    // (3 of 3) is within. At 100 q asks for 3 (5): 3 + 3 <= 6. The newest job of p is c1's
    // (job 4), but c1 is within its entitlement: its job stays. c2 is 3 beyond: its newest,
    // job 2, is preempted for job 5 (p falls from 9 to 6, beyond before).
    let text = "cluster c gpus=12 gpu-type=h100 gpus-per-node=12\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        project p share=1 {\n  project c1 share=1\n  project c2 share=1\n}\nproject q share=1\n";
    let jobs = [
        job(1, "p/c2", 3, 0, 36_000, "batch"),
        job(2, "p/c2", 3, 0, 36_000, "batch"),
        job(3, "q", 3, 0, 36_000, "batch"),
        job(4, "p/c1", 3, 10, 36_000, "batch"),
        job(5, "q", 3, 100, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    let preempted: Vec<(&str, i64)> =
        runs.iter().filter(|r| r.preempted()).map(|r| (&*r.id, r.end)).collect();
    assert_eq!(preempted, [("2", 100)]);
    assert_eq!(runs_of(&runs, "4"), [(10, 36_010)]);
    assert_eq!(runs_of(&runs, "2"), [(0, 100), (3700, 3700 + 36_000 - 100)]);
    assert_eq!(sim.preemptions, 1);
}

#[test]
fn fractional_entitlements_round_down_for_the_job_that_preempts_and_up_for_its_victim() {
    // 10 GPUs, three equal budgets. At 0 a runs 2 one-GPU jobs, b and c 4 each: full. At
    // 100 a asks for two more (demand 4, 4, 4): each is entitled to 10/3 = 3.33. a's first
    // job: 2 + 1 = 3 <= 3.33, it preempts. b and c are 0.67 beyond, tied: b first (the
    // order of the budgets); b keeps 3, the whole GPUs of its 3.33, so one of its jobs may
    // go: the newest (5). a's second job: 3 + 1 = 4 > 3.33: it waits. b keeps 3, c 4. One
    // preemption, while demand holds.
    let text = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        project a share=1\nproject b share=1\nproject c share=1\n";
    let mut jobs = Vec::new();
    for (i, project) in ["a", "a", "b", "b", "b", "b", "c", "c", "c", "c"].into_iter().enumerate() {
        jobs.push(job(i, project, 1, 0, 36_000, "batch"));
    }
    jobs.push(job(10, "a", 1, 100, 3600, "batch"));
    jobs.push(job(11, "a", 1, 100, 3600, "batch"));
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    let preempted = preemptions(&runs);
    assert_eq!(preempted, [("5", 100, Some("10"))]);
    assert_eq!(sim.preemptions, 1);
    // Job 11 waits for job 10's GPU: 3700.
    assert_eq!(start_of(&runs, "11"), 3700);
}

#[test]
fn unbudgeted_work_runs_on_idle_gpus_gives_way_first_and_never_preempts() {
    // 8 GPUs: a has half, the rest is unbudgeted work's. At 0 unbudgeted work runs two
    // 4-GPU jobs (1, 2): the node is full. At 5 a asks for 4 (3): 0 + 4 <= 4, and the newest
    // unbudgeted job (2) gives way. At 10 unbudgeted work asks for 2
    // (4): it is entitled to 4 and runs 4, but work no budget covers never preempts; it
    // waits for idle GPUs (job 3 ends at 3605).
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        project a share=\"50%\"\n";
    let jobs = [
        job(1, "nobody", 4, 0, 36_000, "batch"),
        job(2, "nobody", 4, 0, 36_000, "batch"),
        job(3, "a", 4, 5, 3600, "batch"),
        job(4, "nobody", 2, 10, 600, "batch"),
    ];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    let preempted: Vec<(&str, i64)> =
        runs.iter().filter(|r| r.preempted()).map(|r| (&*r.id, r.end)).collect();
    assert_eq!(preempted, [("2", 5)]);
    assert_eq!(runs_of(&runs, "3"), [(5, 3605)]);
    // At 3605 job 2 (queued since 5) and job 4 (since 10) share unbudgeted work's queue:
    // job 2 first, on the 4 GPUs a left.
    assert_eq!(runs_of(&runs, "2"), [(0, 5), (3605, 3605 + 36_000 - 5)]);
    assert_eq!(start_of(&runs, "4"), 36_000);
    assert_eq!(sim.preemptions, 1);
}

#[test]
fn a_job_larger_than_its_budgets_entitlement_gives_way_a_straddling_one_no_larger_does_not() {
    // 8 GPUs, a entitled to 6 (three quarters), b to 2. a runs job 1 (4 GPUs, from 0) and
    // job 2 (4, from 1): 8 covered GPUs (each job fits a's 6). At 100 b asks for 2 (3):
    // 0 + 2 <= 2, but either of a's jobs would leave a 4 covered, below its 6. Taking one
    // would only move the shortfall from b to a (2 short before, 2 after): b waits for idle
    // GPUs, until job 1 ends at 36,000.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        project a share=3\nproject b share=1\n";
    let jobs = [
        job(1, "a", 4, 0, 36_000, "batch"),
        job(2, "a", 4, 1, 36_000, "batch"),
        job(3, "b", 2, 100, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 0);
    assert_eq!(start_of(&runs, "3"), 36_000);

    // a runs one 8-GPU job instead: larger than its entitlement of 6, it could only ever run
    // beyond it, and covers nothing. b's job takes it at 100; it comes back when b's ends.
    let jobs = [job(1, "a", 8, 0, 36_000, "batch"), job(3, "b", 2, 100, 3600, "batch")];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 1);
    assert_eq!(runs_of(&runs, "1"), [(0, 100), (3700, 3700 + 36_000 - 100)]);
    assert_eq!(runs_of(&runs, "3"), [(100, 3700)]);
}

#[test]
fn older_unprotected_jobs_give_way_when_the_newest_is_protected() {
    // 8 GPUs, a and b entitled to 4 each once b asks. a runs two 2-GPU `batch` jobs from 0
    // (1, 2; no protection) and a 4-GPU `long` job from 10 (3; protected for 10 h). At 100 b
    // asks for 4 (4): a runs 8, 4 beyond its 4. Its newest job is protected, but the rule
    // counts amounts: jobs 1 and 2 go (a keeps 4 covered, its entitlement) and b starts at
    // once. They come back when b's hour ends, at 3700.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        contract long min-runtime=\"10h\" resumable=#true\n\
        project a share=1\nproject b share=1\n";
    let jobs = [
        job(1, "a", 2, 0, 36_000, "batch"),
        job(2, "a", 2, 0, 36_000, "batch"),
        job(3, "a", 4, 10, 72_000, "long"),
        job(4, "b", 4, 100, 3600, "batch"),
    ];
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    assert_eq!(sim.preemptions, 2);
    assert_eq!(runs_of(&runs, "4"), [(100, 3700)]);
    assert_eq!(runs_of(&runs, "1"), [(0, 100), (3700, 3700 + 36_000 - 100)]);
    assert_eq!(runs_of(&runs, "2"), [(0, 100), (3700, 3700 + 36_000 - 100)]);
    assert_eq!(runs_of(&runs, "3"), [(10, 72_010)]);
}

#[test]
fn a_job_larger_than_a_node_takes_the_whole_nodes_cheapest_to_empty() {
    // Four 8-GPU nodes; a and b entitled to 16 each once a asks. b runs, from 0: job 1 (8
    // GPUs, node 0), jobs 2-9 (1 each, node 1), job 10 (8, node 2), jobs 11-14 (1 each, node
    // 3, half idle): 28 GPUs. At 100 a asks for 16 (15): two whole nodes. Node 3 costs 4
    // GPUs, the others 8 each; among those the newest set goes (job 10, the latest of the
    // oldest victims). Victims: jobs 10-14, 12 GPUs; b keeps 16, its entitlement.
    let text = "cluster c gpus=32 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        project a share=1\nproject b share=1\n";
    let mut jobs = vec![job(1, "b", 8, 0, 36_000, "batch")];
    jobs.extend((2..=9).map(|i| job(i, "b", 1, 0, 36_000, "batch")));
    jobs.push(job(10, "b", 8, 0, 36_000, "batch"));
    jobs.extend((11..=14).map(|i| job(i, "b", 1, 0, 36_000, "batch")));
    jobs.push(job(15, "a", 16, 100, 3600, "batch"));
    let (sim, runs) = run(&model(text), &jobs, Policy::Budget);
    let mut preempted: Vec<u32> =
        runs.iter().filter(|r| r.preempted()).map(|r| r.id.parse().unwrap()).collect();
    preempted.sort();
    assert_eq!(preempted, [10, 11, 12, 13, 14]);
    assert_eq!(runs_of(&runs, "15"), [(100, 3700)]);
    assert_eq!(sim.preemptions, 5);
}

/// One 8-GPU node, two equal budgets; `debug` holds a reserve of 2 GPUs.
const RESERVED: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"1h\" resumable=#true default=#true\n\
    contract debug min-runtime=\"0s\" max-runtime=\"2h\" max-gpus=1 reserve=2\n\
    project a share=1\nproject b share=1\n";

#[test]
fn debug_work_of_a_budget_beyond_its_entitlement_takes_a_loan_back_at_once() {
    // At 0 a starts eight 1-GPU batch jobs (1-8, 10 h). The reserve holds 2 GPUs: jobs 1-6
    // leave at least 2 free and run as a's own; job 7 leaves 1 free and job 8 none: they
    // run on loan. At 50 b asks for four (9-12): entitlements 4 and 4, a runs 8, 4 beyond,
    // but every job of a is protected for its first hour: b waits. At 100 a asks for a
    // debug job (13, 10 min): a is beyond its entitlement, so the budget rule would not let
    // it preempt; the reserve (0 of 2 held) takes a loan back at once: job 8, the newer of
    // the two. Job 13 runs from 100 to 700, never preempted. At 700 its GPU is free and b
    // (no usage yet) ranks first: job 9 starts, on loan again.
    let mut jobs: Vec<Job> = (1..=8).map(|i| job(i, "a", 1, 0, 36_000, "batch")).collect();
    jobs.extend((9..=12).map(|i| job(i, "b", 1, 50, 36_000, "batch")));
    jobs.push(job(13, "a", 1, 100, 600, "debug"));
    let (_, runs) = run(&model(RESERVED), &jobs, Policy::Budget);
    assert_eq!(runs_of(&runs, "13"), [(100, 700)]);
    let preempted: Vec<_> = preemptions(&runs).into_iter().filter(|&(_, end, _)| end <= 700).collect();
    assert_eq!(preempted, [("8", 100, Some("13"))]);
    assert_eq!(start_of(&runs, "9"), 700);

    // Without the reserve the debug job waits for the first hour's end (3600), when b's
    // jobs and the debug job compete for a's unprotected ones.
    let plain = RESERVED.replace(" reserve=2", "");
    let (_, runs) = run(&model(&plain), &jobs, Policy::Budget);
    assert!(start_of(&runs, "13") >= 3600, "{:?}", runs_of(&runs, "13"));
}

#[test]
fn an_inner_projects_own_jobs_are_its_own_in_the_figures() {
    // p has a sub-project and runs a job of its own: the simulation's audit counts it to
    // `p (own jobs)`, as the audit of a recorded trace does, not to unbudgeted work.
    let text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\n\
        project p share=1 {\n  project c1 share=1\n}\n";
    let (sim, runs) = run(&model(text), &[job(1, "p", 2, 0, 3600, "batch")], Policy::Budget);
    assert_eq!(&*runs[0].project, "p");
    let used: Vec<(&str, f64)> =
        sim.audit.whole.budgets.iter().map(|b| (b.project.as_str(), b.used_gpu_hours)).collect();
    assert!(used.contains(&("p (own jobs)", 2.0)), "{used:?}");
}

/// A budget tree as the rule reads it, written out apart from the simulator: each node's
/// project path (as runs name it), parent, weight among its siblings and cap, for
/// [`Hierarchy`]'s water-filling.
struct RuleTree {
    gpus: f64,
    nodes: Vec<(&'static str, Option<usize>, f64, Option<f64>)>,
    unbudgeted: usize,
}

impl RuleTree {
    fn hierarchy(&self) -> Hierarchy {
        let nodes = self
            .nodes
            .iter()
            .map(|&(name, parent, weight, cap)| {
                let node = Node::new(name, parent.map(NodeId), weight);
                match cap {
                    Some(cap) => node.with_cap(cap),
                    None => node,
                }
            })
            .collect();
        Hierarchy::new(nodes).unwrap()
    }

    fn leaf(&self, project: &str) -> usize {
        self.nodes.iter().position(|n| n.0 == project).unwrap_or_else(|| panic!("no node {project}"))
    }

    /// A node and the nodes above it.
    fn path(&self, node: usize) -> Vec<usize> {
        std::iter::successors(Some(node), |&n| self.nodes[n].1).collect()
    }
}

/// TREE as the rule reads it: lab (3/4: vision 2/3, nlp 1/3, its own jobs no share), infra
/// (1/4); the top shares leave nothing to unbudgeted work.
fn tree_rule() -> RuleTree {
    RuleTree {
        gpus: 24.0,
        nodes: vec![
            ("lab", None, 0.75, None),
            ("lab/vision", Some(0), 2.0 / 3.0, None),
            ("lab/nlp", Some(0), 1.0 / 3.0, None),
            ("lab (own)", Some(0), 1e-12, None),
            ("infra", None, 0.25, None),
            ("(unbudgeted)", None, 1e-12, Some(0.0)),
        ],
        unbudgeted: 5,
    }
}

/// NESTED as the rule reads it: p (1/2: c1 and c2 halves), q (1/4), unbudgeted work the
/// rest (1/4).
fn nested_rule() -> RuleTree {
    RuleTree {
        gpus: 12.0,
        nodes: vec![
            ("p", None, 0.5, None),
            ("p/c1", Some(0), 0.5, None),
            ("p/c2", Some(0), 0.5, None),
            ("p (own)", Some(0), 1e-12, None),
            ("q", None, 0.25, None),
            ("(unbudgeted)", None, 0.25, None),
        ],
        unbudgeted: 5,
    }
}

/// The budget rule on a schedule, every preemption judged from the runs alone, with the
/// entitlements computed again from the demand of that instant (the jobs entered and not
/// finished). A node's *covered* GPUs are those of its subtree's running jobs no larger than
/// its entitlement; it keeps `floor(entitlement)` of them:
/// - each victim was past its contract's minimum runtime;
/// - every budget and project whose covered GPUs fall in the exchange (the job started
///   counted in on its own path) still covers its entitlement's whole GPUs;
/// - the job it made room for is a budget's, and with it in and its victims out, its budget
///   and every project above it run no more than their entitlements;
/// - the potential falls by the job's GPUs: the budgets' summed shortfall (each leaf budget's
///   whole entitled GPUs its covered GPUs fall short of);
/// - budgets do not take turns: between two changes of demand, the GPUs started by
///   preemption are at most the cluster's (the bound the potential gives), and the
///   reserves' twice over (a loan taken back may leave a budget short).
///
/// A contract's `reserve`: each run is held in its contract's reserve when it fits what the
/// reserve does not hold yet, else on loan when it leaves fewer GPUs free than the other
/// reserves still hold (worked out from the runs in start order). A preemption whose victims
/// are all loans, for a job its reserve holds, is a loan taken back: the rule above does not
/// apply to it. No run its reserve holds is ever preempted.
fn check_budget_rule(model: &Model, tree: &RuleTree, runs: &[Run]) -> Result<(), TestCaseError> {
    const EPSILON: f64 = 1e-6;
    let hierarchy = tree.hierarchy();
    let reserve = |contract: &str| {
        model.contracts.iter().find(|c| *c.name == *contract).and_then(|c| c.reserve_gpus).unwrap_or(0) as u32
    };
    let reserves: u32 = model.contracts.iter().filter_map(|c| c.reserve_gpus).sum::<u64>() as u32;
    let min_runtime = |r: &Run| {
        model.contracts.iter().find(|c| *c.name == *r.contract).map_or(0, |c| c.min_runtime_seconds as i64)
    };
    // Each job's demand: from its first entry to its last end.
    let mut jobs: BTreeMap<&str, (i64, i64, u32, usize)> = BTreeMap::new();
    for r in runs {
        let entry = jobs.entry(&r.id).or_insert((r.queued, r.end, r.gpus, tree.leaf(&r.project)));
        entry.0 = entry.0.min(r.queued);
        entry.1 = entry.1.max(r.end);
    }
    // The run a preempted run made room for.
    let beneficiary = |v: &Run| -> &Run {
        let (id, attempt) = v.preempted_for.as_ref().unwrap();
        runs.iter().find(|b| b.id == *id && b.attempt == *attempt).unwrap()
    };
    // Running just before the run started `k`-th, at `t`: started before it, not ended before
    // it (its own victims still running).
    let running_at = |t: i64, k: u64| -> Vec<&Run> {
        runs.iter()
            .filter(|r| {
                r.start_order < k
                    && (r.end > t || (r.end == t && r.preempted() && beneficiary(r).start_order >= k))
            })
            .collect()
    };
    // What each run holds its GPUs as, by start order: (held by its reserve, on loan).
    let mut by_start: Vec<&Run> = runs.iter().collect();
    by_start.sort_by_key(|r| r.start_order);
    let mut holding: BTreeMap<u64, (bool, bool)> = BTreeMap::new();
    for r in &by_start {
        let before = running_at(r.start, r.start_order);
        let held = |contract: &str| -> u32 {
            before
                .iter()
                .filter(|o| *o.contract == *contract && holding[&o.start_order].0)
                .map(|o| o.gpus)
                .sum()
        };
        let reserved = reserve(&r.contract) > 0 && held(&r.contract) + r.gpus <= reserve(&r.contract);
        // Its victims stop before it starts. (A job larger than a node takes whole nodes.)
        let taken = |o: &Run| o.nodes.iter().map(|&(_, g)| g).sum::<u32>();
        let busy: u32 = before
            .iter()
            .filter(|o| !(o.preempted() && beneficiary(o).start_order == r.start_order))
            .map(|o| taken(o))
            .sum();
        let free_after = tree.gpus as u32 - busy - taken(r);
        let reserved_free: u32 = model
            .contracts
            .iter()
            .filter(|c| *c.name != *r.contract)
            .map(|c| reserve(&c.name).saturating_sub(held(&c.name)))
            .sum();
        holding.insert(r.start_order, (reserved, !reserved && free_after < reserved_free));
    }
    let leaves: Vec<usize> = (0..tree.nodes.len())
        .filter(|&n| n != tree.unbudgeted && !tree.nodes.iter().any(|m| m.1 == Some(n)))
        .collect();
    let mut preempted_gpus: BTreeMap<i64, u32> = BTreeMap::new();
    for started in runs {
        let victims: Vec<&Run> = runs
            .iter()
            .filter(|v| v.preempted() && beneficiary(v).start_order == started.start_order)
            .collect();
        if victims.is_empty() {
            continue;
        }
        let t = started.start;
        let k = started.start_order;
        for v in &victims {
            prop_assert!(!holding[&v.start_order].0, "job {} preempted at {t} within its reserve", v.id);
        }
        if holding[&k].0 && victims.iter().all(|v| holding[&v.start_order].1) {
            // A loan taken back.
            *preempted_gpus.entry(t).or_default() += started.gpus;
            continue;
        }
        let running = running_at(t, k);
        let mut demand = vec![0.0; tree.nodes.len()];
        for &(entered, finished, gpus, leaf) in jobs.values() {
            if entered <= t && t < finished {
                demand[leaf] += f64::from(gpus);
            }
        }
        let entitlement = hierarchy.allocate(tree.gpus, &demand).unwrap();
        let ent = entitlement.allocations();
        let keeps = |n: usize| (ent[n] + EPSILON).floor();
        let covered_by = |n: usize, gpus: u32| f64::from(gpus) <= ent[n] + EPSILON;
        let mut held = vec![0.0; tree.nodes.len()];
        let mut covered = vec![0.0; tree.nodes.len()];
        for r in &running {
            for n in tree.path(tree.leaf(&r.project)) {
                held[n] += f64::from(r.gpus);
                if covered_by(n, r.gpus) {
                    covered[n] += f64::from(r.gpus);
                }
            }
        }
        let mut freed = vec![0.0; tree.nodes.len()];
        let mut freed_covered = vec![0.0; tree.nodes.len()];
        for v in &victims {
            prop_assert!(
                t - v.start >= min_runtime(v),
                "job {} preempted at {t} inside its protection",
                v.id
            );
            for n in tree.path(tree.leaf(&v.project)) {
                freed[n] += f64::from(v.gpus);
                if covered_by(n, v.gpus) {
                    freed_covered[n] += f64::from(v.gpus);
                }
            }
        }
        let leaf = tree.leaf(&started.project);
        prop_assert!(leaf != tree.unbudgeted, "unbudgeted job {} preempted at {t}", started.id);
        let path = tree.path(leaf);
        let gpus = f64::from(started.gpus);
        let rise = |n: usize| if path.contains(&n) { gpus } else { 0.0 };
        for n in (0..tree.nodes.len()).filter(|&n| n != tree.unbudgeted) {
            if freed_covered[n] > rise(n) + EPSILON {
                prop_assert!(
                    covered[n] + rise(n) - freed_covered[n] >= keeps(n) - EPSILON,
                    "{} at {t} fell from {} covered GPUs to {}, below its entitlement {}",
                    tree.nodes[n].0,
                    covered[n],
                    covered[n] + rise(n) - freed_covered[n],
                    ent[n]
                );
            }
            if path.contains(&n) {
                prop_assert!(
                    held[n] + rise(n) - freed[n] <= ent[n] + EPSILON,
                    "job {} at {t} takes {} beyond its entitlement {}: {} GPUs",
                    started.id,
                    tree.nodes[n].0,
                    ent[n],
                    held[n] + rise(n) - freed[n]
                );
            }
        }
        let shortfall = |covered: &dyn Fn(usize) -> f64| -> f64 {
            leaves.iter().map(|&l| (keeps(l) - covered(l)).max(0.0)).sum()
        };
        let before = shortfall(&|l| covered[l]);
        let after = shortfall(&|l| covered[l] + rise(l) - freed_covered[l]);
        prop_assert!(
            after <= before - gpus + EPSILON,
            "the budgets' shortfall went from {before} to {after} at {t}, starting job {} ({gpus} GPUs)",
            started.id
        );
        *preempted_gpus.entry(t).or_default() += started.gpus;
    }
    // Between two changes of demand, at most the cluster's GPUs start by preemption.
    let mut changes: Vec<i64> =
        jobs.values().flat_map(|&(entered, finished, _, _)| [entered, finished]).collect();
    changes.sort_unstable();
    changes.dedup();
    for window in changes.windows(2) {
        let gpus: u32 = preempted_gpus.range(window[0]..window[1]).map(|(_, g)| g).sum();
        prop_assert!(
            f64::from(gpus) <= tree.gpus + f64::from(2 * reserves),
            "{gpus} GPUs started by preemption from {} to {}",
            window[0],
            window[1]
        );
    }
    Ok(())
}

const NESTED_PROJECTS: [&str; 4] = ["p/c1", "p/c2", "q", "nobody"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_budget_rule_holds_at_every_preemption(jobs in trace()) {
        let model = model(TREE);
        let (_, runs) = run(&model, &jobs, Policy::Budget);
        check_budget_rule(&model, &tree_rule(), &runs)?;
    }

    #[test]
    fn the_budget_rule_holds_with_a_reserve_for_debug_work(jobs in trace()) {
        let model = model(&TREE.replace("max-runtime=\"1h\"", "max-runtime=\"1h\" reserve=4"));
        prop_assume!(model.contracts.iter().any(|c| c.reserve_gpus == Some(4)));
        let (_, runs) = run(&model, &jobs, Policy::Budget);
        check_budget_rule(&model, &tree_rule(), &runs)?;
    }

    #[test]
    fn the_budget_rule_holds_in_a_tree_with_unbudgeted_work(jobs in traces_of(&NESTED_PROJECTS, 8)) {
        let model = model(NESTED);
        let (_, runs) = run(&model, &jobs, Policy::Budget);
        check_budget_rule(&model, &nested_rule(), &runs)?;
    }
}

#[test]
fn a_grant_starting_mid_trace_changes_what_the_policies_enforce_from_then_on() {
    // Budget rule, 10 GPUs: a 40% and, from 3600, +20%; b 40% (the rest idle). Both ask at
    // 0: a six 1-GPU jobs, b ten, 2 h each, preemptible at once. Until 3600 each is entitled
    // to 5: each starts five (idle GPUs go to budgets below their entitlements first), and
    // a's sixth waits. From 3600 a is entitled to 6 and b to 4: b's newest job gives way and
    // a's sixth starts then. Without the grant it waits for 7200, when a's jobs end.
    let budgets = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
        contract batch min-runtime=\"0s\" resumable=#true default=#true\n\
        project a share=\"40%\" {\n    grant share=\"+20%\" from=\"1970-01-01T01:00:00Z\" until=\"2100-01-01\" reason=\"r\"\n}\n\
        project b share=\"40%\"\n";
    let mut jobs: Vec<Job> = (1..=6).map(|i| job(i, "a", 1, 0, 7200, "batch")).collect();
    jobs.extend((7..=16).map(|i| job(i, "b", 1, 0, 7200, "batch")));
    let (sim, runs) = run(&model(budgets), &jobs, Policy::Budget);
    assert_eq!(runs_of(&runs, "6"), [(3600, 10_800)]);
    assert_eq!(runs_of(&runs, "11"), [(0, 3600), (7200, 10_800)], "b's newest gives way at 3600");
    assert_eq!(sim.preemptions, 1);
    let written = budgets.replace(
        "    grant share=\"+20%\" from=\"1970-01-01T01:00:00Z\" until=\"2100-01-01\" reason=\"r\"\n",
        "",
    );
    let (sim, runs) = run(&model(&written), &jobs, Policy::Budget);
    assert_eq!(runs_of(&runs, "6"), [(7200, 14_400)]);
    assert_eq!(sim.preemptions, 0);

    // Slurm with floors, 8 GPUs: a 40% (a floor of 3) and, from 600, +10% (4); b 50% (4).
    // b's eight 1-GPU jobs start at 0, four in its floor and four in `over`, protected for
    // 2 minutes. a's four at 10: three preempt b's over jobs at the pass after 120 (130)
    // and run in a's floor; the fourth finds it full. At 600 a's floor is 4: it preempts
    // b's last over job then. Without the grant it waits for b's jobs to end at 3600.
    let floors_text = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"2m\" resumable=#true default=#true\n\
        project a share=\"40%\" {\n    grant share=\"+10%\" from=\"1970-01-01T00:10:00Z\" until=\"2100-01-01\" reason=\"r\"\n}\n\
        project b share=\"50%\"\n";
    let mut jobs: Vec<Job> = (1..=8).map(|i| job(i, "b", 1, 0, 3600, "batch")).collect();
    jobs.extend((9..=12).map(|i| job(i, "a", 1, 10, 3600, "batch")));
    let a_starts = |runs: &[Run]| {
        let mut starts: Vec<i64> =
            runs.iter().filter(|r| r.project.as_ref() == "a").map(|r| r.start).collect();
        starts.sort();
        starts
    };
    let (_, runs) = run(&model(floors_text), &jobs, floors());
    assert_eq!(a_starts(&runs), [130, 130, 130, 600]);
    let written = floors_text.replace(
        "    grant share=\"+10%\" from=\"1970-01-01T00:10:00Z\" until=\"2100-01-01\" reason=\"r\"\n",
        "",
    );
    let (_, runs) = run(&model(&written), &jobs, floors());
    assert_eq!(a_starts(&runs), [130, 130, 130, 3600]);
}
