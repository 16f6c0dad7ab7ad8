//! Hostile `sacctmgr dump`s against `allot import slurm`, `allot plan slurm` and `allot
//! fairshare`: names that would inject KDL or shell, dumps that try to make a plan touch
//! Slurm's root, odd dumps (cycles, duplicates, cut-off records), deep and huge inputs.
//! Every dump is built here as a string.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{Allot, allot};

const BUDGET: &str = "cluster c gpus=8 gpu-type=h100 {\n    slurm cluster=lab\n}\n\
    contract b min-runtime=\"1h\" default=#true\nproject a share=1 {\n    users alice\n}\n";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `allot import slurm` of `dump`: (status, stdout, stderr).
fn import(dir: &Path, dump: &str) -> (i32, String, String) {
    let dump = write(dir, "dump.cfg", dump);
    allot(&["import", "slurm", s(&dump), "--gpus", "8"])
}

/// `allot plan slurm` of the budgets in `dir` against `dump`, asking for a script.
fn plan(dir: &Path, dump: &str) -> (i32, String, String, Option<String>) {
    write(dir, "allot.kdl", BUDGET);
    let live = write(dir, "live.cfg", dump);
    let script = dir.join("apply.sh");
    let _ = std::fs::remove_file(&script);
    let (status, stdout, stderr) =
        allot(&["plan", "slurm", s(dir), "--live", s(&live), "--script", s(&script), "--allow-deletes"]);
    (status, stdout, stderr, std::fs::read_to_string(&script).ok())
}

#[test]
fn import_refuses_names_that_would_inject_kdl_and_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (status, stdout, stderr) = import(
        dir.path(),
        "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\nParent - 'a'\n\
         User - 'x\u{a0}};project evil share=99 {':DefaultAccount='a':Fairshare=1\n",
    );
    assert_eq!(status, 1, "{stdout}");
    assert!(stderr.contains("line 5") && stderr.contains("cannot be a Slurm name"), "{stderr}");
    assert!(stdout.is_empty(), "nothing is written: {stdout}");
    let (status, stdout, stderr) =
        import(dir.path(), "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1:QOS='q\"x'\n");
    assert_eq!(status, 1, "{stdout}");
    assert!(stderr.contains("line 3") && stderr.contains("QOS"), "{stderr}");
}

#[test]
fn import_quotes_names_through_kdl_and_the_result_checks() {
    let dir = tempfile::tempdir().unwrap();
    let dump = write(
        dir.path(),
        "dump.cfg",
        "Cluster - 'lab':QOS='normal'\nParent - 'root'\nAccount - 'a':Fairshare=1\nParent - 'a'\n\
         User - 'true':DefaultAccount='a':Fairshare=1\nUser - '/-y':DefaultAccount='a':Fairshare=1\n",
    );
    let repo = dir.path().join("repo");
    let (status, _, stderr) = allot(&["import", "slurm", s(&dump), "--gpus", "8", "--out", s(&repo)]);
    assert_eq!(status, 0, "{stderr}");
    let text = std::fs::read_to_string(repo.join("allot.kdl")).unwrap();
    assert!(text.contains(r#""/-y""#) && text.contains(r#""true""#), "{text}");
    assert_eq!(allot(&["check", s(&repo)]).0, 0, "{text}");
    let (_, tree, _) = allot(&["tree", s(&repo)]);
    assert!(!tree.contains("evil"), "{tree}");
}

#[test]
fn import_names_names_allot_refuses_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let (status, _, stderr) = import(
        dir.path(),
        "Cluster - 'lab'\nParent - 'root'\nAccount - 'ok'\nAccount - 'ml_team':Fairshare=1\n",
    );
    assert_eq!(status, 1);
    assert!(stderr.contains("line 4: account \"ml_team\" cannot be an allot project"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
}

#[test]
fn a_plan_never_touches_slurms_root_whatever_the_dump_says() {
    let dir = tempfile::tempdir().unwrap();
    // The root user's default account moved, and the root user in accounts allot would delete.
    let dump = "Cluster - 'lab'\nParent - 'root'\nUser - 'root':DefaultAccount='old':AdminLevel='Administrator':Fairshare=1\n\
        Account - 'a':Fairshare=1:QOS='b':DefaultQOS='b'\nAccount - 'old':Fairshare=1\n\
        Parent - 'a'\nUser - 'alice':DefaultAccount='a':Fairshare=1\nUser - 'root':DefaultAccount='old':Fairshare=1\n\
        Parent - 'old'\nUser - 'root':DefaultAccount='old':Fairshare=1\n";
    let (status, stdout, stderr, script) = plan(dir.path(), dump);
    assert_eq!(status, 0, "{stdout}{stderr}");
    let script = script.unwrap();
    for line in script.lines().filter(|l| l.starts_with("sacctmgr")) {
        assert!(!line.contains("root"), "{line}\n{script}");
    }
    assert!(stdout.contains("Left alone") && stdout.contains("account old"), "{stdout}");
}

#[test]
fn an_account_named_root_in_a_dump_is_an_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let (status, _, stderr, script) = plan(
        dir.path(),
        "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\nParent - 'a'\nAccount - 'root':Fairshare=1\n",
    );
    assert_eq!(status, 1);
    assert!(stderr.contains("line 5") && stderr.contains("named `root`"), "{stderr}");
    assert!(script.is_none());
}

#[test]
fn budgets_that_give_the_root_user_a_project_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "allot.kdl", &BUDGET.replace("users alice", "users alice root"));
    let live = write(
        dir.path(),
        "live.cfg",
        "Cluster - 'lab'\nParent - 'root'\nUser - 'root':DefaultAccount='root'\n",
    );
    let script = dir.path().join("apply.sh");
    let (status, _, stderr) =
        allot(&["plan", "slurm", s(dir.path()), "--live", s(&live), "--script", s(&script)]);
    // Refused at check, with its place; the plan refuses it again (its unit tests).
    assert_eq!(status, 1);
    assert!(
        stderr.contains("the `root` user cannot be given a project") && stderr.contains("allot.kdl:"),
        "{stderr}"
    );
    assert!(!script.exists());
}

