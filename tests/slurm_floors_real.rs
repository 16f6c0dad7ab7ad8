//! allot's floors on a real Slurm (`scripts/slurm.sh`: one node of 8 fake GPUs), run with the
//! configuration `allot build --target slurm` emits: the floor partitions of a higher
//! `PriorityTier`, `preempt/partition_prio` with requeue, allot's job_submit.lua and its QOS
//! script. Two budgets of 4 guaranteed GPUs each (a third whose share guarantees none), the
//! contract `batch` with a 1-minute `PreemptExemptTime`; credentials of 5 s (Slurm's least),
//! so that a requeued job is held 6 s; the main scheduler's pass every 10 s (allot's).
//!
//! B fills the 8 GPUs: 4 jobs in its floor, 4 in `gpu`. A asks for 2: they preempt the two
//! youngest of B's jobs in `gpu` once their protection has passed, and run in A's floor. A
//! asks for 4 more: 2 preempt B's last jobs in `gpu` at once, 2 wait (A's floor is full). A
//! requeued job is held `cred_expire` + 1 from its preemption; restarted, it is protected
//! again for 1 minute. A job that may not be requeued runs in its budget's floor only. A
//! user cannot move a job to another partition. The timings measured are printed.
//!
//! Needs root and apt (CI has both); elsewhere it says so and skips, unless
//! `ALLOT_REQUIRE_SLURM` is set, when it fails. About 3 minutes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use allot_simulate::SlurmSettings;

use crate::common::Allot;
use crate::common::slurm::{Floors, Slurm, apply_budgets, borrowed, budgets_in, ok, run, sbatch};

/// a and b guarantee 4 GPUs each (50% of 8, scaled by 100/101 under overcommit: 3.96,
/// rounded); c guarantees none (1%: 0.08 GPUs). allot refuses a share of 0%.
const BUDGETS: &str = r#"
cluster main gpus=8 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=floors partition=gpu
}
policy overcommit=#true
contract batch min-runtime="1m" resumable=#true default=#true
project a share="50%" {
    users alma
}
project b share="50%" {
    users bert
}
project c share="1%" {
    users cleo
}
"#;

/// The test's settings beside allot's: credentials of 5 s, Slurm's least (below it Slurm
/// takes 120 s), so that a requeued job is held 6 s.
const SCHEDULING: &str = "AuthInfo=cred_expire=5\n";

/// The contract's protection (`min-runtime`), in seconds.
const PROTECTION: i64 = 60;

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A job as `squeue` shows it.
#[derive(Clone, Debug)]
struct Queued {
    state: String,
    /// Its partition when it runs; the partitions it may run in while it waits.
    partition: String,
    reason: String,
    /// When it started (running); `None` while it waits.
    start: Option<i64>,
}

/// Every job in the queue, by id.
fn queue() -> BTreeMap<String, Queued> {
    let output = run("squeue", &["-h", "-a", "-o", "%i|%T|%P|%r|%S"], &[("SLURM_TIME_FORMAT", "%s")]);
    assert!(output.status.success(), "squeue: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').map(str::trim).collect();
            let [id, state, partition, reason, start] = f[..] else { return None };
            let start = (state == "RUNNING").then(|| start.parse().ok()).flatten();
            Some((
                id.to_string(),
                Queued { state: state.into(), partition: partition.into(), reason: reason.into(), start },
            ))
        })
        .collect()
}

/// One run of a job, from `sacct -D`: its start, its end (`None` while it runs) and state.
#[derive(Clone, Debug)]
struct Run {
    start: i64,
    end: Option<i64>,
    state: String,
}

/// Every run of job `id` that started, in order.
fn runs(id: &str) -> Vec<Run> {
    let args = ["-j", id, "-X", "-D", "-P", "-n", "-o", "Start,End,State"];
    let output = run("sacct", &args, &[("SLURM_TIME_FORMAT", "%s")]);
    assert!(output.status.success(), "sacct: {}", String::from_utf8_lossy(&output.stderr));
    let mut runs: Vec<Run> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            let [start, end, state] = f[..] else { return None };
            Some(Run { start: start.parse().ok()?, end: end.parse().ok(), state: state.to_string() })
        })
        .collect();
    runs.sort_by_key(|r| r.start);
    runs
}

