//! allot against a real Slurm (slurmctld, slurmd, slurmdbd with MariaDB, fake GPUs), brought
//! up by `scripts/slurm.sh` for each Slurm cluster the examples bind: the emitted QOS script
//! and flat file load; the associations read back as the model says; a plan against a fresh
//! dump has no changes; a changed budget's plan, applied, leaves no changes; and real jobs'
//! usage gives the Fair Tree order the shares predict.
//!
//! Needs root and apt (CI has both); elsewhere it says so and skips, unless
//! `ALLOT_REQUIRE_SLURM` is set, when it fails.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use allot_compiler::test_support::model_of;
use allot_targets::slurm::tree;

use crate::common::Allot;
use crate::common::root;
use crate::common::slurm::{Floors, Slurm, borrowed, ok, run, sbatch};

/// One `sacctmgr show assoc wopl` row: parent, share, grptres, qos, defaultqos.
type Association = (String, String, String, Vec<String>, String);

/// The cluster's associations by (account, user).
fn associations(cluster: &str) -> BTreeMap<(String, String), Association> {
    let format = "format=cluster,account,user,parentname,share,grptres,qos,defaultqos";
    let text = ok("sacctmgr", &["-n", "-P", "show", "assoc", "wopl", &format!("cluster={cluster}"), format]);
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            let mut qos: Vec<String> =
                f.get(6)?.split(',').filter(|q| !q.is_empty()).map(str::to_string).collect();
            qos.sort();
            Some(((f[1].into(), f[2].into()), (f[3].into(), f[4].into(), f[5].into(), qos, f[7].into())))
        })
        .collect()
}

/// `allot build --target slurm` of `example` into `out`.
fn build(example: &Path, out: &Path) {
    let build =
        Allot::new(["build", example.to_str().unwrap(), "--out", out.to_str().unwrap(), "--target", "slurm"])
            .output();
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
}

/// The settings that replace allot's for check_fair_tree: no decay, a pass every minute.
const FAIR_TREE_SETTINGS: &str = "PriorityDecayHalfLife=0\nPriorityCalcPeriod=1\n";

/// slurmctld runs every partition of allot's floors configuration, each floor with its QOS
/// (`scripts/slurm.sh` has checked that slurmctld holds their caps as slurmdbd does).
fn check_floors_loaded(floors: &Floors, cluster: &str) {
    let live = ok("scontrol", &["show", "partition", "-o"]);
    let live: BTreeMap<&str, &str> = live
        .lines()
        .filter_map(|line| Some((line.strip_prefix("PartitionName=")?.split(' ').next()?, line)))
        .collect();
    let wanted: Vec<&str> = floors.partitions.lines().collect();
    for line in &wanted {
        let name = line.strip_prefix("PartitionName=").and_then(|l| l.split(' ').next()).unwrap();
        let shown = live.get(name).unwrap_or_else(|| panic!("partition {name} not in slurmctld"));
        if let Some(qos) = line.split(' ').find_map(|w| w.strip_prefix("QOS=")) {
            assert!(shown.contains(&format!(" QoS={qos} ")), "{name} runs without its QOS {qos}: {shown}");
            let tier = line.split(' ').find(|w| w.starts_with("PriorityTier=")).unwrap();
            assert!(shown.contains(&format!(" {tier} ")) && shown.contains(" PreemptMode=OFF "), "{shown}");
        }
    }
    eprintln!("{cluster}: slurmctld runs allot's {} partitions beside gpu", wanted.len());
}

