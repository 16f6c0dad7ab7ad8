//! `allot build` end to end: what it writes, that it writes the same bytes again, and
//! that a failed run leaves the previous outputs as they were.

use std::path::Path;

use crate::common::allot;
use allot_compiler::test_support::files_under as tree;

#[test]
fn build_writes_every_file_and_the_same_bytes_again() {
    let out = tempfile::tempdir().unwrap();
    let out_path = out.path().to_str().unwrap();
    let (status, stdout, stderr) = allot(&["build", "examples/hadoop-analytics", "--out", out_path]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("wrote 9 files") && stdout.contains("# YARN: what the budgets lose"), "{stdout}");
    let first = tree(out.path());
    let names: Vec<&str> = first.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            ".allot-lock",
            ".allot-manifest",
            "yarn/FIDELITY.md",
            "yarn/edge/capacity-scheduler.xml",
            "yarn/edge/resource-types.xml",
            "yarn/edge/yarn-site.capacity.xml",
            "yarn/lake/capacity-scheduler.xml",
            "yarn/lake/fair-scheduler.xml",
            "yarn/lake/resource-types.xml",
            "yarn/lake/yarn-site.capacity.xml",
            "yarn/lake/yarn-site.fair.xml",
        ]
    );
    assert_eq!(allot(&["build", "examples/hadoop-analytics", "--out", out_path]).0, 0);
    assert_eq!(tree(out.path()), first, "a second build writes the same bytes and leaves nothing behind");
}

