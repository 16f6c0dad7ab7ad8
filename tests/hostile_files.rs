//! Hostile files, built by each test in a temporary folder (links, named pipes, links to
//! `/dev/zero`, sparse giant files, pathological nesting, endless trace rows): allot reads
//! only what belongs to the repository, only regular files, never more than its limits,
//! and says why, with a clear error instead of a hang, a crash or a leak of the text.
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use crate::common::{Allot, git};

const BASE: &str =
    "cluster main gpus=8 gpu-type=h100 gpus-per-node=8\ncontract batch min-runtime=\"1h\" default=#true\n";
const SECRET: &str = "SECRET-TOKEN-d41d8cd98f00b204";

/// Nothing here may hang: each run is stopped (and failed) after a minute.
const LIMIT: Duration = Duration::from_secs(60);

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// A repository whose `allot.kdl` includes `target`.
fn including(target: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("allot.kdl"),
        &format!("{BASE}project p share=1 {{\n    include \"{target}\"\n}}\n"),
    );
    dir
}

fn check(dir: &Path) -> (i32, String) {
    let (status, _, stderr) =
        Allot::new(["check", ".", "--diagnostics", "plain"]).dir(dir).within(LIMIT).run();
    (status, stderr)
}

#[test]
fn an_include_through_a_link_out_of_the_repository_is_refused_and_not_shown() {
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("x.kdl"), &format!("password {SECRET} = = =\n"));
    let repo = including("teams/x.kdl");
    symlink(outside.path(), repo.path().join("teams")).unwrap();
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::include::outside"), "{stderr}");
    assert!(stderr.contains("leads outside the repository"), "{stderr}");
    assert!(!stderr.contains(SECRET), "the linked file's text leaked:\n{stderr}");

    // The entry file itself is held to the same rule.
    let repo = tempfile::tempdir().unwrap();
    symlink(outside.path().join("x.kdl"), repo.path().join("allot.kdl")).unwrap();
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::source::unreadable") && !stderr.contains(SECRET), "{stderr}");
}

#[test]
fn nothing_in_git_folders_is_read_by_path_or_by_link() {
    let repo = including("x.kdl");
    git(repo.path(), &["init", "-q"]);
    let config = repo.path().join(".git/config");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}[credential]\n\ttoken = {SECRET}\n")).unwrap();
    symlink(".git/config", repo.path().join("x.kdl")).unwrap();
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::include::outside") && stderr.contains("`.git`"), "{stderr}");
    assert!(!stderr.contains(SECRET), "the git config leaked:\n{stderr}");

    let repo_direct = including(".git/config");
    let (status, stderr) = check(repo_direct.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(
        stderr.contains("allot::include::outside") && stderr.contains("names a `.git` folder"),
        "{stderr}"
    );
}

#[test]
fn devices_pipes_and_giant_files_are_refused_without_reading_them() {
    let repo = tempfile::tempdir().unwrap();
    symlink("/dev/zero", repo.path().join("allot.kdl")).unwrap();
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::source::unreadable") && stderr.contains("to /dev/zero"), "{stderr}");

    let repo = including("fifo.kdl");
    mkfifo(&repo.path().join("fifo.kdl"));
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::include::missing") && stderr.contains("named pipe"), "{stderr}");

    // A sparse 4 GiB file: refused by its size, before a byte of it is read.
    let repo = including("huge.kdl");
    std::fs::File::create(repo.path().join("huge.kdl")).unwrap().set_len(4 << 30).unwrap();
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(
        stderr.contains("allot::size::file-too-large") && stderr.contains("4294967296 bytes"),
        "{stderr}"
    );
}

#[test]
fn deep_block_comments_are_a_diagnostic_not_a_crash() {
    let repo = tempfile::tempdir().unwrap();
    write(&repo.path().join("allot.kdl"), &format!("{BASE}{}{}\n", "/*".repeat(4000), "*/".repeat(4000)));
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::size::too-deep") && stderr.contains("block comments nest"), "{stderr}");

    write(&repo.path().join("allot.kdl"), &format!("{BASE}/*{}*/\n", "* ".repeat(50_000)));
    let (status, stderr) = check(repo.path());
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("allot::size::too-deep") && stderr.contains("block comment holds"), "{stderr}");
}