/// The runs of job `id` that ended preempted (requeued).
fn preemptions(id: &str) -> Vec<Run> {
    runs(id)
        .into_iter()
        .filter(|r| r.state.starts_with("PREEMPTED") || r.state.starts_with("REQUEUE"))
        .collect()
}

/// `scontrol show job`'s field `key` of job `id` (times in epoch seconds).
fn job_field(id: &str, key: &str) -> String {
    let output = run("scontrol", &["-o", "show", "job", id], &[("SLURM_TIME_FORMAT", "%s")]);
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace()
        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key} in `scontrol show job {id}`: {text}"))
        .to_string()
}

/// Polls `check` every half second until it gives a value; fails after `limit` seconds.
fn wait_for<T>(what: &str, limit: i64, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            started.elapsed() < Duration::from_secs(limit.max(1) as u64),
            "waited {limit} s for {what}: {:#?}",
            queue()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A 1-GPU job of `user` in budget `account`, submitted to the bound partition (which
/// job_submit.lua turns into the budget's floor, then it), running 20 minutes: its id.
fn submit(user: &str, account: &str, extra: &[&str]) -> String {
    let account = format!("--account={account}");
    let mut options = vec!["--partition=gpu", "--gres=gpu:1", account.as_str()];
    options.extend_from_slice(extra);
    sbatch(user, &options, "sleep 1200")
}

fn cancel(ids: &[String]) {
    let mut args = vec!["--quiet"];
    args.extend(ids.iter().map(String::as_str));
    ok("scancel", &args);
    wait_for("the cancelled jobs to leave the queue", 60, || {
        let q = queue();
        ids.iter().all(|id| !q.contains_key(id)).then_some(())
    });
}

fn in_state<'a>(q: &BTreeMap<String, Queued>, ids: &'a [String], state: &str) -> Vec<&'a String> {
    ids.iter().filter(|id| q.get(*id).is_some_and(|j| j.state == state)).collect()
}

/// `text` written as the budget repository `budgets/` in `work` and built for Slurm: the
/// repository's path, the build's folder, and Slurm cluster `cluster`'s configuration with
/// the test's `scheduling` lines.
fn built(
    work: &std::path::Path,
    text: &str,
    cluster: &str,
    scheduling: &str,
) -> (String, std::path::PathBuf, Floors) {
    let budgets = budgets_in(work, text);
    let out = work.join("out");
    let build =
        Allot::new(["build", budgets.as_str(), "--out", out.to_str().unwrap(), "--target", "slurm"]).output();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
    let floors = Floors::from_build(&out, cluster, scheduling);
    (budgets, out, floors)
}

