//! `allot plan slurm --live --out PLAN` and `allot apply slurm PLAN` against a stand-in for
//! `sacctmgr` (a script first on PATH) that serves a dump and a QOS list and records the
//! commands it is given: saving, drift refused, edited plans refused, a failure in the middle
//! reported, the check after applying. tests/slurm_real.rs runs the same flow against a real
//! Slurm.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::Allot;

/// The stand-in: `dump CLUSTER file=/dev/stdout` prints the state's dump.cfg, `-n -P show
/// qos format=...` its qos.txt; the apply locks (QOS `allot-apply-lock...`) are the files of
/// the state's folder locks/ (holding their descriptions), added (refused when one exists),
/// listed with `format=name,description` and deleted as sacctmgr does (with a file race,
/// an add also adds the lock `allot-apply-lock-race` it describes); `-i ARGS` fails when
/// one argument is $FAKE_SACCTMGR_FAIL, else records ARGS (one per line, then an empty line;
/// for `load file=F`, `load` and the lines of F) and, the first time, puts the state's
/// after.cfg and after-qos.txt in place of the dump and the QOS.
const FAKE: &str = r#"#!/bin/sh
state="$FAKE_SACCTMGR_STATE"
mkdir -p "$state/locks"
if [ "$1" = dump ]; then cat "$state/dump.cfg"; exit 0; fi
if [ "$1 $2 $3 $4 $5" = "-n -P show qos format=name,description" ]; then
    for lock in "$state"/locks/*; do
        [ -f "$lock" ] && printf '%s|%s\n' "${lock##*/}" "$(cat "$lock")"
    done
    exit 0
fi
if [ "$1 $2 $3 $4" = "-n -P show qos" ]; then cat "$state/qos.txt"; exit 0; fi
case "$1 $2 $3 $4" in
"-i add qos allot-apply-lock"*)
    if [ -f "$state/locks/$4" ]; then echo " Nothing new added."; exit 1; fi
    printf '%s' "${5#description=}" > "$state/locks/$4"
    # Another apply adding its lock at the same moment.
    if [ -f "$state/race" ]; then cp "$state/race" "$state/locks/allot-apply-lock-race"; fi
    exit 0 ;;
"-i delete qos allot-apply-lock"*) rm -f "$state/locks/$4"; exit 0 ;;
esac
shift
if [ -n "${FAKE_SACCTMGR_FAIL:-}" ] && printf '%s\n' "$@" | grep -qxF -- "$FAKE_SACCTMGR_FAIL"; then
    echo " Problem adding: $*" >&2
    exit 1
fi
if [ "$1" = load ]; then
    { echo load; cat "${2#file=}"; } >> "$state/log"
else
    printf '%s\n' "$@" >> "$state/log"
fi
echo >> "$state/log"
if [ -f "$state/after.cfg" ]; then mv "$state/after.cfg" "$state/dump.cfg"; fi
if [ -f "$state/after-qos.txt" ]; then mv "$state/after-qos.txt" "$state/qos.txt"; fi
"#;

/// The live QOS: Slurm's own `normal`.
const LIVE_QOS: &str = "normal|0|cluster|||||\n";

