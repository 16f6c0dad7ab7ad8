//! `allot replay simulate --schedule FILE` from the command line: the simulated schedule
//! written as a trace of allot's CSV, checked by hand on a tiny trace, read back by `allot
//! replay audit` to the simulation's own figures (the ITP trace, and a generated trace under
//! every policy), and its files named per run.

use std::path::Path;

use serde_json::Value;

use crate::common::{allot_in as allot, git, itp_trace, root};

/// Simulates `budgets` on `trace` in `dir` with `extra` arguments and `--format json`:
/// the JSON's runs.
fn simulate(dir: &Path, budgets: &str, trace: &str, extra: &[&str]) -> Vec<Value> {
    let args = ["replay", "simulate", budgets, "--trace", trace, "--format", "json"];
    let (status, stdout, stderr) = allot(dir, &[&args[..], extra].concat());
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    report["runs"].as_array().unwrap().clone()
}

/// `allot replay audit` of a schedule, as JSON (its expectations may be unmet: status 1).
fn audit(dir: &Path, budgets: &str, schedule: &Path) -> Value {
    let args = ["replay", "audit", budgets, "--trace", schedule.to_str().unwrap(), "--format", "json"];
    let (status, stdout, stderr) = allot(dir, &args);
    assert!(status == 0 || (status == 1 && stderr.contains("not met")), "{status}: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// The schedule's rows, as (id, ended_by), and the number of rows whose `wait` is given.
fn rows(schedule: &Path) -> (Vec<(String, String)>, usize) {
    let text = std::fs::read_to_string(schedule).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("id,project,user,cluster,gpus,submit,start,end,contract,wait,attempt,ended_by,preempted_for")
    );
    let mut rows = Vec::new();
    let mut waits = 0;
    for line in lines {
        // The traces below give ids without commas or quotes, and `wait`, `attempt`,
        // `ended_by` and `preempted_for` are numbers and words: the last four fields are
        // plain.
        let fields: Vec<&str> = line.rsplitn(5, ',').collect();
        let id = line.split(',').next().unwrap();
        rows.push((id.to_string(), fields[1].to_string()));
        waits += usize::from(!fields[3].is_empty());
    }
    (rows, waits)
}

/// The audit of a schedule gives the figures of the simulation that wrote it: GPU-hours
/// used, entitled and delivered per budget, cluster, window and in all, waits per budget
/// and contract, and the expectations. Only the count of jobs differs: the audit counts a
/// row per run.
fn assert_same_figures(simulated: &Value, audited: &Value, runs: usize) {
    for key in ["budgets", "contracts", "clusters", "windows"] {
        assert!(!simulated[key].as_array().unwrap().is_empty(), "{key}: no figures to compare");
        assert_eq!(simulated[key], audited[key], "{key} differ");
    }
    for key in ["start", "end", "expectations", "percentiles"] {
        assert_eq!(simulated[key], audited[key], "{key} differ");
    }
    let mut totals = simulated["totals"].clone();
    totals["jobs"] = Value::from(runs);
    assert_eq!(totals, audited["totals"]);
    let mut whole = simulated.clone();
    whole["totals"]["jobs"] = Value::from(runs);
    assert_eq!(&whole, audited);
}

/// A job preempted, restarted and cut at its contract's `max-runtime`; another cut at
/// its own time limit; under the `budget` and the `slurm` policies: every row worked out by
/// hand.
#[test]
fn a_tiny_schedule_is_the_one_worked_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let budgets = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract short min-runtime=\"0s\" max-runtime=\"1h\"\n\
        contract batch min-runtime=\"0s\" default=#true\n\
        project a share=1\nproject b share=1\n";
    std::fs::write(dir.path().join("allot.kdl"), budgets).unwrap();
    // Job 1 asks for 2 h of the whole cluster under `short` (1 h at most); job 2, for b, for
    // 4 GPUs for 10 min, asking for a limit of 5 min, from a user whose name needs quoting.
    let trace = "id,project,user,gpus,submit,duration,time_limit,contract\n\
        1,a,alice,8,0,7200,,short\n\
        2,b,\"bob, \"\"jr\"\"\",4,10,600,300,\n";
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    let header =
        "id,project,user,cluster,gpus,submit,start,end,contract,wait,attempt,ended_by,preempted_for\n";

    // The budget policy: at 10, b (entitled to 4 GPUs, running none) preempts job 1 (a, 8
    // GPUs, 4 beyond its 4: after it, none are beyond). Job 2 runs its 600 s to 610 (the
    // policy heeds no time limit asked for); job 1, not resumable, requeued at 10, starts
    // again at 610 and runs its hour to 4210. Job 1 waited 600 s (10 to 610), job 2 none.
    let runs = simulate(dir.path(), ".", "trace.csv", &["--policy", "budget", "--schedule", "budget.csv"]);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["preemptions"], 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("budget.csv")).unwrap(),
        format!(
            "{header}\
             1,a,alice,c,8,0,0,10,short,600,1,preempted,2\n\
             2,b,\"bob, \"\"jr\"\"\",c,4,10,10,610,batch,0,1,finished,\n\
             1,a,alice,c,8,10,610,4210,short,,2,max-runtime,\n"
        )
    );
    let audited = audit(dir.path(), ".", &dir.path().join("budget.csv"));
    assert_same_figures(&runs[0]["audit"], &audited, 3);
    // a: 8 GPUs for 10 s and 3600 s; b: 4 GPUs for 600 s; no work beyond the budgets.
    let used: Vec<(&str, f64)> = audited["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["project"].as_str().unwrap(), b["used_gpu_hours"].as_f64().unwrap()))
        .collect();
    let by_hand = [("a", 8.0 * 3610.0 / 3600.0), ("b", 4.0 * 600.0 / 3600.0), ("(unbudgeted)", 0.0)];
    assert_eq!(used.len(), by_hand.len(), "{used:?}");
    for ((project, hours), (expected, by_hand)) in used.iter().zip(by_hand) {
        assert!(*project == expected && (hours - by_hand).abs() < 1e-9, "{used:?}");
    }
    // Waits per contract: `short` 600 s (job 1's, counted once, on its first run), `batch` 0.
    let waits: Vec<(&str, u64)> = audited["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["contract"].as_str().unwrap(), c["wait_p50_s"].as_u64().unwrap()))
        .collect();
    assert_eq!(waits, [("batch", 0), ("short", 600)]);
    assert_eq!(audited["contracts"][1]["wait_p99_s"], 600);

    // The slurm policy, the configuration allot writes: a and b have floors of 4 GPUs. Job
    // 1 (8 GPUs) is larger than a's floor: it runs in `over`. Job 2 (b, 4 GPUs) at 10 has
    // room in b's floor and preempts it (`short` protects for 0 s); its own limit of 300 s
    // ends it at 310. Job 1, requeued at 10 and held 121 s, starts again when b's job
    // ends, at 310, and runs to its `max-runtime` (3910). It waited 300 s (10 to 310).
    let runs = simulate(dir.path(), ".", "trace.csv", &["--policy", "slurm", "--schedule", "slurm.csv"]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("slurm.csv")).unwrap(),
        format!(
            "{header}\
             1,a,alice,c,8,0,0,10,short,300,1,preempted,2\n\
             2,b,\"bob, \"\"jr\"\"\",c,4,10,10,310,batch,0,1,time-limit,\n\
             1,a,alice,c,8,10,310,3910,short,,2,max-runtime,\n"
        )
    );
    assert_same_figures(&runs[0]["audit"], &audit(dir.path(), ".", &dir.path().join("slurm.csv")), 3);
}

