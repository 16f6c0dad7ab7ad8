//! `allot status`, `allot explain` and `allot replay audit --live` against a real Slurm
//! (`scripts/slurm.sh`: one node of 8 fake GPUs): budgets applied with `allot apply`, jobs
//! of two users in two budgets and two contracts made to contend, then what allot reads
//! compared with what `squeue` and `sacct` say, and allot's start estimates measured against
//! the real starts, beside Slurm's own estimates; then `allot drain --wait` empties the node
//! at the contracts' boundaries, and `--resume` returns it.
//!
//! Needs root and apt (CI has both); elsewhere it says so and skips, unless
//! `ALLOT_REQUIRE_SLURM` is set, when it fails.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::Allot;
use crate::common::slurm::{Slurm, apply_budgets, budgets_in, ok, run, sbatch};

const BUDGETS: &str = r#"
cluster live gpus=8 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=live partition=gpu
}
contract batch min-runtime="10m" resumable=#true default=#true
contract wide min-runtime="0s" max-gpus=4
contract quick min-runtime="1m" resumable=#true
project alpha share="60%" {
    users priya
}
project beta share="40%" {
    users rosa
}
"#;

/// Submits a job as `user`: its id.
fn submit(user: &str, account: &str, qos: &str, gpus: u32, seconds: u32, limit: &str) -> String {
    let options = [
        format!("--account={account}"),
        format!("--qos={qos}"),
        format!("--gres=gpu:{gpus}"),
        format!("--time={limit}"),
    ];
    sbatch(user, &options.iter().map(String::as_str).collect::<Vec<_>>(), &format!("sleep {seconds}"))
}

/// `squeue`'s view: each job's (state, reason, account, GPUs).
fn queue() -> BTreeMap<String, (String, String, String, u64)> {
    let text = ok("squeue", &["-h", "-a", "-O", "JobID:|,State:|,Account:|,tres-alloc:|,Reason:"]);
    text.lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .filter(|f| f.len() == 5)
        .map(|f| {
            let gpus =
                f[3].split(',').find_map(|t| t.strip_prefix("gres/gpu=")).map_or(0, |n| n.parse().unwrap());
            (f[0].to_string(), (f[1].to_string(), f[4].to_string(), f[2].to_string(), gpus))
        })
        .collect()
}

