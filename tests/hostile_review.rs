//! Forging the review (issue 12): a pull request's budget files are untrusted, and what
//! allot makes of them for the reviewer (the Markdown comment, the approvers, CODEOWNERS,
//! the CI log) must say what the change does and nothing the change's author wrote to
//! look like something else. Each hostile input is built here, in a scratch repository.

use std::path::Path;

use serde_json::Value;

use crate::common::{allot_in as allot, git};

const HEADER: &str = "cluster main gpus=64 gpu-type=h100 gpus-per-node=8 {\n    slurm cluster=lab\n}\n\
    contract batch min-runtime=\"1h\" default=#true\n";

/// Writes `files` under `dir/budgets` and commits them.
fn commit(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = dir.join("budgets").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "budgets"]);
}

/// A repository whose first commit holds `files`.
fn repository(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    commit(dir.path(), files);
    dir
}

/// The JSON diagnostics of `allot check` on the repository's budgets.
fn diagnostics(dir: &Path) -> (i32, Vec<Value>) {
    let (status, _, stderr) = allot(dir, &["check", "budgets", "--diagnostics", "json"]);
    (status, stderr.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

#[test]
fn forged_owners_are_refused_at_check_with_their_place() {
    // In KDL, `\n` in a string is a line feed: the first owner would write a fake summary
    // into the comment and open a collapsed block to hide the real changes in.
    let owners = [
        r#""@org/a\n\n**No changes.**\n\n<details><summary>more</summary>""#,
        r#""@everyone""#,
        r#""<img src=x onerror=alert(1)>""#,
        r#""@org/Team""#,
        r#""@org/a\n* @mallory""#,
        r#""ops@example.org""#,
    ];
    let text = format!("{HEADER}project a share=\"50%\" {{\n    owners {}\n}}\n", owners.join(" "));
    let repo = repository(&[("allot.kdl", &text)]);
    let (status, found) = diagnostics(repo.path());
    assert_eq!(status, 1);
    let invalid: Vec<&Value> = found.iter().filter(|d| d["code"] == "allot::owner::invalid").collect();
    assert_eq!(invalid.len(), 5, "{found:?}");
    for d in &invalid {
        assert_eq!(d["file"], "budgets/allot.kdl", "{d}");
        assert_eq!(d["line"], 6, "{d}");
    }
    assert!(invalid[1]["message"].as_str().unwrap().contains("mention of everyone"), "{}", invalid[1]);

    // The plain rendering quotes the owners with their line breaks escaped.
    let (_, _, stderr) = allot(repo.path(), &["check", "budgets", "--diagnostics", "plain"]);
    assert!(stderr.contains(r"the owner `@org/a\n\n**No changes.**"), "{stderr}");
    assert!(!stderr.lines().any(|l| l.starts_with("**No changes")), "{stderr}");
}

/// A base where `research` is owned by `@org/research`, then a head commit.
fn approvers_for(head: &str) -> Vec<(String, Value)> {
    let base = format!(
        "{HEADER}project research share=\"60%\" {{\n    owners \"@org/research\"\n    \
         project vision share=\"50%\" {{\n        users alice\n    }}\n}}\nproject other share=\"30%\"\n"
    );
    let repo = repository(&[("allot.kdl", &base)]);
    std::fs::write(repo.path().join("budgets/allot.kdl"), format!("{HEADER}{head}")).unwrap();
    let (status, stdout, stderr) =
        allot(repo.path(), &["diff", "budgets", "--against", "HEAD", "--format", "json"]);
    assert_eq!(status, 0, "{stderr}");
    let diff: Value = serde_json::from_str(&stdout).unwrap();
    diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["subject"].as_str().unwrap().to_string(), c["approvers"].clone()))
        .collect()
}

#[test]
fn a_change_cannot_name_its_own_approvers() {
    // Mallory makes herself the owner of research, raises vision's share and adds a
    // project under it that she owns: every change is still research's owners' call.
    let head = "project research share=\"60%\" {\n    owners \"@mallory\"\n    \
        project vision share=\"90%\" {\n        users alice mallory\n    }\n    \
        project mine share=\"10%\" {\n        owners \"@mallory\"\n        \
        project deeper share=\"100%\"\n    }\n}\nproject other share=\"30%\"\n";
    let approvers = approvers_for(head);
    let expected = serde_json::json!(["@org/research"]);
    for subject in ["project research", "project research/vision", "project research/mine"] {
        let found = approvers.iter().find(|(s, _)| s == subject).unwrap_or_else(|| panic!("{approvers:?}"));
        assert_eq!(found.1, expected, "{subject}: {approvers:?}");
    }
    // A project new under a new project: owned as its nearest ancestor at the base.
    let deeper = approvers.iter().find(|(s, _)| s == "project research/mine/deeper").unwrap();
    assert_eq!(deeper.1, expected, "{approvers:?}");

    // Taking ownership of an unowned top-level project is the maintainers' call.
    let head = "project research share=\"60%\" {\n    owners \"@org/research\"\n    \
        project vision share=\"50%\" {\n        users alice\n    }\n}\n\
        project other share=\"30%\" {\n    owners \"@mallory\"\n}\n";
    let approvers = approvers_for(head);
    assert_eq!(approvers, [("project other".to_string(), serde_json::json!([]))]);
}