#[test]
fn odd_dumps_are_errors_with_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let c = "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\n";
    let cases = [
        (format!("{c}Parent - 'x'\nAccount - 'y'\nParent - 'y'\nAccount - 'x'\n"), "line 5", "cycle"),
        (format!("{c}Account - 'b'\nAccount - 'a'\n"), "line 5", "defined twice (first on line 3)"),
        (format!("{c}Parent - 'a'\nUser - 'u'\nUser - 'u'\n"), "line 6", "twice (first on line 5)"),
        (format!("{c}Parent - 'ghost'\nUser - 'u'\n"), "line 4", "does not define"),
        (format!("{c}Parent - 'a'\nUser - 'u':Fairshare=1:\\\n"), "line 5", "cut off"),
    ];
    for (dump, line, problem) in cases {
        for command in ["plan", "import", "fairshare"] {
            let (status, _, stderr) = match command {
                "plan" => {
                    let (status, stdout, stderr, script) = plan(dir.path(), &dump);
                    assert!(script.is_none());
                    (status, stdout, stderr)
                }
                "import" => import(dir.path(), &dump),
                _ => {
                    let tree = write(dir.path(), "dump.cfg", &dump);
                    let usage = write(dir.path(), "usage.csv", "a,,1\n");
                    allot(&["fairshare", s(&tree), "--usage", s(&usage)])
                }
            };
            assert_eq!(status, 1, "{command} {dump:?}");
            assert!(stderr.contains(line) && stderr.contains(problem), "{command} {dump:?}: {stderr}");
        }
    }
}

/// A chain of `depth` accounts, each the parent of the next, a user at the bottom.
fn chain(depth: usize) -> String {
    let mut dump = String::from("Cluster - 'lab'\nParent - 'root'\nAccount - 'a0':Fairshare=1\n");
    for i in 1..depth {
        dump.push_str(&format!("Parent - 'a{}'\nAccount - 'a{i}':Fairshare=1\n", i - 1));
    }
    dump.push_str(&format!(
        "Parent - 'a{}'\nUser - 'alice':DefaultAccount='a{}':Fairshare=1\n",
        depth - 1,
        depth - 1
    ));
    dump
}

