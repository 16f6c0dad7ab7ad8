//! Grants through the command line: `tree` and `export` at two moments, `allot grants`
//! (the calendar, `--next`, JSON), `build` emitting the shares in force at `--at`, and
//! `fmt` keeping grants.

use crate::common::allot_in;

const BUDGETS: &str = r#"cluster jupiter gpus=100 gpu-type=h100 gpus-per-node=4 {
    slurm
}
contract batch min-runtime="1h" default=#true
project nlp share="30%" {
    grant share="+10%" from="2099-01-10" until="2099-02-01" reason="ACL deadline"
}
project vision share="50%"
"#;

fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), BUDGETS).unwrap();
    dir
}

#[test]
fn tree_and_export_take_the_shares_in_force_at_the_moment_asked() {
    let dir = repository();
    let (status, before, stderr) = allot_in(dir.path(), &["tree", ".", "--at", "2099-01-09"]);
    assert_eq!(status, 0, "{stderr}");
    let nlp = before.lines().find(|l| l.starts_with("nlp")).unwrap();
    assert_eq!(nlp.split_whitespace().collect::<Vec<_>>(), ["nlp", "30%", "30.000%", "30"]);

    let (_, during, _) = allot_in(dir.path(), &["tree", ".", "--at", "2099-01-10"]);
    let nlp = during.lines().find(|l| l.starts_with("nlp")).unwrap();
    assert_eq!(
        nlp.split_whitespace().collect::<Vec<_>>(),
        ["nlp", "30%", "+10%", "until", "2099-02-01", "40.000%", "40"]
    );
    let rest = during.lines().find(|l| l.starts_with("(unallocated)")).unwrap();
    assert!(rest.ends_with(" 10"), "{rest}");

    let (_, json, _) = allot_in(dir.path(), &["export", ".", "--at", "2099-01-31T23:59:59Z"]);
    let model: serde_json::Value = serde_json::from_str(&json).unwrap();
    let nlp = &model["projects"][0];
    assert_eq!(nlp["clusters"]["jupiter"]["guaranteed_gpus"], 40);
    assert_eq!(nlp["clusters"]["jupiter"]["granted_share"], 0.1);
    assert_eq!(nlp["grants"][0]["amount"]["share_percent"], 10.0);
    assert_eq!(nlp["grants"][0]["from"], "2099-01-10");
    assert_eq!(nlp["grants"][0]["until"], "2099-02-01");
    let (_, json, _) = allot_in(dir.path(), &["export", ".", "--at", "2099-02-01"]);
    let model: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(model["projects"][0]["clusters"]["jupiter"]["guaranteed_gpus"], 30);
    assert!(model["projects"][0]["clusters"]["jupiter"].get("granted_share").is_none());

    let (status, _, stderr) = allot_in(dir.path(), &["tree", ".", "--at", "09/01/2099"]);
    assert_eq!(status, 2, "a bad --at is a usage error: {stderr}");
    assert!(stderr.contains("RFC 3339"), "{stderr}");
}

#[test]
fn grants_lists_the_calendar_and_the_next_boundary() {
    let dir = repository();
    let (status, text, stderr) = allot_in(dir.path(), &["grants", ".", "--at", "2099-01-01"]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(
        text,
        "Grants in force at 2099-01-01: none

2099-01-10
  starts: nlp +10% from 2099-01-10 until 2099-02-01: ACL deadline
    nlp  30 → 40 GPUs (30.000% → 40.000% of jupiter)

2099-02-01
  ends:   nlp +10% from 2099-01-10 until 2099-02-01: ACL deadline
    nlp  40 → 30 GPUs (40.000% → 30.000% of jupiter)
"
    );
    let (_, next, _) = allot_in(dir.path(), &["grants", ".", "--next", "--at", "2099-01-01"]);
    assert_eq!(next, "2099-01-10\n");
    let (_, next, _) = allot_in(dir.path(), &["grants", ".", "--next", "--at", "2099-01-10"]);
    assert_eq!(next, "2099-02-01\n");
    let (status, next, _) = allot_in(dir.path(), &["grants", ".", "--next", "--at", "2099-02-01"]);
    assert_eq!((status, next.as_str()), (0, ""), "nothing after the last boundary");

    let (_, json, _) = allot_in(dir.path(), &["grants", ".", "--at", "2099-01-15", "--format", "json"]);
    let calendar: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(calendar["in_force"][0]["project"], "nlp");
    assert_eq!(calendar["in_force"][0]["grant"]["reason"], "ACL deadline");
    assert_eq!(calendar["boundaries"][0]["at"], "2099-02-01");
    assert_eq!(calendar["boundaries"][0]["moves"][0]["after"]["guaranteed_gpus"], 30);
}

#[test]
fn a_reason_reaches_the_terminal_and_markdown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = BUDGETS.replace("ACL deadline", r"ACL\u{1b}[2J <b>*now*</b>");
    std::fs::write(dir.path().join("allot.kdl"), hostile).unwrap();
    let (_, text, _) = allot_in(dir.path(), &["grants", ".", "--at", "2099-01-15"]);
    assert!(!text.contains('\u{1b}') && text.contains(r"ACL\u{1b}[2J"), "{text}");
    let (_, text, _) = allot_in(dir.path(), &["grants", ".", "--at", "2099-01-15", "--format", "markdown"]);
    assert!(!text.contains("<b>") && !text.contains("*now*"), "{text}");
}