#[test]
fn the_itp_schedule_reads_back_to_the_simulations_figures() {
    let Some(trace) = itp_trace() else { return };
    let out = tempfile::tempdir().unwrap();
    let schedule = out.path().join("schedule.csv");
    let runs = simulate(
        &root(),
        "examples/itp-simulate",
        trace.to_str().unwrap(),
        &["--policy", "budget", "--schedule", schedule.to_str().unwrap()],
    );
    assert_eq!(runs.len(), 1);
    let simulated = &runs[0]["audit"];
    let (jobs, preemptions) = (
        simulated["totals"]["jobs"].as_u64().unwrap() as usize,
        runs[0]["preemptions"].as_u64().unwrap() as usize,
    );
    assert_eq!(jobs, 69_351);
    assert!(preemptions > 1000, "{preemptions}");
    // A row per run: each job's last run finishes it (the contract has no max-runtime), each
    // preemption ends one; the wait is given once per job.
    let (rows, waits) = rows(&schedule);
    assert_eq!(rows.len(), jobs + preemptions);
    assert_eq!(waits, jobs);
    assert_eq!(rows.iter().filter(|(_, e)| e == "finished").count(), jobs);
    assert_eq!(rows.iter().filter(|(_, e)| e == "preempted").count(), preemptions);
    let audited = audit(&root(), "examples/itp-simulate", &schedule);
    assert_same_figures(simulated, &audited, jobs + preemptions);
    assert_eq!(audited["windows"].as_array().unwrap().len(), simulated["windows"].as_array().unwrap().len());
}