#[test]
fn a_4000_deep_chain_is_refused_at_once_by_plan_import_and_fairshare() {
    let dir = tempfile::tempdir().unwrap();
    let dump = chain(4000);
    let started = Instant::now();
    let (status, _, stderr, _) = plan(dir.path(), &dump);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 131: account `a64` is 65 levels below root"), "{stderr}");
    let (status, _, stderr) = import(dir.path(), &dump);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 131"), "{stderr}");
    let usage = write(dir.path(), "usage.csv", "a0,,1\n");
    let tree = write(dir.path(), "dump.cfg", &dump);
    let (status, _, stderr) = allot(&["fairshare", s(&tree), "--usage", s(&usage)]);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 131"), "{stderr}");
    // The quadratic walks this replaces took 35 s for each command in a release build.
    assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
}

#[test]
fn a_chain_at_the_limit_runs_plan_and_fairshare() {
    let dir = tempfile::tempdir().unwrap();
    let dump = chain(64);
    let (status, stdout, stderr, script) = plan(dir.path(), &dump);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("65 to destroy"), "64 accounts and alice: {stdout}");
    assert_eq!(script.unwrap().lines().filter(|l| l.starts_with("sacctmgr -i delete account")).count(), 64);
    let usage = write(dir.path(), "usage.csv", "a63,alice,10\n");
    let tree = write(dir.path(), "dump.cfg", &dump);
    let (status, stdout, stderr) = allot(&["fairshare", s(&tree), "--usage", s(&usage)]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.lines().any(|l| l.starts_with(&format!("{}a63|alice|", " ".repeat(65)))), "{stdout}");
    let (status, _, stderr) = import(dir.path(), &dump);
    assert_eq!(status, 1);
    assert!(stderr.contains("\"a32\" is 33 levels deep; budgets nest at most 32 projects"), "{stderr}");
}

#[test]
fn a_huge_dump_is_refused_before_it_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "allot.kdl", BUDGET);
    let live = dir.path().join("huge.cfg");
    // Sparse: no disk used, and allot reads no more than its limit plus one byte.
    std::fs::File::create(&live).unwrap().set_len(1 << 30).unwrap();
    let (status, _, stderr) = allot(&["plan", "slurm", s(dir.path()), "--live", s(&live)]);
    assert_eq!(status, 1);
    assert!(stderr.contains("has 1073741824 bytes; allot reads at most 64 MiB"), "{stderr}");
}

#[test]
fn a_dump_on_standard_input_reads_as_the_same_dump_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let dump = "Cluster - 'lab'\nParent - 'root'\nAccount - 'vision':Fairshare=3\n\
        Parent - 'vision'\nUser - 'alice':Fairshare=1\n";
    let from_file = import(dir.path(), dump);
    assert_eq!(from_file.0, 0, "{from_file:?}");
    assert!(from_file.1.contains("vision"), "{}", from_file.1);
    let from_stdin = Allot::new(["import", "slurm", "-", "--gpus", "8"]).stdin(dump).run();
    assert_eq!(from_stdin, from_file);
    // Standard input is read within the same bounds: text only.
    let (status, _, stderr) =
        Allot::new(["import", "slurm", "-", "--gpus", "8"]).stdin(vec![0xff, 0xfe]).run();
    assert_eq!(status, 1);
    assert!(stderr.starts_with("error: -: "), "{stderr}");
}

#[cfg(unix)]
#[test]
fn a_dump_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "allot.kdl", BUDGET);
    let fifo = dir.path().join("fifo.cfg");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let (status, _, stderr) = allot(&["plan", "slurm", s(dir.path()), "--live", s(&fifo)]);
    assert_eq!(status, 1);
    assert!(stderr.contains("not a regular file"), "{stderr}");
    let (status, _, stderr) = allot(&["import", "slurm", s(&fifo), "--gpus", "8"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

#[test]
fn names_a_shell_would_read_are_refused_at_their_line_and_no_script_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // Names a shell would read cannot come from a dump at all (the plan's script quotes
    // every word again, as its unit tests show, in case one did).
    for (dump, line) in [
        (
            "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\nAccount - '$(reboot)':Fairshare=1\n",
            4,
        ),
        (
            "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Fairshare=1\nParent - 'a'\nUser - '`id`':DefaultAccount='a'\n",
            5,
        ),
        ("Cluster - 'lab'\nParent - 'root'\nAccount - 'x;rm':Fairshare=1\n", 3),
    ] {
        let (status, _, stderr, script) = plan(dir.path(), dump);
        assert_eq!(status, 1, "{stderr}");
        assert!(
            stderr.contains(&format!("line {line}")) && stderr.contains("cannot be a Slurm name"),
            "{stderr}"
        );
        assert!(script.is_none(), "no script is written");
    }
}