/// Loads an example's Slurm files for `cluster` and checks what Slurm stored.
fn load_and_compare(example: &Path, cluster: &str, out: &Path) {
    let qos = out.join(format!("slurm/{cluster}-qos.sh"));
    for _ in 0..2 {
        ok("sh", &[qos.to_str().unwrap()]); // twice: it is idempotent
    }
    let cfg = out.join(format!("slurm/{cluster}.cfg"));
    ok("sacctmgr", &["-i", "load", &format!("file={}", cfg.display())]);

    let model = model_of(example);
    let desired = tree::desired(&model, cluster);
    let live = associations(cluster);
    for account in &desired.accounts {
        let (parent, share, grptres, qos, default) = live
            .get(&(account.name.clone(), String::new()))
            .unwrap_or_else(|| panic!("account {} missing in Slurm", account.name));
        assert_eq!(parent, &account.parent, "{}", account.name);
        assert_eq!(share, &account.fairshare.to_string(), "{}", account.name);
        assert_eq!(
            grptres,
            &account.grp_gpus.map_or(String::new(), |g| format!("gres/gpu={g}")),
            "{}",
            account.name
        );
        assert_eq!(qos, &account.qos, "{}", account.name);
        assert_eq!(Some(default.as_str()), account.default_qos.as_deref(), "{}", account.name);
    }
    for user in &desired.users {
        assert!(
            live.contains_key(&(user.account.clone(), user.name.clone())),
            "user {} in {} missing",
            user.name,
            user.account
        );
    }
    let expected = desired.accounts.len() + desired.users.len() + 2; // root's own and its root user
    assert_eq!(live.len(), expected, "Slurm holds associations allot did not write");
    eprintln!(
        "{cluster}: {} accounts and {} user associations as the model says",
        desired.accounts.len(),
        desired.users.len()
    );
}

/// `sacctmgr dump` of `cluster` into `file`.
fn dump(cluster: &str, file: &Path) {
    let text = ok("sacctmgr", &["dump", cluster, "file=/dev/stdout"]);
    std::fs::write(file, text).unwrap();
}

fn plan(example: &Path, dump: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "plan",
        "slurm",
        example.to_str().unwrap(),
        "--live",
        dump.to_str().unwrap(),
        "--detailed-exitcode",
    ];
    args.extend_from_slice(extra);
    Allot::new(&args).output()
}

fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` not found");
    text.replacen(from, to, 1)
}

/// Job usage under two sibling accounts, read back through sshare. The cluster runs allot's
/// floors: job_submit.lua gives each job its budget's floor, where it runs.
fn check_fair_tree(cluster: &str) {
    let jobs: Vec<(String, &str)> = [("priya", "sft", "2"), ("rosa", "rlvr", "1")]
        .into_iter()
        .map(|(user, account, gpus)| {
            (
                sbatch(user, &[&format!("--account={account}"), &format!("--gres=gpu:{gpus}")], "sleep 5"),
                account,
            )
        })
        .collect();
    for _ in 0..60 {
        if ok("squeue", &["-h"]).trim().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    for (id, account) in &jobs {
        let ran = ok("sacct", &["-j", id, "-X", "-n", "-P", "-o", "Partition,State"]);
        assert_eq!(ran.trim(), format!("gpu-floor-{account}|COMPLETED"), "job {id} of {account}");
    }
    ok("scripts/slurm.sh", &["restart-ctld"]);
    let text = ok(
        "sshare",
        &[
            "-a",
            "-l",
            "-P",
            &format!("--clusters={cluster}"),
            "-o",
            "account,user,rawshares,normshares,rawusage,effectvusage,levelfs",
        ],
    );
    let rows: BTreeMap<String, Vec<String>> = text
        .lines()
        .map(|l| l.split('|').map(|f| f.trim().to_string()).collect::<Vec<_>>())
        .filter(|f| f.len() == 7 && f[1].is_empty())
        .map(|f| (f[0].clone(), f))
        .collect();
    eprintln!("{text}");
    let number = |account: &str, column: usize| -> f64 { rows[account][column].parse().unwrap() };
    // NormShares are the Fairshare values over their siblings': sft 35, rlvr 45, reward-models 20.
    assert!((number("sft", 3) - 0.35).abs() < 1e-6 && (number("rlvr", 3) - 0.45).abs() < 1e-6);
    // Usage is billing x seconds: 2 GPUs x 4 + 1 CPU vs 1 GPU x 4 + 1 CPU, for 5 s.
    assert!(number("sft", 4) > number("rlvr", 4), "sft used more");
    for account in ["sft", "rlvr"] {
        let level_fs = number(account, 3) / number(account, 5);
        assert!(
            (number(account, 6) - level_fs).abs() < 1e-5,
            "{account}: LevelFS is NormShares / EffectvUsage"
        );
    }
    assert!(
        number("rlvr", 6) > number("sft", 6),
        "rlvr, with the larger share and the smaller usage, goes first"
    );
    compare_with_allot_fairshare(cluster);
}

/// `sshare -P` rows by (account, user): all their fields.
fn sshare_rows(text: &str) -> BTreeMap<(String, String), Vec<String>> {
    text.lines()
        .filter(|l| l.contains('|') && !l.starts_with("Account|"))
        .map(|l| l.split('|').map(|f| f.trim().to_string()).collect::<Vec<_>>())
        .filter(|f| f.len() >= 8)
        .map(|f| ((f[0].clone(), f[1].clone()), f))
        .collect()
}

/// Feeds the real usage to `allot fairshare` and compares every association's NormShares,
/// EffectvUsage, FairShare and LevelFS with what Slurm printed.
fn compare_with_allot_fairshare(cluster: &str) {
    let work = tempfile::tempdir().unwrap();
    let live = work.path().join("live.cfg");
    dump(cluster, &live);
    let columns = "account,user,rawshares,normshares,rawusage,effectvusage,fairshare,levelfs";
    let slurm = ok("sshare", &["-a", "-P", &format!("--clusters={cluster}"), "-o", columns]);
    let rows = sshare_rows(&slurm);
    let usage: Vec<String> = std::iter::once("account,user,raw_usage".to_string())
        .chain(
            rows.iter()
                .filter(|((_, user), _)| !user.is_empty())
                .map(|((account, user), f)| format!("{account},{user},{}", f[4])),
        )
        .collect();
    let usage_file = work.path().join("usage.csv");
    std::fs::write(&usage_file, usage.join("\n")).unwrap();
    let output =
        Allot::new(["fairshare", live.to_str().unwrap(), "--usage", usage_file.to_str().unwrap()]).output();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let ours = sshare_rows(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(ours.len(), rows.len(), "allot and Slurm list the same associations:\n{slurm}");
    for (key, theirs) in &rows {
        let mine = ours.get(key).unwrap_or_else(|| panic!("{key:?} missing from allot fairshare"));
        for (column, name) in [(3, "NormShares"), (5, "EffectvUsage"), (6, "FairShare"), (7, "LevelFS")] {
            assert_eq!(mine[column], theirs[column], "{key:?} {name}");
        }
    }
    eprintln!("allot fairshare matches sshare on all {} associations", rows.len());
}

#[test]
fn allot_against_a_real_slurm() {
    // Each Slurm cluster of the examples, and whether its Slurm runs allot's floors (their
    // partitions, job_submit.lua, preemption; ceres runs without them, so that its QOS
    // come from the plan alone).
    let examples = [
        ("published-case", "jupiter", true),
        ("published-case", "ceres", false),
        ("university-hpc", "tern", true),
    ];
    let work = tempfile::tempdir().unwrap();
    // The job submitters, as Unix users before Slurm starts: slurmctld maps associations to
    // user ids when it loads them.
    for user in ["priya", "rosa"] {
        let _ = run("useradd", &["-M", user], &[]);
    }
    for (name, cluster, with_floors) in examples {
        let example = root().join("examples").join(name);
        let out = work.path().join(format!("{name}-{cluster}"));
        build(&example, &out);
        // Usage as billing x seconds, recomputed every minute, as check_fair_tree expects.
        let floors = with_floors.then(|| Floors::from_build(&out, cluster, FAIR_TREE_SETTINGS));
        let settings = floors.as_ref().map(Floors::settings).unwrap_or_default();
        let Some(_slurm) = Slurm::start_with(cluster, &borrowed(&settings)) else { return };
        if let Some(floors) = &floors {
            check_floors_loaded(floors, cluster);
        }
        apply_from_scratch(&example, cluster, &out);
        // What Slurm holds after the apply is exactly what the model says (the load finds
        // nothing new to add).
        load_and_compare(&example, cluster, &out);

        let live = out.join("live.cfg");
        dump(cluster, &live);
        let first = plan(&example, &live, &[]);
        assert_eq!(
            first.status.code(),
            Some(0),
            "a fresh dump plans no changes:\n{}",
            String::from_utf8_lossy(&first.stdout)
        );

        if cluster == "tern" {
            apply_a_saved_plan(&example, cluster, work.path());
        }
        if cluster != "jupiter" {
            continue;
        }
        // A budget change: a share, a new project, a removed project, a moved user.
        let repo = work.path().join("changed");
        ok("cp", &["-r", example.to_str().unwrap(), repo.to_str().unwrap()]);
        let file = repo.join("allot.kdl");
        let mut text = std::fs::read_to_string(&file).unwrap();
        text = edit(&text, "project tulu share=\"20%\"", "project tulu share=\"22%\"");
        text = edit(
            &text,
            "    project ci share=\"40%\"",
            "    project newteam share=\"1%\" {\n        users newhire\n    }\n    project ci share=\"40%\"",
        );
        text =
            edit(&text, "    project data share=\"10%\" {\n        users hiro ines jonas sven\n    }\n", "");
        text = edit(&text, "users rosa sami tomas omar", "users rosa tomas omar");
        text = edit(&text, "users priya quinn kofi", "users priya quinn kofi sami");
        std::fs::write(&file, text).unwrap();
        let script = work.path().join("apply.sh");
        let changed = plan(&repo, &live, &["--script", script.to_str().unwrap()]);
        let shown = String::from_utf8_lossy(&changed.stdout).into_owned();
        assert_eq!(changed.status.code(), Some(2), "{shown}\n{}", String::from_utf8_lossy(&changed.stderr));
        assert!(shown.contains("Plan: 3 to add, 1 to change, 6 to destroy."), "{shown}");
        eprintln!("{shown}");
        ok("sh", &[script.to_str().unwrap()]);
        dump(cluster, &live);
        let after = plan(&repo, &live, &[]);
        assert_eq!(
            after.status.code(),
            Some(0),
            "applied, no changes left:\n{}",
            String::from_utf8_lossy(&after.stdout)
        );

        check_fair_tree(cluster);
        check_grant_boundaries(&repo, cluster, work.path());
    }
    check_decay();
}

/// A grant's two boundaries brought to a real Slurm as the scheduled workflow of
/// docs/github-action.md brings them (`allot plan slurm --live --out`, then `allot apply`),
/// each planned at its moment with `--at`: tulu +2% through January 2030. At the start the
/// plan moves tulu's Fairshare and its subprojects' floor caps; applied, a plan at that
/// moment finds nothing left; at the end they move back, and Slurm holds tulu's share of
/// before.
fn check_grant_boundaries(repo: &Path, cluster: &str, work: &Path) {
    let file = repo.join("allot.kdl");
    let text = std::fs::read_to_string(&file).unwrap();
    let granted = edit(
        &text,
        "project tulu share=\"22%\" {",
        "project tulu share=\"22%\" {\n    grant share=\"+2%\" from=\"2030-01-01\" until=\"2030-02-01\" reason=\"deadline\"",
    );
    std::fs::write(&file, granted).unwrap();
    let (repo, saved) = (repo.to_str().unwrap(), work.join("grant.plan"));
    let saved = saved.to_str().unwrap();
    // Brings Slurm to the budgets at `at` (none: now): what was planned, "" when nothing.
    let bring = |at: &[&str]| -> String {
        let plan = |extra: &[&str]| {
            let base = ["plan", "slurm", repo, "--live", "--cluster", cluster, "--detailed-exitcode"];
            Allot::new([&base[..], at, extra].concat()).output()
        };
        let planned = plan(&["--out", saved]);
        let shown = String::from_utf8_lossy(&planned.stdout).into_owned();
        match planned.status.code() {
            Some(0) => return String::new(),
            Some(2) => {}
            _ => panic!("{shown}\n{}", String::from_utf8_lossy(&planned.stderr)),
        }
        let applied = Allot::new(["apply", "slurm", saved, "--auto-approve"]).output();
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
        let after = plan(&[]);
        assert_eq!(
            after.status.code(),
            Some(0),
            "{at:?}, applied:\n{}",
            String::from_utf8_lossy(&after.stdout)
        );
        shown
    };
    // The floors' QOS first: the change above was applied from a dump, which holds none.
    bring(&[]);
    let tulu = || associations(cluster)[&("tulu".to_string(), String::new())].1.clone();
    let before = tulu();
    let started = bring(&["--at", "2030-01-01"]);
    let during = tulu();
    let ended = bring(&["--at", "2030-02-01"]);
    for (shown, move_) in [(&started, "fairshare: 22 -> 24"), (&ended, "fairshare: 24 -> 22")] {
        assert!(shown.contains(move_) && shown.contains("gpu-floor-sft"), "{shown}");
        assert!(shown.contains("Plan: 0 to add,") && shown.contains(", 0 to destroy."), "{shown}");
    }
    assert_eq!((before.as_str(), during.as_str(), tulu().as_str()), ("22", "24", "22"));
    eprintln!("{cluster}: a grant's start and end planned with --at and applied:\n{started}");
}

/// How much `allot apply` saves against a command per change (the figures of docs/slurm.md).
/// Not in CI (about 3 minutes at the default size):
/// `cargo test --test integration slurm_real:: -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for docs/slurm.md"]
fn apply_against_a_command_per_change_measured() {
    let work = tempfile::tempdir().unwrap();
    apply_against_a_command_per_change(work.path());
}