const LIVE: &str = "# sacctmgr dump of tern\nCluster - 'tern':Fairshare=1:QOS='normal'\nParent - 'root'\n\
    User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1\n\
    Account - 'old':Description='old':Organization='elsewhere':Fairshare=5\n";

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        crate::common::stand_ins(dir.path(), &[("sacctmgr", FAKE)]);
        std::fs::write(dir.path().join("dump.cfg"), LIVE).unwrap();
        std::fs::write(dir.path().join("qos.txt"), LIVE_QOS).unwrap();
        Fake { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs allot with the stand-in first on PATH, `fail` telling it what to fail: (status,
    /// stdout, stderr).
    fn run(&self, args: &[&str], fail: Option<&str>) -> (i32, String, String) {
        let allot =
            Allot::new(args).path_first(&self.path("bin")).env("FAKE_SACCTMGR_STATE", self.dir.path());
        match fail {
            Some(fail) => allot.env("FAKE_SACCTMGR_FAIL", fail).run(),
            None => allot.run(),
        }
    }

    /// The apply locks the stand-in holds: (name, description).
    fn locks(&self) -> Vec<(String, String)> {
        let Ok(dir) = std::fs::read_dir(self.path("locks")) else { return Vec::new() };
        let mut locks: Vec<(String, String)> = dir
            .map(|e| e.unwrap().path())
            .map(|p| {
                (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        locks.sort();
        locks
    }

    /// Puts a lock in the stand-in.
    fn lock(&self, name: &str, description: &str) {
        std::fs::create_dir_all(self.path("locks")).unwrap();
        std::fs::write(self.path("locks").join(name), description).unwrap();
    }

    /// The commands the stand-in was given, each as its arguments.
    fn log(&self) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(self.path("log")).unwrap_or_default();
        text.split("\n\n")
            .filter(|c| !c.is_empty())
            .map(|c| c.lines().map(str::to_string).collect())
            .collect()
    }

    /// Applies the saved plan without asking, one command at a time (the log is in order).
    fn apply(&self, plan: &Path, fail: Option<&str>) -> (i32, String, String) {
        self.run(&["apply", "slurm", plan.to_str().unwrap(), "--auto-approve", "--parallel", "1"], fail)
    }

    fn plan(&self, plan: &Path) -> Value {
        let out = plan.to_str().unwrap();
        let (status, stdout, stderr) =
            self.run(&["plan", "slurm", "examples/university-hpc", "--live", "--out", out], None);
        assert_eq!(status, 0, "{stdout}\n{stderr}");
        assert!(stdout.contains("- account old"), "{stdout}");
        serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap()
    }
}

/// The plan's steps, each as its kind (`in_order`, `load`, `together`) and what it holds.
fn steps(plan: &Value) -> Vec<(String, Value)> {
    plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step.as_object().unwrap().iter().next().map(|(k, v)| (k.clone(), v.clone())).unwrap())
        .collect()
}

/// What the stand-in records of the whole plan applied with `--parallel 1`: its steps'
/// commands, a load as `load` and the lines of its file.
fn calls(plan: &Value) -> Vec<Vec<String>> {
    let mut calls = Vec::new();
    for (_, step) in steps(plan) {
        match step.as_str() {
            Some(load) => {
                calls.push(std::iter::once("load").chain(load.lines()).map(str::to_string).collect())
            }
            None => calls.extend(serde_json::from_value::<Vec<Vec<String>>>(step).unwrap()),
        }
    }
    calls
}

#[test]
fn a_saved_plan_holds_what_it_was_made_against() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    let plan = fake.plan(&file);
    assert_eq!(plan["cluster"], "tern");
    assert_eq!(plan["live"]["dump"], LIVE);
    assert_eq!(plan["live"]["qos"], LIVE_QOS);
    assert_eq!(plan["max_deletes"], 10);
    assert!(plan["revision"].is_null() || plan["revision"].as_str().is_some_and(|r| r.len() == 40));
    let steps = steps(&plan);
    let kinds: Vec<&str> = steps.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["together", "in_order", "load", "in_order"]);
    // First the QOS: every one added (side by side), then the preemption lists of the
    // contracts'.
    let mut qos: Vec<Vec<String>> = serde_json::from_value(steps[0].1.clone()).unwrap();
    qos.extend(serde_json::from_value::<Vec<Vec<String>>>(steps[1].1.clone()).unwrap());
    let mut named: Vec<String> =
        qos.iter().map(|c| format!("{} {}", c[0], if c[0] == "add" { &c[2] } else { &c[3] })).collect();
    // The floors' QOS are added with the others (a100's and l40s's budgets' floors).
    let floors =
        named.iter().filter(|n| n.starts_with("add a100-floor-") || n.starts_with("add l40s-floor-")).count();
    assert_eq!(floors, 62, "{named:?}");
    named.retain(|n| !n.contains("-floor-"));
    assert_eq!(
        named,
        [
            "add long",
            "add preemptible",
            "add short",
            "add standard",
            "modify name=long",
            "modify name=short",
            "modify name=standard"
        ]
    );
    assert_eq!(
        qos.iter().find(|c| c[..3] == ["add", "qos", "short"]).unwrap()[..],
        [
            "add",
            "qos",
            "short",
            "priority=0",
            "preemptmode=cancel",
            "preemptexempttime=00:00:00",
            "maxwall=240",
            "maxtresperjob=gres/gpu=4",
            "grptres=gres/gpu=-1"
        ]
    );
    assert_eq!(
        qos.iter().find(|c| c[..3] == ["add", "qos", "a100-floor-hpc-staff"]).unwrap()[3..],
        [
            "priority=0",
            "preemptmode=cluster",
            "preemptexempttime=-1",
            "maxwall=-1",
            "maxtresperjob=gres/gpu=-1",
            "grptres=gres/gpu=10"
        ]
    );
    assert_eq!(qos.iter().find(|c| c[0] == "modify").unwrap()[4..], ["set", "preempt=preemptible"]);
    // Every association added goes in one load, accounts parents first, then users; the
    // account the budgets do not hold goes by command.
    let load = steps[2].1.as_str().unwrap();
    let lines: Vec<&str> = load.lines().collect();
    assert_eq!(lines[1..3], ["Cluster - 'tern'", "Parent - 'root'"], "{load}");
    assert!(
        lines[3].starts_with(
            "Account - 'engineering':Description='engineering':Organization='allot':Fairshare=40"
        )
    );
    let first_user = lines.iter().position(|l| l.starts_with("User - ")).unwrap();
    assert!(lines[..first_user].iter().all(|l| !l.starts_with("User - ")));
    assert_eq!(lines.iter().filter(|l| l.starts_with("Account - ") || l.starts_with("User - ")).count(), 193);
    assert_eq!(steps[3].1, serde_json::json!([["delete", "account", "where", "name=old", "cluster=tern"]]));
    assert!(fake.log().is_empty(), "planning runs no command");

    // The budgets bind two Slurm clusters: which one to read must be said.
    let (status, _, stderr) = fake.run(&["plan", "slurm", "examples/published-case", "--live"], None);
    assert_eq!(status, 1);
    assert!(stderr.contains("several Slurm clusters (jupiter, ceres): name one with --cluster"), "{stderr}");
}

