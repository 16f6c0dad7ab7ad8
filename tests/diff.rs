//! `allot diff` and `allot owners` on small git repositories whose commits make the changes
//! managers make: a share, a move, a rename, an added include, a contract. Every format is
//! snapshotted; bad revisions and missing files give clear errors.

use std::path::Path;

use crate::common::{allot_in as allot, git, snapshots};

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
fn a_grant_shows_with_its_dates_and_the_shares_at_its_boundaries() {
    let _guard = snapshots();
    let repo = repository();
    let text = std::fs::read_to_string(repo.path().join("budgets/allot.kdl")).unwrap();
    let granted = text.replace(
        "        users alice bob\n",
        "        users alice bob\n        grant share=\"+10%\" from=\"2099-01-10\" until=\"2099-02-01\" reason=\"CVPR deadline\"\n",
    );
    commit(repo.path(), &[("allot.kdl", &granted)], "grant");
    let diff = |format: &str| {
        let args = [
            "diff",
            "budgets",
            "--against",
            "HEAD~1",
            "--head",
            "HEAD",
            "--at",
            "2099-01-01",
            "--format",
            format,
        ];
        let (status, stdout, stderr) = allot(repo.path(), &args);
        assert_eq!(status, 0, "{stderr}");
        stdout
    };
    // Now nothing moves; on 2099-01-10 vision holds 65% of research's 60% of 64 GPUs: 25
    // (24.96) against 55%'s 21 (21.12); nlp keeps 40%, 15. Its end (2099-02-01) is beyond
    // the 30 days.
    insta::assert_snapshot!("diff-grant-human", diff("human"));
    insta::assert_snapshot!("diff-grant-markdown", diff("markdown"));
    let json: serde_json::Value = serde_json::from_str(&diff("json")).unwrap();
    let change = &json["changes"][0];
    assert_eq!(change["subject"], "project research/vision");
    assert_eq!(change["details"][0]["field"], "grants");
    assert_eq!(change["details"][0]["after"], "+10% from 2099-01-10 until 2099-02-01 (CVPR deadline)");
    assert_eq!(change["approvers"], serde_json::json!(["@org/research-leads"]));
    assert_eq!(json["share_moves"], serde_json::json!([]));
    let later = &json["grant_boundaries"];
    assert_eq!(later.as_array().unwrap().len(), 1, "{later}");
    assert_eq!(later[0]["at"], "2099-01-10");
    let vision = &later[0]["share_moves"][0];
    assert_eq!((&vision["project"], &vision["cluster"]), (&"research/vision".into(), &"main".into()));
    assert_eq!(
        (&vision["before"]["guaranteed_gpus"], &vision["after"]["guaranteed_gpus"]),
        (&21.into(), &25.into())
    );
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

/// Copies a folder, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// examples/published-case committed, then the issue's change in the working tree: `olmo`
/// 35% to 30%, `tulu` 20% to 25%, `tulu/sft` 35% to 30%.
fn published_case_change() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    copy_dir(&crate::common::root().join("examples/published-case"), &dir.path().join("budgets"));
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "base"]);
    let file = dir.path().join("budgets/allot.kdl");
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("project olmo share=\"35%\"", "project olmo share=\"30%\"")
        .replace("project tulu share=\"20%\"", "project tulu share=\"25%\"")
        .replace("project sft share=\"35%\"", "project sft share=\"30%\"");
    std::fs::write(file, text).unwrap();
    dir
}

fn diff_in(repo: &Path, format: &str) -> String {
    let (status, stdout, stderr) =
        allot(repo, &["diff", "budgets", "--against", "HEAD", "--format", format, "--detailed-exitcode"]);
    assert_eq!(status, 2, "{format}: {stderr}");
    stdout
}

/// The Markdown as GitHub renders it (GitHub-Flavored Markdown: tables, raw `<details>`).
fn rendered(markdown: &str) -> String {
    let mut options = comrak::Options::default();
    options.extension.table = true;
    options.extension.strikethrough = true;
    options.extension.autolink = true;
    options.render.r#unsafe = true;
    comrak::markdown_to_html(markdown, &options)
}

/// Text with its tags removed and its entities left as they are.
fn untagged(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.trim().to_string()
}

/// Each rendered table as rows of cells' text (a header cell or a data cell alike).
fn tables(html: &str) -> Vec<Vec<Vec<String>>> {
    let cells = |row: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = row;
        while let Some(at) = ["<td", "<th"]
            .iter()
            .filter_map(|open| {
                rest.match_indices(open)
                    .find(|(i, _)| matches!(rest.as_bytes().get(i + 3), Some(b'>' | b' ')))
            })
            .map(|(i, _)| i)
            .min()
        {
            let cell = &rest[at..];
            let end = cell.find("</t").expect("a cell closes");
            out.push(untagged(&cell[..end]));
            rest = &cell[end + 3..];
        }
        out
    };
    html.split("<table>")
        .skip(1)
        .map(|table| {
            let table = &table[..table.find("</table>").expect("a table closes")];
            table.split("<tr>").skip(1).map(cells).collect()
        })
        .collect()
}

