//! The `kueue` policy measured against the Kueue oracle: Kueue's own scheduler, cache,
//! queue manager and workload event handlers (tests/kueue-oracle, Kueue as its go.mod pins
//! it) replaying the same workloads (`scripts/kueue-oracle.sh`), compared job by job
//! (`kueue-oracle compare`). A generated trace on a Cohort tree of ClusterQueues (an inner
//! project's Cohort with two, three more at the root), the objects `allot build` writes, with
//! Fair Sharing (as allot writes it) and without: the two agree job by job, every run the
//! same (docs/verifier.md, "The Kueue oracle", records the longer comparisons).
//! The long comparison (the ITP trace, more setups, the oracle's own spread) is
//! `scripts/kueue-oracle-compare.sh`.
//!
//! Needs Go (scripts/test.sh installs it): the oracle is built on first use.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::{Allot, allot_dir, root};

/// Budgets on one cluster whose single node holds every GPU, so that the policy's placement
/// on nodes (which Kueue, deciding quota alone, does not make) never decides anything.
const BUDGETS: &str = "cluster c gpus=64 gpu-type=h100 gpus-per-node=64 {\n    kubernetes kueue\n}\n\
    policy window=\"1d\"\n\
    contract batch min-runtime=\"1h\" resumable=#true default=#true\n\
    contract quick min-runtime=\"10m\"\n\
    project a share=2 {\n    project x share=1\n    project y share=1\n}\n\
    project b share=1\n\
    project c share=1\n\
    project d share=1\n";

/// A trace of `jobs` jobs from a fixed seed: sizes 1 to 16 GPUs, work from minutes to
/// hours, arrivals that keep the cluster busy, a quarter under `quick`.
fn trace(jobs: usize) -> String {
    let mut seed: u64 = 0x0ac1_e000;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut rows = Vec::with_capacity(jobs);
    let mut submit = 0;
    for i in 0..jobs {
        submit += next(600);
        let project = ["a/x", "a/y", "b", "c", "d", "b"][next(6) as usize];
        let gpus = [1, 1, 2, 4, 4, 8, 16][next(7) as usize];
        let work = 300 + next(3 * 3600);
        let contract = ["", "", "", "quick"][next(4) as usize];
        rows.push(format!("j{i},{project},u{},{gpus},{submit},{work},{contract}", next(4)));
    }
    format!("id,project,user,gpus,submit,duration,contract\n{}\n", rows.join("\n"))
}

/// The policy's schedule and the oracle's of the same trace, compared.
fn agreement(dir: &Path, extra: &[&str]) -> Value {
    let policy = dir.join("policy.csv");
    let oracle = dir.join("oracle.csv");
    let mut simulate = Allot::new(["replay", "simulate", "."])
        .args(["--trace", "trace.csv", "--policy", "kueue", "--format", "json", "--schedule"])
        .arg(&policy);
    for arg in extra {
        simulate = simulate.arg(arg);
    }
    let (status, _, stderr) = simulate.dir(dir).run();
    assert_eq!(status, 0, "{stderr}");
    let script = root().join("scripts/kueue-oracle.sh");
    let run = Command::new(&script)
        .args([".", "--trace", "trace.csv", "--schedule"])
        .arg(&oracle)
        .args(extra)
        .current_dir(dir)
        .env("ALLOT", allot_dir().join("allot"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    eprintln!("{stderr}");
    let built = Command::new(root().join("scripts/kueue-oracle-build.sh")).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let binary = String::from_utf8(built.stdout).unwrap();
    let compared = Command::new(binary.trim()).arg("compare").arg(&policy).arg(&oracle).output().unwrap();
    assert!(compared.status.success(), "{}", String::from_utf8_lossy(&compared.stderr));
    let result: Value = serde_json::from_slice(&compared.stdout).unwrap();
    result[0].clone()
}

/// Three budgets on 16 GPUs (b and c 4 each, d 8), seven jobs: c's 12-GPU job borrows
/// and is reclaimed by b's first job, c's `quick` job by d's; b's second waits, c's first
/// comes back when the GPUs are free. Worked by hand, the same in the policy and in Kueue.
const SMALL: &str = "cluster c gpus=16 gpu-type=h100 gpus-per-node=16 {\n    kubernetes kueue\n}\n\
    policy window=\"1d\"\n\
    contract batch min-runtime=\"1h\" resumable=#true default=#true\n\
    contract quick min-runtime=\"10m\"\n\
    project b share=1\n\
    project c share=1\n\
    project d share=2\n";

const SMALL_TRACE: &str = "id,project,user,gpus,submit,duration,contract\n\
    c1,c,u,12,0,5000,\n\
    c2,c,u,4,10,3000,quick\n\
    d1,d,u,4,50,2000,\n\
    b1,b,u,4,100,600,\n\
    b2,b,u,8,200,900,quick\n\
    d2,d,u,8,300,1200,\n\
    c3,c,u,2,400,500,\n";

/// Writes the budgets, the trace and a Configuration without Fair Sharing (Kueue's
/// defaults) into a new folder.
fn folder(budgets: &str, trace: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), budgets).unwrap();
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    std::fs::write(
        dir.path().join("classical.yaml"),
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n",
    )
    .unwrap();
    dir
}