#[test]
fn apply_runs_the_plan_in_order_then_checks_that_nothing_is_left() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    let plan = fake.plan(&file);
    let out = fake.path("out");
    let (status, _, stderr) = fake.run(
        &["build", "examples/university-hpc", "--out", out.to_str().unwrap(), "--target", "slurm"],
        None,
    );
    assert_eq!(status, 0, "{stderr}");
    // What Slurm holds once the commands ran: the associations and QOS the budgets want.
    std::fs::copy(out.join("slurm/tern.cfg"), fake.path("after.cfg")).unwrap();
    let after_qos = format!("{LIVE_QOS}{}", plan["desired"]["qos"].as_str().unwrap());
    std::fs::write(fake.path("after-qos.txt"), after_qos).unwrap();
    let (status, stdout, stderr) = fake.apply(&file, None);
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Apply complete"), "{stdout}");
    assert_eq!(fake.log(), calls(&plan), "the QOS, the load, then the deletion, in the plan's order");
    // 62 floors and 4 other QOS added, 3 preemption lists, the load, the deletion.
    assert!(stdout.contains("Apply complete in 71 sacctmgr calls"), "{stdout}");
    assert_eq!(fake.locks(), [], "the apply released its lock");

    // Applied again: the live tree is no longer the one it was made against.
    let (status, _, stderr) = fake.apply(&file, None);
    assert_eq!(status, 1);
    assert!(stderr.contains("changed since the plan was made: nothing was applied"), "{stderr}");
    assert_eq!(fake.log().len(), calls(&plan).len(), "nothing more ran");
}

