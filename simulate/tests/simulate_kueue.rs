//! The simulator's `kueue` policy on schedules worked out by hand from Kueue's rules (the
//! notes cited in `simulate/src/kueue/`), and its quota invariant on generated traces.

use std::collections::BTreeMap;
use std::sync::Arc;

use allot_compiler::ir::Model;
use allot_compiler::test_support::model;
use allot_simulate::{
    ClusterObjects, EndedBy, Kueue, Policy, Run, Simulation, UNBUDGETED, simulate_with_runs,
};
use allot_verify::audit::AuditError;
use allot_verify::trace::Job;
use proptest::prelude::*;
use serde_json::{Value, json};

const GPU: &str = "nvidia.com/gpu";
const API: &str = "kueue.x-k8s.io/v1beta2";

/// A job as a trace records it: `runtime` seconds of work.
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

/// One cluster `c` of 8 GPUs on one node, projects a, b and c, contracts `batch` (the
/// default), `mid`, `high` and `urgent`, none protected, none resumable.
const MODEL: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"0s\" default=#true\n\
    contract mid min-runtime=\"0s\"\n\
    contract high min-runtime=\"0s\"\n\
    contract urgent min-runtime=\"0s\"\n\
    project a share=1\nproject b share=1\nproject c share=1\n";

fn flavor() -> Value {
    json!({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}, "spec": {}})
}

