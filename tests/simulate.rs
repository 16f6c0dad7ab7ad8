//! `allot replay simulate` from the command line: the ITP trace under both policies, a
//! budget change against a git revision, and the report it writes.

use serde_json::{Value, json};

use crate::common::{allot_in as allot, git, itp_trace, root};

fn run<'a>(report: &'a Value, label: &str) -> &'a Value {
    report["runs"].as_array().unwrap().iter().find(|r| r["label"] == label).unwrap()
}

#[test]
fn the_itp_trace_under_budgets_and_under_priorities() {
    let Some(trace) = itp_trace() else { return };
    let out = tempfile::tempdir().unwrap();
    let args = ["replay", "simulate", "examples/itp-simulate", "--trace", trace.to_str().unwrap()];
    let report_dir = out.path().join("report");
    let (status, stdout, stderr) = allot(
        &root(),
        &[
            &args[..],
            &["--policy", "budget,priority", "--format", "json", "--report", report_dir.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let (budget, priority) = (run(&report, "budget policy"), run(&report, "priority baseline"));
    for r in [budget, priority] {
        assert_eq!(r["audit"]["totals"]["jobs"], 69_351);
        // Every job ran its recorded runtime once (all are resumable: nothing is lost).
        let used = r["audit"]["totals"]["used_gpu_hours"].as_f64().unwrap();
        assert!((used - 1_632_719.7).abs() < 0.1, "{used}");
        assert_eq!(r["lost_gpu_hours"], 0.0);
    }
    let delivered = |r: &Value| r["audit"]["totals"]["delivered_ratio"].as_f64().unwrap();
    // Backfill starts most short jobs at once under both; the tail tells them apart.
    let short_p90 = |r: &Value| r["short_jobs"]["wait_p90_s"].as_u64().unwrap();
    assert!(
        delivered(budget) > delivered(priority) + 0.05,
        "{} vs {}",
        delivered(budget),
        delivered(priority)
    );
    assert!(short_p90(budget) < short_p90(priority), "{} vs {}", short_p90(budget), short_p90(priority));
    let page = std::fs::read_to_string(report_dir.join("index.html")).unwrap();
    assert!(page.contains("budget policy") && page.contains("priority baseline"));
    assert_eq!(page.matches("<svg").count(), 4);
    // The rule's own promise on this trace (docs/verifier.md): 96% overall, every budget 93%.
    assert!(delivered(budget) >= 0.96, "{}", delivered(budget));
    assert_worst(budget, 0.93);
}

/// Every budget of a simulated run was delivered at least `least` of its entitled GPU-hours.
fn assert_worst(run: &Value, least: f64) {
    // Unbudgeted work, entitled to nothing here, has no ratio.
    for b in run["audit"]["budgets"].as_array().unwrap().iter().filter(|b| b["project"] != "(unbudgeted)") {
        let ratio = b["delivered_ratio"].as_f64().unwrap();
        assert!(ratio >= least, "{} delivered {ratio}", b["project"]);
    }
}

#[test]
fn the_itp_trace_under_a_two_level_tree_keeps_every_budget() {
    let Some(trace) = itp_trace() else { return };
    let report = simulated("examples/itp-hierarchy", &trace);
    assert_worst(run(&report, "budget policy"), 0.90);
}

/// `allot replay simulate EXAMPLE --trace TRACE` as JSON, which must exit 0 (the example's
/// expectations met).
fn simulated(example: &str, trace: &std::path::Path) -> Value {
    report_in(&root(), &["replay", "simulate", example, "--trace", trace.to_str().unwrap()])
}

/// The JSON report of `allot ARGS --format json` run in `dir`, which must exit 0.
fn report_in(dir: &std::path::Path, args: &[&str]) -> Value {
    let (status, stdout, stderr) = allot(dir, &[args, &["--format", "json"]].concat());
    assert_eq!(status, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn debug_work_starts_in_seconds_on_the_itp_trace() {
    let Some(folder) = itp_trace() else { return };
    let out = tempfile::tempdir().unwrap();
    let trace = out.path().join("itp-debug.csv");
    let made = std::process::Command::new("sh")
        .arg(root().join("examples/itp-debug/make-trace.sh"))
        .arg(&folder)
        .stdout(std::fs::File::create(&trace).unwrap())
        .status()
        .unwrap();
    assert!(made.success());
    // The example's expectations hold: every budget 90%, overall 95%, debug p90 a minute.
    let trace = trace.to_str().unwrap();
    let report = report_in(
        &root(),
        &["replay", "simulate", "examples/itp-debug", "--trace", trace, "--policy", "budget"],
    );
    let budget = run(&report, "budget policy");
    let debug =
        budget["audit"]["contracts"].as_array().unwrap().iter().find(|c| c["contract"] == "debug").unwrap();
    assert_eq!(debug["jobs"], 2181);
    assert!(debug["wait_p90_s"].as_u64().unwrap() <= 60, "{debug}");
    assert!(budget["audit"]["totals"]["delivered_ratio"].as_f64().unwrap() >= 0.96);
}

const BASE: &str = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
    contract batch min-runtime=\"1h\" default=#true\nproject a share=1\nproject b share=1\n";

#[test]
fn a_budget_change_is_simulated_against_its_base() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("allot.kdl"), BASE).unwrap();
    git(dir.path(), &["add", "allot.kdl"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    std::fs::write(dir.path().join("allot.kdl"), BASE.replace("project b share=1", "project b share=3"))
        .unwrap();
    // a and b each ask for the whole pool (two 4-GPU jobs an hour) for a day.
    let mut trace = String::from("id,project,gpus,submit,start,end\n");
    for i in 0..48 {
        for project in ["a", "b"] {
            let (submit, end) = (i * 1800, i * 1800 + 3600);
            trace.push_str(&format!("{project}{i},{project},4,{submit},{submit},{end}\n"));
        }
    }
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let (status, stdout, stderr) = allot(
        dir.path(),
        &["replay", "simulate", ".", "--trace", "trace.csv", "--against", "HEAD", "--format", "json"],
    );
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let median_wait = |label: &str, project: &str| {
        let budgets = run(&report, label)["audit"]["budgets"].as_array().unwrap().clone();
        budgets.iter().find(|b| b["project"] == project).unwrap()["wait_p50_s"].as_u64().unwrap()
    };
    // b's share rises from a half to three quarters of the pool: b waits less, a more.
    assert!(median_wait("working tree", "b") < median_wait("HEAD", "b"));
    assert!(median_wait("working tree", "a") > median_wait("HEAD", "a"));
    // allot diff --replay folds the same runs into the review.
    let (status, stdout, stderr) =
        allot(dir.path(), &["diff", ".", "--against", "HEAD", "--replay", "trace.csv", "--format", "json"]);
    assert_eq!(status, 0, "{stderr}");
    let review: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(review["replay"], report, "the review carries the simulation");
    let (status, stdout, _) = allot(
        dir.path(),
        &["diff", ".", "--against", "HEAD", "--replay", "trace.csv", "--format", "markdown"],
    );
    assert_eq!(status, 0);
    assert!(stdout.contains("### Simulated on trace.csv") && stdout.contains("xychart-beta"), "{stdout}");
    let (status, stdout, _) =
        allot(dir.path(), &["replay", "simulate", ".", "--trace", "trace.csv", "--against", "HEAD"]);
    assert_eq!(status, 0);
    assert!(
        stdout.contains("HEAD") && stdout.contains("working tree") && stdout.contains("* differs"),
        "{stdout}"
    );
}

#[test]
fn a_missing_trace_is_an_error() {
    let (status, _, stderr) =
        allot(&root(), &["replay", "simulate", "examples/itp-simulate", "--trace", "nowhere.csv"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("nowhere.csv"), "{stderr}");
}

#[test]
fn slurm_bound_budgets_are_simulated_as_slurm_schedules_them_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let bound = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=c partition=gpu\n}\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=1\n";
    std::fs::write(dir.path().join("allot.kdl"), bound).unwrap();
    // By default, the configuration allot writes: a's floor is the whole node; job 2 (8 GPUs)
    // finds 6 of it taken, waits in `over` until job 1 ends, and job 3 (2 GPUs) starts in
    // the floor at once. With the slurm.conf of a Slurm that preempts by QOS, job 2 blocks
    // the queue and job 3 (100 s, asking for 300) is started by the backfill scheduler at
    // its first run after its submission at 20: at 21 with bf_interval=7.
    let trace = "id,project,gpus,submit,duration,time_limit\n1,a,6,0,1000,1200\n2,a,8,10,1000,1200\n3,a,2,20,100,300\n";
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    std::fs::write(
        dir.path().join("slurm.conf"),
        "PreemptType=preempt/qos\nSchedulerParameters=bf_interval=7\n",
    )
    .unwrap();
    let args = ["replay", "simulate", ".", "--trace", "trace.csv", "--format", "json"];
    let short_p50 = |extra: &[&str]| {
        let (status, stdout, stderr) = allot(dir.path(), &[&args[..], extra].concat());
        assert_eq!(status, 0, "{stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        let runs = report["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1);
        (runs[0]["policy"].as_str().unwrap().to_string(), runs[0]["short_jobs"]["wait_p50_s"].clone())
    };
    // Waits 0, 990 and 0 s; with the slurm.conf, 0, 990 and 1: the median is job 3's.
    assert_eq!(short_p50(&[]), ("Slurm as configured".to_string(), Value::from(0)));
    assert_eq!(short_p50(&["--slurm-conf", "slurm.conf"]).1, Value::from(1));
    assert_eq!(short_p50(&["--policy", "budget"]).0, "budget policy");
    // A value Slurm would refuse is refused with its line.
    std::fs::write(dir.path().join("bad.conf"), "# scaled\nSchedulerParameters=bf_interval=0\n").unwrap();
    let (status, _, stderr) = allot(dir.path(), &[&args[..], &["--slurm-conf", "bad.conf"]].concat());
    assert_ne!(status, 0);
    assert!(stderr.contains("line 2: bf_interval=0"), "{stderr}");
    // Budgets on a cluster Slurm does not run are simulated under the budget policy.
    std::fs::write(dir.path().join("allot.kdl"), BASE).unwrap();
    assert_eq!(short_p50(&[]).0, "budget policy");
}

#[test]
fn kueue_bound_budgets_are_simulated_as_kueue_admits_them_by_default() {
    let dir = tempfile::tempdir().unwrap();
    // ClusterQueues a and b of 4 GPUs each in Cohort root (allot's: reclaimWithinCohort Any,
    // Fair Sharing on). Job 1 (a, 8 GPUs) borrows b's 4; job 2 (b, 4 GPUs) comes at 10,
    // within b's quota: Kueue takes b's GPUs back at once, evicting job 1, and admits job 2
    // at 10. Job 1 (not resumable) waits for them: it starts again at 110, and waits 100 s.
    let bound = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8 {\n    kubernetes kueue\n}\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=\"50%\"\nproject b share=\"50%\"\n";
    std::fs::write(dir.path().join("allot.kdl"), bound).unwrap();
    let trace = "id,project,gpus,submit,duration\n1,a,8,0,1000\n2,b,4,10,100\n";
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let args = ["replay", "simulate", ".", "--trace", "trace.csv", "--format", "json"];
    let (status, stdout, stderr) = allot(dir.path(), &args);
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let kueue = &report["runs"][0];
    assert_eq!(kueue["policy"], "Kueue as configured", "{stdout}");
    assert_eq!(kueue["preemptions"], 1, "{stdout}");
    assert_eq!(kueue["stalled_instants"], 0, "{stdout}");
    assert_eq!(
        (&kueue["short_jobs"]["wait_p50_s"], &kueue["short_jobs"]["wait_p90_s"]),
        (&json!(0), &json!(100))
    );
    // Side by side with the budget rule, as asked.
    let (status, stdout, stderr) = allot(dir.path(), &[&args[..], &["--policy", "kueue,budget"]].concat());
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let labels: Vec<&Value> = report["runs"].as_array().unwrap().iter().map(|r| &r["policy"]).collect();
    assert_eq!(labels, [&json!("Kueue as configured"), &json!("budget policy")]);
    // Budgets on a cluster Kueue does not run: the policy cannot be simulated, and says why.
    std::fs::write(dir.path().join("allot.kdl"), BASE).unwrap();
    let (status, _, stderr) = allot(dir.path(), &[&args[..], &["--policy", "kueue"]].concat());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("is not bound to Kueue"), "{stderr}");
}

#[test]
fn a_reserves_jobs_take_its_quota_back_at_once_under_kueue() {
    let dir = tempfile::tempdir().unwrap();
    // 16 GPUs, 2 held for debug: ClusterQueues a and b of 7 GPUs each and
    // root-reserve-debug of 2, all in Cohort root. Jobs 1 (a) and 2 (b), 8 GPUs each at 0,
    // borrow a GPU each: the reserve's, idle. Job 3 (b, debug, 1 GPU) comes at 10 and goes
    // to root-reserve-debug, within its quota: Kueue evicts one borrower at once and
    // admits job 3 at 10. The evicted job needs 8 GPUs and finds 7 until job 3 ends: it
    // starts again at 110, and waits 100 s.
    let bound = "cluster c gpus=16 gpu-type=h100 gpus-per-node=8 {\n    kubernetes kueue\n}\n\
        contract debug min-runtime=\"0s\" max-gpus=1 reserve=2\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=\"50%\"\nproject b share=\"50%\"\n";
    std::fs::write(dir.path().join("allot.kdl"), bound).unwrap();
    let trace = "id,project,gpus,submit,duration,contract\n1,a,8,0,1000,batch\n2,b,8,0,1000,batch\n3,b,1,10,100,debug\n";
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let report =
        report_in(dir.path(), &["replay", "simulate", ".", "--trace", "trace.csv", "--policy", "kueue"]);
    let kueue = &report["runs"][0];
    assert_eq!(kueue["preemptions"], 1, "{kueue}");
    let waits = |kueue: &Value, contract: &str| {
        let contracts = kueue["audit"]["contracts"].as_array().unwrap();
        let c = contracts.iter().find(|c| c["contract"] == contract).unwrap();
        (c["wait_p50_s"].clone(), c["wait_p90_s"].clone())
    };
    assert_eq!(waits(kueue, "debug"), (json!(0), json!(0)), "{kueue}");
    assert_eq!(waits(kueue, "batch"), (json!(0), json!(100)), "{kueue}");
    // Without the reserve, job 3 goes to b's ClusterQueue: b borrows nothing then (its job
    // 2 runs 8 of its 8), so job 3 waits for a job to end, at 1000.
    std::fs::write(dir.path().join("allot.kdl"), bound.replace(" reserve=2", "")).unwrap();
    let report =
        report_in(dir.path(), &["replay", "simulate", ".", "--trace", "trace.csv", "--policy", "kueue"]);
    let kueue = &report["runs"][0];
    assert_eq!(kueue["preemptions"], 0, "{kueue}");
    assert_eq!(waits(kueue, "debug"), (json!(990), json!(990)), "{kueue}");
}

#[test]
fn the_kueue_policy_takes_the_objects_allot_writes_for_each_grant_boundary() {
    let dir = tempfile::tempdir().unwrap();
    // 8 GPUs bound to Kueue: a 25% (ClusterQueue a, 2 GPUs, weight 0.25) and from 3600 +25%
    // (4 GPUs, weight 0.5); b 50% (4 GPUs, weight 0.5); the rest is Cohort root's. Job 1 (b,
    // 8 GPUs, 10,000 s) borrows 4. Job 2 (a, 5 GPUs, 1000 s) comes at 100: a would borrow
    // 3 of the 8 the cohort lends, a share of 3/8/0.25 = 1.5 against b's 4/8/0.5 = 1, so
    // Fair Sharing preempts nothing. At 3600 the objects of the grant take over: a borrows
    // 1, 1/8/0.5 = 0.25 < 1: job 1 is evicted and job 2 starts, having waited 3500 s. Job 1
    // starts again when job 2 ends, at 4600. Without the grant job 2 waits for job 1's end
    // at 10,000: 9900 s, no preemption.
    let granted = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8 {\n    kubernetes kueue\n}\n\
        contract batch min-runtime=\"0s\" default=#true\n\
        project a share=\"25%\" {\n    grant share=\"+25%\" from=\"1970-01-01T01:00:00Z\" until=\"2100-01-01\" reason=\"r\"\n}\n\
        project b share=\"50%\"\n";
    let trace = "id,project,gpus,submit,duration\n1,b,8,0,10000\n2,a,5,100,1000\n";
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let simulated = |budgets: &str| {
        std::fs::write(dir.path().join("allot.kdl"), budgets).unwrap();
        let report =
            report_in(dir.path(), &["replay", "simulate", ".", "--trace", "trace.csv", "--policy", "kueue"]);
        let run = &report["runs"][0];
        (run["preemptions"].clone(), run["short_jobs"]["wait_p50_s"].clone())
    };
    assert_eq!(simulated(granted), (json!(1), json!(3500)));
    let written = granted.replace(
        "{\n    grant share=\"+25%\" from=\"1970-01-01T01:00:00Z\" until=\"2100-01-01\" reason=\"r\"\n}",
        "",
    );
    assert_eq!(simulated(&written), (json!(0), json!(9900)));
}