#[test]
fn floors_on_a_real_slurm() {
    let begun = Instant::now();
    // The submitters, as Unix users before Slurm starts.
    for user in ["alma", "bert", "cleo"] {
        let _ = run("useradd", &["-M", user], &[]);
    }
    let work = tempfile::tempdir().unwrap();
    let (budgets, out, floors) = built(work.path(), BUDGETS, "floors", SCHEDULING);
    // What allot emitted: a floor of 4 GPUs for a and for b, none for c.
    let qos = std::fs::read_to_string(out.join("slurm/floors-qos.sh")).unwrap();
    for budget in ["a", "b"] {
        // The floors of the same cap are set in one call: `qos NAME,NAME ... GrpTRES=...`.
        let floor = format!("gpu-floor-{budget}");
        let line = qos.lines().find(|l| {
            l.strip_prefix("qos ")
                .and_then(|l| l.split(' ').next())
                .is_some_and(|n| n.split(',').any(|n| n == floor))
        });
        assert!(
            line.is_some_and(|l| l.split_whitespace().any(|w| w == "GrpTRES=gres/gpu=4")),
            "no `qos {floor} ... GrpTRES=gres/gpu=4` in floors-qos.sh:\n{qos}"
        );
        assert!(
            floors.partitions.contains(&format!("PartitionName=gpu-floor-{budget} ")),
            "{}",
            floors.partitions
        );
    }
    assert!(!qos.contains("floor-c") && !floors.partitions.contains("floor-c"), "c guarantees no GPU");
    let settings = SlurmSettings::read(&floors.conf).expect("allot's settings");
    assert!(settings.floors, "{}", floors.conf);
    let (sched_interval, hold) = (settings.sched_interval, settings.requeue_delay);
    assert_eq!(hold, 6, "cred_expire=5: held 6 s");

    let env = floors.settings();
    let Some(_slurm) = Slurm::start_with("floors", &borrowed(&env)) else { return };
    apply_budgets(work.path(), &budgets);
    let started = begun.elapsed().as_secs();
    // Slurm runs allot's partitions, with the floors' limits.
    for (partition, expected) in [
        ("gpu", &["PriorityTier=1", "PreemptMode=REQUEUE", "QoS=N/A"][..]),
        ("gpu-floor-a", &["PriorityTier=2", "PreemptMode=OFF", "QoS=gpu-floor-a", "AllowAccounts=a"]),
        ("gpu-floor-b", &["PriorityTier=2", "PreemptMode=OFF", "QoS=gpu-floor-b", "AllowAccounts=b"]),
    ] {
        let shown = ok("scontrol", &["-o", "show", "partition", partition]);
        for field in expected {
            assert!(shown.split_whitespace().any(|f| f == *field), "{partition}: no {field} in {shown}");
        }
    }
    for budget in ["a", "b"] {
        let shown = ok("scontrol", &["show", "assoc_mgr", "flags=qos", &format!("qos=gpu-floor-{budget}")]);
        assert!(shown.contains(",gres/gpu=4("), "slurmctld's QOS gpu-floor-{budget}:\n{shown}");
    }

    // 1. B fills the GPUs: 4 jobs in its floor, 4 in `gpu`.
    let t1 = now();
    let b: Vec<String> = (0..8).map(|_| submit("bert", "b", &[])).collect();
    let q = wait_for("B's 8 jobs to run", 60, || {
        let q = queue();
        (in_state(&q, &b, "RUNNING").len() == 8).then_some(q)
    });
    let (b_floor, b_over): (Vec<String>, Vec<String>) =
        b.iter().cloned().partition(|id| q[id].partition == "gpu-floor-b");
    assert_eq!((b_floor.len(), b_over.len()), (4, 4), "B's jobs: {q:#?}");
    assert!(b_over.iter().all(|id| q[id].partition == "gpu"), "{q:#?}");
    let b_started: BTreeMap<String, i64> = b.iter().map(|id| (id.clone(), q[id].start.unwrap())).collect();
    println!(
        "1. B's 8 jobs ran {} to {} s after their submission: 4 in gpu-floor-b, 4 in gpu",
        b_started.values().min().unwrap() - t1,
        b_started.values().max().unwrap() - t1
    );

    // 2. A asks for 2: they wait for B's protection, then preempt the two youngest of B's
    // jobs in `gpu` and run in A's floor.
    let a: Vec<String> = (0..2).map(|_| submit("alma", "a", &[])).collect();
    let t2 = now();
    // A user may not move their job to another partition (nor QOS): job_submit.lua refuses.
    let pending = &a[0];
    for change in ["partition=gpu-floor-a", "qos=preemptible"] {
        let tried = run(
            "runuser",
            &["-u", "alma", "--", "scontrol", "update", &format!("jobid={pending}"), change],
            &[],
        );
        let said = String::from_utf8_lossy(&tried.stderr).trim().to_string();
        assert!(!tried.status.success(), "`scontrol update {change}` by its user was accepted");
        println!(
            "2. alma's `scontrol update jobid={pending} {change}`: refused, exit {:?}: {said}",
            tried.status.code()
        );
    }
    let q = queue();
    // (squeue lists a waiting job's partitions in no set order.)
    let mut listed: Vec<&str> = q[pending].partition.split(',').collect();
    listed.sort_unstable();
    assert_eq!(
        (listed, q[pending].state.as_str()),
        (vec!["gpu", "gpu-floor-a"], "PENDING"),
        "{:?}",
        q[pending]
    );
    let protection_end = b_over.iter().map(|id| b_started[id]).min().unwrap() + PROTECTION;
    let q = wait_for("A's 2 jobs to run", protection_end + 2 * PROTECTION - now(), || {
        let q = queue();
        // Until then, B's jobs in `gpu` run: nothing preempts them.
        if now() < protection_end - 1 {
            assert_eq!(
                in_state(&q, &b, "RUNNING").len(),
                8,
                "a job of B stopped before its protection ended: {q:#?}"
            );
        }
        (in_state(&q, &a, "RUNNING").len() == 2).then_some(q)
    });
    assert!(a.iter().all(|id| q[id].partition == "gpu-floor-a"), "{q:#?}");
    assert!(b_floor.iter().all(|id| q[id].state == "RUNNING"), "B's floor untouched: {q:#?}");
    let requeued: Vec<String> = wait_for("sacct to show the preempted runs", 30, || {
        let r: Vec<String> = b_over.iter().filter(|id| !preemptions(id).is_empty()).cloned().collect();
        (r.len() >= 2).then_some(r)
    });
    assert_eq!(requeued.len(), 2, "exactly two of B's jobs in gpu preempted: {requeued:?} of {b_over:?}");
    let still: Vec<&String> = b_over.iter().filter(|id| !requeued.contains(id)).collect();
    assert!(still.iter().all(|id| q[*id].state == "RUNNING" && q[*id].partition == "gpu"), "{q:#?}");
    // The youngest first.
    for r in &requeued {
        assert!(
            still.iter().all(|s| b_started[r] >= b_started[*s]),
            "{r} preempted before a younger job: {b_started:?}"
        );
    }
    let mut preempted_at: BTreeMap<String, i64> = BTreeMap::new();
    let mut delays = Vec::new();
    for id in &requeued {
        let run = &preemptions(id)[0];
        assert_eq!(run.start, b_started[id]);
        let at = run.end.unwrap();
        let delay = at - (run.start + PROTECTION);
        assert!(delay >= 0, "job {id} preempted {} s before its protection ended", -delay);
        assert!(delay <= sched_interval + 20, "job {id} preempted {delay} s after its protection ended");
        preempted_at.insert(id.clone(), at);
        delays.push(delay);
    }
    let a_runs: Vec<i64> = a.iter().map(|id| q[id].start.unwrap()).collect();
    println!(
        "2. A's 2 jobs (submitted at +{} s) waited for the protection of B's jobs in gpu (till +{} s); \
         protection end -> preemption {delays:?} s (sched_interval {sched_interval} s); A's jobs ran {:?} s after the preemptions",
        t2 - t1,
        protection_end - t1,
        a_runs.iter().zip(&requeued).map(|(s, id)| s - preempted_at[id]).collect::<Vec<_>>()
    );

    // 3. A asks for 4 more: 2 preempt B's last jobs in `gpu` at once (their protection is
    // over), 2 wait, A's floor full.
    let a_more: Vec<String> = (0..4).map(|_| submit("alma", "a", &[])).collect();
    let t3 = now();
    let mut reasons_of_requeued: BTreeMap<String, Vec<String>> = BTreeMap::new();
    wait_for("2 more of A's jobs to run", 3 * sched_interval + 30, || {
        let q = queue();
        for id in &b_over {
            if let Some(j) = q.get(id).filter(|j| j.state == "PENDING") {
                let seen = reasons_of_requeued.entry(id.clone()).or_default();
                if seen.last() != Some(&j.reason) {
                    seen.push(j.reason.clone());
                }
            }
        }
        (in_state(&q, &a_more, "RUNNING").len() == 2).then_some(())
    });
    let ran = now();
    // The other 2 wait: still, a pass later.
    std::thread::sleep(Duration::from_secs((sched_interval + 5) as u64));
    let q2 = queue();
    let running: Vec<&String> = in_state(&q2, &a_more, "RUNNING");
    let waiting: Vec<&String> = in_state(&q2, &a_more, "PENDING");
    assert_eq!((running.len(), waiting.len()), (2, 2), "{q2:#?}");
    assert!(running.iter().all(|id| q2[*id].partition == "gpu-floor-a"), "{q2:#?}");
    let reasons: Vec<&str> = waiting.iter().map(|id| q2[*id].reason.as_str()).collect();
    for reason in &reasons {
        assert!(["QOSGrpGRES", "Resources", "Priority"].contains(reason), "a waiting job's reason: {reason}");
    }
    assert!(b_floor.iter().all(|id| q2[id].state == "RUNNING"), "B's floor untouched: {q2:#?}");
    let second: Vec<String> = b_over.iter().filter(|id| !requeued.contains(id)).cloned().collect();
    let mut quick = Vec::new();
    for id in &second {
        let run = wait_for("sacct to show the preemption", 30, || preemptions(id).into_iter().next());
        let at = run.end.unwrap();
        assert!(at >= t3, "job {id} preempted before A asked");
        assert!(at - t3 <= 2 * sched_interval + 15, "job {id} preempted {} s after A asked", at - t3);
        preempted_at.insert(id.clone(), at);
        quick.push(at - t3);
    }
    println!(
        "3. A's 4 more jobs: B's last 2 jobs in gpu preempted {quick:?} s after A asked, A's 2 ran {} s after; \
         the other 2 wait with reason {reasons:?}; B's requeued jobs waited with reasons {reasons_of_requeued:?}",
        running.iter().filter_map(|id| q2[*id].start).max().unwrap_or(ran) - t3,
    );

    // 4. Requeued, a job is held cred_expire + 1 from its preemption (its eligible time), and
    // restarts no sooner; restarted, it is protected again.
    let mut holds = Vec::new();
    for id in &b_over {
        let eligible: i64 = job_field(id, "EligibleTime").parse().unwrap();
        let held = eligible - preempted_at[id];
        assert!((hold - 1..=hold + 10).contains(&held), "job {id} held {held} s, not about {hold} s");
        holds.push(held);
    }
    // Room for two of them: A's waiting jobs cancelled, then two of its running ones.
    cancel(&waiting.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let freed = now();
    cancel(&a);
    let q = wait_for("2 of B's requeued jobs to restart", 60, || {
        let q = queue();
        (in_state(&q, &b_over, "RUNNING").len() == 2).then_some(q)
    });
    let restarted: Vec<String> = in_state(&q, &b_over, "RUNNING").into_iter().cloned().collect();
    let mut restart_delays = Vec::new();
    for id in &restarted {
        assert_eq!(q[id].partition, "gpu", "{q:#?}");
        let start = q[id].start.unwrap();
        let eligible: i64 = job_field(id, "EligibleTime").parse().unwrap();
        assert!(start >= eligible && start >= preempted_at[id] + hold - 1, "job {id} restarted at {start}");
        assert_eq!(job_field(id, "Restarts"), "1");
        restart_delays.push((start - preempted_at[id], start - freed));
    }
    println!(
        "4. requeued jobs held {holds:?} s (cred_expire + 1 = {hold}); 2 restarted (preemption -> restart, GPUs freed -> restart): {restart_delays:?} s"
    );
    // A asks for 2 again: B's restarted jobs are protected 1 minute from their restart.
    let a_last: Vec<String> = (0..2).map(|_| submit("alma", "a", &[])).collect();
    let restart_end = restarted.iter().map(|id| q[id].start.unwrap()).min().unwrap() + PROTECTION;
    wait_for("A's last 2 jobs to run", restart_end + PROTECTION - now(), || {
        let q = queue();
        if now() < restart_end - 1 {
            assert!(
                restarted.iter().all(|id| q[id].state == "RUNNING"),
                "a restarted job stopped before its protection ended: {q:#?}"
            );
        }
        (in_state(&q, &a_last, "RUNNING").len() == 2).then_some(())
    });
    let mut again = Vec::new();
    for id in &restarted {
        let runs = wait_for("sacct to show the second preemption", 30, || {
            let p = preemptions(id);
            (p.len() == 2).then_some(p)
        });
        let delay = runs[1].end.unwrap() - (runs[1].start + PROTECTION);
        assert!(
            delay >= 0,
            "job {id} preempted {} s into its protection after its restart",
            PROTECTION + delay
        );
        assert!(delay <= sched_interval + 20, "job {id} preempted {delay} s after its protection ended");
        again.push(delay);
    }
    println!(
        "4. A's next 2 jobs preempted B's restarted ones {again:?} s after their protection (from their restart) ended"
    );

    // 5. A job that may not be requeued runs in its budget's floor only, where nothing
    // preempts it: it waits for B's floor even with GPUs free in `gpu`.
    let q = queue();
    let b_waiting: Vec<String> =
        q.iter().filter(|(id, j)| b.contains(id) && j.state == "PENDING").map(|(id, _)| id.clone()).collect();
    cancel(&b_waiting);
    let pinned = submit("bert", "b", &["--no-requeue"]);
    let q = queue();
    assert_eq!(q[&pinned].partition, "gpu-floor-b", "a job with --no-requeue: {:?}", q[&pinned]);
    let a_running: Vec<String> = q
        .iter()
        .filter(|(_, j)| j.state == "RUNNING" && j.partition == "gpu-floor-a")
        .map(|(id, _)| id.clone())
        .collect();
    cancel(&a_running);
    std::thread::sleep(Duration::from_secs((sched_interval + 5) as u64));
    let q = queue();
    let busy = q.values().filter(|j| j.state == "RUNNING").count();
    assert_eq!(busy, 4, "B's floor only runs: {q:#?}");
    assert_eq!(q[&pinned].state, "PENDING", "with 4 GPUs free in gpu: {:?}", q[&pinned]);
    let waited_for = q[&pinned].reason.clone();
    cancel(&b_floor[..1]);
    let q = wait_for("the job with --no-requeue to run", 3 * sched_interval, || {
        let q = queue();
        (q[&pinned].state == "RUNNING").then_some(q)
    });
    assert_eq!(q[&pinned].partition, "gpu-floor-b");
    println!(
        "5. a job of B with --no-requeue: partitions gpu-floor-b only; with 4 GPUs free in gpu and B's floor full it waited ({waited_for}); it ran in gpu-floor-b once a floor job ended"
    );

    // 6. c guarantees no GPU: its jobs go to `gpu` only. A job submitted without a partition.
    let c_job = submit("cleo", "c", &[]);
    let unrouted = sbatch("alma", &["--gres=gpu:1", "--account=a"], "sleep 1200");
    let q = queue();
    assert!(q[&c_job].partition == "gpu", "c's job: {:?}", q[&c_job]);
    // `gpu` is the cluster's default partition: a job that names none is routed as if it
    // had named it (job_submit.lua reads the default; targets/tests/slurm_floors.rs checks
    // it). Where it runs depends on the floor's room now: shown, not asserted.
    println!(
        "6. c's job: partitions {}; A's job submitted without --partition: partitions {}",
        q[&c_job].partition, q[&unrouted].partition
    );
    // Nothing preempted the job that may not be requeued.
    assert_eq!((q[&pinned].state.as_str(), q[&pinned].partition.as_str()), ("RUNNING", "gpu-floor-b"));
    assert_eq!(job_field(&pinned, "Restarts"), "0");
    println!(
        "Slurm up and budgets applied in {started} s; the whole test took {} s",
        begun.elapsed().as_secs()
    );
}

/// A reserve of 2 GPUs for `debug` (1 GPU a job, no protection of its own) beside the
/// floors: a and b guarantee 3 GPUs each, of the 6 no reserve holds.
const RESERVE_BUDGETS: &str = r#"
cluster main gpus=8 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=reserve partition=gpu
}
contract debug min-runtime="0s" max-runtime="1h" max-gpus=1 reserve=2
contract batch min-runtime="1m" resumable=#true default=#true
project a share="50%" {
    users alma
}
project b share="50%" {
    users bert
}
"#;