#[test]
fn links_and_submodules_in_a_git_revision_are_named() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    write(&dir.path().join("outside.kdl"), "project x share=1\n");
    write(&dir.path().join("budgets/allot.kdl"), &format!("{BASE}include \"x.kdl\"\n"));
    symlink("../outside.kdl", dir.path().join("budgets/x.kdl")).unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "a link"]);
    let (status, _, stderr) =
        Allot::new(["diff", "budgets", "--against", "HEAD", "--head", "HEAD", "--diagnostics", "plain"])
            .dir(dir.path())
            .within(LIMIT)
            .run();
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("HEAD:budgets/x.kdl") && stderr.contains("is a symbolic link"), "{stderr}");
    assert!(!stderr.contains("outside.kdl` is not"), "the link's text was parsed:\n{stderr}");

    // A submodule (a gitlink) where the included file's folder should be.
    write(&dir.path().join("budgets/allot.kdl"), &format!("{BASE}include \"teams/a.kdl\"\n"));
    std::fs::remove_file(dir.path().join("budgets/x.kdl")).unwrap();
    git(dir.path(), &["add", "-A"]);
    let head = String::from_utf8(
        std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(dir.path())
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    git(
        dir.path(),
        &["update-index", "--add", "--cacheinfo", &format!("160000,{},budgets/teams", head.trim())],
    );
    git(dir.path(), &["commit", "-q", "-m", "a submodule"]);
    let (status, _, stderr) =
        Allot::new(["diff", "budgets", "--against", "HEAD", "--head", "HEAD", "--diagnostics", "plain"])
            .dir(dir.path())
            .within(LIMIT)
            .run();
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("its folder budgets/teams is a git") && stderr.contains("submodule"), "{stderr}");
}

const TRACE_BUDGETS: &str = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\ncontract batch min-runtime=\"1h\" default=#true\nproject a share=1\n";

/// A budget repository with `trace` as its trace.csv.
fn traced(trace: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("allot.kdl"), TRACE_BUDGETS);
    write(&dir.path().join("trace.csv"), trace);
    dir
}

fn audit(dir: &Path, trace: &str, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["replay", "audit", ".", "--trace", trace, "--format", "json"];
    args.extend_from_slice(extra);
    Allot::new(&args).dir(dir).within(LIMIT).run()
}