fn groups(gpus: u64) -> Value {
    json!([{"coveredResources": [GPU], "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}])
}

/// A Cohort with `gpus` of its own.
fn cohort(name: &str, gpus: u64) -> Value {
    let spec = if gpus > 0 { json!({"resourceGroups": groups(gpus)}) } else { json!({}) };
    json!({"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
}

/// A ClusterQueue of `gpus` in `cohort`, with `extra` fields of its spec.
fn queue(name: &str, cohort: Option<&str>, gpus: u64, extra: Value) -> Value {
    let mut spec = json!({"resourceGroups": groups(gpus)});
    if let Some(cohort) = cohort {
        spec["cohortName"] = json!(cohort);
    }
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})
}

/// A WorkloadPriorityClass.
fn class(name: &str, value: i32) -> Value {
    json!({"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})
}

/// The policy of `objects` on cluster `c`, each project's jobs in the ClusterQueue of its
/// name.
fn kueue(objects: Vec<Value>, configuration: Option<Value>) -> Policy {
    kueue_over_time(objects, &[], configuration)
}

/// The policy of `objects` on cluster `c`, then of each of `later` from its moment on.
fn kueue_over_time(objects: Vec<Value>, later: &[(i64, Vec<Value>)], configuration: Option<Value>) -> Policy {
    let queues: Vec<(String, String)> =
        ["a", "b", "c"].iter().map(|p| (p.to_string(), p.to_string())).collect();
    let queues: Vec<(String, String)> = queues
        .into_iter()
        .filter(|(name, _)| {
            objects.iter().any(|o| o["kind"] == "ClusterQueue" && o["metadata"]["name"] == *name)
        })
        .collect();
    let given = ClusterObjects {
        cluster: "c",
        objects: &objects,
        configuration: configuration.as_ref(),
        resource: GPU,
        queues: &queues,
        contracts: &[],
        later,
    };
    Policy::Kueue(Arc::new(Kueue::new([given]).unwrap()))
}

fn run(model: &Model, jobs: &[Job], policy: Policy) -> (Simulation, Vec<Run>) {
    simulate_with_runs(model, jobs.iter().cloned().map(Ok), policy, false).unwrap()
}

/// Each job's runs: (start, end, preempted).
fn runs_of(runs: &[Run]) -> BTreeMap<String, Vec<(i64, i64, bool)>> {
    let mut by_job: BTreeMap<String, Vec<(i64, i64, bool)>> = BTreeMap::new();
    for run in runs {
        by_job.entry(run.id.to_string()).or_default().push((run.start, run.end, run.preempted()));
    }
    by_job.values_mut().for_each(|r| r.sort());
    by_job
}

/// The runs preempted, each with the job it made room for.
fn preempted(runs: &[Run]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = runs
        .iter()
        .filter(|r| r.preempted())
        .map(|r| (r.id.to_string(), r.preempted_for.as_ref().unwrap().0.to_string()))
        .collect();
    out.sort();
    out
}

/// Two ClusterQueues of 4 GPUs in one cohort (no quota of its own), `preemption` for both.
fn pair(preemption: Value) -> Vec<Value> {
    let extra = json!({"preemption": preemption});
    vec![
        flavor(),
        cohort("pool", 0),
        queue("a", Some("pool"), 4, extra.clone()),
        queue("b", Some("pool"), 4, extra),
    ]
}

/// a borrows all 8 GPUs: jobs 1 (2 GPUs at 0), 2 (4 at 10) and 3 (2 at 20), each 10,000 s.
/// b asks for 4 at 100, for 1000 s.
fn borrowed_then_reclaimed() -> Vec<Job> {
    vec![
        job(1, "a", 2, 0, 10_000, "batch"),
        job(2, "a", 4, 10, 10_000, "batch"),
        job(3, "a", 2, 20, 10_000, "batch"),
        job(4, "b", 4, 100, 1000, "batch"),
    ]
}

#[test]
fn a_lender_reclaims_its_quota_with_a_minimal_set() {
    // At 100, b's job 4 does not fit (the cohort's 8 are a's). 4 ≤ b's nominal 4: Kueue
    // tries preemption. b is within its quota with it (0 + 4 ≤ 4): a's jobs (a is over its
    // 4) are hierarchical reclaims, most recently started first: 3, 2, 1. Attempt with
    // borrowing allowed: without 3 a uses 6, b has 2 available: not enough; without 2 as
    // well, a uses 2, b has 6: it fits. Fill back: with 3 given back a uses 4 and b still
    // has 4: 3 is spared. The victim is job 2 alone; job 4 starts at 100 in the next cycle.
    // Job 2 requeues at its place: a uses 4 of its 4 and b its 4; it asks 4 ≤ a's nominal,
    // but no queue is over its quota: no candidates, set aside until job 4 ends at 1100.
    let policy = kueue(pair(json!({"reclaimWithinCohort": "Any"})), None);
    let (sim, runs) = run(&model(MODEL), &borrowed_then_reclaimed(), policy);
    assert_eq!((sim.preemptions, sim.stalled), (1, 0));
    assert_eq!(preempted(&runs), [("2".to_string(), "4".to_string())]);
    let by_job = runs_of(&runs);
    assert_eq!(by_job["1"], [(0, 10_000, false)]);
    assert_eq!(by_job["2"], [(10, 100, true), (1100, 11_100, false)]);
    assert_eq!(by_job["3"], [(20, 10_020, false)]);
    assert_eq!(by_job["4"], [(100, 1100, false)]);
}

#[test]
fn without_reclaim_the_lender_waits_for_the_borrower() {
    // reclaimWithinCohort Never: at 100 job 4 has no candidates and is set aside (its
    // queue reserves its 4 for the rest of the cycle, to no one's loss). Job 1 ends at
    // 10,000: quota released, job 4 comes back, but only 2 are free: set aside again. Job 2
    // ends at 10,010: a uses 2, 6 are free: job 4 starts at 10,010.
    let policy = kueue(pair(json!({"reclaimWithinCohort": "Never"})), None);
    let (sim, runs) = run(&model(MODEL), &borrowed_then_reclaimed(), policy);
    assert_eq!(sim.preemptions, 0);
    assert_eq!(runs_of(&runs)["4"], [(10_010, 11_010, false)]);
}

#[test]
fn within_a_queue_a_higher_priority_preempts_a_lower_one_not_an_equal_one() {
    // One ClusterQueue of 8, no cohort, withinClusterQueue LowerPriority; `urgent` is 100,
    // `batch` has no class: 0. At 0 job 1 (batch, 4), at 10 job 2 (urgent, 4): full. At
    // 100 job 3 (urgent, 4): its only lower candidate is job 1 (job 2 is equal, though
    // started later): job 1 is preempted, job 3 starts at 100 and ends at 1100. Job 1
    // (batch) may preempt nobody: set aside. At 200 job 4 (urgent, 4): jobs 2 and 3 are its
    // equals: no candidates. At 1100 job 3 ends; job 4 (urgent) heads the queue before job
    // 1: it starts at 1100, ends at 1200; job 1 restarts at 1200.
    let objects = vec![
        flavor(),
        class("urgent", 100),
        queue("a", None, 8, json!({"preemption": {"withinClusterQueue": "LowerPriority"}})),
    ];
    let jobs = [
        job(1, "a", 4, 0, 10_000, "batch"),
        job(2, "a", 4, 10, 10_000, "urgent"),
        job(3, "a", 4, 100, 1000, "urgent"),
        job(4, "a", 4, 200, 100, "urgent"),
    ];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(objects, None));
    assert_eq!(sim.preemptions, 1);
    assert_eq!(preempted(&runs), [("1".to_string(), "3".to_string())]);
    let by_job = runs_of(&runs);
    assert_eq!(by_job["1"], [(0, 100, true), (1200, 11_200, false)]);
    assert_eq!(by_job["2"], [(10, 10_010, false)]);
    assert_eq!(by_job["3"], [(100, 1100, false)]);
    assert_eq!(by_job["4"], [(1100, 1200, false)]);
}

/// a (nominal 2) runs jobs 1 (mid, 2 GPUs at 0), 2 (mid, 2 at 10) and 3 (batch, 2 at 20);
/// c (nominal 4) runs job 5 (batch, 2 at 30): each 10,000 s; the cohort's 8 are in use, a
/// borrowing 4 of them. b (nominal 2) asks for 4 at 100 (high), for 1000 s: it would
/// borrow 2.
fn borrowing_preemptor(threshold: Option<i32>) -> (Vec<Value>, Vec<Job>) {
    let mut bwc = json!({"policy": "LowerPriority"});
    if let Some(threshold) = threshold {
        bwc["maxPriorityThreshold"] = json!(threshold);
    }
    let objects = vec![
        flavor(),
        class("mid", 100),
        class("high", 200),
        cohort("pool", 0),
        queue("a", Some("pool"), 2, json!({})),
        queue(
            "b",
            Some("pool"),
            2,
            json!({"preemption": {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": bwc}}),
        ),
        queue("c", Some("pool"), 4, json!({})),
    ];
    let jobs = vec![
        job(1, "a", 2, 0, 10_000, "mid"),
        job(2, "a", 2, 10, 10_000, "mid"),
        job(3, "a", 2, 20, 10_000, "batch"),
        job(5, "c", 2, 30, 10_000, "batch"),
        job(4, "b", 4, 100, 1000, "high"),
    ];
    (objects, jobs)
}

#[test]
fn borrowing_preemption_stops_at_the_priority_threshold() {
    // maxPriorityThreshold 50. At 100 job 4 (high, 200) would borrow (4 > b's 2): only
    // borrowWithinCohort lets it preempt. a is over its quota (6 > 2), c is not (2 ≤ 4).
    // Candidates: job 3 (batch, 0 ≤ 50) may be preempted while b borrows; jobs 1 and 2
    // (mid, 100 > 50) only if b would not borrow. Attempt allowing borrowing: without job 3,
    // a uses 4 and b has 2 available: not enough, and nothing else is valid. Attempt not
    // allowing it: b borrows with 4 whatever goes. No candidates: job 4 waits. At 10,000 job
    // 1 ends: a uses 4, 2 are free; without job 3, a uses 2 and b has 4: job 3 is preempted
    // and job 4 starts at 10,000. Job 3 (a: Never) waits until job 2 ends at 10,010.
    let (objects, jobs) = borrowing_preemptor(Some(50));
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(objects, None));
    assert_eq!(preempted(&runs), [("3".to_string(), "4".to_string())]);
    assert_eq!(sim.preemptions, 1);
    let by_job = runs_of(&runs);
    assert_eq!(by_job["4"], [(10_000, 11_000, false)]);
    assert_eq!(by_job["3"], [(20, 10_000, true), (10_010, 20_010, false)]);
}

#[test]
fn borrowing_preemption_without_a_threshold_takes_any_lower_priority() {
    // No threshold: every a job is lower than 200 and may go while b borrows. Lowest
    // priority first, then the most recent: 3 (batch), 2, 1. Without 3, b has 2; without 2
    // as well, a uses 2 (back at its quota) and b has 4: it fits. Fill back: with 3 back, b
    // has 2: 3 stays a victim. Victims 3 and 2; job 4 starts at 100, ends at 1100. Then a's
    // head is job 2 (mid before batch): it restarts at 1100, and job 3 after it.
    let (objects, jobs) = borrowing_preemptor(None);
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(objects, None));
    assert_eq!(sim.preemptions, 2);
    assert_eq!(preempted(&runs), [("2".to_string(), "4".to_string()), ("3".to_string(), "4".to_string())]);
    let by_job = runs_of(&runs);
    assert_eq!(by_job["4"], [(100, 1100, false)]);
    assert_eq!(by_job["2"], [(10, 100, true), (1100, 11_100, false)]);
    assert_eq!(by_job["3"], [(20, 100, true), (1100, 11_100, false)]);
}

#[test]
fn best_effort_fifo_lets_a_small_job_pass_strict_fifo_does_not() {
    // One ClusterQueue of 8, no cohort. Job 1 takes 6 at 0 for 1000 s; job 2 asks for 4 at
    // 10 (2 are free); job 3 for 2 at 20. BestEffortFIFO: job 2 is set aside (no
    // candidates), job 3 heads the queue and starts at 20. StrictFIFO: job 2 blocks the
    // queue; both start when job 1 ends at 1000.
    let jobs = [
        job(1, "a", 6, 0, 1000, "batch"),
        job(2, "a", 4, 10, 100, "batch"),
        job(3, "a", 2, 20, 100, "batch"),
    ];
    let starts = |strategy: &str| {
        let objects = vec![flavor(), queue("a", None, 8, json!({"queueingStrategy": strategy}))];
        let (_, runs) = run(&model(MODEL), &jobs, kueue(objects, None));
        let by_job = runs_of(&runs);
        (by_job["2"][0].0, by_job["3"][0].0)
    };
    assert_eq!(starts("BestEffortFIFO"), (1000, 20));
    assert_eq!(starts("StrictFIFO"), (1000, 1000));
}

/// A cohort of its own 6 GPUs (`quota`) lent to a (weight 1) and b (weight 2), both of
/// quota 0 and reclaiming `Any`.
fn borrowers(quota: u64) -> Vec<Value> {
    let extra = |weight: u32| json!({"fairSharing": {"weight": weight}, "preemption": {"reclaimWithinCohort": "Any"}});
    vec![
        flavor(),
        cohort("pool", quota),
        queue("a", Some("pool"), 0, extra(1)),
        queue("b", Some("pool"), 0, extra(2)),
    ]
}

fn fair_sharing(strategies: &[&str]) -> Value {
    json!({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": strategies}})
}

#[test]
fn fair_sharing_admits_the_lower_weighted_share_first() {
    // The cohort has 6; a and b each queue three 2-GPU jobs at 0. Lendable to each: 6. A
    // queue's share with its head: borrowed × 1000 / 6 over its weight. Cycle 1: a's 2 →
    // 333 / 1, b's 2 → 333 / 2 = 167: b's job 4 first, then a's job 1 (4 used). Cycle 2:
    // a's 4 → 667, b's 4 → 333: b's job 5 (6 used); a's job 2 no longer fits. b ends up
    // with 4, a with 2 until they end at 1000.
    let jobs = [
        job(1, "a", 2, 0, 1000, "batch"),
        job(2, "a", 2, 0, 1000, "batch"),
        job(3, "a", 2, 0, 1000, "batch"),
        job(4, "b", 2, 0, 1000, "batch"),
        job(5, "b", 2, 0, 1000, "batch"),
        job(6, "b", 2, 0, 1000, "batch"),
    ];
    let policy = kueue(borrowers(6), Some(fair_sharing(&["LessThanOrEqualToFinalShare"])));
    let (_, runs) = run(&model(MODEL), &jobs, policy);
    let mut at_zero: Vec<(u64, String)> =
        runs.iter().filter(|r| r.start == 0).map(|r| (r.start_order, r.id.to_string())).collect();
    at_zero.sort();
    let order: Vec<&str> = at_zero.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(order, ["4", "1", "5"]);
}

/// a runs one job of 4 GPUs from 0 (10,000 s), b two of 2 from 10 and 20 (10,000 s): the
/// cohort's 8 are in use. b asks for 2 more at 100, for 100 s.
fn fair_preemption(strategies: &[&str]) -> (Simulation, Vec<Run>) {
    let jobs = [
        job(1, "a", 4, 0, 10_000, "batch"),
        job(2, "b", 2, 10, 10_000, "batch"),
        job(3, "b", 2, 20, 10_000, "batch"),
        job(4, "b", 2, 100, 100, "batch"),
    ];
    run(&model(MODEL), &jobs, kueue(borrowers(8), Some(fair_sharing(strategies))))
}

#[test]
fn fair_sharing_preempts_by_each_strategy() {
    // Lendable 8: a's share is 125 per GPU (weight 1), b's 62.5 (weight 2). With job 4 b
    // would use 6: 375. a's job 1 is b's only candidate (a borrows 4): a's share is 500
    // before, 0 after. LessThanOrEqualToFinalShare: 375 ≤ 0 fails: no preemption; job 4
    // waits until job 1 ends at 10,000.
    let (sim, runs) = fair_preemption(&["LessThanOrEqualToFinalShare"]);
    assert_eq!(sim.preemptions, 0);
    assert_eq!(runs_of(&runs)["4"], [(10_000, 10_100, false)]);
    // LessThanInitialShare: 375 < 500 holds: job 1 is preempted and job 4 starts at 100.
    // Job 1, requeued, would take a to 500 against b's 375: it may not preempt back, and
    // waits for job 4 to end at 200. The default pair of strategies refuses with the first
    // and preempts with the second.
    for strategies in
        [&["LessThanInitialShare"][..], &["LessThanOrEqualToFinalShare", "LessThanInitialShare"]]
    {
        let (sim, runs) = fair_preemption(strategies);
        assert_eq!((sim.preemptions, sim.stalled), (1, 0), "{strategies:?}");
        let by_job = runs_of(&runs);
        assert_eq!(by_job["4"], [(100, 200, false)], "{strategies:?}");
        assert_eq!(by_job["1"], [(0, 100, true), (200, 10_200, false)], "{strategies:?}");
    }
}

#[test]
fn jobs_without_a_queue_or_beyond_their_quota_are_not_replayed() {
    // c has no ClusterQueue; a's 6-GPU job is more than a could ever hold (4, no cohort).
    let objects = vec![flavor(), queue("a", None, 4, json!({})), queue("b", None, 8, json!({}))];
    let jobs =
        [job(1, "a", 6, 0, 100, "batch"), job(2, "c", 1, 0, 100, "batch"), job(3, "b", 8, 0, 100, "batch")];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(objects, None));
    assert_eq!(sim.unplaceable, 2);
    assert_eq!(runs.len(), 1);
    // A queue pair naming nothing, and Admission Fair Sharing, are refused.
    let objects = [
        flavor(),
        queue("a", None, 4, json!({"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}})),
    ];
    let configuration = json!({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "admissionFairSharing": {}});
    let given = |queues| ClusterObjects {
        cluster: "c",
        objects: &objects,
        configuration: Some(&configuration),
        resource: GPU,
        queues,
        contracts: &[],
        later: &[],
    };
    let error = Kueue::new([given(&[])]).unwrap_err().to_string();
    assert!(error.contains("Admission Fair Sharing") && error.contains("not simulated yet"), "{error}");
    let pairs = [("z".to_string(), "a".to_string())];
    let objects = [flavor(), queue("a", None, 4, json!({}))];
    let error = Kueue::new([ClusterObjects { objects: &objects, configuration: None, ..given(&pairs) }])
        .unwrap_err()
        .to_string();
    assert_eq!(error, "cluster \"c\": \"z\" (for project \"a\") names no ClusterQueue or Cohort");
    // Work no budget covers goes to the ClusterQueue named for UNBUDGETED, if any.
    let objects = [flavor(), queue("a", None, 4, json!({})), queue("root-unbudgeted", None, 2, json!({}))];
    let pairs = [("a".to_string(), "a".to_string()), ("root-unbudgeted".to_string(), UNBUDGETED.to_string())];
    let policy = Policy::Kueue(Arc::new(
        Kueue::new([ClusterObjects { objects: &objects, configuration: None, ..given(&pairs) }]).unwrap(),
    ));
    let jobs = [job(1, "elsewhere", 2, 0, 100, "batch"), job(2, "elsewhere", 2, 0, 100, "batch")];
    let (sim, runs) = run(&model(MODEL), &jobs, policy);
    let starts: Vec<(&str, i64)> = runs.iter().map(|r| (&*r.project, r.start)).collect();
    assert_eq!((sim.unplaceable, starts), (0, vec![("(unbudgeted)", 0), ("(unbudgeted)", 100)]));
    // The label.
    assert_eq!(kueue(vec![flavor()], None).label(), "Kueue as configured");
}

#[test]
fn quotas_follow_the_objects_of_each_grant_boundary() {
    // ClusterQueues a and b in cohort pool (8 GPUs on one node), each reclaiming within the
    // cohort and never preempting within itself: a 2 and b 6 GPUs, then a 4 and b 4 from
    // 3600 (a grant), then a 2 and b 6 again from 7200. b's eight 1-GPU jobs (1-8) start at
    // 0, borrowing 2 of a's. a's four (9-12) come at 100, 10,000 s each like b's:
    // - at 100, 9 and 10 are within a's quota: each reclaims one of b's; 11 and 12 would
    //   borrow, and b is within its own quota: set aside;
    // - at 3600, a's quota is 4: the update brings 11 and 12 back, within a's quota, and
    //   b (6 running, quota 4) borrows 2: two more of b's are evicted, 11 and 12 start;
    // - at 7200, a (4 running, quota 2) borrows 2 and b's evicted jobs are within b's quota
    //   (4 running of 6): b reclaims the two a admitted last, 11 and 12, and two of its own
    //   start again; its other two would borrow, and a is within its quota;
    // - at 10,000 b's four of 0 end: 4 GPUs free; b's last two (2 running of 6) and a's 11
    //   and 12 (2 of 2, borrowing) are all admitted.
    // Without the boundaries 11 and 12 wait for b's six to end at 10,000: two preemptions.
    let reclaim = json!({"preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}});
    let setup = |a: u64, b: u64| {
        vec![
            flavor(),
            cohort("pool", 0),
            queue("a", Some("pool"), a, reclaim.clone()),
            queue("b", Some("pool"), b, reclaim.clone()),
        ]
    };
    let mut jobs: Vec<Job> = (1..=8).map(|i| job(i, "b", 1, 0, 10_000, "batch")).collect();
    jobs.extend((9..=12).map(|i| job(i, "a", 1, 100, 10_000, "batch")));
    let later = [(3600, setup(4, 4)), (7200, setup(2, 6))];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue_over_time(setup(2, 6), &later, None));
    let by_job = runs_of(&runs);
    for id in ["9", "10"] {
        assert_eq!(by_job[id], [(100, 10_100, false)], "job {id}");
    }
    for id in ["11", "12"] {
        assert_eq!(by_job[id], [(3600, 7200, true), (10_000, 20_000, false)], "job {id}");
    }
    assert_eq!(sim.preemptions, 6);
    // Who made room for whom: two of b's for 9 and 10, two for 11 and 12, and a's 11 and 12
    // for two of b's.
    let of_b = |id: &str| id.parse::<u32>().unwrap() <= 8;
    let pairs = preempted(&runs);
    let mut for_a: Vec<&str> =
        pairs.iter().filter(|(victim, _)| of_b(victim)).map(|(_, by)| by.as_str()).collect();
    for_a.sort_by_key(|id| id.parse::<u32>().unwrap());
    assert_eq!(for_a, ["9", "10", "11", "12"]);
    let of_a: Vec<(&str, bool)> =
        pairs.iter().filter(|(victim, _)| !of_b(victim)).map(|(v, by)| (v.as_str(), of_b(by))).collect();
    assert_eq!(of_a, [("11", true), ("12", true)]);
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(setup(2, 6), None));
    let by_job = runs_of(&runs);
    for id in ["11", "12"] {
        assert_eq!(by_job[id], [(10_000, 20_000, false)], "job {id}");
    }
    assert_eq!(sim.preemptions, 2);

    // A job larger than its ClusterQueue holds (a alone: 4 GPUs) waits for a boundary that
    // makes it fit (8 from 3600); one submitted after the last boundary that could hold it
    // (8 until 3600, then 2) is never run.
    let alone = |gpus: u64| vec![flavor(), queue("a", None, gpus, json!({}))];
    let jobs = [job(1, "a", 6, 0, 100, "batch")];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue_over_time(alone(4), &[(3600, alone(8))], None));
    assert_eq!((sim.unplaceable, &runs_of(&runs)["1"]), (0, &vec![(3600, 3700, false)]));
    let jobs = [job(1, "a", 6, 4000, 100, "batch"), job(2, "a", 1, 4000, 100, "batch")];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue_over_time(alone(8), &[(3600, alone(2))], None));
    assert_eq!((sim.unplaceable, runs.len()), (1, 1));
}

#[test]
fn later_objects_may_change_quotas_and_weights_only() {
    let given = |objects: &[Value], later: &[(i64, Vec<Value>)]| {
        Kueue::new([ClusterObjects {
            cluster: "c",
            objects,
            configuration: None,
            resource: GPU,
            queues: &[],
            contracts: &[],
            later,
        }])
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    let base = [flavor(), cohort("pool", 0), queue("a", Some("pool"), 4, json!({}))];
    let quota = vec![flavor(), cohort("pool", 0), queue("a", Some("pool"), 2, json!({}))];
    assert_eq!(given(&base, &[(60, quota.clone())]), Ok(()));
    let moved = vec![flavor(), cohort("pool", 0), queue("a", None, 4, json!({}))];
    assert_eq!(
        given(&base, &[(86_400, moved)]),
        Err("cluster \"c\": its objects from 1970-01-02 change the Cohort or ClusterQueue \"a\", not only quotas and weights".into())
    );
    let more = vec![
        flavor(),
        cohort("pool", 0),
        queue("a", Some("pool"), 4, json!({})),
        queue("b", None, 1, json!({})),
    ];
    assert!(given(&base, &[(60, more)]).unwrap_err().contains("change its Cohorts and ClusterQueues"));
    let reordered = given(&base, &[(120, quota.clone()), (60, quota)]).unwrap_err();
    assert!(reordered.contains("not in time order"), "{reordered}");
}

#[test]
fn a_job_may_name_its_queue_and_its_priority() {
    // a and b (4 each, in one cohort); b preempts lower priorities within itself, and the
    // LocalQueue team/gpus submits to it. No ClusterQueue takes c's jobs by their budget.
    // Job 1 (a's, no queue) runs in a 0-10,000. Job 2 (a's) names team/gpus: it runs in b
    // at 10, within b's 4 (a's running 4 are a's queue's, not b's). Job 3 (c's) names b,
    // priority 100 though its contract has none: the cohort is full, a is within its quota
    // (no reclaim), and job 2 (0 < 100) is the only candidate in b: it is preempted at 20,
    // job 3 runs 20-1,020, job 2 restarts then (non-resumable: all 10,000 s again). Job 4
    // names a LocalQueue that does not exist, job 5 is c's without a queue: neither is
    // admitted.
    let team = json!({"apiVersion": API, "kind": "LocalQueue",
        "metadata": {"name": "gpus", "namespace": "team"}, "spec": {"clusterQueue": "b"}});
    let mut objects = pair(json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}));
    objects.push(team);
    let queued = |job: Job, queue: &str, priority: Option<i32>| Job { queue: queue.into(), priority, ..job };
    let jobs = [
        job(1, "a", 4, 0, 10_000, "batch"),
        queued(job(2, "a", 4, 10, 10_000, "batch"), "team/gpus", None),
        queued(job(3, "c", 4, 20, 1000, "batch"), "b", Some(100)),
        queued(job(4, "a", 1, 30, 100, "batch"), "team/none", None),
        job(5, "c", 1, 40, 100, "batch"),
    ];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(objects.clone(), None));
    assert_eq!((sim.preemptions, sim.unplaceable), (1, 2));
    assert_eq!(preempted(&runs), [("2".to_string(), "3".to_string())]);
    let by_job = runs_of(&runs);
    assert_eq!(by_job["1"], [(0, 10_000, false)]);
    assert_eq!(by_job["2"], [(10, 20, true), (1020, 11_020, false)]);
    assert_eq!(by_job["3"], [(20, 1020, false)]);
    // Each run is its budget's, whatever queue it ran in.
    let project = |id: &str| runs.iter().find(|r| &*r.id == id).map(|r| r.project.to_string());
    assert_eq!((project("2"), project("3")), (Some("a".into()), Some("c".into())));
    // Without its priority, job 3 is job 2's equal: no candidate. It waits until job 1 ends
    // at 10,000, then borrows a's unused 4 through the cohort.
    let jobs = [jobs[0].clone(), jobs[1].clone(), Job { priority: None, ..jobs[2].clone() }];
    let (sim, runs) = run(&model(MODEL), &jobs, kueue(objects, None));
    assert_eq!(sim.preemptions, 0);
    assert_eq!(runs_of(&runs)["3"], [(10_000, 11_000, false)]);
}

// The property: on random small setups (a cohort of its own quota and three
// ClusterQueues, flat or two of them in a cohort of their own below it, with random quotas, borrowing limits, policies, queueing strategies, Fair
// Sharing on or off) and random traces, no ClusterQueue ever uses more than its quota and
// borrowing limit allow, the cohort never more than its subtree quota, and every job that
// is replayed ends, finished. Jobs name a ClusterQueue other than their budget's at random
// (the trace's `queue`), so that a budget's jobs run in several queues.

/// (nominal, borrowing limit, withinClusterQueue, reclaimWithinCohort, borrowWithinCohort,
/// StrictFIFO, weight)
type QueueSpec = (u64, Option<u64>, u8, u8, bool, bool, u32);

fn queue_spec() -> impl Strategy<Value = QueueSpec> {
    (0u64..6, proptest::option::of(0u64..6), 0u8..3, 0u8..3, any::<bool>(), any::<bool>(), 0u32..3)
}

/// The cohort `pool` of `cohort_quota` GPUs over a, b and c; when `nested`, b and c are in a
/// cohort `inner` (no quota of its own) under `pool`.
fn random_setup(cohort_quota: u64, specs: &[QueueSpec], nested: bool) -> Vec<Value> {
    let mut objects = vec![flavor(), class("high", 10), class("mid", 5), cohort("pool", cohort_quota)];
    if nested {
        let mut inner = cohort("inner", 0);
        inner["spec"]["parentName"] = json!("pool");
        objects.push(inner);
    }
    for (name, &(nominal, limit, within, reclaim, borrow, strict, weight)) in
        ["a", "b", "c"].iter().zip(specs)
    {
        let within = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"][within as usize];
        let reclaim = ["Never", "LowerPriority", "Any"][reclaim as usize];
        let mut preemption = json!({"withinClusterQueue": within, "reclaimWithinCohort": reclaim});
        if borrow && reclaim != "Never" {
            preemption["borrowWithinCohort"] = json!({"policy": "LowerPriority", "maxPriorityThreshold": 5});
        }
        let mut q = queue(
            name,
            Some(if nested && *name != "a" { "inner" } else { "pool" }),
            nominal,
            json!({
                "preemption": preemption,
                "queueingStrategy": if strict { "StrictFIFO" } else { "BestEffortFIFO" },
                "fairSharing": {"weight": weight},
            }),
        );
        if let Some(limit) = limit {
            q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = json!(limit);
        }
        objects.push(q);
    }
    objects
}

/// (project, GPUs, submit, runtime, contract, the ClusterQueue its `queue` names)
type JobSpec = (usize, u32, i64, i64, usize, Option<usize>);

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (0usize..3, 1u32..9, 0i64..3000, 1i64..2000, 0usize..3, proptest::option::of(0usize..3))
}

/// Fair Sharing's configuration for `fair` (one of three strategy lists), none without.
fn random_fair_sharing(fair: Option<usize>) -> Option<Value> {
    let strategies: [&[&str]; 3] = [
        &["LessThanOrEqualToFinalShare"],
        &["LessThanInitialShare"],
        &["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
    ];
    fair.map(|f| fair_sharing(strategies[f]))
}

/// The jobs of `raw` in submit order (each named by its index in it).
fn random_jobs(raw: &[JobSpec]) -> (Vec<JobSpec>, Vec<Job>) {
    let mut sorted = raw.to_vec();
    sorted.sort_by_key(|j| j.2);
    let jobs = sorted
        .iter()
        .enumerate()
        .map(|(i, &(p, gpus, submit, runtime, contract, queue))| Job {
            queue: queue.map_or("", |q| ["a", "b", "c"][q]).into(),
            ..job(i, ["a", "b", "c"][p], gpus, submit, runtime, ["batch", "mid", "high"][contract])
        })
        .collect();
    (sorted, jobs)
}

/// Each job's ClusterQueue (an index of a, b, c): the one it names, else its budget's.
fn queue_of(sorted: &[JobSpec], id: &str) -> usize {
    let (p, _, _, _, _, queue) = sorted[id.parse::<usize>().unwrap()];
    queue.unwrap_or(p)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn quotas_hold_and_every_job_ends(
        cohort_quota in 0u64..6,
        nested in any::<bool>(),
        specs in proptest::collection::vec(queue_spec(), 3),
        fair in proptest::option::of(0usize..3),
        raw in proptest::collection::vec(job_spec(), 1..40),
    ) {
        let objects = random_setup(cohort_quota, &specs, nested);
        let (sorted, jobs) = random_jobs(&raw);
        let queue_of = |id: &str| queue_of(&sorted, id);
        let policy = kueue(objects, random_fair_sharing(fair));
        let simulated = simulate_with_runs(&model(MODEL), jobs.iter().cloned().map(Ok), policy, false);
        let (sim, runs) = match simulated {
            // Every job was larger than its queue could hold.
            Err(AuditError::NoJobs(_)) => return Ok(()),
            other => other.unwrap(),
        };
        // Usage per queue at every start.
        let quota: Vec<(u64, Option<u64>)> = specs.iter().map(|s| (s.0, s.1)).collect();
        let total: u64 = cohort_quota + quota.iter().map(|q| q.0).sum::<u64>();
        for at in runs.iter().map(|r| r.start) {
            let mut used = [0u64; 3];
            for r in runs.iter().filter(|r| r.start <= at && at < r.end) {
                used[queue_of(&r.id)] += u64::from(r.gpus);
            }
            for (q, &(nominal, limit)) in quota.iter().enumerate() {
                if let Some(limit) = limit {
                    prop_assert!(used[q] <= nominal + limit, "queue {q} uses {} at {at}", used[q]);
                }
            }
            prop_assert!(used.iter().sum::<u64>() <= total, "{used:?} at {at}, quota {total}");
        }
        // Each preemption is one a rule allows: in its own ClusterQueue, by
        // withinClusterQueue (a lower priority, or with LowerOrNewerEqualPriority an equal
        // one submitted later); from another, by reclaimWithinCohort (Any, or a lower
        // priority), which Fair Sharing's and borrowWithinCohort's preemptions need too.
        let priority = |contract: usize| [0, 5, 10][contract];
        for victim in runs.iter().filter(|r| r.preempted()) {
            let (preemptor, _) = victim.preempted_for.as_ref().unwrap();
            let (v, p) = (victim.id.parse::<usize>().unwrap(), preemptor.parse::<usize>().unwrap());
            let (qv, qp) = (queue_of(&victim.id), queue_of(preemptor));
            let (pv, pp) = (priority(sorted[v].4), priority(sorted[p].4));
            let (_, _, within, reclaim, _, _, _) = specs[qp];
            let allowed = match qv == qp {
                true => match within {
                    0 => false,
                    1 => pv < pp,
                    _ => pv < pp || (pv == pp && sorted[v].2 > sorted[p].2),
                },
                false => match reclaim {
                    0 => false,
                    1 => pv < pp,
                    _ => true,
                },
            };
            prop_assert!(allowed, "job {v} (queue {qv}, priority {pv}) preempted for job {p} (queue {qp}, priority {pp}), specs {specs:?}");
        }
        // Every job replayed finishes once.
        let finished: Vec<&str> = runs.iter().filter(|r| r.ended_by == EndedBy::Finished).map(|r| &*r.id).collect();
        let mut unique = finished.clone();
        unique.sort();
        unique.dedup();
        prop_assert_eq!(unique.len(), finished.len());
        prop_assert_eq!(finished.len() + sim.unplaceable, jobs.len());
    }
}

// Quotas that change at a grant boundary: the setup above from 0, and from a random moment
// the same ClusterQueues with other quotas, borrowing limits and weights. Each admission
// keeps its ClusterQueue within the borrowing limit, and all within the total quota, in
// force at its moment (running jobs admitted before a quota was lowered stay); each job
// finishes at most once. When every quota only grows at the boundary, every job replayed
// finishes: what could hold it at its submission still can.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn each_admission_keeps_the_quotas_of_its_moment(
        cohort_quota in 0u64..6,
        nested in any::<bool>(),
        specs in proptest::collection::vec(queue_spec(), 3),
        later_cohort in 0u64..6,
        later_specs in proptest::collection::vec(queue_spec(), 3),
        boundary in 0i64..3000,
        grown in any::<bool>(),
        fair in proptest::option::of(0usize..3),
        raw in proptest::collection::vec(job_spec(), 1..40),
    ) {
        // The later queues keep each queue's preemption and queueing: only quotas change.
        let later_specs: Vec<QueueSpec> = specs
            .iter()
            .zip(&later_specs)
            .map(|(&(n, l, w, r, b, s, _), &(later_n, later_l, _, _, _, _, weight))| match grown {
                true => (n.max(later_n), l.map(|l| l.max(later_l.unwrap_or(l))), w, r, b, s, weight),
                false => (later_n, later_l, w, r, b, s, weight),
            })
            .collect();
        let later_cohort = if grown { later_cohort.max(cohort_quota) } else { later_cohort };
        let later = [(boundary, random_setup(later_cohort, &later_specs, nested))];
        let (sorted, jobs) = random_jobs(&raw);
        let queue_of = |id: &str| queue_of(&sorted, id);
        let policy = kueue_over_time(random_setup(cohort_quota, &specs, nested), &later, random_fair_sharing(fair));
        let (sim, runs) = match simulate_with_runs(&model(MODEL), jobs.iter().cloned().map(Ok), policy, false) {
            Err(AuditError::NoJobs(_)) => return Ok(()),
            other => other.unwrap(),
        };
        let in_force = |at: i64| match at >= boundary {
            true => (later_cohort, &later_specs),
            false => (cohort_quota, &specs),
        };
        for started in &runs {
            let at = started.start;
            let (cohort, specs) = in_force(at);
            let mut used = [0u64; 3];
            for r in runs.iter().filter(|r| r.start <= at && at < r.end) {
                used[queue_of(&r.id)] += u64::from(r.gpus);
            }
            let q = queue_of(&started.id);
            let (nominal, limit) = (specs[q].0, specs[q].1);
            if let Some(limit) = limit {
                prop_assert!(used[q] <= nominal + limit, "queue {q} uses {} at {at}", used[q]);
            }
            let total = cohort + specs.iter().map(|s| s.0).sum::<u64>();
            prop_assert!(used.iter().sum::<u64>() <= total, "{used:?} at {at}, quota {total}");
        }
        let mut finished: Vec<&str> = runs.iter().filter(|r| r.ended_by == EndedBy::Finished).map(|r| &*r.id).collect();
        let count = finished.len();
        finished.sort();
        finished.dedup();
        prop_assert_eq!(finished.len(), count);
        if grown {
            prop_assert_eq!(count + sim.unplaceable, jobs.len());
        }
    }
}

// Victims are minimal: each is needed. On flat setups without borrowing limits, a
// ClusterQueue may use what the whole quota (the cohort's and every nominal quota, all of it
// lendable) leaves: Kueue's available GPUs of a ClusterQueue are then the total quota less
// all usage. At each instant where one preemptor evicts victims, and nothing else starts or
// is evicted, the usage just before is what ran across the instant plus the victims: with
// every victim gone the preemptor fits, and with any one of them back it does not (or, where
// classical preemption tried first not to borrow, its queue would then borrow).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn each_victim_is_needed(
        cohort_quota in 0u64..6,
        specs in proptest::collection::vec(queue_spec(), 3),
        fair in proptest::option::of(0usize..3),
        raw in proptest::collection::vec(job_spec(), 1..40),
    ) {
        let specs: Vec<QueueSpec> = specs.into_iter().map(|(n, _, w, r, b, s, f)| (n, None, w, r, b, s, f)).collect();
        let objects = random_setup(cohort_quota, &specs, false);
        let (sorted, jobs) = random_jobs(&raw);
        let queue_of = |id: &str| queue_of(&sorted, id);
        let policy = kueue(objects, random_fair_sharing(fair));
        let (_, runs) = match simulate_with_runs(&model(MODEL), jobs.iter().cloned().map(Ok), policy, false) {
            Err(AuditError::NoJobs(_)) => return Ok(()),
            other => other.unwrap(),
        };
        let quota = cohort_quota + specs.iter().map(|s| s.0).sum::<u64>();
        let mut instants: Vec<i64> = runs.iter().filter(|r| r.preempted()).map(|r| r.end).collect();
        instants.dedup();
        for t in instants {
            let victims: Vec<&Run> = runs.iter().filter(|r| r.preempted() && r.end == t).collect();
            let preemptor = &victims[0].preempted_for.as_ref().unwrap().0;
            let alone = victims.iter().all(|v| v.preempted_for.as_ref().unwrap().0 == *preemptor && v.start < t);
            let starts_else = runs.iter().any(|r| r.start == t && r.id != *preemptor);
            if !alone || starts_else {
                continue;
            }
            let p = sorted[preemptor.parse::<usize>().unwrap()];
            let (pq, pgpus) = (queue_of(preemptor), u64::from(p.1));
            let across: Vec<&Run> = runs.iter().filter(|r| r.start < t && r.end > t).collect();
            let used = |q: Option<usize>| -> u64 {
                across.iter().chain(&victims).filter(|r| q.is_none_or(|q| queue_of(&r.id) == q)).map(|r| u64::from(r.gpus)).sum()
            };
            let freed: u64 = victims.iter().map(|v| u64::from(v.gpus)).sum();
            let freed_own: u64 = victims.iter().filter(|v| queue_of(&v.id) == pq).map(|v| u64::from(v.gpus)).sum();
            let (total, own, nominal) = (used(None), used(Some(pq)), specs[pq].0);
            prop_assert!(total - freed + pgpus <= quota, "at {t} job {preemptor} does not fit with its victims gone");
            let within_after = own - freed_own + pgpus <= nominal;
            for v in &victims {
                let back = u64::from(v.gpus);
                let own_back = if queue_of(&v.id) == pq { back } else { 0 };
                let needed = total - freed + back + pgpus > quota
                    || (fair.is_none() && within_after && own - freed_own + own_back + pgpus > nominal);
                prop_assert!(needed, "at {t}, job {} is not needed for job {preemptor}: victims {:?}", v.id, victims.iter().map(|v| &*v.id).collect::<Vec<_>>());
            }
        }
    }
}
