//! Faults on a real Slurm (`scripts/slurm.sh`: one node of 8 fake GPUs), each with what allot
//! must do (docs/reliability.md):
//!
//! - slurmctld stopped (SIGSTOP) during `status` and `explain`: an error naming the command
//!   and the bound, within it;
//! - slurmdbd stopped before an apply: refused, nothing applied, the plan unchanged;
//! - slurmdbd that stops answering (SIGSTOP) in the middle of an apply: the command in flight
//!   given up at its bound, the error naming the step and what was applied;
//! - an apply killed (SIGKILL) at each of its steps, as it begins or with a command in flight
//!   (`ALLOT_FAULTS_FULL=1`: both at each step, the second on the way back);
//! - two applies of the same plan at once.
//!
//! After each, the next `plan --live` holds only changes of the interrupted plan, and
//! applying it leaves nothing to change. Needs root and apt (CI has both); elsewhere it says
//! so and skips, unless `ALLOT_REQUIRE_SLURM` is set, when it fails.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::Allot;
use crate::common::slurm::{Slurm, ok, run};

/// What the budgets say first.
const FIRST: &str = r#"
cluster faults gpus=8 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=faults partition=gpu
}
contract batch min-runtime="10m" resumable=#true default=#true
project alpha share="60%" {
    users priya
}
project beta share="40%" {
    project b1 share="50%" {
        users rosa
    }
    project b2 share="50%"
}
"#;

/// The change applied under faults: a QOS changed and three added (a contract, two floors),
/// a preemption list, associations added, settings changed, a user moved and an account
/// deleted: an application of five steps.
const SECOND: &str = r#"
cluster faults gpus=8 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=faults partition=gpu
}
contract batch min-runtime="20m" resumable=#true default=#true
contract wide min-runtime="0s" max-gpus=4
project alpha share="50%" {
    users priya
}
project beta share="30%" {
    project b1 share="50%"
    project b3 share="50%" {
        users rosa
    }
}
project gamma share="20%"
"#;

/// The QOS `SECOND` adds, which going back to `FIRST` leaves (allot never deletes a QOS):
/// deleted by the test, so that every change to `SECOND` applies the same five steps.
const ADDED_QOS: &str = "wide,gpu-floor-b3,gpu-floor-gamma";

/// The steps of the application of `SECOND` over `FIRST`.
const STEPS: usize = 5;

/// How the apply locks' QOS are named.
const LOCK: &str = "allot-apply-lock";

/// The bound given to reads (`--timeout`); writes get ten times it.
const BOUND: &str = "2s";

#[test]
fn faults_against_a_real_slurm() {
    for user in ["priya", "rosa"] {
        let _ = run("useradd", &["-M", user], &[]);
    }
    let Some(_slurm) = Slurm::start("faults") else { return };
    let work = tempfile::tempdir().unwrap();
    let first = budgets(work.path(), "first", FIRST);
    let second = budgets(work.path(), "second", SECOND);
    converge(&first);

    // Each case leaves Slurm holding budgets it says, the next starts from there: no case
    // pays for going back (each apply of about 14 changes takes 5 s).
    controller_stopped(&first);
    database_stopped_before_an_apply(&second);
    database_stops_answering_during_an_apply(&first);
    apply_killed_at_each_step(&first, &second);
    two_applies_at_once(&first, &second);
}

/// Writes `text` as the budget repository `name` in `work`: its path.
fn budgets(work: &Path, name: &str, text: &str) -> String {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("allot.kdl"), text).unwrap();
    dir.to_str().unwrap().to_string()
}

/// The PID `scripts/slurm.sh` recorded for `daemon`.
fn daemon(name: &str) -> String {
    let state = std::env::var("ALLOT_SLURM_STATE").unwrap_or_else(|_| "/var/lib/allot-slurm".into());
    let record = std::fs::read_to_string(Path::new(&state).join("pids").join(name)).unwrap();
    record.split_whitespace().next().unwrap().to_string()
}

/// A daemon stopped with SIGSTOP, continued when dropped (the test failed or not).
struct Stopped(String);

