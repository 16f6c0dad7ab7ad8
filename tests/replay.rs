//! `allot replay audit` and `allot fairshare` from the command line.
use serde_json::Value;

use crate::common::{allot, itp_trace};

#[test]
fn the_itp_trace_audits_to_its_published_totals() {
    let Some(trace) = itp_trace() else { return };
    let (status, stdout, stderr) = allot(&[
        "replay",
        "audit",
        "examples/itp-replay",
        "--trace",
        trace.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(status, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["percentiles"], "nearest-rank");
    assert_eq!(report["totals"]["jobs"], 69_351);
    // The trace's README: 1,632,719.7 GPU-hours in all.
    let used = report["totals"]["used_gpu_hours"].as_f64().unwrap();
    assert!((used - 1_632_719.7).abs() < 0.1, "{used}");
    let budgets = report["budgets"].as_array().unwrap();
    for b in budgets.iter().filter(|b| b["project"] != "(unbudgeted)") {
        let (entitled, delivered) =
            (b["entitled_gpu_hours"].as_f64().unwrap(), b["delivered_gpu_hours"].as_f64().unwrap());
        assert!(
            delivered <= entitled + 1e-6 && delivered <= b["used_gpu_hours"].as_f64().unwrap() + 1e-6,
            "{b}"
        );
    }
    let windows = report["windows"].as_array().unwrap();
    assert!(windows.len() >= 8, "two months in weekly windows");
    let window_hours: f64 = windows
        .iter()
        .flat_map(|w| w["budgets"].as_array().unwrap())
        .map(|b| b["used_gpu_hours"].as_f64().unwrap())
        .sum();
    assert!((window_hours - used).abs() < 1.0, "windows add up: {window_hours}");
}

fn scratch(budgets: &str, trace: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("allot.kdl"), budgets).unwrap();
    std::fs::write(dir.path().join("trace.csv"), trace).unwrap();
    dir
}

const BUDGETS: &str = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\ncontract batch min-runtime=\"1h\" default=#true\n\
    project a share=1\nproject b share=1\nexpect {\n    delivered per-budget=\"90%\"\n    wait contract=batch p90=\"10m\"\n}\n";

#[test]
fn unmet_expectations_set_the_exit_code() {
    // b waits 30 minutes, and gets half of what it is entitled to.
    let dir = scratch(BUDGETS, "id,project,gpus,submit,start,end\n1,a,10,0,0,3600\n2,b,5,1800,3600,5400\n");
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let (status, stdout, stderr) =
        allot(&["replay", "audit", &path("allot.kdl"), "--trace", &path("trace.csv")]);
    assert_eq!(status, 1, "{stdout}");
    assert!(
        stdout.contains("FAIL delivered per budget   b on c") && stdout.contains("FAIL p90 wait"),
        "{stdout}"
    );
    assert!(stderr.contains("2 expectations not met"), "{stderr}");
    let (_, markdown, _) = allot(&[
        "replay",
        "audit",
        &path("allot.kdl"),
        "--trace",
        &path("trace.csv"),
        "--format",
        "markdown",
    ]);
    assert!(
        markdown.contains("| delivered per budget | b on c | 0.500 | 0.900 | **not met** |"),
        "{markdown}"
    );
}

#[test]
fn bad_trace_rows_name_their_line_or_are_skipped() {
    let dir = scratch(BUDGETS, "id,project,gpus,submit,start,end\n1,a,1,0,0,10\n2,a,x,5,5,10\n");
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let (status, _, stderr) = allot(&["replay", "audit", &path("allot.kdl"), "--trace", &path("trace.csv")]);
    assert_eq!(status, 1);
    assert!(stderr.contains("line 3: `x` is not a GPU count"), "{stderr}");
    let (status, stdout, _) = allot(&[
        "replay",
        "audit",
        &path("allot.kdl"),
        "--trace",
        &path("trace.csv"),
        "--skip-bad-rows",
        "--format",
        "json",
    ]);
    assert_eq!(status, 0);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (report["totals"]["jobs"].as_u64(), report["totals"]["skipped_rows"].as_u64()),
        (Some(1), Some(1))
    );
}

/// A trace of 12 jobs in submit order (distinct submit times), two of them pending at the
/// end, and one bad row.
fn jobs_in_order() -> Vec<String> {
    (0..12)
        .map(|i| {
            let (submit, project, gpus) = (i * 600, ["a", "b"][i % 2], 1 + i % 4);
            match i {
                5 | 9 => format!("{i},{project},{gpus},{submit},,"),
                _ => format!(
                    "{i},{project},{gpus},{submit},{},{}",
                    submit + 300 * (i % 3),
                    submit + 3600 + 60 * i
                ),
            }
        })
        .chain(std::iter::once("99,a,bad,0,0,0".to_string()))
        .collect()
}

const HEADER: &str = "id,project,gpus,submit,start,end\n";

fn lines(rows: &[String]) -> String {
    HEADER.to_string() + &rows.join("\n") + "\n"
}

