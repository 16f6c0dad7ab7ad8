//! End-to-end tests of the command line on the shipped examples.

use serde_json::Value;

use crate::common::{Allot, allot, root, snapshots};

const EXAMPLES: &[&str] = &[
    "published-case",
    "university-hpc",
    "kubernetes-platform",
    "hadoop-analytics",
    "itp-replay",
    "itp-simulate",
    "itp-hierarchy",
    "itp-debug",
];

#[test]
fn examples_check_clean_and_show_their_tree() {
    let _guard = snapshots();
    for name in EXAMPLES {
        let path = format!("examples/{name}");
        let (status, stdout, stderr) = allot(&["check", &path]);
        assert_eq!(status, 0, "{name}: {stderr}");
        assert!(stdout.starts_with("ok: ") && stdout.contains("0 errors, 0 warnings"), "{name}: {stdout}");
        assert!(stderr.is_empty(), "{name}: {stderr}");

        let (status, tree, stderr) = allot(&["tree", &path]);
        assert_eq!(status, 0, "{stderr}");
        insta::assert_snapshot!(format!("tree-{name}"), tree);
    }
}

#[test]
fn examples_are_formatted() {
    for name in EXAMPLES {
        let (status, stdout, stderr) = allot(&["fmt", "--check", &format!("examples/{name}")]);
        assert_eq!(status, 0, "{name} needs `allot fmt`: {stdout}{stderr}");
    }
}

/// Walks a project of the exported JSON, checking every cluster's numbers against its
/// parent's.
fn check_project(project: &Value, cluster: &str, parent_effective: f64) {
    let a = &project["clusters"][cluster];
    if a.is_null() {
        return;
    }
    let effective = a["effective_share"].as_f64().unwrap();
    let normalized = a["normalized_share"].as_f64().unwrap();
    assert!((effective - parent_effective * normalized).abs() < 1e-12, "{}", project["path"]);
    let children = project["children"].as_array().unwrap();
    if !children.is_empty() {
        let sum: u64 =
            children.iter().filter_map(|c| c["clusters"][cluster]["guaranteed_gpus"].as_u64()).sum();
        let rest = a["unallocated_gpus"].as_u64().unwrap();
        assert_eq!(sum + rest, a["guaranteed_gpus"].as_u64().unwrap(), "{}", project["path"]);
    }
    for child in children {
        check_project(child, cluster, effective);
    }
}

#[test]
fn exported_shares_multiply_out_and_gpus_add_up() {
    for name in EXAMPLES {
        let (status, stdout, stderr) = allot(&["export", &format!("examples/{name}")]);
        assert_eq!(status, 0, "{stderr}");
        let model: Value = serde_json::from_str(&stdout).unwrap();
        for cluster in model["clusters"].as_array().unwrap() {
            let name = cluster["name"].as_str().unwrap();
            let top: u64 = model["projects"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p["clusters"][name]["guaranteed_gpus"].as_u64())
                .sum();
            // What the contracts' reserves hold on every cluster is no budget's.
            let reserved: u64 = model["contracts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["reserve_gpus"].as_u64())
                .sum();
            assert_eq!(
                top + cluster["unallocated_gpus"].as_u64().unwrap() + reserved,
                cluster["gpus"].as_u64().unwrap()
            );
            for project in model["projects"].as_array().unwrap() {
                check_project(project, name, 1.0);
            }
        }
    }
}

#[test]
fn the_export_format_is_stable() {
    let _guard = snapshots();
    let (status, stdout, stderr) = allot(&["export", "examples/kubernetes-platform"]);
    assert_eq!(status, 0, "{stderr}");
    insta::assert_snapshot!("export-kubernetes-platform", stdout);
}

#[test]
fn the_published_case_divides_jupiter_as_written() {
    let (_, stdout, _) = allot(&["export", "examples/published-case"]);
    let model: Value = serde_json::from_str(&stdout).unwrap();
    let olmo = &model["projects"][0];
    let pretrain = &olmo["children"][0];
    assert_eq!(pretrain["path"], "olmo/pretrain");
    // 35% of 50% of jupiter's 1,024 GPUs: 17.5%, 179.2 GPUs.
    let a = &pretrain["clusters"]["jupiter"];
    assert!((a["effective_share"].as_f64().unwrap() - 0.175).abs() < 1e-12);
    assert_eq!(a["guaranteed_gpus"], 179);
    assert_eq!(olmo["clusters"]["jupiter"]["guaranteed_gpus"], 358);
}

#[test]
fn the_committed_schema_is_fresh_and_exports_conform_to_it() {
    let (status, schema, _) = allot(&["schema"]);
    assert_eq!(status, 0);
    let committed = std::fs::read_to_string(root().join("schema/allot.schema.json")).unwrap();
    assert_eq!(
        committed, schema,
        "schema/allot.schema.json is stale: run `allot schema > schema/allot.schema.json`"
    );
    let validator = jsonschema::validator_for(&serde_json::from_str(&schema).unwrap()).unwrap();
    for name in EXAMPLES {
        let (_, stdout, _) = allot(&["export", &format!("examples/{name}")]);
        let export: Value = serde_json::from_str(&stdout).unwrap();
        let errors: Vec<String> = validator.iter_errors(&export).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}");
    }
}