#[test]
fn a_second_apply_is_refused_while_another_holds_the_lock() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    fake.plan(&file);
    // Another administrator's apply, on another machine, holds the lock.
    let holder = "allot apply lock: bob@adm2 pid 4242 since 1764700000";
    let theirs = "allot-apply-lock-00000000000000aa";
    fake.lock(theirs, holder);
    let (status, _, stderr) = fake.apply(&file, None);
    assert_eq!(status, 1);
    assert!(
        stderr.contains(&format!(
            "another apply holds this Slurm's apply lock (QOS {theirs}: {holder}): nothing was applied"
        )),
        "{stderr}"
    );
    assert!(fake.log().is_empty(), "nothing ran");
    assert_eq!(fake.locks(), [(theirs.to_string(), holder.to_string())], "the other's lock is left alone");
    // With --break-lock it is taken over, and released at the end.
    let (_, _, stderr) =
        fake.run(&["apply", "slurm", file.to_str().unwrap(), "--auto-approve", "--break-lock"], None);
    assert!(stderr.contains(&format!("allot: taking over the apply lock left by {holder}")), "{stderr}");
    assert!(!fake.log().is_empty(), "the plan ran");
    assert_eq!(fake.locks(), [], "released");
    // A QOS of a lock's name that allot did not make is never deleted.
    fake.lock("allot-apply-lock", "the site's own");
    let (status, _, stderr) =
        fake.run(&["apply", "slurm", file.to_str().unwrap(), "--auto-approve", "--break-lock"], None);
    assert_eq!(status, 1);
    assert!(stderr.contains("Slurm has a QOS allot-apply-lock that allot did not make"), "{stderr}");
    assert_eq!(fake.locks(), [("allot-apply-lock".to_string(), "the site's own".to_string())]);
}

#[test]
fn two_applies_taking_the_lock_at_the_same_moment_are_not_both_let_through() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    fake.plan(&file);
    // Another apply adds its lock while this one adds its own: both adds succeed (as two
    // `sacctmgr add qos` of one name at once do on a real Slurm), and this one sees the other.
    let other = "allot apply lock: eve@adm3 pid 7 since 1764700000";
    std::fs::write(fake.path("race"), other).unwrap();
    // This one deletes its lock, pauses, looks again and finds the other's.
    let (status, _, stderr) = fake.apply(&file, None);
    assert_eq!(status, 1);
    assert!(
        stderr.contains(&format!(
            "another apply holds this Slurm's apply lock (QOS allot-apply-lock-race: {other}): nothing was applied"
        )),
        "{stderr}"
    );
    assert!(fake.log().is_empty(), "nothing ran");
    assert_eq!(
        fake.locks(),
        [("allot-apply-lock-race".to_string(), other.to_string())],
        "its own lock deleted, the other's left"
    );
}

#[test]
fn apply_says_what_did_not_take() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    fake.plan(&file);
    // The commands "succeed", and the live tree stays as it was.
    let (status, _, stderr) = fake.apply(&file, None);
    assert_eq!(status, 1);
    assert!(stderr.contains("every command ran, yet these changes did not take"), "{stderr}");
    assert!(stderr.contains("- account old"), "{stderr}");
}