/// Every table rendered has as many cells in each row as in its header, and no cell shows
/// a pipe (a name that broke out of its cell would).
fn assert_well_formed(html: &str) {
    for table in tables(html) {
        let width = table[0].len();
        for row in &table {
            assert_eq!(row.len(), width, "{row:?} in a table of {width} columns:\n{html}");
            assert!(row.iter().all(|c| !c.contains('|')), "a stray pipe: {row:?}");
        }
    }
}

#[test]
fn the_issues_change_to_the_published_case_is_a_table_of_what_moved() {
    let _guard = snapshots();
    let repo = published_case_change();
    let markdown = diff_in(repo.path(), "markdown");
    insta::assert_snapshot!("diff-published-case-markdown", markdown);
    insta::assert_snapshot!("diff-published-case-human", diff_in(repo.path(), "human"));
    let json = diff_in(repo.path(), "json");
    insta::assert_snapshot!("diff-published-case-json", json);

    // The headline: two lines before the first table.
    let headline: Vec<&str> =
        markdown.split("\n####").next().unwrap().lines().skip(1).filter(|l| !l.trim().is_empty()).collect();
    assert!(headline.len() <= 3, "{headline:?}");
    assert!(headline[0].contains("3 projects changed") && headline[0].contains("jupiter 51"), "{headline:?}");

    let html = rendered(&markdown);
    assert_well_formed(&html);
    let tables = tables(&html);
    // What moved: the header, a row per changed project and per budget moved (11, not 35),
    // the clusters as columns; the changes; folded, the budgets moved by rounding only.
    assert_eq!(tables.len(), 3, "{html}");
    assert_eq!(tables[0][0], ["", "budget", "share", "jupiter", "ceres", "titan"]);
    assert_eq!(tables[0].len() - 1, 11, "{markdown}");
    assert_eq!(tables[0][1], ["~", "olmo", "35% → 30%", "358 → 307 (-51)", "89 → 77 (-12)", "31 → 26 (-5)"]);
    assert!(tables[0].iter().any(|r| r[1].ends_with("pretrain") && r[5] == "absent"), "{:?}", tables[0]);
    assert_eq!(tables[1].len() - 1, 3);
    assert!(html.contains("<details><summary>3 more budgets moved (3 by rounding only)</summary>"), "{html}");
    // The handles in the headline mention no one.
    assert!(
        html.contains("@&amp;#8203;institute/tulu-leads") || html.contains("@\u{200b}institute/tulu-leads"),
        "{html}"
    );

    // JSON keeps every row: 35 moves over the three clusters.
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["share_moves"].as_array().unwrap().len(), 35);
}

#[test]
fn the_what_if_of_a_replay_is_the_headlines_third_line() {
    let repo = published_case_change();
    let mut trace = String::from("id,project,cluster,contract,gpus,submit,start,end\n");
    for i in 0..12 {
        let submit = i * 1800;
        for (project, gpus) in [("olmo/pretrain", 256), ("tulu/rlvr", 128), ("tulu/sft", 64)] {
            trace.push_str(&format!(
                "{project}{i},{project},jupiter,batch,{gpus},{submit},{submit},{}\n",
                submit + 7200
            ));
        }
        trace.push_str(&format!("data{i},olmo/data,jupiter,debug,8,{submit},{submit},{}\n", submit + 600));
    }
    std::fs::write(repo.path().join("trace.csv"), trace).unwrap();
    let replay = |format: &str| {
        let (status, stdout, stderr) = allot(
            repo.path(),
            &["diff", "budgets", "--against", "HEAD", "--replay", "trace.csv", "--format", format],
        );
        assert_eq!(status, 0, "{format}: {stderr}");
        stdout
    };
    let markdown = replay("markdown");
    let headline: Vec<&str> = markdown.split("\n####").next().unwrap().lines().skip(2).collect();
    assert_eq!(headline.len(), 3, "{headline:?}");
    let what_if = headline[2];
    // Before -> after: delivered overall and for the budgets whose GPUs move most, each
    // contract's p90 wait, the expectations met.
    assert!(what_if.starts_with("What-if on trace.csv (budget policy): delivered "), "{what_if}");
    for part in ["olmo/pretrain ", "tulu/rlvr ", "p90 wait batch ", "debug ", "expectations met "] {
        assert!(what_if.contains(part), "{part}: {what_if}");
    }
    // The simulation in full, folded after the changes.
    let folded = markdown.find("<details><summary>The simulation in full</summary>").expect("folded");
    assert!(markdown.find("#### Changes").unwrap() < folded, "{markdown}");
    assert!(markdown[folded..].contains("#### Simulated on trace.csv"), "{markdown}");
    assert_well_formed(&rendered(&markdown));
    let human = replay("human");
    assert!(human.lines().nth(2).unwrap().starts_with("What-if on trace.csv (budget policy): "), "{human}");
    assert!(human.find("Changes:").unwrap() < human.find("Simulated on trace.csv").unwrap(), "{human}");
}