#[test]
fn a_trace_out_of_submit_order_gives_what_the_sorted_trace_gives() {
    let dir = scratch(BUDGETS, &lines(&jobs_in_order()));
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    // The same rows shuffled (a fixed permutation), and a folder of two files, each reversed.
    let mut shuffled = jobs_in_order();
    for i in 0..shuffled.len() {
        shuffled.swap(i, (i * 7 + 3) % 13);
    }
    std::fs::write(path("shuffled.csv"), lines(&shuffled)).unwrap();
    std::fs::create_dir(path("folder")).unwrap();
    let rows = jobs_in_order();
    let halves = [&rows[..6], &rows[6..]];
    for (name, half) in ["folder/first.csv", "folder/second.csv"].into_iter().zip(halves) {
        let reversed: Vec<String> = half.iter().rev().cloned().collect();
        std::fs::write(path(name), lines(&reversed)).unwrap();
    }
    for command in ["audit", "simulate"] {
        let output = |trace: &str| {
            let (status, stdout, stderr) = allot(&[
                "replay",
                command,
                &path("allot.kdl"),
                "--trace",
                &path(trace),
                "--skip-bad-rows",
                "--format",
                "json",
            ]);
            assert!(status == 0 || status == 1, "{command} {trace}: {stderr}");
            assert!(!stderr.contains("error"), "{command} {trace}: {stderr}");
            stdout
        };
        let sorted = output("trace.csv");
        let report: Value = serde_json::from_str(&sorted).unwrap();
        let totals =
            if command == "audit" { &report["totals"] } else { &report["runs"][0]["audit"]["totals"] };
        assert_eq!(totals["skipped_rows"], 1, "{command}: {totals}");
        assert_eq!(output("shuffled.csv"), sorted, "{command}: shuffled");
        assert_eq!(output("folder"), sorted, "{command}: a folder of reversed files");
    }
}

#[test]
fn a_trace_of_submissions_only_is_an_error() {
    let dir = scratch(BUDGETS, "id,project,gpus,submit,duration\n1,a,1,0,100\n2,b,1,10,100\n");
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let (status, stdout, stderr) =
        allot(&["replay", "audit", &path("allot.kdl"), "--trace", &path("trace.csv")]);
    assert_eq!((status, stdout.as_str()), (1, ""), "{stderr}");
    assert!(
        stderr.contains(
            "no job of the trace could be used: the trace's rows record submissions only (no start times): \
             `allot replay simulate` replays them"
        ),
        "{stderr}"
    );
}

#[test]
fn windows_align_to_the_epoch_on_request() {
    // 10 GPUs from noon of day 0 for two days under one-day windows.
    let dir = scratch(BUDGETS, "id,project,gpus,submit,start,end\n1,a,10,43200,43200,216000\n");
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let windows = |align: &str| {
        let (status, stdout, stderr) = allot(&[
            "replay",
            "audit",
            &path("allot.kdl"),
            "--trace",
            &path("trace.csv"),
            "--window",
            "1d",
            "--align",
            align,
            "--format",
            "json",
        ]);
        assert!(status <= 1, "{stderr}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!((report["start"].as_i64(), report["end"].as_i64()), (Some(43_200), Some(216_000)));
        report["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (w["start"].as_i64().unwrap(), w["end"].as_i64().unwrap(), w["partial"].as_bool().unwrap())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(windows("first-submit"), [(43_200, 129_600, false), (129_600, 216_000, false)]);
    assert_eq!(
        windows("epoch"),
        [(43_200, 86_400, true), (86_400, 172_800, false), (172_800, 216_000, true)]
    );
}

/// The Slurm reference's example tree and its usage after four 30-second jobs.
#[test]
fn fairshare_prints_what_sshare_prints() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump.cfg");
    std::fs::write(
        &dump,
        "Cluster - 'test':Fairshare=1:QOS='normal'\nParent - 'root'\nUser - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1\n\
         Account - 'eng':Fairshare=60\nAccount - 'research':Fairshare=40\nParent - 'eng'\nAccount - 'infra':Fairshare=30\nAccount - 'ml':Fairshare=70\n\
         Parent - 'infra'\nUser - 'carol':DefaultAccount='infra':Fairshare=1\nParent - 'ml'\nAccount - 'nlp':Fairshare=50\nAccount - 'vision':Fairshare=50\n\
         Parent - 'nlp'\nUser - 'bob':DefaultAccount='nlp':Fairshare=1\nParent - 'vision'\nUser - 'alice':DefaultAccount='vision':Fairshare=1\n\
         Parent - 'research'\nAccount - 'physics':Fairshare=100\nParent - 'physics'\nUser - 'alice':DefaultAccount='vision':Fairshare=2147483647\nUser - 'dave':DefaultAccount='physics':Fairshare=1\n",
    )
    .unwrap();
    let usage = dir.path().join("usage.csv");
    std::fs::write(
        &usage,
        "account,user,raw_usage\nvision,alice,510\nnlp,bob,270\ninfra,carol,60\nphysics,dave,150\n",
    )
    .unwrap();
    let (status, stdout, stderr) =
        allot(&["fairshare", dump.to_str().unwrap(), "--usage", usage.to_str().unwrap()]);
    assert_eq!(status, 0, "{stderr}");
    for row in [
        "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare|LevelFS",
        " eng||60|0.594059|840|0.848485||0.700141",
        "    vision|alice|1|1.000000|510|1.000000|0.166667|1.000000",
        "   physics|alice|parent|1.000000|0|0.000000|0.833333|",
    ] {
        assert!(stdout.lines().any(|l| l == row), "{row} missing from:\n{stdout}");
    }
}