#[test]
fn a_budget_file_can_be_named_directly() {
    let (status, stdout, _) = allot(&["check", "examples/published-case/allot.kdl"]);
    assert_eq!(status, 0);
    assert!(stdout.contains("3 files"), "{stdout}");
}

#[test]
fn a_missing_repository_is_an_error_not_a_panic() {
    let (status, _, stderr) = allot(&["check", "no/such/folder", "--diagnostics", "plain"]);
    assert_eq!(status, 1);
    assert!(
        stderr.contains("allot::source::unreadable") && stderr.contains("no/such/folder/allot.kdl"),
        "{stderr}"
    );
}

#[test]
fn github_annotations_point_at_the_line() {
    let (status, stdout, _) = allot(&["check", "tests/bad/share-overcommit", "--diagnostics", "github"]);
    assert_eq!(status, 1);
    let line = stdout.lines().find(|l| l.starts_with("::error ")).unwrap_or_default();
    assert!(
        line.starts_with("::error file=tests/bad/share-overcommit/allot.kdl,line=")
            && line.contains("title=allot%3A%3Ashare%3A%3Aovercommit::"),
        "{stdout}"
    );
}

#[test]
fn ci_gets_plain_diagnostics() {
    let output = Allot::new(["check", "tests/bad/share-mixed"]).env("CI", "true").output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("allot::share::mixed") && !stderr.contains('\u{1b}'), "{stderr}");
}

#[test]
fn warnings_fail_only_when_denied() {
    let path = "tests/bad/cluster-partial-node";
    assert_eq!(allot(&["check", path]).0, 0);
    assert_eq!(allot(&["check", path, "--deny-warnings"]).0, 1);
}

#[test]
fn fmt_rewrites_files_in_place_and_keeps_comments() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("teams")).unwrap();
    let entry = "// the pool\ncluster a   gpus=8 gpu-type=h100  // H100s\ncontract b min-runtime=\"1h\"    default=#true\n\n\n\
                 project x share=\"50%\" {   include \"teams/x.kdl\" }\n";
    std::fs::write(dir.path().join("allot.kdl"), entry).unwrap();
    std::fs::write(dir.path().join("teams/x.kdl"), "project   y share=1 /* weight */").unwrap();
    let path = dir.path().to_str().unwrap();

    let (status, stdout, _) = allot(&["fmt", "--check", path]);
    assert_eq!(status, 1);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");

    let (status, _, stderr) = allot(&["fmt", path]);
    assert_eq!(status, 0, "{stderr}");
    let formatted = std::fs::read_to_string(dir.path().join("allot.kdl")).unwrap();
    assert_eq!(
        formatted,
        "// the pool\ncluster a gpus=8 gpu-type=h100 // H100s\ncontract b min-runtime=\"1h\" default=#true\n\n\
         project x share=\"50%\" {\n    include \"teams/x.kdl\"\n}\n"
    );
    let team = std::fs::read_to_string(dir.path().join("teams/x.kdl")).unwrap();
    assert_eq!(team, "project y share=1 /* weight */\n");
    assert_eq!(allot(&["fmt", "--check", path]).0, 0);
    assert_eq!(allot(&["check", path]).0, 0);
}

#[test]
fn fmt_leaves_a_file_alone_rather_than_lose_a_comment() {
    let dir = tempfile::tempdir().unwrap();
    let entry = "cluster a gpus=8 gpu-type=h100 {\n  slurm\n} // the only pool\ncontract b min-runtime=\"1h\" default=#true\n";
    std::fs::write(dir.path().join("allot.kdl"), entry).unwrap();
    let (status, _, stderr) = allot(&["fmt", dir.path().to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(stderr.contains("would lose the comment `// the only pool`"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("allot.kdl")).unwrap(), entry);
}

#[test]
fn the_readme_example_is_true() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = |start: &str| {
        let from = readme.find(start).unwrap() + start.len();
        readme[from..from + readme[from..].find("```").unwrap()].to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), block("```kdl\n")).unwrap();
    let (status, tree, stderr) = allot(&["tree", dir.path().to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(tree, block("$ allot tree\n"));
}

#[test]
fn a_trace_is_read_live_only_from_slurm() {
    // Kueue deletes a finished Workload with its job: there is no trace to read from it.
    let (code, _, err) = allot(&["replay", "audit", "examples/university-hpc", "--live", "kueue"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid value 'kueue' for '--live <LIVE>'"), "{err}");
}
