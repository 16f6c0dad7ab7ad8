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
use std::process::{Command, Output};

use allot_compiler::test_support::model_of;
use allot_targets::slurm::tree;

mod common;

use common::root;

fn run(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn ok(program: &str, args: &[&str]) -> String {
    let output = run(program, args, &[]);
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn allot(args: &[&str]) -> Output {
    run(env!("CARGO_BIN_EXE_allot"), args, &[("NO_COLOR", "1")])
}

/// Stops the Slurm it started when the test ends, passed or not.
struct Slurm;

impl Slurm {
    /// A fresh Slurm whose cluster is `cluster`; `None` when this machine cannot run one.
    fn start(cluster: &str) -> Option<Slurm> {
        let output = run("scripts/slurm.sh", &["start"], &[("ALLOT_SLURM_CLUSTER", cluster)]);
        match output.status.code() {
            Some(0) => Some(Slurm),
            Some(3) if std::env::var_os("ALLOT_REQUIRE_SLURM").is_none() => {
                eprintln!("skipped: no real Slurm here:\n{}", String::from_utf8_lossy(&output.stderr));
                None
            }
            _ => panic!("scripts/slurm.sh start failed:\n{}", String::from_utf8_lossy(&output.stderr)),
        }
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = run("scripts/slurm.sh", &["stop"], &[]);
    }
}

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

/// Loads an example's Slurm files for `cluster` and checks what Slurm stored.
fn load_and_compare(example: &Path, cluster: &str, out: &Path) {
    let build =
        allot(&["build", example.to_str().unwrap(), "--out", out.to_str().unwrap(), "--target", "slurm"]);
    assert!(build.status.success(), "{}", String::from_utf8_lossy(&build.stderr));
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
    allot(&args)
}

fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` not found");
    text.replacen(from, to, 1)
}

/// Job usage under two sibling accounts, read back through sshare.
fn check_fair_tree(cluster: &str) {
    for (user, account, gpus) in [("priya", "sft", "2"), ("rosa", "rlvr", "1")] {
        ok(
            "runuser",
            &[
                "-u",
                user,
                "--",
                "sbatch",
                "--chdir=/tmp",
                "-o",
                "/dev/null",
                &format!("--account={account}"),
                &format!("--gres=gpu:{gpus}"),
                "--wrap",
                "sleep 5",
            ],
        );
    }
    for _ in 0..60 {
        if ok("squeue", &["-h"]).trim().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
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
    let output = allot(&["fairshare", live.to_str().unwrap(), "--usage", usage_file.to_str().unwrap()]);
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
    let examples = [("published-case", "jupiter"), ("published-case", "ceres"), ("university-hpc", "tern")];
    let work = tempfile::tempdir().unwrap();
    // The job submitters, as Unix users before Slurm starts: slurmctld maps associations to
    // user ids when it loads them.
    for user in ["priya", "rosa"] {
        let _ = run("useradd", &["-M", user], &[]);
    }
    for (name, cluster) in examples {
        let Some(_slurm) = Slurm::start(cluster) else { return };
        let example = root().join("examples").join(name);
        let out = work.path().join(format!("{name}-{cluster}"));
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
    }
}