#[test]
fn a_failed_build_leaves_the_previous_outputs_intact() {
    let out = tempfile::tempdir().unwrap();
    let out_path = out.path().to_str().unwrap();
    assert_eq!(allot(&["build", "examples/hadoop-analytics", "--out", out_path]).0, 0);
    let before = tree(out.path());

    let (status, _, stderr) =
        allot(&["build", "examples/hadoop-analytics", "--out", out_path, "--target", "nope"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("unknown target `nope`") && stderr.contains("nothing was written"), "{stderr}");

    let (status, _, _) = allot(&["build", "tests/bad/share-mixed", "--out", out_path]);
    assert_eq!(status, 1);
    assert_eq!(tree(out.path()), before);
}

#[test]
fn a_tree_bound_to_no_target_builds_nothing() {
    let out = tempfile::tempdir().unwrap();
    let (status, _, stderr) =
        allot(&["build", "tests/bad/cluster-partial-node", "--out", out.path().to_str().unwrap()]);
    assert_eq!(status, 0);
    assert!(stderr.contains("nothing to build"), "{stderr}");
    assert!(tree(out.path()).is_empty());
}

fn write_repo(dir: &Path, text: &str) {
    std::fs::write(dir.join("allot.kdl"), text).unwrap();
}

const SLURM_BUDGET: &str = "cluster c gpus=8 gpu-type=h100 {\n    slurm cluster=lab\n}\ncontract b min-runtime=\"1h\" default=#true\n\
    project a share=1 {\n    users alice\n}\n";

#[test]
fn plan_refuses_a_dump_that_does_not_parse_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_repo(dir.path(), SLURM_BUDGET);
    let dump = dir.path().join("live.cfg");
    std::fs::write(&dump, "Cluster - 'lab'\nAccount - 'x':Fairshare=many\n").unwrap();
    let script = dir.path().join("apply.sh");
    let (status, _, stderr) = allot(&[
        "plan",
        "slurm",
        dir.path().to_str().unwrap(),
        "--live",
        dump.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 2") && stderr.contains("not a sacctmgr dump"), "{stderr}");
    assert!(!script.exists());
}

#[test]
fn plan_refuses_more_deletions_than_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    write_repo(dir.path(), SLURM_BUDGET);
    let mut dump = String::from(
        "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1:QOS='b,preemptible':DefaultQOS='b'\n",
    );
    for i in 0..3 {
        dump.push_str(&format!("Account - 'old{i}':Fairshare=1\n"));
    }
    dump.push_str("Parent - 'a'\nUser - 'alice':DefaultAccount='a':Fairshare=1\n");
    let live = dir.path().join("live.cfg");
    std::fs::write(&live, dump).unwrap();
    let script = dir.path().join("apply.sh");
    let args = |extra: &[&'static str]| {
        let mut a: Vec<String> = [
            "plan",
            "slurm",
            dir.path().to_str().unwrap(),
            "--live",
            live.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--detailed-exitcode",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |extra: &[&'static str]| {
        let a = args(extra);
        allot(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (status, stdout, stderr) = run(&["--max-deletes", "2"]);
    assert_eq!(status, 1, "{stderr}");
    assert!(
        stdout.contains("Plan: 0 to add, 0 to change, 3 to destroy.") && stderr.contains("--allow-deletes"),
        "{stdout}{stderr}"
    );
    assert!(!script.exists());
    let (status, _, _) = run(&["--max-deletes", "2", "--allow-deletes"]);
    assert_eq!(status, 2);
    let written = std::fs::read_to_string(&script).unwrap();
    assert!(written.contains("sacctmgr -i delete account where name=old2 cluster=lab"), "{written}");
}

#[test]
fn plan_refuses_names_slurm_cannot_carry() {
    let dir = tempfile::tempdir().unwrap();
    write_repo(
        dir.path(),
        "cluster c gpus=8 gpu-type=h100 {\n    slurm cluster=lab\n}\ncontract b min-runtime=\"1h\" default=#true\n\
         project a share=1 {\n    project eval share=1\n}\nproject b share=1 {\n    project eval share=1\n}\n",
    );
    let live = dir.path().join("live.cfg");
    std::fs::write(&live, "Cluster - 'lab'\n").unwrap();
    let (status, _, stderr) =
        allot(&["plan", "slurm", dir.path().to_str().unwrap(), "--live", live.to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(
        stderr.contains("account names are unique") && stderr.contains("allot.kdl:6:13, allot.kdl:9:13"),
        "{stderr}"
    );
    let (status, _, stderr) =
        allot(&["build", dir.path().to_str().unwrap(), "--out", dir.path().join("out").to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(stderr.contains("nothing was written"), "{stderr}");
}

#[test]
fn import_then_build_then_plan_shows_no_changes() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("live.cfg");
    std::fs::write(
        &dump,
        "Cluster - 'lab':Fairshare=1:QOS='normal'\nParent - 'root'\nUser - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1\n\
         Account - 'eng':Description='e':Organization='o':Fairshare=60:GrpTRES=gres/gpu=6\nAccount - 'ops':Fairshare=40\n\
         Parent - 'eng'\nUser - 'alice':DefaultAccount='eng':Fairshare=1\nParent - 'ops'\nUser - 'alice':DefaultAccount='eng':Fairshare=1\nUser - 'bob':DefaultAccount='ops':Fairshare=1\n",
    )
    .unwrap();
    let repo = dir.path().join("repo");
    let (status, _, stderr) =
        allot(&["import", "slurm", dump.to_str().unwrap(), "--gpus", "16", "--out", repo.to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(allot(&["check", repo.to_str().unwrap()]).0, 0);
    let (status, stdout, _) = allot(&[
        "plan",
        "slurm",
        repo.to_str().unwrap(),
        "--live",
        dump.to_str().unwrap(),
        "--detailed-exitcode",
    ]);
    assert_eq!(status, 0, "{stdout}");
    assert!(stdout.contains("Plan: 0 to add, 0 to change, 0 to destroy."));
    let (status, _, stderr) =
        allot(&["import", "slurm", dump.to_str().unwrap(), "--gpus", "16", "--out", repo.to_str().unwrap()]);
    assert_eq!(status, 1, "import never overwrites: {stderr}");
}
