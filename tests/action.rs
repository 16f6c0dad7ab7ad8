//! The GitHub Action's steps, run here as the runner would run them: `action.yml` is read,
//! each step's `env:` filled from a simulated event, its `run:` executed by bash with the
//! `GITHUB_*` files in a scratch folder, and a fake `gh` standing in for GitHub's API. The
//! install step (a release build) is not run: the test puts the built `allot` on PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{allot_dir, git, root};

const BUDGETS: &str = "cluster main gpus=16 gpu-type=h100 {\n    slurm\n}\ncontract batch min-runtime=\"1h\" default=#true\n\
    project a share=\"60%\" {\n    owners \"@org/a\"\n    users alice\n}\nproject b share=\"40%\"\n";

/// A workspace with one commit, then an uncommitted share change.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("budgets")).unwrap();
    std::fs::write(dir.path().join("budgets/allot.kdl"), BUDGETS).unwrap();
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "base"]);
    std::fs::write(dir.path().join("budgets/allot.kdl"), BUDGETS.replace("\"60%\"", "\"55%\"")).unwrap();
    dir
}

/// Fills `${{ ... }}` from the simulated context.
fn expand(template: &str, context: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").map(|e| start + e + 2).unwrap();
        let key = rest[start + 3..end - 2].trim();
        out.push_str(context.get(key).map(String::as_str).unwrap_or(""));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

struct Runner {
    workspace: tempfile::TempDir,
    temp: tempfile::TempDir,
    steps: Vec<Value>,
    context: BTreeMap<&'static str, String>,
}

impl Runner {
    fn new(inputs: &[(&'static str, &str)]) -> Runner {
        let action: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(root().join("action.yml")).unwrap()).unwrap();
        let steps = action["runs"]["steps"].as_array().unwrap().clone();
        let workspace = workspace();
        let temp = tempfile::tempdir().unwrap();
        let mut context: BTreeMap<&'static str, String> = BTreeMap::new();
        for (name, value) in action["inputs"].as_object().unwrap() {
            let key: &'static str = Box::leak(format!("inputs.{name}").into_boxed_str());
            context.insert(key, value["default"].as_str().unwrap_or("").to_string());
        }
        for (key, value) in inputs {
            context.insert(key, value.to_string());
        }
        context.insert("github.event.pull_request.base.sha", "HEAD".into());
        context.insert("github.event.pull_request.number", "7".into());
        context.insert("github.token", "test-token".into());
        Runner { workspace, temp, steps, context }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    /// Runs the step with this `id`, as the runner would; returns its status and output.
    fn run(&mut self, id: &str) -> (i32, String) {
        let step = self.steps.iter().find(|s| s["id"] == id).unwrap().clone();
        let bin = allot_dir();
        let path = format!(
            "{}:{}:{}",
            self.file("fake-bin").display(),
            bin.display(),
            std::env::var("PATH").unwrap()
        );
        let mut command = Command::new("bash");
        command
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"].as_str().unwrap()])
            .current_dir(self.workspace.path())
            .env("PATH", path)
            .env("GITHUB_ACTION_PATH", root())
            .env("GITHUB_STEP_SUMMARY", self.file("summary.md"))
            .env("GITHUB_OUTPUT", self.file("output"))
            .env("GITHUB_PATH", self.file("path"))
            .env("GITHUB_REPOSITORY", "org/budgets")
            .env("RUNNER_TEMP", self.temp.path())
            .env("NO_COLOR", "1");
        for (key, value) in step["env"].as_object().into_iter().flatten() {
            command.env(key, expand(value.as_str().unwrap_or(""), &self.context));
        }
        let output = command.output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        // The runner turns GITHUB_OUTPUT lines into step outputs.
        for line in std::fs::read_to_string(self.file("output")).unwrap_or_default().lines() {
            if let Some((key, value)) = line.split_once('=') {
                let key: &'static str = Box::leak(format!("steps.{id}.outputs.{key}").into_boxed_str());
                self.context.insert(key, value.to_string());
            }
        }
        (output.status.code().unwrap_or(-1), text)
    }

    /// A fake `gh` that logs its calls and answers the comment listing with `comments`.
    fn fake_gh(&self, comments: &str) {
        fake_gh(self.temp.path(), comments, "{}");
    }
}

/// A fake `gh` in `dir/fake-bin` that logs its calls to `dir/gh.log`, fails `gh api user`
/// (as the workflow's token does), and answers the comment listing with the JSON array
/// `comments` and a pull request with the JSON object `pull`, through the call's `--jq`
/// filter as gh would (with jq, which GitHub's runners have).
fn fake_gh(dir: &Path, comments: &str, pull: &str) {
    let bin = dir.join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(dir.join("comments.json"), comments).unwrap();
    std::fs::write(dir.join("pull.json"), pull).unwrap();
    let script = format!(
        r#"#!/usr/bin/env bash
echo "$*" >> '{dir}/gh.log'
filter=.; previous=
for argument in "$@"; do [ "$previous" = --jq ] && filter="$argument"; previous="$argument"; done
case "$*" in
    "api user"*) echo 'HTTP 403: Resource not accessible by integration' >&2; exit 1 ;;
    *--paginate*) jq -r "$filter" '{dir}/comments.json' ;;
    *"/pulls/"*) jq -r "$filter" '{dir}/pull.json' ;;
esac
"#,
        dir = dir.display()
    );
    std::fs::write(bin.join("gh"), script).unwrap();
    Command::new("chmod").args(["+x", bin.join("gh").to_str().unwrap()]).status().unwrap();
}