/// allot's reserve on a real Slurm: a debug job of a budget beyond its floor, on a full
/// cluster, runs in the reserve's partition as soon as the work there may be preempted (its
/// contract's `PreemptExemptTime`: Slurm applies the victim's to every preemptor); a second
/// takes the reserve's other GPU at once; a third waits, the reserve full; the floors are
/// never touched; and only `debug` may run in the reserve's partition. About 2 minutes.
#[test]
fn a_reserve_on_a_real_slurm() {
    let begun = Instant::now();
    for user in ["alma", "bert"] {
        let _ = run("useradd", &["-M", user], &[]);
    }
    let work = tempfile::tempdir().unwrap();
    let (budgets, _, floors) = built(work.path(), RESERVE_BUDGETS, "reserve", SCHEDULING);
    let settings = SlurmSettings::read(&floors.conf).expect("allot's settings");
    let sched_interval = settings.sched_interval;
    let env = floors.settings();
    let Some(_slurm) = Slurm::start_with("reserve", &borrowed(&env)) else { return };
    apply_budgets(work.path(), &budgets);
    for (partition, expected) in [
        ("gpu-floor-a", &["PriorityTier=2", "PreemptMode=OFF", "QoS=gpu-floor-a"][..]),
        (
            "gpu-reserve-debug",
            &["PriorityTier=3", "PreemptMode=OFF", "QoS=gpu-reserve-debug", "AllowQos=debug"],
        ),
    ] {
        let shown = ok("scontrol", &["-o", "show", "partition", partition]);
        for field in expected {
            assert!(shown.split_whitespace().any(|f| f == *field), "{partition}: no {field} in {shown}");
        }
    }
    for (qos, gpus) in [("gpu-floor-a", 3), ("gpu-floor-b", 3), ("gpu-reserve-debug", 2)] {
        let shown = ok("scontrol", &["show", "assoc_mgr", "flags=qos", &format!("qos={qos}")]);
        assert!(shown.contains(&format!(",gres/gpu={gpus}(")), "slurmctld's QOS {qos}:\n{shown}");
    }

    // 1. The cluster full: A's 3 jobs in its floor; B's 5, 3 in its floor and 2 in `gpu`.
    let t1 = now();
    let a: Vec<String> = (0..3).map(|_| submit("alma", "a", &[])).collect();
    let b: Vec<String> = (0..5).map(|_| submit("bert", "b", &[])).collect();
    let q = wait_for("the 8 jobs to run", 60, || {
        let q = queue();
        (in_state(&q, &a, "RUNNING").len() + in_state(&q, &b, "RUNNING").len() == 8).then_some(q)
    });
    assert!(a.iter().all(|id| q[id].partition == "gpu-floor-a"), "{q:#?}");
    let b_over: Vec<String> = b.iter().filter(|id| q[*id].partition == "gpu").cloned().collect();
    assert_eq!(b_over.len(), 2, "{q:#?}");
    let floor_jobs: Vec<String> = a.iter().chain(&b).filter(|id| !b_over.contains(id)).cloned().collect();

    // 2. B, beyond its floor, asks for a debug GPU: it waits for the protection of the work
    // in `gpu`, then runs in the reserve.
    let debug_b = submit("bert", "b", &["--qos=debug"]);
    let t2 = now();
    let q = queue();
    let mut listed: Vec<&str> = q[&debug_b].partition.split(',').collect();
    listed.sort_unstable();
    assert_eq!(listed, ["gpu", "gpu-floor-b", "gpu-reserve-debug"], "{:?}", q[&debug_b]);
    let protection_end = b_over.iter().map(|id| q[id].start.unwrap()).min().unwrap() + PROTECTION;
    let q = wait_for("B's debug job to run", protection_end + PROTECTION - now(), || {
        let q = queue();
        (q[&debug_b].state == "RUNNING").then_some(q)
    });
    assert_eq!(q[&debug_b].partition, "gpu-reserve-debug", "{q:#?}");
    let ran = q[&debug_b].start.unwrap();
    assert!(
        ran >= protection_end,
        "B's debug job ran {} s before the protection ended",
        protection_end - ran
    );
    let taken: Vec<String> = wait_for("sacct to show the preemption", 30, || {
        let r: Vec<String> = b_over.iter().filter(|id| !preemptions(id).is_empty()).cloned().collect();
        (!r.is_empty()).then_some(r)
    });
    assert_eq!(taken.len(), 1, "one job of B in gpu preempted: {taken:?}");
    println!(
        "2. B's debug job (submitted at +{} s): ran in gpu-reserve-debug {} s after the protection of B's work in gpu ended (+{} s), preempting one job there",
        t2 - t1,
        ran - protection_end,
        protection_end - t1
    );

    // 3. A asks for 2 debug GPUs: one takes the reserve's other GPU at once, from B's last
    // job in `gpu`; the other waits, the reserve full and A's floor too.
    let debug_a: Vec<String> = (0..2).map(|_| submit("alma", "a", &["--qos=debug"])).collect();
    let t3 = now();
    let q = wait_for("one of A's debug jobs to run", 3 * sched_interval + 30, || {
        let q = queue();
        (in_state(&q, &debug_a, "RUNNING").len() == 1).then_some(q)
    });
    let started = q[in_state(&q, &debug_a, "RUNNING")[0]].clone();
    assert_eq!(started.partition, "gpu-reserve-debug", "{q:#?}");
    std::thread::sleep(Duration::from_secs((sched_interval + 5) as u64));
    let q = queue();
    let waiting = in_state(&q, &debug_a, "PENDING");
    assert_eq!(waiting.len(), 1, "{q:#?}");
    let reason = q[waiting[0]].reason.clone();
    assert!(["QOSGrpGRES", "Resources", "Priority"].contains(&reason.as_str()), "the reason: {reason}");
    assert!(floor_jobs.iter().all(|id| q[id].state == "RUNNING"), "the floors untouched: {q:#?}");
    assert!(floor_jobs.iter().all(|id| preemptions(id).is_empty()), "no floor job preempted");
    println!(
        "3. A's 2 debug jobs: one ran in gpu-reserve-debug {} s after A asked (B's last job in gpu preempted), the other waits ({reason})",
        started.start.unwrap() - t3
    );

    // 4. Only `debug` runs in the reserve's partition: a batch job sent there is refused.
    let refused = run(
        "runuser",
        &[
            "-u",
            "alma",
            "--",
            "sbatch",
            "--chdir=/tmp",
            "-o",
            "/dev/null",
            "--partition=gpu-reserve-debug",
            "--account=a",
            "--gres=gpu:1",
            "--wrap",
            "sleep 60",
        ],
        &[],
    );
    assert!(!refused.status.success(), "a batch job was accepted in the reserve's partition");
    println!(
        "4. a batch job sent to gpu-reserve-debug: refused: {}; the whole test took {} s",
        String::from_utf8_lossy(&refused.stderr).trim(),
        begun.elapsed().as_secs()
    );
}