/// Budgets of 10 top-level projects of `sub` projects each on cluster `speed`, with the
/// shares of the first `changed` projects of each top-level one moved by one.
fn speed_budgets(dir: &Path, sub: usize, changed: usize) {
    let mut text = String::from(
        "cluster speed gpus=1000 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=speed partition=gpu\n}\n\
         contract batch min-runtime=\"1h\" resumable=#true default=#true\n",
    );
    for i in 0..10 {
        text.push_str(&format!("project t{i} share={} {{\n", 10 + i));
        for j in 0..sub {
            let share = 100 + j + usize::from(j < changed);
            text.push_str(&format!("    project p{i}x{j} share={share}\n"));
        }
        text.push_str("}\n");
    }
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("allot.kdl"), text).unwrap();
}

/// The same budgets created, then a tenth of them changed, on a fresh Slurm each time: by
/// the plan's script (one `sacctmgr` command per change, as account-sync scripts do) and by
/// `allot apply` of a saved plan (one `sacctmgr load` of what is added, one command per
/// distinct setting run side by side, the live state read before and after).
/// `ALLOT_APPLY_SUBPROJECTS` sets the projects per top-level project (default 10: 110
/// accounts, 10 changed, about two minutes, the least at which allot's apply, whose reading
/// of the live state before and after costs a second or so, is 10x faster in all; 100 gives
/// the 1,010 accounts and 100 changes of docs/slurm.md).
fn apply_against_a_command_per_change(work: &Path) {
    let sub: usize = std::env::var("ALLOT_APPLY_SUBPROJECTS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let changed = (sub / 10).max(1);
    let budgets = work.join("speed");
    let timed = |what: &dyn Fn()| {
        let started = std::time::Instant::now();
        what();
        started.elapsed().as_secs_f64()
    };
    let plan_live = |extra: &[&str]| {
        let mut args = vec!["plan", "slurm", budgets.to_str().unwrap(), "--live", "--allow-deletes"];
        args.extend_from_slice(extra);
        let output = Allot::new(&args).output();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    let (script, saved) = (work.join("speed.sh"), work.join("speed.plan"));
    let (script, saved) = (script.to_str().unwrap(), saved.to_str().unwrap());
    let by_commands = || {
        ok("sh", &[script]);
    };
    let by_apply = || {
        let applied = Allot::new(["apply", "slurm", saved, "--auto-approve"]).output();
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    };
    // One command per change (the plan's script), then a saved plan applied, each from a
    // fresh Slurm.
    let ways: [(&[&str], &dyn Fn()); 2] =
        [(&["--script", script], &by_commands), (&["--out", saved], &by_apply)];
    let mut seconds = Vec::new();
    for (plan_args, apply) in ways {
        speed_budgets(&budgets, sub, 0);
        let Some(_slurm) = Slurm::start("speed") else { return };
        for step in [0, changed] {
            speed_budgets(&budgets, sub, step);
            plan_live(plan_args);
            seconds.push(timed(apply));
        }
    }
    let accounts = 10 * (sub + 1);
    let [create_commands, change_commands, create_apply, change_apply] = seconds[..] else { unreachable!() };
    eprintln!(
        "apply: {accounts} accounts created in {create_commands:.1} s by commands, {create_apply:.1} s by allot apply ({:.0}x); \
         {} changed in {change_commands:.1} s by commands, {change_apply:.1} s by allot apply ({:.1}x)",
        create_commands / create_apply,
        10 * changed,
        change_commands / change_apply
    );
    assert!(create_commands >= 10.0 * create_apply, "creating: {create_commands} s vs {create_apply} s");
    let (commands, applied) = (create_commands + change_commands, create_apply + change_apply);
    assert!(commands >= 10.0 * applied, "creating and changing: {commands} s vs {applied} s");
    // At the default size, the 10 changes take one command, and reading the live state
    // before and after weighs as much as the commands it saves: the bound holds at 100.
    if sub >= 100 {
        assert!(change_commands >= 10.0 * change_apply, "changing: {change_commands} s vs {change_apply} s");
    }
}

/// Asserts that an apply went through, and that the plan made after it finds nothing left.
fn assert_applied(applied: &Output, after: &Output) {
    let (stdout, stderr) =
        (String::from_utf8_lossy(&applied.stdout), String::from_utf8_lossy(&applied.stderr));
    assert_eq!(applied.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Apply complete"), "{stdout}");
    assert_eq!(
        after.status.code(),
        Some(0),
        "applied, no changes left:\n{}",
        String::from_utf8_lossy(&after.stdout)
    );
}

/// A saved plan of every association of an example (and of every QOS where the Slurm runs
/// without floors: with them, the QOS script made the QOS before slurmctld started, as
/// slurmctld needs), applied to a Slurm that holds no association: planned again, nothing is
/// left, and the build's QOS script finds the QOS as it would make them.
fn apply_from_scratch(example: &Path, cluster: &str, out: &Path) {
    let saved = out.join("scratch.plan");
    let plan_live = |extra: &[&str]| {
        let mut args = vec![
            "plan",
            "slurm",
            example.to_str().unwrap(),
            "--live",
            "--cluster",
            cluster,
            "--detailed-exitcode",
        ];
        args.extend_from_slice(extra);
        Allot::new(&args).output()
    };
    let planned = plan_live(&["--out", saved.to_str().unwrap()]);
    assert_eq!(planned.status.code(), Some(2), "{}", String::from_utf8_lossy(&planned.stderr));
    let applied = Allot::new(["apply", "slurm", saved.to_str().unwrap(), "--auto-approve"]).output();
    assert_applied(&applied, &plan_live(&[]));
    ok("sh", &[out.join(format!("slurm/{cluster}-qos.sh")).to_str().unwrap()]);
    let again = plan_live(&[]);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    eprintln!(
        "{cluster}: the whole example applied from a saved plan ({})",
        String::from_utf8_lossy(&applied.stdout).trim()
    );
}

/// `allot plan slurm --live --out` and `allot apply slurm` on the live cluster: a change made
/// by hand between the two is refused with the change named; planned again, the plan
/// applies, and a third plan finds nothing left to change.
fn apply_a_saved_plan(example: &Path, cluster: &str, work: &Path) {
    let repo = work.join("apply");
    ok("cp", &["-r", example.to_str().unwrap(), repo.to_str().unwrap()]);
    let file = repo.join("allot.kdl");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, edit(&text, "project science share=35", "project science share=30")).unwrap();
    let saved = work.join("tern-plan.json");
    let plan_live = |out: Option<&Path>| {
        let mut args = vec!["plan", "slurm", repo.to_str().unwrap(), "--live", "--detailed-exitcode"];
        if let Some(out) = out {
            args.extend(["--out", out.to_str().unwrap()]);
        }
        Allot::new(&args).output()
    };
    let planned = plan_live(Some(&saved));
    assert_eq!(planned.status.code(), Some(2), "{}", String::from_utf8_lossy(&planned.stderr));
    let apply = || Allot::new(["apply", "slurm", saved.to_str().unwrap(), "--auto-approve"]).output();

    // Behind allot's back.
    ok(
        "sacctmgr",
        &[
            "-i",
            "modify",
            "account",
            "where",
            "name=medicine",
            &format!("cluster={cluster}"),
            "set",
            "fairshare=21",
        ],
    );
    ok("sacctmgr", &["-i", "modify", "qos", "where", "name=short", "set", "priority=5"]);
    let refused = apply();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("changed since the plan was made: nothing was applied")
            && said.contains("'medicine'")
            && said.contains("now:         QOS - short|5|cancel|"),
        "{said}"
    );
    eprintln!("{said}");

    let planned = plan_live(Some(&saved));
    assert_eq!(planned.status.code(), Some(2), "{}", String::from_utf8_lossy(&planned.stderr));

    // Another administrator's apply holds the lock (a QOS Slurm's database holds): refused
    // at once, its holder named, nothing applied.
    let lock = "allot-apply-lock";
    let holder = "allot apply lock: bob@adm2 pid 4242 since 1764700000";
    ok("sacctmgr", &["-i", "add", "qos", lock, &format!("description={holder}")]);
    let held = apply();
    let said = String::from_utf8_lossy(&held.stderr);
    assert_eq!(held.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("another apply holds this Slurm's apply lock (QOS {lock}: {holder})"))
            && said.contains("nothing was applied")
            && said.contains("--break-lock"),
        "{said}"
    );
    assert_eq!(plan_live(None).status.code(), Some(2), "the plan is still to apply");
    // One left on this host by a process that is gone is taken over; the apply releases it.
    ok("sacctmgr", &["-i", "delete", "qos", lock]);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_ascii_lowercase();
    ok(
        "sacctmgr",
        &[
            "-i",
            "add",
            "qos",
            lock,
            &format!("description=allot apply lock: root@{host} pid 4294967295 since 1"),
        ],
    );
    let started = std::time::Instant::now();
    let applied = apply();
    let took = started.elapsed();
    let said = String::from_utf8_lossy(&applied.stderr);
    assert!(said.contains("allot: taking over the apply lock left by allot apply lock: root@"), "{said}");
    assert_applied(&applied, &plan_live(None));
    let left = ok("sacctmgr", &["-n", "-P", "show", "qos", "format=name"]);
    assert!(!left.lines().any(|name| name.starts_with(lock)), "the apply released its lock: {left}");
    eprintln!(
        "{cluster}: a saved plan refused on drift and on another's lock, then applied in {took:.1?} (a stale lock of this host taken over), and nothing left to change"
    );

    // A failure in the middle: a new contract, planned from a dump file (which holds no QOS),
    // so that the plan gives its QOS to the accounts without creating it.
    let text = std::fs::read_to_string(&file).unwrap();
    let urgent = "contract urgent min-runtime=\"0s\" max-runtime=\"1h\"\n";
    std::fs::write(&file, edit(&text, "contract short ", &format!("{urgent}contract short "))).unwrap();
    let live = work.join("apply-live.cfg");
    dump(cluster, &live);
    let planned = Allot::new([
        "plan",
        "slurm",
        repo.to_str().unwrap(),
        "--live",
        live.to_str().unwrap(),
        "--out",
        saved.to_str().unwrap(),
    ])
    .output();
    let shown = String::from_utf8_lossy(&planned.stdout);
    assert!(planned.status.success() && shown.contains("QOS not compared"), "{shown}");
    let failed = apply();
    let said = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{said}");
    assert!(
        said.contains("step 1 of 1 failed: 1 of 1 commands run side by side failed")
            && said.contains("You gave a bad qos 'urgent'"),
        "{said}"
    );
    eprintln!("{said}");
    // The next plan, made with the live QOS, shows what remains: the QOS to add first.
    let planned = plan_live(Some(&saved));
    let shown = String::from_utf8_lossy(&planned.stdout);
    assert_eq!(planned.status.code(), Some(2), "{shown}");
    assert!(shown.contains("+ qos urgent"), "{shown}");
    assert_applied(&apply(), &plan_live(None));
    eprintln!("{cluster}: an apply that failed in the middle said so, and the next plan applied the rest");

    // The deletion guard: a faculty taken out deletes more associations than the default 10.
    let text = std::fs::read_to_string(&file).unwrap();
    let medicine = "project medicine share=20 {\n    owners \"@northfield-hpc/medicine-allocations\"\n    include \"faculties/medicine.kdl\"\n}\n";
    std::fs::write(&file, edit(&text, medicine, "")).unwrap();
    std::fs::remove_file(&saved).unwrap();
    let refused = plan_live(Some(&saved));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("more than --max-deletes 10") && !saved.exists(), "{said}");
    let out = saved.to_str().unwrap();
    let planned =
        Allot::new(["plan", "slurm", repo.to_str().unwrap(), "--live", "--allow-deletes", "--out", out])
            .output();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    assert_applied(&apply(), &plan_live(None));
    eprintln!("{cluster}: a plan over the deletion guard was refused and saved nothing; allowed, it applied");
}

