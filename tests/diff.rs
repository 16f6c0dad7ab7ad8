//! `allot diff` and `allot owners` on small git repositories whose commits make the changes
//! managers make: a share, a move, a rename, an added include, a contract. Every format is
//! snapshotted; bad revisions and missing files give clear errors.

use std::path::Path;

mod common;

use common::{allot_in as allot, git, snapshots};

const BASE: &str = r#"cluster main gpus=64 gpu-type=h100 gpus-per-node=8 {
    slurm cluster=lab
    kubernetes kueue
}

contract debug min-runtime="0s" max-runtime="2h"
contract batch min-runtime="1h" resumable=#true default=#true

project research share="60%" {
    owners "@org/research-leads"
    project vision share="50%" {
        users alice bob
    }
    project nlp share="40%" {
        users carol
    }
}
project platform share="30%" {
    owners "@org/platform"
    include "teams/infra.kdl"
}
"#;

const INFRA: &str =
    "project ci share=\"45%\" {\n    users dan\n}\nproject kernels share=\"40%\" {\n    users erin\n}\n";

fn commit(dir: &Path, files: &[(&str, &str)], message: &str) {
    for (path, text) in files {
        let path = dir.join("budgets").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

/// A repository with one commit per kind of change, oldest first.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    commit(dir.path(), &[("allot.kdl", BASE), ("teams/infra.kdl", INFRA)], "base");
    let share = BASE.replace("project vision share=\"50%\"", "project vision share=\"55%\"");
    commit(dir.path(), &[("allot.kdl", &share)], "share");
    let moved = share.replace("    project nlp share=\"40%\" {\n        users carol\n    }\n", "").replace(
        "    include \"teams/infra.kdl\"\n",
        "    include \"teams/infra.kdl\"\n    project nlp share=\"10%\" {\n        users carol\n    }\n",
    );
    commit(dir.path(), &[("allot.kdl", &moved)], "move");
    commit(
        dir.path(),
        &[("teams/infra.kdl", &INFRA.replace("project kernels", "project compilers"))],
        "rename",
    );
    let included = moved.replace(
        "    include \"teams/infra.kdl\"\n",
        "    include \"teams/infra.kdl\"\n    include \"teams/data.kdl\"\n",
    );
    commit(
        dir.path(),
        &[
            ("allot.kdl", &included),
            (
                "teams/data.kdl",
                "project pipelines share=\"5%\" {\n    owners \"@org/data\"\n    users fay\n}\n",
            ),
        ],
        "include",
    );
    let contract = included.replace(
        "contract debug min-runtime=\"0s\" max-runtime=\"2h\"",
        "contract debug min-runtime=\"0s\" max-runtime=\"4h\" max-gpus=8",
    );
    commit(dir.path(), &[("allot.kdl", &contract)], "contract");
    dir
}

#[test]
fn each_change_in_each_format() {
    let _guard = snapshots();
    let repo = repository();
    let steps = ["share", "move", "rename", "include", "contract"];
    for (i, step) in steps.iter().enumerate() {
        let (base, head) = (format!("HEAD~{}", steps.len() - i), format!("HEAD~{}", steps.len() - i - 1));
        for format in ["human", "markdown", "json", "github"] {
            let (status, stdout, stderr) = allot(
                repo.path(),
                &[
                    "diff",
                    "budgets",
                    "--against",
                    &base,
                    "--head",
                    &head,
                    "--format",
                    format,
                    "--detailed-exitcode",
                ],
            );
            assert_eq!(status, 2, "{step}/{format}: {stderr}");
            insta::assert_snapshot!(format!("diff-{step}-{format}"), stdout);
        }
    }
}

#[test]
fn moves_and_renames_are_detected_not_shown_as_remove_and_add() {
    let repo = repository();
    let (_, moved, _) = allot(
        repo.path(),
        &["diff", "budgets", "--against", "HEAD~4", "--head", "HEAD~3", "--format", "json"],
    );
    let moved: serde_json::Value = serde_json::from_str(&moved).unwrap();
    assert_eq!(moved["changes"][0]["kind"], "moved");
    assert_eq!(moved["changes"][0]["subject"], "project platform/nlp");
    // Leaving research is research's leads' call, joining platform is platform's.
    assert_eq!(moved["changes"][0]["approvers"], serde_json::json!(["@org/platform", "@org/research-leads"]));
    let (_, renamed, _) = allot(
        repo.path(),
        &["diff", "budgets", "--against", "HEAD~3", "--head", "HEAD~2", "--format", "json"],
    );
    let renamed: serde_json::Value = serde_json::from_str(&renamed).unwrap();
    assert_eq!(renamed["changes"][0]["kind"], "renamed");
    assert_eq!(renamed["changes"][0]["source"]["file"], "budgets/teams/infra.kdl");
}

#[test]
fn the_working_tree_is_the_default_head_and_native_diffs_show_target_files() {
    let repo = repository();
    let file = repo.path().join("budgets/allot.kdl");
    let text = std::fs::read_to_string(&file).unwrap().replace("users carol", "users carol gus");
    std::fs::write(&file, text).unwrap();
    let (status, stdout, _) = allot(repo.path(), &["diff", "budgets", "--against", "HEAD", "--native"]);
    assert_eq!(status, 0);
    assert!(
        stdout.contains("users: carol -> carol, gus") && stdout.contains("approve: @org/platform"),
        "{stdout}"
    );
    assert!(stdout.contains("+++ b/slurm/lab.cfg") && stdout.contains("+User - 'gus'"), "{stdout}");
    let (status, stdout, _) = allot(
        repo.path(),
        &["diff", "budgets", "--against", "HEAD", "--head", "HEAD", "--detailed-exitcode"],
    );
    assert_eq!((status, stdout.trim()), (0, "No changes."));
}

#[test]
fn bad_revisions_and_files_are_clear_errors() {
    let repo = repository();
    let (status, _, stderr) = allot(repo.path(), &["diff", "budgets", "--against", "no-such-branch"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("unknown revision `no-such-branch`"), "{stderr}");

    commit(repo.path(), &[("allot.kdl", "cluster main gpus=64 gpu-type=h100 {\n")], "broken");
    let (status, _, stderr) = allot(
        repo.path(),
        &["diff", "budgets", "--against", "HEAD", "--head", "HEAD", "--diagnostics", "plain"],
    );
    assert_eq!(status, 1);
    assert!(stderr.contains("HEAD:budgets/allot.kdl") && stderr.contains("allot::syntax::kdl"), "{stderr}");

    std::fs::create_dir(repo.path().join("elsewhere")).unwrap();
    let (status, _, stderr) =
        allot(repo.path(), &["diff", "elsewhere", "--against", "HEAD~1", "--diagnostics", "plain"]);
    assert_eq!(status, 1);
    assert!(
        stderr.contains("allot::source::unreadable") && stderr.contains("HEAD~1:elsewhere/allot.kdl"),
        "{stderr}"
    );
    let (status, _, stderr) = allot(repo.path(), &["diff", "nowhere", "--against", "HEAD~1"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("nowhere: no such folder"), "{stderr}");

    let outside = tempfile::tempdir().unwrap();
    let (status, _, stderr) = allot(outside.path(), &["diff", ".", "--against", "HEAD"]);
    assert_eq!(status, 1);
    assert!(stderr.contains("not inside a git repository"), "{stderr}");
}

#[test]
fn owners_writes_codeowners_for_included_files() {
    let repo = repository();
    let (status, stdout, stderr) = allot(repo.path(), &["owners", "budgets"]);
    assert_eq!(status, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines, ["/budgets/teams/data.kdl @org/data", "/budgets/teams/infra.kdl @org/platform"]);
}