/// Waits until `done` holds of the queue (at most five minutes).
fn wait_for(what: &str, done: impl Fn(&BTreeMap<String, (String, String, String, u64)>) -> bool) {
    let started = Instant::now();
    while !done(&queue()) {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "waited five minutes for {what}: {:?}",
            queue()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

#[test]
fn live_commands_against_a_real_slurm() {
    for user in ["priya", "rosa"] {
        let _ = run("useradd", &["-M", user], &[]);
    }
    let Some(_slurm) = Slurm::start("live") else { return };
    let work = tempfile::tempdir().unwrap();
    let budgets = budgets_in(work.path(), BUDGETS);
    let budgets = budgets.as_str();
    apply_budgets(work.path(), budgets);

    check_status_and_explain(budgets);
    ok("scancel", &["--user=priya"]);
    ok("scancel", &["--user=rosa"]);
    wait_for("an empty queue", |q| q.is_empty());
    measure_estimates(budgets);
    check_audit(budgets);
    wait_for("an empty queue", |q| q.is_empty());
    check_drain(budgets);
}

/// Beta's jobs fill the 8 GPUs; alpha's wait, one of them beyond its contract's GPUs.
fn check_status_and_explain(budgets: &str) {
    let running: Vec<String> = (0..2).map(|_| submit("rosa", "beta", "batch", 4, 600, "10:00")).collect();
    wait_for("beta's jobs to run", |q| running.iter().all(|id| q.get(id).is_some_and(|j| j.0 == "RUNNING")));
    // Slurm checks a job's limits when it reaches it in the queue: the job beyond its
    // contract's GPUs goes first.
    let wide = submit("priya", "alpha", "wide", 8, 60, "5:00");
    wait_for("the wide job's reason", |q| q.get(&wide).is_some_and(|j| j.1 == "QOSMaxGRESPerJob"));
    let pending: Vec<String> = (0..2).map(|_| submit("priya", "alpha", "batch", 4, 600, "10:00")).collect();
    wait_for("the reasons of alpha's jobs", |q| {
        pending.iter().all(|id| q.get(id).is_some_and(|j| j.0 == "PENDING" && j.1 != "None"))
    });

    // status agrees with squeue, budget by budget.
    let status = Allot::new(["status", budgets, "--live", "slurm", "--format", "json"]).json();
    eprintln!(
        "{}",
        String::from_utf8_lossy(&Allot::new(["status", budgets, "--live", "slurm"]).output().stdout)
    );
    let squeue = queue();
    // Pending jobs count while they wait for GPUs: the wide job, held by its contract's
    // limit, asks for none.
    let waits = |reason: &str| matches!(reason, "Priority" | "Resources" | "None");
    let gpus = |account: &str, state: &str| -> u64 {
        squeue
            .values()
            .filter(|j| j.2 == account && j.0 == state && (state == "RUNNING" || waits(&j.1)))
            .map(|j| j.3)
            .sum()
    };
    let rows = status["clusters"][0]["budgets"].as_array().unwrap();
    let row =
        |name: &str| rows.iter().find(|b| b["budget"] == name).unwrap_or_else(|| panic!("{name}: {status}"));
    for name in ["alpha", "beta"] {
        assert_eq!(row(name)["running_gpus"], gpus(name, "RUNNING"), "{name}: {status}");
        assert_eq!(row(name)["pending_gpus"], gpus(name, "PENDING"), "{name}: {status}");
    }
    assert_eq!(
        (row("beta")["running_gpus"].as_u64(), row("alpha")["pending_gpus"].as_u64()),
        (Some(8), Some(8))
    );
    // Both have demand above the 8 GPUs: they divide them 60:40.
    let entitled = |name: &str| row(name)["entitled_gpus"].as_f64().unwrap();
    assert!((entitled("alpha") - 4.8).abs() < 1e-9 && (entitled("beta") - 3.2).abs() < 1e-9, "{status}");
    assert_eq!(
        (row("alpha")["standing"].as_str(), row("beta")["standing"].as_str()),
        (Some("under"), Some("over"))
    );
    // Beta's jobs are inside batch's 10 minutes of protection.
    assert_eq!(row("beta")["protected_gpus"], 8);
    assert!(row("beta")["protected_until"].as_i64().unwrap() > now() + 500);
    assert!(row("alpha")["usage_over_share"].is_number(), "Fair Tree figures from sshare: {status}");
    assert_eq!(status["drift"]["changes"].as_array().map(Vec::len), Some(0), "the budgets were applied");

    // explain names Slurm's reason, in budget language.
    for id in &pending {
        let explained = Allot::new(["explain", id, "--live", "slurm", budgets, "--format", "json"]).json();
        assert_eq!(explained["reason"], squeue[id].1, "{explained}");
        assert!(
            explained["reason_explained"].as_str().unwrap().contains(&format!("(Slurm: `{}`)", squeue[id].1))
        );
        assert_eq!(explained["budget"], "alpha");
        assert_eq!(explained["budget_now"]["standing"], "under");
        // Its account in the Fair Tree beside beta's; alpha has used nothing yet.
        let tree = &explained["fair_tree"];
        assert_eq!(
            (tree["account"].as_str(), tree["level_fs"].as_f64()),
            (Some("alpha"), None),
            "{explained}"
        );
        let siblings: Vec<&str> =
            tree["siblings"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert!(siblings.contains(&"alpha") && siblings.contains(&"beta"), "{explained}");
        assert!(tree["fair_share"].as_f64().is_some_and(|f| f > 0.0 && f <= 1.0), "{explained}");
        // Beta's batch jobs are not in batch's Preempt list: nothing to preempt.
        assert_eq!(explained["preemptible"].as_array().map(Vec::len), Some(0), "{explained}");
        // allot: when a beta job's 10-minute limit ends.
        let estimate = explained["estimated_start"].as_i64().unwrap();
        assert!(estimate > now() + 500 && estimate <= now() + 601, "{explained}");
    }
    let explained = Allot::new(["explain", &wide, "--live", "slurm", budgets, "--format", "json"]).json();
    eprintln!("wide job: {explained}");
    assert_eq!(explained["reason"], "QOSMaxGRESPerJob", "{explained}");
    assert!(explained["reason_explained"].as_str().unwrap().contains("contract allows"));
    assert!(explained["estimated_start"].is_null(), "it will not start as it is: {explained}");
    let text = String::from_utf8_lossy(
        &Allot::new(["explain", &pending[0], "--live", "slurm", budgets]).output().stdout,
    )
    .into_owned();
    eprintln!("{text}");
    assert!(text.contains("Why: ") && text.contains("Ahead of it in partition gpu"), "{text}");
    assert!(text.contains("Its account alpha in the Fair Tree: LevelFS inf (no usage)"), "{text}");
    let text = String::from_utf8_lossy(
        &Allot::new(["explain", &running[0], "--live", "slurm", budgets]).output().stdout,
    )
    .into_owned();
    // Beta's batch jobs: batch's Preempt list names only `preemptible`, and no QOS names batch.
    assert!(text.contains("running since") && text.contains("no QOS may preempt it"), "{text}");
    // A job that left the queue gets a short account from sacct.
    ok("scancel", &[&wide]);
    wait_for("the wide job to leave", |q| !q.contains_key(&wide));
    let text =
        String::from_utf8_lossy(&Allot::new(["explain", &wide, "--live", "slurm", budgets]).output().stdout)
            .into_owned();
    assert!(text.contains("no longer in the queue: CANCELLED"), "{text}");
    // A job Slurm never had is an error.
    let nowhere = Allot::new(["explain", "999999", "--live", "slurm", budgets]).output();
    assert_eq!(nowhere.status.code(), Some(1), "{}", String::from_utf8_lossy(&nowhere.stdout));
    assert!(String::from_utf8_lossy(&nowhere.stderr).contains("is not in the queue or the accounting"));
}

/// A pending job's estimated starts at one moment: (job, sampled at, allot's, Slurm's).
type Sample = (String, i64, Option<i64>, Option<i64>);

/// Jobs of 4 GPUs that run 45 s under a limit of one minute, queued two by two: every 5 s,
/// each pending job's estimated start, allot's and Slurm's (its backfill plans every 30 s),
/// against its real start.
fn measure_estimates(budgets: &str) {
    let mut jobs = Vec::new();
    for i in 0..8 {
        let (user, account) = if i % 2 == 0 { ("priya", "alpha") } else { ("rosa", "beta") };
        jobs.push(submit(user, account, "batch", 4, 45, "1:00"));
    }
    let mut samples: Vec<Sample> = Vec::new();
    let started = Instant::now();
    loop {
        let queued = queue();
        let pending: Vec<&String> =
            jobs.iter().filter(|id| queued.get(*id).is_some_and(|j| j.0 == "PENDING")).collect();
        if pending.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "the jobs took five minutes to start");
        for id in pending {
            let explained =
                Allot::new(["explain", id, "--live", "slurm", budgets, "--format", "json"]).json();
            if explained["start"].is_null() {
                let (ours, slurms) =
                    (explained["estimated_start"].as_i64(), explained["slurm_expected_start"].as_i64());
                samples.push((id.clone(), now(), ours, slurms));
            }
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    wait_for("every job to end", |q| jobs.iter().all(|id| !q.contains_key(id)));
    let ids = jobs.join(",");
    let sacct =
        run("sacct", &["-j", &ids, "-X", "-n", "-P", "-o", "JobID,Start"], &[("SLURM_TIME_FORMAT", "%s")]);
    assert!(sacct.status.success(), "{}", String::from_utf8_lossy(&sacct.stderr));
    let text = String::from_utf8_lossy(&sacct.stdout);
    let starts: BTreeMap<String, i64> = text
        .lines()
        .filter_map(|l| l.split_once('|'))
        .filter_map(|(id, start)| Some((id.to_string(), start.trim().parse().ok()?)))
        .collect();
    // Each sample's error (estimate - real start), and the real wait from the sample on.
    let errors = |which: fn(&Sample) -> Option<i64>| -> Vec<(i64, i64)> {
        samples.iter().filter_map(|s| Some((which(s)? - starts[&s.0], (starts[&s.0] - s.1).max(1)))).collect()
    };
    let (ours, slurms) = (errors(|s| s.2), errors(|s| s.3));
    // |estimate - real start| and predicted wait / real wait, each at p50 and p90.
    let figures = |errors: &[(i64, i64)]| -> Option<[f64; 4]> {
        if errors.is_empty() {
            return None;
        }
        let mut absolute: Vec<f64> = errors.iter().map(|e| e.0.abs() as f64).collect();
        let mut ratios: Vec<f64> = errors.iter().map(|e| (e.0 + e.1) as f64 / e.1 as f64).collect();
        absolute.sort_by(f64::total_cmp);
        ratios.sort_by(f64::total_cmp);
        let p = |v: &[f64], q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
        Some([p(&absolute, 0.5), p(&absolute, 0.9), p(&ratios, 0.5), p(&ratios, 0.9)])
    };
    let summary = |errors: &[(i64, i64)]| match figures(errors) {
        None => "no estimates".to_string(),
        Some([a50, a90, r50, r90]) => format!(
            "{} estimates, |estimate - real start| p50 {a50} s, p90 {a90} s; predicted wait / real wait p50 {r50:.2}, p90 {r90:.2}",
            errors.len()
        ),
    };
    eprintln!(
        "start estimates sampled every 5 s over {} pending jobs: allot {}; Slurm (squeue --start) {}",
        samples.iter().map(|s| &s.0).collect::<std::collections::BTreeSet<_>>().len(),
        summary(&ours),
        summary(&slurms)
    );
    assert_eq!(ours.len(), samples.len(), "allot estimated every pending job");
    // The jobs run three quarters of their limit, so the estimates, made from the limits,
    // run late; Fair Tree may also put a job of the other budget first once usage counts.
    let [_, _, median, _] = figures(&ours).unwrap();
    assert!((0.5..=2.0).contains(&median), "allot's median predicted wait is {median:.2} times the real one");
}

/// `replay audit --live slurm` reads the same jobs as `sacct` lists.
fn check_audit(budgets: &str) {
    let audit =
        Allot::new(["replay", "audit", budgets, "--live", "slurm", "--since", "1h", "--format", "json"])
            .json();
    let listed =
        ok("sacct", &["-a", "-X", "-D", "-n", "-P", "-S", "now-3600seconds", "-E", "now", "-o", "JobID"]);
    let rows = listed.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(audit["totals"]["jobs"].as_u64(), Some(rows as u64), "{audit}");
    eprintln!("replay audit --live slurm --since 1h: {rows} jobs, as sacct lists them");
}

/// A job's start, from squeue, in seconds since the epoch.
fn started(id: &str) -> i64 {
    let output = run("squeue", &["-h", "-j", id, "-o", "%S"], &[("SLURM_TIME_FORMAT", "%s")]);
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    text.parse().unwrap_or_else(|_| panic!("job {id}: no start time in {text:?}"))
}

/// `allot drain NODE --wait` on the node of three jobs: one past its protection (QOS
/// `preemptible`: none) is requeued at once; one protected a minute (`quick`, resumable) is
/// requeued within seconds after its protection ends; one not resumable (`wide`, 40 s of
/// work under a minute's limit) runs to its end; then the node is empty and allot ends. A
/// second drain meanwhile does no harm, `status` shows the node, and `--resume` returns it
/// to service.
fn check_drain(budgets: &str) {
    let node = ok("sinfo", &["-h", "-N", "-o", "%N"]).lines().next().unwrap().trim().to_string();
    let free = submit("priya", "alpha", "preemptible", 1, 600, "10:00");
    let protected = submit("priya", "alpha", "quick", 1, 600, "10:00");
    let kept = submit("rosa", "beta", "wide", 1, 40, "1:00");
    let jobs = [&free, &protected, &kept];
    wait_for("the three jobs to run", |q| jobs.iter().all(|id| q.get(*id).is_some_and(|j| j.0 == "RUNNING")));
    let (protection_end, kept_start) = (started(&protected) + 60, started(&kept));

    let mut drain = Allot::new([
        "drain",
        &node,
        budgets,
        "--live",
        "slurm",
        "--reason",
        "test drain",
        "--wait",
        "--poll",
        "2s",
    ])
    .command()
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Each line of progress, with when it was said.
    let stderr = drain.stderr.take().unwrap();
    let progress = std::thread::spawn(move || {
        BufReader::new(stderr).lines().map(|l| (now(), l.unwrap())).collect::<Vec<(i64, String)>>()
    });
    wait_for("the job past its protection to be requeued", |q| {
        q.get(&free).is_some_and(|j| j.0 == "PENDING")
    });

    // A second drain meanwhile: the node is allot's already, nothing more is requeued.
    let again = Allot::new(["drain", &node, budgets, "--live", "slurm", "--reason", "again"]).output();
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert_eq!(again.status.code(), Some(0), "{said}{}", String::from_utf8_lossy(&again.stderr));
    assert!(said.contains(&format!("({node} drained by allot before)")), "{said}");
    assert!(said.contains(&format!("job {protected} (priya, quick): to requeue at ")), "{said}");
    // status lists the node, with the jobs left on it.
    let status = Allot::new(["status", budgets, "--live", "slurm", "--format", "json"]).json();
    let draining = &status["draining"][0];
    assert_eq!(
        (draining["node"].as_str(), draining["reason"].as_str()),
        (Some(node.as_str()), Some("test drain"))
    );
    assert_eq!(draining["jobs"], 2, "{status}");
    assert!(queue().get(&protected).is_some_and(|j| j.0 == "RUNNING"), "protected: {:?}", queue());

    let deadline = Instant::now() + Duration::from_secs(180);
    while drain.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "allot drain --wait still waits after 3 minutes: {:?}", queue());
        std::thread::sleep(Duration::from_millis(500));
    }
    let output = drain.wait_with_output().unwrap();
    let progress = progress.join().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let shown: Vec<String> = progress.iter().map(|(at, l)| format!("{at} {l}")).collect();
    eprintln!("allot drain --wait:\n{stdout}{}", shown.join("\n"));
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    for said in [
        format!("job {free} (priya, preemptible): requeued now (resumable, past its protection)"),
        format!("job {protected} (priya, quick): to requeue at "),
        format!("job {kept} (rosa, wide): runs to its end at "),
        "(its contract is not resumable)".to_string(),
        "The nodes are empty (at ".to_string(),
        format!("Requeued as their protection ended: {protected} at "),
        format!("Left on their own: {kept}."),
    ] {
        assert!(stdout.contains(&said), "{said:?} in\n{stdout}");
    }
    let when = |said: &str| {
        progress
            .iter()
            .find(|(_, l)| l.ends_with(said))
            .map(|(at, _)| *at)
            .unwrap_or_else(|| panic!("{said:?}"))
    };
    let requeued = when(&format!("job {protected} requeued: its protection ended"));
    assert!(
        (protection_end..=protection_end + 5).contains(&requeued),
        "requeued at {requeued}, its protection ended at {protection_end}"
    );
    // The job not resumable ran once, to its end.
    assert!(when(&format!("job {kept} left the nodes")) >= kept_start + 40);
    let runs = ok("sacct", &["-j", &kept, "-X", "-D", "-n", "-P", "-o", "State"]);
    assert_eq!(runs.trim(), "COMPLETED", "{runs}");
    eprintln!(
        "drain: job {protected} requeued {} s after its protection ended; the node empty {} s after the drain began",
        requeued - protection_end,
        when("the nodes are empty") - progress[0].0
    );

    // --resume returns the node; the requeued jobs wait to run again.
    let resumed = Allot::new(["drain", &node, budgets, "--live", "slurm", "--resume"]).output();
    assert_eq!(resumed.status.code(), Some(0), "{}", String::from_utf8_lossy(&resumed.stderr));
    let state = ok("sinfo", &["-h", "-N", "-n", &node, "-o", "%T"]);
    assert!(!state.contains("drain"), "{state}");
    let q = queue();
    assert!([&free, &protected].iter().all(|id| q.get(*id).is_some_and(|j| j.0 == "PENDING")), "{q:?}");
    ok("scancel", &["--user=priya"]);
}