/// A job's usage as Slurm decays it, against allot's model of the decay thread
/// (`allot_simulate::decay`): a 2-GPU job of 50 s under a one-minute half-life, its RawUsage
/// read after the first pass that follows its end. Slurm's passes come every
/// PriorityCalcPeriod (1 minute here) from when slurmctld started; the last one is in
/// `priority_last_decay_ran` in its StateSaveLocation (a big-endian 64-bit time).
fn check_decay() {
    let cluster = "decay";
    let Some(_slurm) = Slurm::start_with(cluster, &[("ALLOT_SLURM_HALFLIFE", "00:01:00")]) else { return };
    let state = std::env::var("ALLOT_SLURM_STATE").unwrap_or_else(|_| "/var/lib/allot-slurm".into());
    let last_pass = || -> i64 {
        let bytes = std::fs::read(Path::new(&state).join("ctld/priority_last_decay_ran")).unwrap_or_default();
        bytes.get(..8).map_or(0, |b| i64::from_be_bytes(b.try_into().unwrap()))
    };
    ok("sacctmgr", &["-i", "add", "account", "decay", &format!("cluster={cluster}")]);
    ok("sacctmgr", &["-i", "add", "user", "priya", "account=decay", &format!("cluster={cluster}")]);
    let id = sbatch("priya", &["--account=decay", "--gres=gpu:2"], "sleep 50");
    let fields = loop {
        let output = run(
            "sacct",
            &["-j", &id, "-X", "-n", "-P", "-o", "State,Start,End,AllocTRES"],
            &[("SLURM_TIME_FORMAT", "%s")],
        );
        let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let fields: Vec<String> = text.split('|').map(str::to_string).collect();
        if fields.first().is_some_and(|s| s == "COMPLETED") {
            break fields;
        }
        assert!(!fields.first().is_some_and(|s| s.contains("FAIL") || s.contains("CANCEL")), "{text}");
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    let (start, end): (i64, i64) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    let billing: f64 = fields[3]
        .split(',')
        .find_map(|t| t.strip_prefix("billing="))
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("no billing in {}", fields[3]));
    // The first pass after the end, and the usage Slurm holds then.
    let pass = loop {
        let pass = last_pass();
        if pass > end {
            break pass;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    };
    let text =
        ok("sshare", &["-a", "-P", "-n", &format!("--clusters={cluster}"), "-o", "account,user,rawusage"]);
    assert_eq!(last_pass(), pass, "no pass between the two readings");
    let slurm: f64 = text
        .lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .find(|f| f.len() == 3 && f[0] == "decay" && f[1] == "priya")
        .and_then(|f| f[2].parse().ok())
        .unwrap_or_else(|| panic!("no usage of priya in decay:\n{text}"));
    // allot's model, with the passes every 60 s back from the last one.
    let decay = allot_simulate::decay::Decay::new(60.0, 60);
    let mut usage = allot_simulate::decay::Usage::new(1, decay);
    let origin = pass - 60 * ((pass - start) / 60 + 2);
    usage.start(0, origin, 0.0);
    usage.start(0, start, billing);
    usage.stop(0, end, billing, start);
    let ours = usage.raw(0, pass);
    // What a continuous 2^(-t / half-life) decay would give.
    let continuous: f64 = {
        let rate = std::f64::consts::LN_2 / 60.0;
        billing * ((-rate * (pass - end) as f64).exp() - (-rate * (pass - start) as f64).exp()) / rate
    };
    eprintln!(
        "decay: job {id} from {start} to {end} (billing {billing}), pass {pass}: Slurm RawUsage {slurm}, allot {ours:.1}, continuous decay {continuous:.1}"
    );
    assert!((ours - slurm).abs() <= 0.03 * slurm + 1.0, "allot's decay {ours} vs Slurm's {slurm}");
    assert!((ours - slurm).abs() < (continuous - slurm).abs(), "closer to Slurm than a continuous decay");
}