#[test]
fn traces_that_are_pipes_devices_or_links_out_of_their_folder_are_refused() {
    let dir = traced("id,project,gpus,submit,start,end\n1,a,1,0,0,10\n");
    mkfifo(&dir.path().join("fifo.csv"));
    let (status, _, stderr) = audit(dir.path(), "fifo.csv", &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("fifo.csv: is a named pipe (FIFO), not a regular file"), "{stderr}");

    symlink("/dev/zero", dir.path().join("zero.csv")).unwrap();
    let (status, _, stderr) = audit(dir.path(), "zero.csv", &["--trace-format", "csv"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("is a character device"), "{stderr}");

    let folder = dir.path().join("itp");
    write(&folder.join("a.csv"), "job_id,submission_time,duration,num_gpu\nx,5,100,1\n");
    symlink(dir.path().join("trace.csv"), folder.join("b.csv")).unwrap();
    let (status, _, stderr) = audit(dir.path(), "itp", &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("b.csv: is a symbolic link that leads outside the trace folder"), "{stderr}");
}

#[test]
fn trace_memory_is_bounded_by_the_trace_content() {
    // A row that ends at the end of i64: an error naming the row, not gigabytes of windows.
    let dir = traced(&format!("id,project,gpus,submit,start,end\n1,a,1,0,0,{}\n", i64::MAX));
    let (status, _, stderr) = audit(dir.path(), "trace.csv", &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 2: time 9223372036854775807 is outside years -9999 to 9999"), "{stderr}");

    // Two jobs 8,000 years apart in one-second windows: the idle years are not walked.
    let far = 8000 * 365 * 86_400_i64;
    let dir =
        traced(&format!("id,project,gpus,submit,start,end\n1,a,1,0,0,2\n2,a,1,{far},{far},{}\n", far + 1));
    let (status, stdout, stderr) = audit(dir.path(), "trace.csv", &["--window", "1s"]);
    assert_eq!(status, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["windows"].as_array().unwrap().len(), 3, "only the windows with activity");

    // A job running for 30 years in one-second windows: activity in every one.
    let dir = traced("id,project,gpus,submit,start,end\n1,a,1,0,0,1000000000\n");
    let (status, _, stderr) = audit(dir.path(), "trace.csv", &["--window", "1s"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("activity in more than 100000 windows of 1 s"), "{stderr}");

    // A 4 MiB row is not gathered whole.
    let dir = traced(&format!("id,project,gpus,submit,start,end\n1,a,1,0,0,10\n2,{}\n", "a".repeat(4 << 20)));
    let (status, _, stderr) = audit(dir.path(), "trace.csv", &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 3: the row is longer than 1 MiB"), "{stderr}");
}

#[test]
fn dumps_and_usage_files_must_be_regular_files_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("dump.cfg"));
    let (status, _, stderr) =
        Allot::new(["import", "slurm", "dump.cfg", "--gpus", "8"]).dir(dir.path()).within(LIMIT).run();
    assert_eq!(status, 1);
    assert!(stderr.contains("dump.cfg: is a named pipe (FIFO), not a regular file"), "{stderr}");

    symlink("/dev/zero", dir.path().join("usage.csv")).unwrap();
    let slurm = TRACE_BUDGETS.replace("gpus-per-node=10\n", "gpus-per-node=10 {\n    slurm cluster=lab\n}\n");
    write(&dir.path().join("budgets/allot.kdl"), &slurm);
    let (status, _, stderr) =
        Allot::new(["fairshare", "budgets", "--usage", "usage.csv"]).dir(dir.path()).within(LIMIT).run();
    assert_eq!(status, 1);
    assert!(stderr.contains("usage.csv: is a character device"), "{stderr}");

    let big = dir.path().join("big.cfg");
    std::fs::File::create(&big).unwrap().set_len(65 << 20).unwrap();
    let (status, _, stderr) =
        Allot::new(["import", "slurm", "big.cfg", "--gpus", "8"]).dir(dir.path()).within(LIMIT).run();
    assert_eq!(status, 1);
    assert!(stderr.contains("big.cfg: has 68157440 bytes; allot reads at most 64 MiB"), "{stderr}");
}

#[test]
fn a_storm_of_diagnostics_is_counted_not_rendered() {
    // 20,000 unknown nodes: every one is counted, the first 200 are shown (rendering each
    // with its source took minutes and gigabytes at 100,000).
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("allot.kdl"), &format!("{BASE}{}", "a;".repeat(20_000)));
    let (status, _, stderr) =
        Allot::new(["check", "--diagnostics", "plain"]).dir(dir.path()).within(LIMIT).run();
    assert_eq!(status, 1);
    assert_eq!(
        stderr.matches("help: known here").count(),
        200,
        "{}",
        &stderr[stderr.len().saturating_sub(500)..]
    );
    assert!(stderr.contains("19800 diagnostics not shown (`--diagnostics json` lists them all)"), "{stderr}");
    assert!(stderr.contains("allot.kdl: 20000 errors, 0 warnings"), "{stderr}");
    let (_, _, json) = Allot::new(["check", "--diagnostics", "json"]).dir(dir.path()).within(LIMIT).run();
    assert_eq!(json.lines().filter(|l| l.starts_with('{')).count(), 20_000);
}