const CLASSICAL: &[&str] = &["--kueue-config", "classical.yaml"];

#[test]
fn the_kueue_workloads_are_the_policys_jobs() {
    let dir = folder(SMALL, SMALL_TRACE);
    let run = |policy: &str| {
        Allot::new(["replay", "simulate", ".", "--trace", "trace.csv", "--format", "json"])
            .args(["--policy", policy, "--kueue-workloads", "workloads.jsonl"])
            .dir(dir.path())
            .run()
    };
    let (status, _, stderr) = run("budget");
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("--kueue-workloads is for the kueue policy"), "{stderr}");
    assert!(!dir.path().join("workloads.jsonl").exists());
    let (status, _, stderr) = run("kueue");
    assert_eq!(status, 0, "{stderr}");
    let text = std::fs::read_to_string(dir.path().join("workloads.jsonl")).unwrap();
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 7);
    // The default contract `batch` (its priority class: 60, its minimum runtime in minutes),
    // resumable; `quick` (10) not.
    assert_eq!(
        lines[0],
        serde_json::json!({"id": "c1", "project": "c", "user": "u", "cluster": "c", "contract": "batch",
            "gpus": 12, "submit": 0, "work": 5000, "resumable": true, "cluster_queue": "c", "priority": 60})
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"id": "c2", "project": "c", "user": "u", "cluster": "c", "contract": "quick",
            "gpus": 4, "submit": 10, "work": 3000, "resumable": false, "cluster_queue": "c", "priority": 10})
    );
}

#[test]
fn a_hand_worked_schedule_is_kueues_own() {
    let dir = folder(SMALL, SMALL_TRACE);
    for extra in [&[][..], CLASSICAL] {
        let result = agreement(dir.path(), extra);
        // c1 reclaimed for b1 at 100, c2 for d1 at 50; c1 back at 3000, after b2 and d2.
        assert_eq!(result["jobs"], 7, "{result}");
        assert_eq!(result["same_runs"], 7, "{extra:?}: {result}");
        assert_eq!(result["preemptions"], serde_json::json!([2, 2]), "{extra:?}: {result}");
        assert_eq!(result["first_difference"], -1, "{extra:?}: {result}");
    }
}