#[test]
fn a_change_behind_allots_back_is_refused_with_the_change_named() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    fake.plan(&file);
    std::fs::write(fake.path("dump.cfg"), LIVE.replace("Fairshare=5", "Fairshare=7")).unwrap();
    let (status, _, stderr) = fake.apply(&file, None);
    assert_eq!(status, 1);
    assert!(
        stderr
            .contains("at the plan: Account - 'old':Description='old':Organization='elsewhere':Fairshare=5")
    );
    assert!(
        stderr
            .contains("now:         Account - 'old':Description='old':Organization='elsewhere':Fairshare=7")
    );
    assert!(stderr.contains("plan again"), "{stderr}");
    assert!(fake.log().is_empty());

    // A QOS changed by hand is drift too.
    std::fs::write(fake.path("dump.cfg"), LIVE).unwrap();
    std::fs::write(fake.path("qos.txt"), "normal|5|cluster|||||\n").unwrap();
    let (status, _, stderr) = fake.apply(&file, None);
    assert_eq!(status, 1);
    assert!(stderr.contains("at the plan: QOS - normal|0|cluster|||||"), "{stderr}");
    assert!(stderr.contains("now:         QOS - normal|5|cluster|||||"), "{stderr}");
    assert!(fake.log().is_empty());
}

#[test]
fn an_edited_plan_is_refused() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    let plan = fake.plan(&file);
    let apply = |plan: &Value| {
        std::fs::write(&file, plan.to_string()).unwrap();
        fake.apply(&file, None)
    };
    let mut edited = plan.clone();
    edited["steps"][3]["in_order"][0][3] = "name=root;rm -rf /".into();
    let (status, _, stderr) = apply(&edited);
    assert_eq!(status, 1);
    assert!(stderr.contains("its steps are not the ones its trees give"), "{stderr}");
    let mut edited = plan.clone();
    edited["steps"][2]["load"] =
        plan["steps"][2]["load"].as_str().unwrap().replace("Fairshare=40", "Fairshare=99").into();
    assert!(apply(&edited).2.contains("its steps are not the ones its trees give"));
    let mut edited = plan.clone();
    edited["desired"]["qos"] = serde_json::Value::Null;
    assert!(apply(&edited).2.contains("it holds the QOS of one side only"));
    // A wanted QOS allot does not manage, or a setting it never sets, is refused.
    let wanted = plan["desired"]["qos"].as_str().unwrap();
    for (edit, refused) in [
        (format!("{wanted}normal|1000|off|||||\n"), "QOS normal is not one the budgets could want"),
        (wanted.replace("short|0|", "short|5|"), "QOS short is not one the budgets could want"),
        (
            format!("{wanted}gpu-floor-nobody|0|cluster||||gres/gpu=4|\n"),
            "QOS gpu-floor-nobody is not one the budgets could want",
        ),
        (
            wanted.replace("a100-floor-hpc-staff|0|cluster||", "a100-floor-hpc-staff|0|cluster|00:00:00|"),
            "QOS a100-floor-hpc-staff is not one the budgets could want",
        ),
    ] {
        let mut edited = plan.clone();
        edited["desired"]["qos"] = edit.into();
        let said = apply(&edited).2;
        assert!(said.contains(refused), "{said}");
    }
    let mut edited = plan.clone();
    edited["live"]["qos"] = "normal|0|cluster|||||\nurgent|0|cluster|||||\n".into();
    assert!(apply(&edited).2.contains("does not match its fingerprint"));
    let mut edited = plan.clone();
    edited["live"]["dump"] = LIVE.replace("Fairshare=5", "Fairshare=6").into();
    assert!(apply(&edited).2.contains("does not match its fingerprint"));
    let mut edited = plan.clone();
    edited["max_deletes"] = 0.into();
    assert!(apply(&edited).2.contains("more than its guard allows"));
    let mut edited = plan.clone();
    edited["revision"] = "\u{1b}[2J".into();
    assert!(apply(&edited).2.contains("its revision is not a git commit id"));
    let mut edited = plan;
    edited["allot_version"] = "0.0.0-other".into();
    assert!(apply(&edited).2.contains("made by allot 0.0.0-other"));
    assert!(fake.log().is_empty());
}