/// A trace of `jobs` jobs made from a fixed seed, on the budgets of [`GENERATED`]: sizes
/// from 1 to 16 GPUs, work from minutes to hours, some under `short` (cut at its hour),
/// some asking for a time limit shorter than their work, some of the `preemptible` QOS, a
/// few of an inner project's own and of no budget; written out of submit order at its end,
/// so that it is read again and sorted.
fn generated_trace(jobs: usize) -> String {
    let mut seed: u64 = 0x5eed_a110;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut rows = Vec::new();
    let mut submit = 0;
    for i in 0..jobs {
        submit += 1 + next(900);
        let project = ["a/x", "a/x", "a", "b", "b", "c", "c", "nobody"][next(8) as usize];
        let gpus = [1, 1, 2, 4, 8, 8, 16][next(7) as usize];
        let work = 300 + next(4 * 3600);
        let contract = ["", "", "ckpt", "short", "preemptible"][next(5) as usize];
        let limit = if next(4) == 0 { (work / 2).to_string() } else { String::new() };
        let user = format!("user{}", next(5));
        rows.push(format!("j{i},{project},{user},{gpus},{submit},{work},{limit},{contract}"));
    }
    // The last two rows swapped (their submit times differ): the replay finds the trace out
    // of order near its end, and reads it again sorted, writing the schedule again.
    let last = rows.len() - 1;
    rows.swap(last - 1, last);
    format!("id,project,user,gpus,submit,duration,time_limit,contract\n{}\n", rows.join("\n"))
}

const GENERATED: &str = "cluster c gpus=16 gpu-type=h100 gpus-per-node=8\n\
    policy window=\"1d\"\n\
    contract batch min-runtime=\"10m\" default=#true\n\
    contract ckpt min-runtime=\"0s\" resumable=#true\n\
    contract short min-runtime=\"0s\" max-runtime=\"1h\"\n\
    project a share=2 {\n    project x share=1\n}\n\
    project b share=1\n\
    project c share=1 max-gpus=8\n";

#[test]
fn a_generated_schedule_reads_back_under_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), GENERATED).unwrap();
    std::fs::write(dir.path().join("trace.csv"), generated_trace(600)).unwrap();
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let policies = ["slurm", "budget", "priority"];
    let runs = simulate(
        dir.path(),
        ".",
        "trace.csv",
        &["--policy", "slurm,budget,priority", "--schedule", "out/schedule.csv"],
    );
    assert_eq!(runs.len(), 3);
    // A file per policy, named after it; none under FILE's own name.
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["schedule-budget.csv", "schedule-priority.csv", "schedule-slurm.csv"]);
    for (run, policy) in runs.iter().zip(policies) {
        let schedule = dir.path().join(format!("out/schedule-{policy}.csv"));
        let (rows, waits) = rows(&schedule);
        let jobs = run["audit"]["totals"]["jobs"].as_u64().unwrap() as usize;
        let preemptions = run["preemptions"].as_u64().unwrap() as usize;
        assert!(jobs > 500, "{policy}: {jobs}");
        assert_eq!((rows.len(), waits), (jobs + preemptions, jobs), "{policy}");
        let ended = |what: &str| rows.iter().filter(|(_, e)| e == what).count();
        assert_eq!(ended("preempted"), preemptions, "{policy}");
        assert_eq!(ended("finished") + ended("max-runtime") + ended("time-limit"), jobs, "{policy}");
        // `short` cuts work beyond its hour under every policy; only Slurm heeds the limits
        // jobs ask for; every policy preempts here (the `slurm` one, the preemptible QOS).
        assert!(ended("max-runtime") > 0, "{policy}");
        assert_eq!(ended("time-limit") > 0, policy == "slurm", "{policy}");
        assert!(preemptions > 0, "{policy}");
        let audited = audit(dir.path(), ".", &schedule);
        assert_same_figures(&run["audit"], &audited, jobs + preemptions);
        // An inner project's own jobs and work no budget covers are in the figures too.
        let projects: Vec<&str> =
            audited["budgets"].as_array().unwrap().iter().map(|b| b["project"].as_str().unwrap()).collect();
        assert!(projects.contains(&"(unbudgeted)") && projects.contains(&"a/x"), "{projects:?}");
    }
}