/// Kueue's own Fair Sharing test "preempt workload that doesn't transfer the imbalance, even
/// if high priority" (pkg/scheduler/preemption/preemption_fair_test.go, Kueue v0.17.0), with
/// GPUs for CPUs: ClusterQueues a, b and c of 3 each and an empty one in Cohort `all`
/// (`borrowWithinCohort` LowerPriority below -3), `LessThanOrEqualToFinalShare` alone. a1 (3)
/// runs in a, b_low (5, priority 0) and b_high (1, priority 1) in b; a_incoming (1) comes to
/// a. Taking b_low would leave b below a's share (it would transfer the imbalance): Kueue
/// takes b_high, as its test wants. Its test ends there; the replay goes on: b_high, back in
/// b's queue, takes b_low's place (`withinClusterQueue: LowerPriority`), and b_low waits for
/// a_incoming to end. The policy and Kueue agree run for run.
#[test]
fn kueues_fair_sharing_test_replayed() {
    let cluster_queue = |name: &str, quota: u32, preemption: &str| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: {name}\nspec:\n  cohortName: all\n{preemption}  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: default\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: \"{quota}\"\n"
        )
    };
    let preemption = "  preemption:\n    withinClusterQueue: LowerPriority\n    reclaimWithinCohort: Any\n    borrowWithinCohort:\n      policy: LowerPriority\n      maxPriorityThreshold: -3\n";
    let objects = [
        cluster_queue("a", 3, preemption),
        cluster_queue("b", 3, preemption),
        cluster_queue("c", 3, preemption),
        cluster_queue("preemptible", 0, ""),
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default\n".into(),
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata:\n  name: all\n".into(),
    ];
    let dir = folder(
        "cluster c gpus=9 gpu-type=h100 gpus-per-node=9\npolicy window=\"1d\"\n\
         contract batch min-runtime=\"0s\" default=#true\n\
         project a share=1\nproject b share=1\nproject c share=1\n",
        "id,project,user,gpus,submit,duration,queue,priority\n\
         a1,a,u,3,0,1000,a,0\n\
         b_low,b,u,5,0,1000,b,0\n\
         b_high,b,u,1,0,1000,b,1\n\
         a_incoming,a,u,1,10,100,a,0\n",
    );
    std::fs::create_dir(dir.path().join("objects")).unwrap();
    std::fs::write(dir.path().join("objects/kueue.yaml"), objects.join("---\n")).unwrap();
    std::fs::write(
        dir.path().join("final-share.yaml"),
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n\
         fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare]\n",
    )
    .unwrap();
    let result =
        agreement(dir.path(), &["--kueue-objects", "c=objects", "--kueue-config", "final-share.yaml"]);
    assert_eq!(result["same_runs"], 4, "{result}");
    assert_eq!(result["preemptions"], serde_json::json!([2, 2]), "{result}");
    let schedule = std::fs::read_to_string(dir.path().join("oracle.csv")).unwrap();
    let preempted: Vec<(&str, &str)> = schedule
        .lines()
        .filter(|row| row.contains(",preempted,"))
        .map(|row| (row.split(',').next().unwrap(), row.rsplit(',').next().unwrap()))
        .collect();
    assert_eq!(preempted, [("b_high", "a_incoming"), ("b_low", "b_high")], "{schedule}");
}

#[test]
fn the_kueue_policy_against_kueues_own_scheduler_on_a_generated_trace() {
    let dir = folder(BUDGETS, &trace(300));
    let setups: [(&str, &[&str]); 2] = [
        ("Fair Sharing (allot's Configuration)", &[]),
        ("classical preemption (Kueue's default Configuration)", CLASSICAL),
    ];
    for (name, extra) in setups {
        let result = agreement(dir.path(), extra);
        eprintln!("{name}: {result}");
        assert_eq!(result["jobs"], 300, "{name}: {result}");
        assert_eq!(result["missing"], 0, "{name}: the same jobs in both: {result}");
        assert_eq!(result["same_runs"], 300, "{name}: every run the same: {result}");
        assert_eq!(result["preemptions"][0], result["preemptions"][1], "{name}: {result}");
        assert!(result["preemptions"][0].as_u64().unwrap() > 50, "{name}: the trace preempts: {result}");
    }
}