#[test]
fn build_emits_the_shares_in_force_at_the_moment_asked() {
    let dir = repository();
    let out = dir.path().join("out");
    let fairshare = |at: &str| {
        let (status, _, stderr) =
            allot_in(dir.path(), &["build", ".", "--out", out.to_str().unwrap(), "--at", at, "--force"]);
        assert_eq!(status, 0, "{stderr}");
        let file = std::fs::read_to_string(out.join("slurm/jupiter.cfg")).unwrap();
        let line = file.lines().find(|l| l.starts_with("Account - 'nlp'")).map(str::to_string);
        line.unwrap_or_else(|| panic!("no account nlp in\n{file}"))
    };
    let before = fairshare("2099-01-01");
    let during = fairshare("2099-01-15");
    // 30% and 50% as written; with the grant 40% and 50%, and vision's floor unchanged.
    assert!(before.contains(":Fairshare=30:"), "{before}");
    assert!(during.contains(":Fairshare=40:"), "{during}");
    let qos = std::fs::read_to_string(out.join("slurm/jupiter-qos.sh")).unwrap();
    assert!(qos.contains("qos gpu-floor-nlp ") && qos.contains("GrpTRES=gres/gpu=40"), "{qos}");
}

#[test]
fn fmt_keeps_grants() {
    let dir = tempfile::tempdir().unwrap();
    let messy = BUDGETS.replace("    grant share=\"+10%\"", "  grant   share=\"+10%\"");
    std::fs::write(dir.path().join("allot.kdl"), &messy).unwrap();
    let (status, _, stderr) = allot_in(dir.path(), &["fmt", "."]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("allot.kdl")).unwrap(), BUDGETS);
}

#[test]
fn a_hostile_reason_stays_text_in_every_review_format() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("allot.kdl"),
        BUDGETS.replace(
            "    grant share=\"+10%\" from=\"2099-01-10\" until=\"2099-02-01\" reason=\"ACL deadline\"\n",
            "",
        ),
    )
    .unwrap();
    crate::common::git(dir.path(), &["init", "-q"]);
    crate::common::git(dir.path(), &["add", "-A"]);
    crate::common::git(dir.path(), &["commit", "-q", "-m", "base"]);
    let hostile = r#"x\u{1b}[2J\r\n::error::forged | <details><summary>fine</summary> @everyone [link](https://example.com)"#;
    std::fs::write(dir.path().join("allot.kdl"), BUDGETS.replace("ACL deadline", hostile)).unwrap();
    let diff = |format: &str| {
        let (status, stdout, stderr) = allot_in(
            dir.path(),
            &["diff", ".", "--against", "HEAD", "--at", "2099-01-01", "--format", format],
        );
        assert_eq!(status, 0, "{stderr}");
        stdout
    };
    let human = diff("human");
    assert!(!human.contains('\u{1b}') && !human.contains('\r') && human.contains(r"x\u{1b}[2J"), "{human}");
    let markdown = diff("markdown");
    for raw in ["<details>", "@everyone", "[link](", "| <"] {
        assert!(!markdown.contains(raw), "{raw} in\n{markdown}");
    }
    let github = diff("github");
    assert_eq!(github.lines().count(), 1, "one annotation, no forged line:\n{github}");
    assert!(!github.contains('\u{1b}') && !github.contains("\n::error"), "{github}");
    let json: serde_json::Value = serde_json::from_str(&diff("json")).unwrap();
    let after = json["changes"][0]["details"][0]["after"].as_str().unwrap();
    assert!(after.contains('\u{1b}'), "JSON carries the text as it is, escaped by JSON: {after}");
}