/// A comment of the listing GitHub returns: its id, its author's login, its body.
fn comment(id: u64, login: &str, body: &str) -> Value {
    serde_json::json!({ "id": id, "user": { "login": login }, "body": body })
}

#[test]
fn the_steps_check_report_and_comment() {
    let mut runner = Runner::new(&[("inputs.path", "budgets"), ("inputs.comment", "true")]);
    let (status, output) = runner.run("check");
    assert_eq!(status, 0, "{output}");

    let (status, output) = runner.run("diff");
    assert_eq!(status, 0, "{output}");
    let summary = std::fs::read_to_string(runner.file("summary.md")).unwrap();
    assert!(
        summary.contains("### allot: budget changes") && summary.contains("share: 60% -> 55%"),
        "{summary}"
    );
    assert!(summary.contains("<!-- allot-report -->"));
    assert_eq!(runner.context["steps.diff.outputs.has-changes"], "true");
    assert!(runner.context["steps.diff.outputs.summary-file"].ends_with("allot-report.md"));

    runner.fake_gh("[]");
    let (status, output) = runner.run("comment");
    assert_eq!(status, 0, "{output}");
    assert!(output.contains("created a comment"), "{output}");
    let marker = "report\n<!-- allot-report -->\n";
    runner.fake_gh(&serde_json::json!([comment(4242, "github-actions[bot]", marker)]).to_string());
    let (status, output) = runner.run("comment");
    assert_eq!(status, 0, "{output}");
    assert!(output.contains("updated comment 4242"), "{output}");
    let calls = std::fs::read_to_string(runner.file("gh.log")).unwrap();
    assert!(calls.contains("--method POST repos/org/budgets/issues/7/comments"), "{calls}");
    assert!(calls.contains("--method PATCH repos/org/budgets/issues/comments/4242"), "{calls}");
}

