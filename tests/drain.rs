//! `allot drain` against stand-ins for Slurm's client commands (scripts first on PATH):
//! `sinfo` and `squeue` print the nodes and jobs the test writes, `sacctmgr` the live QOS,
//! and `scontrol` records what it is asked to do (for `--wait`, it also drains the node and
//! takes a requeued job off it). What is drained, which jobs are requeued now, when the
//! others leave, the nodes left alone, `--dry-run`, `--resume`, `--wait`, and the refusals.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::SlurmStandIns;
use crate::common::scripts::{
    SACCTMGR, SCONTROL_ACTING, SCONTROL_LOGGED, SINFO, SQUEUE, SQUEUE_FAILING_ONCE,
};

/// batch protects an hour and is resumable; interactive protects ten minutes, is not
/// resumable and runs two hours at most.
const BUDGETS: &str = r#"
cluster main gpus=16 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=s partition=gpu
}
contract batch min-runtime="1h" resumable=#true default=#true
contract interactive min-runtime="10m" max-runtime="2h"
project a share="50%" {
    users alma
}
project b share="50%" {
    users bert
}
"#;

/// The live QOS, as allot writes them for these budgets.
const QOS: &str = "normal|0|cluster|||||\npreemptible|0|requeue|||||\n\
    batch|0|requeue|01:00:00||||preemptible\ninteractive|0|cancel|00:10:00|02:00:00|||preemptible\n";

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// The stand-ins, with the nodes as `sinfo -O NodeList:|,StateComplete:|,Reason:` prints
/// them and the jobs on them as `squeue -O` does.
fn stand_ins(sinfo: &str, squeue: &str) -> SlurmStandIns {
    let programs =
        [("sinfo", SINFO), ("squeue", SQUEUE), ("scontrol", SCONTROL_LOGGED), ("sacctmgr", SACCTMGR)];
    let state = [("sinfo.txt", sinfo), ("squeue.txt", squeue), ("qos.txt", QOS)];
    SlurmStandIns::new(&programs, &state, BUDGETS)
}

/// What scontrol was asked to do, one call a line.
fn calls(fake: &SlurmStandIns) -> Vec<String> {
    let log = std::fs::read_to_string(fake.path("scontrol.log")).unwrap_or_default();
    log.lines().map(str::to_string).collect()
}

/// Node n1 runs four jobs, started at `now` minus: two hours (batch: past its hour, requeued
/// now), ten minutes (batch: protected 50 minutes more), twenty minutes (interactive, not
/// resumable: its one-hour time limit ends in 40 minutes) and, with `unbounded`, two hours
/// (batch, submitted with --no-requeue and no time limit: no known end).
fn jobs(now: i64, unbounded: bool) -> String {
    let mut lines = vec![
        format!("101|alma|batch|RUNNING|{}|1-00:00:00|1|", now - 7_200),
        format!("102|bert|batch|RUNNING|{}|UNLIMITED|1|", now - 600),
        format!("103|alma|interactive|RUNNING|{}|1:00:00|1|", now - 1_200),
    ];
    if unbounded {
        lines.push(format!("104|bert|batch|RUNNING|{}|UNLIMITED|0|", now - 7_200));
    }
    lines.iter().map(|l| format!("CLUSTER: s\n{l}\n")).collect()
}

const IDLE: &str = "CLUSTER: s\nn1|mixed|none\n";