/// What many floors cost slurmctld, for docs/slurm.md: budgets of `n` projects, each with a
/// floor of 8 GPUs (`n` floor partitions beside `gpu`), on the test's one node. Per `n`: how
/// long Slurm took to start (the QOS script run twice, partitions read), slurmctld's memory,
/// its main and backfill scheduler cycles with 400 one-GPU jobs of 20 users queued (8 run,
/// the rest wait, each with its floor and `gpu`), read from `sdiag` after a minute, the QOS
/// script run again (every QOS there: it reads them and sets each), and a restart of
/// slurmctld alone (its state and the partitions read again).
/// Not in CI (about 8 minutes):
/// `cargo test --test integration slurm_floors_real:: -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for docs/slurm.md"]
fn what_floors_cost_slurmctld() {
    let users: Vec<String> = (0..20).map(|i| format!("floorcost{i}")).collect();
    for user in &users {
        let _ = run("useradd", &["-M", user], &[]);
    }
    println!(
        "floors | start (s) | slurmctld RSS (MiB) | main cycle mean (µs) | backfill cycle mean (µs) | QOS script again (s) | slurmctld restart (s)"
    );
    let timed = |what: &dyn Fn()| {
        let begun = Instant::now();
        what();
        begun.elapsed().as_secs_f64()
    };
    for n in [1, 100, 400] {
        let work = tempfile::tempdir().unwrap();
        let mut text = format!(
            "cluster main gpus={} gpu-type=h100 gpus-per-node=8 {{\n    slurm cluster=cost partition=gpu\n}}\n\
             contract batch min-runtime=\"1h\" resumable=#true default=#true\n",
            8 * n
        );
        for p in 0..n {
            text += &format!("project p{p} share=1 {{\n");
            if let Some(user) = users.get(p) {
                text += &format!("    users {user}\n");
            }
            text += "}\n";
        }
        let (budgets, out, floors) = built(work.path(), &text, "cost", "");
        assert_eq!(floors.partitions.lines().count(), n, "a floor per project");
        let env = floors.settings();
        let begun = Instant::now();
        let Some(_slurm) = Slurm::start_with("cost", &borrowed(&env)) else { return };
        let start = begun.elapsed().as_secs_f64();
        apply_budgets(work.path(), &budgets);
        for i in 0..400 {
            let p = i % users.len().min(n);
            let user = users[p].as_str();
            sbatch(user, &[&format!("--account=p{p}"), "--gres=gpu:1", "--partition=gpu"], "sleep 60");
        }
        std::thread::sleep(Duration::from_secs(60));
        let sdiag = ok("sdiag", &[]);
        let means: Vec<f64> =
            sdiag.lines().filter_map(|l| l.trim().strip_prefix("Mean cycle:")?.trim().parse().ok()).collect();
        // scripts/slurm.sh's record of the daemon: "PID BINARY".
        let state = std::env::var("ALLOT_SLURM_STATE").unwrap_or_else(|_| "/var/lib/allot-slurm".into());
        let pid = std::fs::read_to_string(format!("{state}/pids/slurmctld")).unwrap();
        let pid = pid.split_whitespace().next().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let rss_kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
            .unwrap();
        let script = out.join("slurm/cost-qos.sh");
        let again = timed(&|| {
            ok("sh", &[script.to_str().unwrap()]);
        });
        let restart = timed(&|| {
            ok("scripts/slurm.sh", &["restart-ctld"]);
        });
        println!(
            "{n} | {start:.1} | {:.1} | {} | {} | {again:.1} | {restart:.1}",
            rss_kib / 1024.0,
            means.first().map_or("-".into(), |m| format!("{m:.0}")),
            means.get(1).map_or("-".into(), |m| format!("{m:.0}"))
        );
    }
}