#[test]
fn the_comment_step_updates_only_its_own_comment() {
    let mut runner = Runner::new(&[("inputs.path", "budgets"), ("inputs.comment", "true")]);
    let (status, output) = runner.run("diff");
    assert_eq!(status, 0, "{output}");
    // Someone quoted the marker first; the action's own comment comes after.
    let marker = "<!-- allot-report -->";
    let listing = serde_json::json!([
        comment(1, "mallory", &format!("fake report {marker}")),
        comment(2, "github-actions[bot]", "an unrelated bot comment"),
        comment(3, "github-actions[bot]", &format!("report {marker}")),
    ]);
    runner.fake_gh(&listing.to_string());
    let (status, output) = runner.run("comment");
    assert_eq!(status, 0, "{output}");
    assert!(output.contains("updated comment 3"), "{output}");
    let calls = std::fs::read_to_string(runner.file("gh.log")).unwrap();
    assert!(!calls.contains("issues/comments/1") && !calls.contains("issues/comments/2"), "{calls}");

    // Only mallory's comment: a new one, hers untouched.
    runner.fake_gh(&serde_json::json!([comment(1, "mallory", marker)]).to_string());
    let (status, output) = runner.run("comment");
    assert_eq!(status, 0, "{output}");
    assert!(output.contains("created a comment"), "{output}");

    // A GitHub App's token names its login through the comment-author input.
    runner.context.insert("inputs.comment-author", "allot-app[bot]".into());
    runner.fake_gh(&serde_json::json!([comment(5, "allot-app[bot]", marker)]).to_string());
    let (status, output) = runner.run("comment");
    assert_eq!(status, 0, "{output}");
    assert!(output.contains("updated comment 5"), "{output}");
    runner.context.insert("inputs.comment-author", "x\" or true or \"".into());
    let (status, output) = runner.run("comment");
    assert_eq!(status, 1, "{output}");
    assert!(output.contains("not a GitHub login"), "{output}");
}

/// Runs the comment step of `docs/workflows/allot-fork-comment.yml` as the runner would,
/// with the downloaded artifact (`pr-number`, `report.md`) in its folder; a fake `gh`
/// answers that pull request #`pr`'s head is `head`. Returns the status, the output and
/// the calls made.
fn fork_comment(pr: &str, head: &str, run_head: &str, comments: &str) -> (i32, String, String) {
    let workflow: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("docs/workflows/allot-fork-comment.yml")).unwrap(),
    )
    .unwrap();
    let step = workflow["jobs"]["comment"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Post or update the comment")
        .unwrap()
        .clone();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pr-number"), pr).unwrap();
    std::fs::write(dir.path().join("report.md"), "report\n<!-- allot-report -->\n").unwrap();
    fake_gh(dir.path(), comments, &serde_json::json!({ "number": 7, "head": { "sha": head } }).to_string());
    let context: BTreeMap<&str, String> = [
        ("github.token", "test-token".to_string()),
        ("github.repository", "org/budgets".to_string()),
        ("github.event.workflow_run.head_sha", run_head.to_string()),
    ]
    .into();
    let path = format!("{}:{}", dir.path().join("fake-bin").display(), std::env::var("PATH").unwrap());
    let mut command = Command::new("bash");
    command
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"].as_str().unwrap()])
        .current_dir(dir.path())
        .env("PATH", path);
    for (key, value) in step["env"].as_object().into_iter().flatten() {
        command.env(key, expand(value.as_str().unwrap_or(""), &context));
    }
    let output = command.output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let calls = std::fs::read_to_string(dir.path().join("gh.log")).unwrap_or_default();
    (output.status.code().unwrap_or(-1), text, calls)
}

#[test]
fn the_fork_workflow_comments_only_on_the_pull_request_it_reviewed() {
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let (status, output, calls) = fork_comment("7", sha, sha, "[]");
    assert_eq!(status, 0, "{output}");
    assert!(calls.contains("api repos/org/budgets/pulls/7 --jq .head.sha"), "{calls}");
    assert!(calls.contains("--method POST repos/org/budgets/issues/7/comments"), "{calls}");

    // The artifact names another pull request, whose head is another commit.
    let other = "fedcba9876543210fedcba9876543210fedcba98";
    let (status, output, calls) = fork_comment("7", other, sha, "[]");
    assert_eq!(status, 1, "{output}");
    assert!(output.contains("not at"), "{output}");
    assert!(!calls.contains("--method"), "{calls}");

    let (status, _, calls) = fork_comment("7; rm -rf /", sha, sha, "[]");
    assert_eq!(status, 1);
    assert!(calls.is_empty(), "{calls}");

    // Someone else's comment with the marker is not the one to update.
    let listing = serde_json::json!([comment(1, "mallory", "<!-- allot-report -->")]).to_string();
    let (status, output, calls) = fork_comment("7", sha, sha, &listing);
    assert_eq!(status, 0, "{output}");
    assert!(calls.contains("--method POST") && !calls.contains("comments/1"), "{calls}");
}

