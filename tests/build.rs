//! `allot build` end to end: what it writes, that it writes the same bytes again, and
//! that a failed run leaves the previous outputs as they were.

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;

fn allot(args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("allot")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// Every file under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

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