#[test]
fn schedules_are_named_per_run_and_written_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let base = "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
        contract batch min-runtime=\"0s\" default=#true\nproject a share=1\nproject b share=1\n";
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("allot.kdl"), base).unwrap();
    git(dir.path(), &["add", "allot.kdl"]);
    git(dir.path(), &["commit", "-qm", "base"]);
    std::fs::write(dir.path().join("allot.kdl"), base.replace("project b share=1", "project b share=3"))
        .unwrap();
    let trace = "id,project,gpus,submit,duration\n1,a,8,0,3600\n2,b,8,10,600\n3,a,4,20,60\n";
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();

    // One run: FILE itself.
    simulate(dir.path(), ".", "trace.csv", &["--schedule", "one.csv"]);
    assert!(dir.path().join("one.csv").is_file());

    // A revision beside the working tree, for two policies: base-POLICY, working-tree-POLICY.
    let runs = simulate(
        dir.path(),
        ".",
        "trace.csv",
        &["--against", "HEAD", "--policy", "budget,priority", "--schedule", "s.csv"],
    );
    assert_eq!(runs.len(), 4);
    for (run, name) in runs.iter().zip([
        "s-base-budget.csv",
        "s-working-tree-budget.csv",
        "s-base-priority.csv",
        "s-working-tree-priority.csv",
    ]) {
        let path = dir.path().join(name);
        let jobs = run["audit"]["totals"]["jobs"].as_u64().unwrap() as usize;
        let preemptions = run["preemptions"].as_u64().unwrap() as usize;
        assert_eq!(rows(&path).0.len(), jobs + preemptions, "{name}");
    }
    assert!(!dir.path().join("s.csv").exists());
    // The budget policy under the two revisions: b's share of 3 against 1 changes the schedule.
    assert_ne!(
        std::fs::read_to_string(dir.path().join("s-base-budget.csv")).unwrap(),
        std::fs::read_to_string(dir.path().join("s-working-tree-budget.csv")).unwrap()
    );

    // A policy named twice would write one file twice: refused, before anything is written.
    let (status, _, stderr) = allot(
        dir.path(),
        &[
            "replay",
            "simulate",
            ".",
            "--trace",
            "trace.csv",
            "--policy",
            "budget,budget",
            "--schedule",
            "twice.csv",
        ],
    );
    assert_eq!(status, 1);
    assert!(stderr.contains("--schedule: two runs would write twice-budget.csv"), "{stderr}");

    // A run that fails leaves every file as it was, those of the runs before it too, and
    // no temporary file: here the working tree renames the cluster, so the trace's rows name
    // one it does not know, and its run fails after the base revision's succeeded.
    let before = std::fs::read_to_string(dir.path().join("s-base-budget.csv")).unwrap();
    std::fs::write(dir.path().join("allot.kdl"), base.replace("cluster c", "cluster d")).unwrap();
    std::fs::write(dir.path().join("other.csv"), "id,project,cluster,gpus,submit,duration\n1,a,c,8,0,60\n")
        .unwrap();
    let (status, _, stderr) = allot(
        dir.path(),
        &[
            "replay",
            "simulate",
            ".",
            "--trace",
            "other.csv",
            "--against",
            "HEAD",
            "--policy",
            "budget",
            "--schedule",
            "s.csv",
        ],
    );
    assert_eq!(status, 1);
    assert!(stderr.contains("other.csv") && stderr.contains("`c`"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("s-base-budget.csv")).unwrap(), before);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".allot-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A file that cannot be written is an error naming it; nothing is simulated.
    let (status, _, stderr) = allot(
        dir.path(),
        &["replay", "simulate", ".", "--trace", "trace.csv", "--schedule", "nowhere/s.csv"],
    );
    assert_eq!(status, 1);
    assert!(
        stderr.contains("error: --schedule nowhere/s.csv: its folder nowhere does not exist"),
        "{stderr}"
    );
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("one.csv", dir.path().join("link.csv")).unwrap();
        let (status, _, stderr) =
            allot(dir.path(), &["replay", "simulate", ".", "--trace", "trace.csv", "--schedule", "link.csv"]);
        assert_eq!(status, 1);
        assert!(stderr.contains("--schedule link.csv: is a symbolic link"), "{stderr}");
    }
}