#[test]
fn a_drain_requeues_what_it_may_now_and_says_when_the_rest_leaves() {
    let now = now();
    let fake = stand_ins(IDLE, &jobs(now, false));
    let plan = fake.json(&["drain", "n1", "--live", "slurm", "--reason", "disk failing", "--dry-run"]);
    assert!(calls(&fake).is_empty(), "a dry run touches nothing: {:?}", calls(&fake));
    let actions: Vec<(&str, &str)> = plan["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["job"].as_str().unwrap(), j["action"].as_str().unwrap()))
        .collect();
    assert_eq!(actions, [("101", "requeue_now"), ("103", "runs_to_end"), ("102", "requeue_at")], "{plan}");
    assert_eq!(plan["jobs"][1]["at"], now + 2_400, "{plan}");
    assert_eq!(plan["jobs"][1]["kept_because"], "its contract is not resumable");
    assert_eq!(plan["jobs"][2]["at"], now + 3_000, "{plan}");
    assert_eq!(plan["empty_at"], now + 3_000);
    assert_eq!((plan["dry_run"].as_bool(), plan["drained"][0].as_str()), (Some(true), Some("n1")));

    let (code, stdout, stderr) = fake.run(&["drain", "n1", "--live", "slurm", "--reason", "disk failing"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        calls(&fake),
        [
            "--quiet --clusters=s update NodeName=n1 State=DRAIN Reason=allot drain: disk failing",
            "--quiet --clusters=s requeue 101"
        ]
    );
    for said in [
        "Nodes drained on Slurm cluster s: n1",
        "job 101 (alma, batch): requeued now (resumable, past its protection)",
        "job 103 (alma, interactive): runs to its end at ",
        "(its contract is not resumable)",
        "job 102 (bert, batch): to requeue at ",
        "The nodes will be empty at ",
        "Run `allot drain` again after each time above",
    ] {
        assert!(stdout.contains(said), "{said:?} in\n{stdout}");
    }
}

#[test]
fn a_job_without_an_end_leaves_the_nodes_without_a_time_to_be_empty() {
    let now = now();
    let fake = stand_ins(IDLE, &jobs(now, true));
    let plan = fake.json(&["drain", "n1", "--live", "slurm", "--reason", "fan", "--dry-run"]);
    let last = &plan["jobs"][3];
    assert_eq!((last["job"].as_str(), last["action"].as_str()), (Some("104"), Some("runs_to_end")), "{plan}");
    assert_eq!(last["kept_because"], "it was submitted with --no-requeue");
    assert!(last["at"].is_null() && plan["empty_at"].is_null(), "{plan}");
    let (_, stdout, _) = fake.run(&["drain", "n1", "--live", "slurm", "--reason", "fan", "--dry-run"]);
    assert!(
        stdout.starts_with("Dry run: nothing was changed.\nNodes would be drained on Slurm cluster s: n1\n"),
        "{stdout}"
    );
    assert!(stdout.contains("job 101 (alma, batch): would be requeued now"), "{stdout}");
    assert!(
        stdout.contains("The nodes have no time to be empty: a job on them has no known end."),
        "{stdout}"
    );
}

#[test]
fn nodes_drained_by_someone_else_are_left_alone_and_allots_own_are_not_drained_twice() {
    let now = now();
    let sinfo = "CLUSTER: s\nn1|mixed+drain|allot drain: disk failing\nn1|mixed+drain|allot drain: disk failing\n\
                 n2|idle+drain|bad DIMM\nn3|down+not_responding|Not responding\n";
    let fake = stand_ins(sinfo, &jobs(now, false));
    let (code, stdout, stderr) = fake.run(&["drain", "n1,n2,n3", "--live", "slurm", "--reason", "again"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // n1 is allot's already: its jobs are planned again, nothing is drained anew.
    assert_eq!(calls(&fake), ["--quiet --clusters=s requeue 101"]);
    assert!(stdout.contains("Nodes drained on Slurm cluster s: n1 (n1 drained by allot before)"), "{stdout}");
    assert!(stdout.contains("Node n2 left alone: idle+drain by someone else (reason: bad DIMM)"), "{stdout}");
    assert!(
        stdout.contains("Node n3 left alone: down+not_responding by someone else (reason: Not responding)"),
        "{stdout}"
    );

    // With every node left alone, nothing is planned.
    let (_, stdout, _) = fake.run(&["drain", "n2,n3", "--live", "slurm", "--reason", "x", "--dry-run"]);
    assert!(stdout.ends_with("No node is drained by allot: nothing more to do.\n"), "{stdout}");
    // Only allot's nodes return to service.
    let (code, _, stderr) = fake.run(&["drain", "n1,n2", "--live", "slurm", "--resume"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("node n2 was not drained by allot (state idle+drain, reason \"bad DIMM\")"),
        "{stderr}"
    );
    assert_eq!(calls(&fake).len(), 1, "nothing was done");
    let (code, stdout, stderr) = fake.run(&["drain", "n1", "--live", "slurm", "--resume"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(calls(&fake)[1], "--quiet --clusters=s update NodeName=n1 State=RESUME");
    assert!(stdout.contains("Returned to service on Slurm cluster s: n1"), "{stdout}");
}

#[test]
fn bad_nodes_and_reasons_are_refused_before_anything_is_done() {
    let fake = stand_ins(IDLE, "");
    for (args, said) in [
        (
            vec!["drain", "n9", "--live", "slurm", "--reason", "x"],
            "Slurm cluster s has no node n9: nothing was done",
        ),
        (
            vec!["drain", "gpu[01-04]", "--live", "slurm", "--reason", "x"],
            "\"gpu[01-04]\" is not a node name",
        ),
        (vec!["drain", "n1;reboot", "--live", "slurm", "--reason", "x"], "is not a node name"),
        (vec!["drain", "n1", "--live", "slurm", "--reason", "two\nlines"], "--reason must be one line"),
        (vec!["drain", "n1", "--live", "kueue", "--reason", "x"], "allot drain drives Slurm only"),
    ] {
        let (code, _, stderr) = fake.run(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    assert!(calls(&fake).is_empty(), "{:?}", calls(&fake));
    // No job on the node: it is empty now.
    let (code, stdout, _) = fake.run(&["drain", "n1", "--live", "slurm", "--reason", "x"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("No job runs on them.\nThe nodes are empty now."), "{stdout}");
}

#[test]
fn names_from_slurm_are_shown_escaped() {
    let now = now();
    let squeue = format!("101|al\x1b[2Jma|batch|RUNNING|{}|1:00:00|1|\n", now - 7_200);
    let sinfo = "n1|mixed|none\nn2|idle+drain|evil \x1b]0;title\x07 reason\n";
    let fake = stand_ins(sinfo, &squeue);
    let (_, stdout, _) = fake.run(&["drain", "n1,n2", "--live", "slurm", "--reason", "x", "--dry-run"]);
    assert!(!stdout.contains('\x1b') && !stdout.contains('\x07'), "{stdout:?}");
    assert!(stdout.contains("job 101 (al\\u{1b}[2Jma, batch)"), "{stdout}");
    let (_, markdown, _) = fake.run(&[
        "drain",
        "n1,n2",
        "--live",
        "slurm",
        "--reason",
        "x",
        "--dry-run",
        "--format",
        "markdown",
    ]);
    assert!(!markdown.contains('\x1b') && markdown.contains("- job 101"), "{markdown}");
}

/// The stand-ins of [`stand_ins`], with `scontrol` acting as Slurm does.
fn acting_stand_ins(squeue: &str) -> SlurmStandIns {
    let programs = [
        ("sinfo", SINFO),
        ("squeue", SQUEUE_FAILING_ONCE),
        ("scontrol", SCONTROL_ACTING),
        ("sacctmgr", SACCTMGR),
    ];
    let state = [("sinfo.txt", IDLE), ("squeue.txt", squeue), ("qos.txt", QOS)];
    SlurmStandIns::new(&programs, &state, BUDGETS)
}

/// The arguments of a drain of n1 that waits, reading the node every second.
const WAITING: [&str; 9] =
    ["drain", "n1", "--live", "slurm", "--reason", "disk failing", "--wait", "--poll", "1s"];

/// Runs `allot drain n1 --wait` against `fake`, calling `on_line` with each line it says
/// on standard error (its progress) and `fake`'s folder, until it ends (within a minute):
/// its status, standard output and standard error.
fn drain_waiting(
    fake: &SlurmStandIns,
    mut on_line: impl FnMut(&str, &std::path::Path),
) -> (i32, String, String) {
    let mut child =
        fake.runner(&WAITING).command().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let mut stderr = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        assert!(started.elapsed() < Duration::from_secs(60), "still waiting after a minute:\n{stderr}");
        on_line(&line, fake.dir.path());
        stderr += &line;
        stderr.push('\n');
    }
    let output = child.wait_with_output().unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}

#[test]
fn a_waiting_drain_requeues_each_job_as_its_protection_ends_and_ends_when_the_node_is_empty() {
    let now = now();
    // 101 is past its protection; 102's hour of protection ends 3 s from now; 103 is not
    // resumable, and ends (the test takes it off the node) once 102 is requeued.
    let squeue = format!(
        "CLUSTER: s\n101|alma|batch|RUNNING|{}|1-00:00:00|1|\n102|bert|batch|RUNNING|{}|UNLIMITED|1|\n\
         103|alma|interactive|RUNNING|{}|1:00:00|1|\n",
        now - 7_200,
        now - 3_600 + 3,
        now - 1_200
    );
    let fake = acting_stand_ins(&squeue);
    let (code, stdout, stderr) = drain_waiting(&fake, |line, state| {
        if line.ends_with("job 102 requeued: its protection ended") {
            let queue = std::fs::read_to_string(state.join("squeue.txt")).unwrap();
            let left: Vec<&str> = queue.lines().filter(|l| !l.starts_with("103|")).collect();
            std::fs::write(state.join("squeue.txt"), left.join("\n") + "\n").unwrap();
        }
    });
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        calls(&fake),
        [
            "--quiet --clusters=s update NodeName=n1 State=DRAIN Reason=allot drain: disk failing",
            "--quiet --clusters=s requeue 101",
            "--quiet --clusters=s requeue 102"
        ]
    );
    // The plan first, then what happened; the progress on standard error.
    assert!(stdout.contains("job 102 (bert, batch): to requeue at "), "{stdout}");
    assert!(!stdout.contains("Run `allot drain` again"), "{stdout}");
    for said in
        ["The nodes are empty (at ", "Requeued as their protection ended: 102 at ", "Left on their own: 103."]
    {
        assert!(stdout.contains(said), "{said:?} in\n{stdout}");
    }
    let progress: Vec<&str> =
        stderr.lines().map(|l| l.split_once("  ").map_or(l, |(_, said)| said)).collect();
    assert!(progress[0].starts_with("2 jobs left; next, job 102 requeued at "), "{stderr}");
    let requeued = progress.iter().position(|l| *l == "job 102 requeued: its protection ended");
    let left = progress.iter().position(|l| *l == "job 103 left the nodes");
    assert!(requeued.is_some() && left > requeued, "{stderr}");
    assert_eq!(progress.last(), Some(&"the nodes are empty"), "{stderr}");
}

#[test]
fn a_waiting_drain_stops_when_its_node_is_returned_to_service() {
    let now = now();
    let squeue = format!("CLUSTER: s\n102|bert|batch|RUNNING|{}|UNLIMITED|1|\n", now - 600);
    let fake = acting_stand_ins(&squeue);
    let (code, stdout, stderr) = drain_waiting(&fake, |line, state| {
        if line.contains("1 job left") {
            std::fs::write(state.join("sinfo.txt"), IDLE).unwrap();
        }
    });
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("node n1 is no longer drained by allot (returned to service, or drained again by someone else): stopped waiting, nothing more was requeued"),
        "{stderr}"
    );
    assert_eq!(calls(&fake).len(), 1, "drained, nothing requeued: {:?}", calls(&fake));
}

#[test]
fn a_waiting_drain_stopped_and_run_again_goes_on_from_what_slurm_holds() {
    let now = now();
    // 102's protection ends 4 s from now: the first drain is killed before, the second
    // requeues it.
    let squeue = format!("CLUSTER: s\n102|bert|batch|RUNNING|{}|UNLIMITED|1|\n", now - 3_600 + 4);
    let fake = acting_stand_ins(&squeue);
    let mut first =
        fake.runner(&WAITING).command().stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    let said = lines.next().unwrap().unwrap();
    assert!(said.contains("  1 job left; next, job 102 requeued at "), "{said}");
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(calls(&fake).len(), 1, "drained, nothing requeued yet: {:?}", calls(&fake));

    let (code, stdout, stderr) = drain_waiting(&fake, |_, _| {});
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Nodes drained on Slurm cluster s: n1 (n1 drained by allot before)"), "{stdout}");
    assert_eq!(calls(&fake)[1..], ["--quiet --clusters=s requeue 102"]);
    assert!(stdout.contains("Requeued as their protection ended: 102 at "), "{stdout}");
}

#[test]
fn a_waiting_drain_reads_again_after_a_failed_reading() {
    let now = now();
    let squeue = format!("CLUSTER: s\n102|bert|batch|RUNNING|{}|UNLIMITED|1|\n", now - 3_600 + 3);
    let fake = acting_stand_ins(&squeue);
    let (code, stdout, stderr) = drain_waiting(&fake, |line, state| {
        if line.contains("1 job left") {
            std::fs::write(state.join("squeue.fail"), "").unwrap();
        }
    });
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("Unable to contact slurm controller"), "{stderr}");
    assert!(stderr.contains(": trying again\n"), "{stderr}");
    assert_eq!(calls(&fake)[1..], ["--quiet --clusters=s requeue 102"]);
}