/// A budget of `teams` top-level projects of `each` children on one large cluster, every
/// share a weight of 1 but the first team's, `first`.
fn many_projects(teams: usize, each: usize, first: u32) -> String {
    let mut text = String::from(
        "cluster big gpus=65536 gpu-type=h100 gpus-per-node=8 {\n    slurm\n}\ncontract batch min-runtime=\"1h\" default=#true\n",
    );
    for t in 0..teams {
        let share = if t == 0 { first } else { 1 };
        text.push_str(&format!("project team{t} share={share} {{\n    owners \"@org/team{t}\"\n"));
        for p in 0..each {
            text.push_str(&format!("    project p{p} share=1 {{\n        users u{t}x{p}\n    }}\n"));
        }
        text.push_str("}\n");
    }
    text
}

#[test]
fn a_change_to_thousands_of_budgets_stays_readable_and_under_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    commit(dir.path(), &[("allot.kdl", &many_projects(60, 40, 1))], "base");
    std::fs::write(dir.path().join("budgets/allot.kdl"), many_projects(60, 40, 4)).unwrap();
    let markdown = diff_in(dir.path(), "markdown");
    assert!(markdown.len() < 60_000 && !markdown.contains("Truncated"), "{} characters", markdown.len());
    let html = rendered(&markdown);
    assert_well_formed(&html);
    let tables = tables(&html);
    // The top 40 rows by GPUs moved and their ancestors, then a count; the rest folded, as
    // many rows as fit, then a count: no table is cut.
    assert!(tables[0].len() - 1 <= 40 + 40, "{} rows", tables[0].len() - 1);
    assert_eq!(tables[0][1][1], "team0");
    assert!(markdown.contains("more budgets moved ("), "{markdown}");
    assert!(markdown.contains("more: `allot diff --format json` lists every one."), "{markdown}");
    let json: serde_json::Value = serde_json::from_str(&diff_in(dir.path(), "json")).unwrap();
    assert_eq!(json["share_moves"].as_array().unwrap().len(), 60 * 41);
}

/// The rendered comment as a page styled like a GitHub comment (the tables bordered).
fn comment_page(html: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><style>\
         body {{ font: 14px -apple-system, 'Segoe UI', 'Noto Sans', Helvetica, Arial, sans-serif; \
         color: #1f2328; margin: 16px 24px; max-width: 960px; line-height: 1.5 }}\
         table {{ border-collapse: collapse; margin: 8px 0 16px }}\
         th, td {{ border: 1px solid #d1d9e0; padding: 4px 12px }}\
         tr:nth-child(2n) {{ background: #f6f8fa }} h3, h4 {{ margin: 16px 0 8px }}\
         </style></head><body>{html}</body></html>"
    )
}

/// The picture in docs/github-action.md: the comment on the issue's change, rendered from
/// GitHub-Flavored Markdown and screenshotted by headless Chromium (`scripts/chromium.sh`;
/// skipped, saying so, where there is none). `ALLOT_DIFF_SCREENSHOT=FILE` keeps the PNG.
#[test]
fn the_comment_renders_in_a_browser() {
    let folder = tempfile::tempdir().unwrap();
    let chromium = |args: &[&str]| {
        std::process::Command::new("scripts/chromium.sh")
            .args(args)
            .env("TMPDIR", folder.path())
            .current_dir(crate::common::root())
            .output()
            .unwrap()
    };
    let ensure = chromium(&["ensure"]);
    match ensure.status.code() {
        Some(0) => {}
        Some(3) if std::env::var_os("ALLOT_REQUIRE_CHROMIUM").is_none() => {
            eprintln!("skipped: no headless Chromium here:\n{}", String::from_utf8_lossy(&ensure.stderr));
            return;
        }
        _ => panic!("scripts/chromium.sh ensure failed:\n{}", String::from_utf8_lossy(&ensure.stderr)),
    }
    let repo = published_case_change();
    let page = folder.path().join("comment.html");
    std::fs::write(&page, comment_page(&rendered(&diff_in(repo.path(), "markdown")))).unwrap();
    let png = folder.path().join("comment.png");
    let output = chromium(&["screenshot", &page.to_string_lossy(), &png.to_string_lossy(), "1000", "820"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let info = decoder.read_info().expect("the screenshot is a PNG");
    assert_eq!((info.info().width, info.info().height), (1000, 820));
    if let Some(keep) = std::env::var_os("ALLOT_DIFF_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}