/// Checks that a Markdown report has only the structure allot writes: every table row as
/// many cells as its header, no HTML but allot's own tags, no mention, no link, no
/// heading but allot's.
fn assert_inert(markdown: &str) {
    let cells = |line: &str| line.replace("\\\\", "").replace("\\|", "").matches('|').count();
    let mut columns = None;
    let mut fence: Option<&str> = None;
    let mut outside = String::new();
    for line in markdown.lines() {
        // A code block (the native diffs) shows its lines as they are, and only allot's own
        // fence ends it.
        if let Some(open) = fence {
            if line == open {
                fence = None;
            } else {
                assert!(!line.trim_start().starts_with(open), "a line that closes the block early: {line}");
            }
            continue;
        }
        if line.starts_with("```") {
            fence = Some(line.trim_end_matches("diff"));
            continue;
        }
        outside.push_str(line);
        outside.push('\n');
        if line.starts_with('|') {
            let n = cells(line);
            assert_eq!(
                *columns.get_or_insert(n),
                n,
                "a row with another number of cells: {line}\n{markdown}"
            );
        } else {
            columns = None;
        }
        if line.starts_with('#') {
            assert!(
                ["### allot: budget changes", "#### What moved", "#### Changes", "#### Simulated on "]
                    .iter()
                    .any(|h| line.starts_with(h)),
                "a heading allot did not write: {line}"
            );
        }
    }
    assert!(fence.is_none(), "a code block left open:\n{markdown}");
    let mut rest = outside;
    for tag in ["<br>", "<details>", "</details>", "<summary>", "</summary>", "<!-- allot-report -->"] {
        rest = rest.replace(tag, "");
    }
    assert!(!rest.contains('<'), "HTML that allot did not write:\n{markdown}");
    let unescaped = |c: char| rest.match_indices(c).any(|(i, _)| !rest[..i].ends_with('\\'));
    assert!(!unescaped('['), "a link:\n{markdown}");
    let mention =
        rest.match_indices('@').any(|(i, _)| rest[i + 1..].starts_with(|c: char| c.is_ascii_alphanumeric()));
    assert!(!mention, "a mention:\n{markdown}");
}

#[test]
fn budget_text_stays_text_in_the_markdown_report() {
    let base = format!("{HEADER}project a share=\"50%\" {{\n    owners \"@org/a\"\n    users alice\n}}\n");
    let repo = repository(&[("allot.kdl", &base)]);
    // Member names allow what Slurm allows; each of these is either refused at check or
    // shown as text.
    let hostile = [
        "x|y|z",
        "<img/src=x/onerror=alert(1)>",
        "[approved](https://evil.example)",
        "@org/everyone",
        "**LGTM**",
        "`code`",
        "~~struck~~",
        "&lt;b&gt;",
        "```",
    ];
    for user in hostile {
        let head = base.replace("users alice", &format!("users alice \"{}\"", user.replace('\\', "\\\\")));
        std::fs::write(repo.path().join("budgets/allot.kdl"), &head).unwrap();
        let (status, stdout, stderr) =
            allot(repo.path(), &["diff", "budgets", "--against", "HEAD", "--native", "--format", "markdown"]);
        if status == 1 {
            assert!(stderr.contains("allot::"), "{user}: refused without a diagnostic: {stderr}");
            continue;
        }
        assert_eq!(status, 0, "{user}: {stderr}");
        assert!(stdout.contains("| ~ | project a | users: "), "{user}: {stdout}");
        assert!(stdout.contains("diff\n--- a/slurm/lab.cfg"), "{user}: {stdout}");
        assert_inert(&stdout);
        // The approvers (the base's owners) are named without being mentioned.
        assert!(stdout.contains("@&#8203;org/a"), "{stdout}");
    }
}

#[test]
fn codeowners_paths_are_escaped_and_globs_refused() {
    let owned = |file: &str| {
        format!("{HEADER}project a share=\"50%\" {{\n    owners \"@org/a\"\n    include \"{file}\"\n}}\n")
    };
    let child = "project c share=\"100%\"\n";
    let repo = repository(&[("allot.kdl", &owned("teams/my team #1.kdl")), ("teams/my team #1.kdl", child)]);
    let (status, stdout, stderr) = allot(repo.path(), &["owners", "budgets"]);
    assert_eq!(status, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines, [r"/budgets/teams/my\ team\ \#1.kdl @org/a"]);

    // A file named `*.kdl` would be a rule owning every budget file of the folder.
    for file in ["teams/*.kdl", "teams/[ab].kdl", "teams/a?.kdl"] {
        let repo = repository(&[("allot.kdl", &owned(file)), (file, child)]);
        let (status, stdout, stderr) = allot(repo.path(), &["owners", "budgets"]);
        assert_eq!(status, 1, "{file}: {stdout}");
        assert!(!stdout.lines().any(|l| l.starts_with('/')), "{file}: {stdout}");
        assert!(stderr.contains("cannot write CODEOWNERS") || stderr.contains("allot::"), "{file}: {stderr}");
    }
}

#[test]
fn control_characters_never_reach_the_log_raw() {
    // A raw carriage return (which KDL reads as a line break) and an escape sequence in a
    // name, written as KDL's `\u{1b}`.
    let text = format!(
        "{HEADER}project \"x\\u{{1b}}[2J\" share=\"50%\"\nproject b share=\"10%\" // \r::error::forged\n"
    );
    let repo = repository(&[("allot.kdl", &text)]);
    for format in ["plain", "fancy", "github"] {
        let (status, stdout, stderr) = allot(repo.path(), &["check", "budgets", "--diagnostics", format]);
        assert_eq!(status, 1, "{format}: {stderr}");
        for output in [&stdout, &stderr] {
            assert!(!output.contains(['\r', '\u{1b}']), "{format}: raw control character in\n{output:?}");
            assert!(!output.lines().any(|l| l.starts_with("::error::forged")), "{format}: {output}");
        }
        if format == "plain" {
            assert!(stderr.contains(r"\u{1b}[2J") && stderr.contains(r"\r::error::forged"), "{stderr}");
        }
    }
}
