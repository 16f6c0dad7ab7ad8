//! Every diagnostic code has a bad-input repository under `tests/bad/<area>-<name>/`; this
//! test checks that `allot check` reports that code there, with the right exit code, and
//! snapshots the rendered output in `tests/snapshots/`.

use std::path::{Path, PathBuf};

use allot_compiler::Code;

use crate::common::{allot_in, root, snapshots};

fn bad_dir() -> PathBuf {
    root().join("tests/bad")
}

/// The folder name of a code: `allot::share::mixed` -> `share-mixed`.
fn folder(code: Code) -> String {
    code.as_str().trim_start_matches("allot::").replace("::", "-")
}

/// Cases whose input is generated rather than committed.
fn generated(name: &str, scratch: &Path) -> Option<PathBuf> {
    let base = "cluster main gpus=8 gpu-type=h100\ncontract batch min-runtime=\"1h\" default=#true\n";
    match name {
        "size-file-too-large" => {
            let padding = "// padding\n".repeat(110_000);
            std::fs::write(scratch.join("allot.kdl"), format!("{base}{padding}")).ok()?;
        }
        "size-too-many-files" => {
            // A chain of includes, one file more than allot reads.
            std::fs::write(scratch.join("allot.kdl"), format!("{base}include \"f0.kdl\"\n")).ok()?;
            for i in 0..1000 {
                let text = format!("project p{i} share=1\ninclude \"f{}.kdl\"\n", i + 1);
                std::fs::write(scratch.join(format!("f{i}.kdl")), text).ok()?;
            }
        }
        _ => return None,
    }
    Some(scratch.to_path_buf())
}

fn run(dir: &Path, display: &str, format: &str) -> (i32, String, String) {
    let (status, stdout, stderr) = allot_in(dir, &["check", ".", "--diagnostics", format]);
    (status, stdout, stderr.replace("allot.kdl", &format!("{display}/allot.kdl")))
}

#[test]
fn every_code_has_a_bad_input_that_reports_it() {
    let _guard = snapshots();

    for &code in Code::ALL {
        let name = folder(code);
        let scratch = tempfile_dir();
        let dir = generated(&name, scratch.path()).unwrap_or_else(|| bad_dir().join(&name));
        assert!(dir.join("allot.kdl").exists(), "no bad input for {code}: tests/bad/{name}/allot.kdl");
        let (status, _, stderr) = run(&dir, &format!("tests/bad/{name}"), "plain");
        let warning_only = matches!(code, Code::ClusterPartialNode | Code::GrantExpired);
        assert_eq!(status, if warning_only { 0 } else { 1 }, "{code}: exit status\n{stderr}");
        assert!(stderr.contains(code.as_str()), "{code} not reported:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{code}: panic\n{stderr}");
        insta::assert_snapshot!(name.clone(), stderr);

        // The JSON form names the file and, where the problem has a place, its line.
        let (_, _, json) = run(&dir, &format!("tests/bad/{name}"), "json");
        let first = json
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|d| d["code"] == code.as_str())
            .unwrap_or_else(|| panic!("{code}: no JSON diagnostic in\n{json}"));
        assert!(first["file"].is_string(), "{code}: no file in {first}");
        if code != Code::SourceUnreadable && code != Code::SizeFileTooLarge {
            assert!(first["line"].as_u64().is_some_and(|l| l >= 1), "{code}: no line in {first}");
        }
    }
}

#[test]
fn declared_overcommit_is_a_warning() {
    let (status, stdout, stderr) = run(&bad_dir().join("share-overcommit-declared"), "x", "plain");
    assert_eq!(status, 0, "{stderr}");
    assert!(stderr.contains("allot::share::overcommit") && stderr.contains("overcommit declared here"));
    assert!(stdout.contains("1 warning"), "{stdout}");
}

#[test]
fn every_bad_input_folder_belongs_to_a_code() {
    let codes: Vec<String> = Code::ALL.iter().map(|&c| folder(c)).collect();
    for entry in std::fs::read_dir(bad_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let known = codes.contains(&name) || name == "share-overcommit-declared";
        assert!(known, "tests/bad/{name} matches no diagnostic code");
    }
}

#[test]
fn every_code_is_documented() {
    let docs = std::fs::read_to_string(root().join("docs/diagnostics.md")).unwrap();
    for code in Code::ALL {
        assert!(docs.contains(&format!("### `{code}`")), "{code} is not documented in docs/diagnostics.md");
    }
}

fn tempfile_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