impl Stopped {
    fn daemon(name: &str) -> Stopped {
        let pid = daemon(name);
        ok("kill", &["-s", "STOP", &pid]);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = run("kill", &["-s", "CONT", &self.0], &[]);
    }
}

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// `allot plan slurm BUDGETS --live` as JSON: each change's record and the values it sets.
fn planned(budgets: &str) -> BTreeMap<String, Value> {
    let output = Allot::new(["plan", "slurm", budgets, "--live", "--format", "json"]).output();
    assert!(output.status.success(), "{}", said(&output));
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            // An add cut short leaves a change: the subject is the record, not the action.
            let subject = format!("{} {} {}", c["kind"], c["name"], c["account"]);
            let after: BTreeMap<&str, &Value> =
                c["fields"].as_object().unwrap().iter().map(|(f, v)| (f.as_str(), &v["after"])).collect();
            (subject, serde_json::to_value(after).unwrap())
        })
        .collect()
}

/// Saves the plan of `budgets` against the live Slurm: its path.
fn save_plan(budgets: &str, name: &str) -> String {
    let saved = Path::new(budgets).parent().unwrap().join(name);
    let saved = saved.to_str().unwrap().to_string();
    let output = Allot::new(["plan", "slurm", budgets, "--live", "--out", &saved]).output();
    assert!(output.status.success(), "{}", said(&output));
    saved
}

fn apply(saved: &str) -> Output {
    Allot::new(["apply", "slurm", saved, "--auto-approve", "--timeout", BOUND]).output()
}

/// Plans and applies `budgets` until the plan is empty: one apply must do.
fn converge(budgets: &str) {
    let saved = save_plan(budgets, "converge.plan");
    let applied = apply(&saved);
    assert!(applied.status.success(), "{}", said(&applied));
    assert_eq!(planned(budgets), BTreeMap::new(), "nothing is left to change after one apply");
}

/// Deletes the QOS `SECOND` adds (with Slurm at `FIRST`, which leaves them), and any lock.
fn forget_added_qos() {
    // sacctmgr exits 1 when there is nothing to delete.
    for qos in std::iter::once(ADDED_QOS.to_string()).chain(locks()) {
        let deleted = run("sacctmgr", &["-i", "delete", "qos", &qos], &[]);
        assert!(deleted.status.success() || said(&deleted).contains("Nothing deleted"), "{}", said(&deleted));
    }
}

/// The apply locks Slurm holds (their QOS names).
fn locks() -> Vec<String> {
    let names = ok("sacctmgr", &["-n", "-P", "show", "qos", "format=name"]);
    names.lines().filter(|name| name.starts_with(LOCK)).map(str::to_string).collect()
}

/// What the next plan holds after an interrupted apply of `before`: only records `before`
/// changed, each set to what `before` set it to.
fn remaining(budgets: &str, before: &BTreeMap<String, Value>, case: &str) -> BTreeMap<String, Value> {
    let left = planned(budgets);
    for (subject, after) in &left {
        let Some(planned) = before.get(subject) else {
            panic!("{case}: {subject} was not in the interrupted plan")
        };
        for (field, value) in after.as_object().unwrap() {
            assert_eq!(
                planned.get(field),
                Some(value),
                "{case}: {subject} sets {field} as the interrupted plan did not"
            );
        }
    }
    left
}