#[test]
fn a_replay_trace_adds_the_simulation_to_the_report() {
    let mut runner = Runner::new(&[("inputs.path", "budgets"), ("inputs.replay-trace", "trace.csv")]);
    let trace = "id,project,gpus,submit,start,end\na1,a,16,0,0,7200\nb1,b,8,60,60,3660\n";
    std::fs::write(runner.workspace.path().join("trace.csv"), trace).unwrap();
    let (status, output) = runner.run("diff");
    assert_eq!(status, 0, "{output}");
    let summary = std::fs::read_to_string(runner.file("summary.md")).unwrap();
    assert!(summary.contains("### Simulated on trace.csv"), "{summary}");
    assert!(summary.contains("| | HEAD | working tree |") && summary.contains("xychart-beta"), "{summary}");
}

#[test]
fn broken_budgets_become_annotations() {
    let mut runner = Runner::new(&[("inputs.path", "budgets")]);
    let file = runner.workspace.path().join("budgets/allot.kdl");
    std::fs::write(&file, BUDGETS.replace("share=\"40%\"", "share=\"50%\"")).unwrap();
    let (status, output) = runner.run("check");
    assert_eq!(status, 1);
    assert!(
        output.contains("::error file=budgets/allot.kdl,line=9")
            && output.contains("title=allot%3A%3Ashare%3A%3Aovercommit"),
        "{output}"
    );
}

#[test]
fn the_action_never_expands_expressions_inside_run() {
    let action = std::fs::read_to_string(root().join("action.yml")).unwrap();
    let parsed: Value = serde_saphyr::from_str(&action).unwrap();
    for step in parsed["runs"]["steps"].as_array().unwrap() {
        let run = step["run"].as_str().unwrap_or("");
        assert!(!run.contains("${{"), "step {} expands an expression in run: {run}", step["id"]);
    }
}

/// Runs the `due` job's step of `docs/workflows/allot-grants.yml` as the runner would, on
/// budgets whose grant starts `minutes` from now; returns its `due` output.
fn grant_due(minutes: i64) -> String {
    let workflow: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("docs/workflows/allot-grants.yml")).unwrap(),
    )
    .unwrap();
    let steps = workflow["jobs"]["due"]["steps"].as_array().unwrap();
    let step = steps.iter().find(|s| s["id"] == "next").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let from = allot_compiler::units::format_instant((now + minutes * 60) / 60 * 60);
    let granted = BUDGETS.replace(
        "project b share=\"40%\"\n",
        &format!("project b share=\"30%\" {{\n    grant share=\"+10%\" from=\"{from}\" until=\"2999-01-01\" reason=\"r\"\n}}\n"),
    );
    std::fs::create_dir(dir.path().join("budgets")).unwrap();
    std::fs::write(dir.path().join("budgets/allot.kdl"), granted).unwrap();
    let bin = allot_dir();
    let output = Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"].as_str().unwrap()])
        .current_dir(dir.path())
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()))
        .env("GITHUB_OUTPUT", dir.path().join("output"))
        .env("GITHUB_STEP_SUMMARY", dir.path().join("summary"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::read_to_string(dir.path().join("output")).unwrap()
}

#[test]
fn the_grants_workflow_acts_only_when_a_boundary_has_passed_since_its_last_run() {
    // Started 30 minutes ago: within the 70 minutes the hourly run looks back.
    assert_eq!(grant_due(-30), "due=true\n");
    // Started two hours ago: the previous run acted on it.
    assert_eq!(grant_due(-120), "due=false\n");
    // Starts in an hour: the next runs will.
    assert_eq!(grant_due(60), "due=false\n");
}