#[test]
fn a_failure_in_the_middle_says_what_was_applied_and_what_was_not() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    let plan = fake.plan(&file);
    let apply = |fail: &str| fake.apply(&file, Some(fail));
    let qos: usize = steps(&plan)[..2].iter().map(|(_, step)| step.as_array().unwrap().len()).sum();
    // The load fails: the QOS were applied, nothing after the load runs.
    let (status, _, stderr) = apply("load");
    assert_eq!(status, 1);
    assert!(
        stderr.contains("step 3 of 4 failed: the load failed")
            && stderr.contains("the 2 steps before it were applied, the 1 after it not run"),
        "{stderr}"
    );
    assert_eq!(fake.log(), calls(&plan)[..qos]);
    // The QOS and the load go through, the command after them fails.
    std::fs::remove_file(fake.path("log")).unwrap();
    let (status, _, stderr) = apply("name=old");
    assert_eq!(status, 1);
    assert!(
        stderr.contains("step 4 of 4 failed: this command failed")
            && stderr.contains("in its step, the 0 commands before it were applied, the 0 after it not run")
            && stderr.contains("the 3 steps before it were applied, the 0 after it not run"),
        "{stderr}"
    );
    assert!(stderr.contains("Problem adding: delete account where name=old cluster=tern"), "{stderr}");
    assert_eq!(fake.log(), calls(&plan)[..qos + 1]);
}

#[test]
fn apply_asks_on_a_terminal_and_refuses_without_one() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    fake.plan(&file);
    let (status, _, stderr) = fake.run(&["apply", "slurm", file.to_str().unwrap()], None);
    assert_eq!(status, 1);
    assert!(stderr.contains("no terminal to ask on, and nothing was applied"), "{stderr}");
    assert!(fake.log().is_empty());
}

#[test]
fn settings_of_existing_associations_go_together_and_a_failure_among_them_is_named() {
    let fake = Fake::new();
    let file = fake.path("plan.json");
    let first = fake.plan(&file);
    let out = fake.path("out");
    let (status, _, stderr) = fake.run(
        &["build", "examples/university-hpc", "--out", out.to_str().unwrap(), "--target", "slurm"],
        None,
    );
    assert_eq!(status, 0, "{stderr}");
    // Slurm holds the budgets' QOS and associations, but the shares 40 and 25 are one more.
    let wanted = std::fs::read_to_string(out.join("slurm/tern.cfg")).unwrap();
    let live = wanted.replace("Fairshare=40:", "Fairshare=41:").replace("Fairshare=25:", "Fairshare=26:");
    std::fs::write(fake.path("dump.cfg"), &live).unwrap();
    std::fs::write(fake.path("qos.txt"), format!("{LIVE_QOS}{}", first["desired"]["qos"].as_str().unwrap()))
        .unwrap();
    let out = file.to_str().unwrap();
    let (status, stdout, stderr) =
        fake.run(&["plan", "slurm", "examples/university-hpc", "--live", "--out", out], None);
    assert_eq!(status, 0, "{stdout}\n{stderr}");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let steps = steps(&plan);
    assert_eq!(steps.len(), 1, "{steps:?}");
    let (kind, commands) = &steps[0];
    assert_eq!(kind, "together");
    // One command per share, naming every account given it.
    let commands: Vec<Vec<String>> = serde_json::from_value(commands.clone()).unwrap();
    assert_eq!(commands.len(), 2, "{commands:?}");
    let forty = live.matches("Fairshare=41:").count();
    assert!(forty > 1 && commands[0][3].split(',').count() == forty, "{commands:?}");
    assert_eq!(commands[0][6], "fairshare=40");
    assert_eq!(commands[1][6], "fairshare=25");
    // The second fails: the first is applied, the failure named, one by one with --parallel 1.
    let (status, _, stderr) = fake.apply(&file, Some("fairshare=25"));
    assert_eq!(status, 1);
    assert!(
        stderr.contains(
            "step 1 of 1 failed: 1 of 2 commands run side by side failed, and the other 1 were applied"
        ) && stderr.contains("set fairshare=25\n    sacctmgr said: Problem adding"),
        "{stderr}"
    );
    assert_eq!(fake.log(), commands[..1]);
}