/// Waits until no `sacctmgr` runs: a command an apply started goes on when the apply is
/// killed, and the next plan must see what it did.
fn no_sacctmgr_left() {
    let started = Instant::now();
    while run("pgrep", &["-x", "sacctmgr"], &[]).status.success() {
        assert!(started.elapsed() < Duration::from_secs(60), "a sacctmgr ran for a minute");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// slurmctld stops answering: `status` and `explain` end with an error within the bound.
fn controller_stopped(budgets: &str) {
    let _stopped = Stopped::daemon("slurmctld");
    for args in [
        vec!["status", budgets, "--live", "slurm", "--timeout", BOUND],
        vec!["explain", "1", "--live", "slurm", budgets, "--timeout", BOUND],
    ] {
        let started = Instant::now();
        let output = Allot::new(&args).output();
        let took = started.elapsed();
        let text = said(&output);
        assert_eq!(output.status.code(), Some(1), "{text}");
        assert!(
            text.contains("did not finish within 2 s: allot stopped it") && text.contains("scontrol ping"),
            "{text}"
        );
        assert!(took < Duration::from_secs(10), "{args:?} took {took:?}");
        eprintln!("slurmctld stopped: `allot {}` failed in {took:.1?}", args[0]);
    }
}

/// slurmdbd is down when an apply of `second` starts (Slurm at `FIRST`): nothing is
/// applied, the plan is as it was, and once slurmdbd is back the plan applies.
fn database_stopped_before_an_apply(second: &str) {
    forget_added_qos();
    let before = planned(second);
    let saved = save_plan(second, "second.plan");
    ok("scripts/slurm.sh", &["stop-dbd"]);
    let started = Instant::now();
    let applied = apply(&saved);
    let took = started.elapsed();
    ok("scripts/slurm.sh", &["start-dbd"]);
    let text = said(&applied);
    assert_eq!(applied.status.code(), Some(1), "{text}");
    assert!(text.contains("cannot read the apply lock") && text.contains("nothing was applied"), "{text}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(remaining(second, &before, "slurmdbd stopped before"), before, "nothing was applied");
    converge(second);
    eprintln!(
        "slurmdbd stopped before an apply: refused in {took:.1?}, nothing applied; the same plan applied after"
    );
}

/// Runs `allot apply` of `saved`, calling `on_line` with each line it says on standard error
/// (and the apply, which it may kill), until it ends: its status and all it said. Its
/// temporary files (the load file of sacctmgr, which a killed apply cannot remove) go
/// beside `saved`, in the test's own folder.
fn apply_watched(saved: &str, mut on_line: impl FnMut(&str, &mut Child)) -> (ExitStatus, String) {
    let mut child = Allot::new(["apply", "slurm", saved, "--auto-approve", "--timeout", BOUND])
        .env("TMPDIR", Path::new(saved).parent().unwrap())
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut text = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        on_line(&line, &mut child);
        text.push_str(&line);
        text.push('\n');
    }
    (child.wait().unwrap(), text)
}

/// slurmdbd stops answering as the load of an apply of `first` begins (Slurm at `SECOND`),
/// and answers again once the apply has given up: the command in flight is given up at its
/// bound (ten times the reads'), the error names the step and what was applied before it,
/// and the lock is released.
fn database_stops_answering_during_an_apply(first: &str) {
    let before = planned(first);
    let saved = save_plan(first, "first.plan");
    let mut stopped = None;
    let mut started = None;
    let (status, text) = apply_watched(&saved, |line, _| {
        if line.starts_with("step ") && line.contains("sacctmgr -i load") {
            stopped = Some(Stopped::daemon("slurmdbd"));
            started = Some(Instant::now());
        }
        if line.starts_with("error: step ") {
            stopped = None;
        }
    });
    let took = started.expect("the load began").elapsed();
    eprintln!("{text}");
    assert_eq!(status.code(), Some(1), "{text}");
    // The load is in flight when slurmdbd stops, unless it was quicker than the signal:
    // then the next step's commands are.
    let failed = text.lines().find_map(|l| l.strip_prefix("error: step ")).expect("a step failed");
    let (step, rest) = failed.split_once(" of ").unwrap();
    let step: usize = step.parse().unwrap();
    let steps: usize = rest.split_once(' ').unwrap().0.parse().unwrap();
    let applied = if step == 2 {
        "the 1 step before it was".to_string()
    } else {
        format!("the {} steps before it were", step - 1)
    };
    assert!(
        text.contains(&format!("{applied} applied, the {} after it not run", steps - step))
            && text.contains("did not finish within 20 s: allot stopped it")
            && text.contains("`allot plan slurm --live` shows what remains"),
        "{text}"
    );
    assert!(took < Duration::from_secs(40), "took {took:?}");
    no_sacctmgr_left();
    assert_eq!(locks(), Vec::<String>::new(), "the apply released its lock once slurmdbd answered");
    let left = remaining(first, &before, "slurmdbd stopped during the load").len();
    assert!(
        left < before.len(),
        "the steps before the load were applied: {left} of {} changes left",
        before.len()
    );
    converge(first);
    eprintln!(
        "slurmdbd stopped as the load (step {step} of {steps}) began: the apply ended {took:.1?} later (exit 1), {left} of {} changes left, then applied",
        before.len()
    );
}

/// Applies killed with SIGKILL (Slurm at `FIRST`), turn by turn the change to `second` and
/// the way back to `first`: at each step K of five, as the step begins (odd K) or with a
/// command of it in flight (even K: slurmdbd held while the apply is killed, then let go).
/// With `ALLOT_FAULTS_FULL` set, both at every step. After each kill, the lock it left is
/// taken over by the next apply, which finishes the work.
fn apply_killed_at_each_step(first: &str, second: &str) {
    let rounds: Vec<(usize, bool)> = if std::env::var_os("ALLOT_FAULTS_FULL").is_some() {
        (1..=STEPS).flat_map(|step| [(step, false), (step, true)]).collect()
    } else {
        (1..=STEPS).map(|step| (step, step % 2 == 0)).collect()
    };
    for (round, (step, in_flight)) in rounds.into_iter().enumerate() {
        if round % 2 == 0 {
            forget_added_qos();
            killed_at(second, step, in_flight);
        } else {
            killed_at(first, step, in_flight);
        }
    }
}

/// Kills an apply of `budgets` as its step `step` (or its last) begins, with a command in
/// flight if `in_flight`; then checks what remains and applies it.
fn killed_at(budgets: &str, step: usize, in_flight: bool) {
    let before = planned(budgets);
    let saved = save_plan(budgets, "killed.plan");
    let mut stopped = None;
    let mut at = None;
    apply_watched(&saved, |line, child| {
        let Some((this, of)) =
            line.strip_prefix("step ").and_then(|l| l.split_once(':')?.0.split_once(" of "))
        else {
            return;
        };
        let (this, of): (usize, usize) = (this.parse().unwrap(), of.parse().unwrap());
        if at.is_some() || this != step.min(of) {
            return;
        }
        if in_flight {
            stopped = Some(Stopped::daemon("slurmdbd"));
            std::thread::sleep(Duration::from_millis(500));
        }
        child.kill().unwrap();
        at = Some(format!("step {this} of {of}"));
    });
    drop(stopped);
    no_sacctmgr_left();
    let name = Path::new(budgets).file_name().unwrap().to_string_lossy();
    let case = format!(
        "the apply of {name} killed at {}{}",
        at.unwrap(),
        if in_flight { ", a command in flight" } else { " as it began" }
    );
    assert_eq!(locks().len(), 1, "{case}: the killed apply left its lock");
    let left = remaining(budgets, &before, &case);
    if !left.is_empty() {
        // The next apply takes over the lock of a process that is gone.
        let applied = apply(&save_plan(budgets, "next.plan"));
        let text = said(&applied);
        assert!(applied.status.success(), "{case}: {text}");
        assert!(text.contains("taking over the apply lock left by allot apply lock: "), "{case}: {text}");
    }
    assert_eq!(planned(budgets), BTreeMap::new(), "{case}: nothing is left to change");
    eprintln!(
        "{case}: {} of {} changes left, applied by the next apply, which took the lock over",
        left.len(),
        before.len()
    );
}

/// Two applies of one plan at once, twice (to `second`, then back): never both go on. When one does, it applies the
/// plan and the other is refused with nothing applied, by the lock or, when it came after
/// the first had ended, by the drift check; both may be refused (their locks met five
/// times), and then nothing was applied.
fn two_applies_at_once(first: &str, second: &str) {
    converge(first);
    forget_added_qos();
    let mut rounds = Vec::new();
    for to in [second, first] {
        let before = planned(to);
        let saved = save_plan(to, "both.plan");
        let spawn = || {
            Allot::new(["apply", "slurm", &saved, "--auto-approve", "--timeout", BOUND])
                .command()
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (one, other) = (spawn(), spawn());
        let outputs = [one.wait_with_output().unwrap(), other.wait_with_output().unwrap()];
        let both = format!("{}\n---\n{}", said(&outputs[0]), said(&outputs[1]));
        let applied = outputs.iter().filter(|o| o.status.success()).count();
        assert!(applied <= 1, "both applies went on:\n{both}");
        for refused in outputs.iter().filter(|o| !o.status.success()) {
            let text = said(refused);
            assert!(
                text.contains("another apply holds this Slurm's apply lock")
                    || text.contains("another apply took this Slurm's apply lock at the same moment")
                    || text.contains("changed since the plan was made"),
                "{both}"
            );
            assert!(text.contains("nothing was applied"), "{both}");
        }
        let left = planned(to);
        assert_eq!(locks(), Vec::<String>::new(), "both applies released what they held:\n{both}");
        if applied == 1 {
            assert_eq!(left, BTreeMap::new(), "the plan was applied once, and completely:\n{both}");
        } else {
            assert_eq!(left, before, "both refused, nothing applied:\n{both}");
            // The next round starts from `to`.
            converge(to);
        }
        rounds.push(applied);
    }
    eprintln!(
        "two applies at once, 2 rounds: one applied and one refused in {}, both refused in {}",
        rounds.iter().filter(|a| **a == 1).count(),
        rounds.iter().filter(|a| **a == 0).count()
    );
}
