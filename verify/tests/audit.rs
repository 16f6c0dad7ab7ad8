//! The audit on small traces checked by hand, and its errors.

use allot_compiler::ir::Model;
use allot_verify::audit::{Alignment, AuditError, Options, audit, audit_with};
use allot_verify::budgets::JobError;
use allot_verify::trace::{Format, Merged, Reader};

use allot_compiler::test_support::model;

const TWO: &str = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\ncontract batch min-runtime=\"1h\" default=#true\n\
    contract debug min-runtime=\"0s\"\nproject a share=1\nproject b share=1\n";

fn run(
    model: &Model,
    trace: &str,
    window: u64,
    skip: bool,
) -> Result<allot_verify::figures::Audit, AuditError> {
    let mut reader = Reader::new(trace.as_bytes(), Format::Csv, "").unwrap();
    audit(model, std::iter::from_fn(move || reader.next_job()), window, skip)
}

fn figures<'a>(
    span: &'a allot_verify::figures::Span,
    project: &str,
) -> &'a allot_verify::figures::BudgetFigures {
    span.budgets.iter().find(|b| b.project == project).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn entitlement_follows_demand_and_delivery_follows_use() {
    // a: 10 GPUs from 0 to 3600 s. b: 5 GPUs submitted at 1800, started at 3600, ended 5400.
    //   0-1800:    only a has demand: a is entitled to all 10 and uses 10      (a: 5 GPU-h)
    //   1800-3600: a 10 and b 5 ask; equal weights give 5 each, b needs only 5: a 5, b 5;
    //              a uses 10 (delivered 5), b waits (delivered 0)              (2.5 each)
    //   3600-5400: b alone asks 5 and uses 5                                   (b: 2.5)
    let trace =
        "id,project,gpus,submit,start,end,contract\n1,a,10,0,0,3600,batch\n2,b,5,1800,3600,5400,debug\n";
    let result = run(&model(TWO), trace, 7 * 86_400, false).unwrap();
    let (a, b) = (figures(&result.whole, "a"), figures(&result.whole, "b"));
    assert!(
        close(a.used_gpu_hours, 10.0)
            && close(a.entitled_gpu_hours, 7.5)
            && close(a.delivered_gpu_hours, 7.5),
        "{a:?}"
    );
    assert!(
        close(b.used_gpu_hours, 2.5) && close(b.entitled_gpu_hours, 5.0) && close(b.delivered_gpu_hours, 2.5),
        "{b:?}"
    );
    assert_eq!(b.delivered_ratio(), Some(0.5));
    assert!(close(result.whole.overall_ratio(&result.leaves).unwrap(), 10.0 / 12.5));
    let debug = result.whole.contracts.iter().find(|c| c.contract == "debug").unwrap();
    assert_eq!((debug.waits.jobs(), debug.waits.percentile(90.0)), (1, Some(1800)));
    let utilisation = result.whole.utilisation(&result.whole.clusters[0]);
    assert!(close(utilisation, 12.5 / (1.5 * 10.0)), "{utilisation}");
}

#[test]
fn windows_split_the_figures() {
    let trace = "id,project,gpus,submit,start,end\n1,a,10,0,0,3600\n2,b,5,1800,3600,5400\n";
    let result = run(&model(TWO), trace, 3600, false).unwrap();
    assert_eq!(result.windows.len(), 2);
    let (first, second) = (&result.windows[0], &result.windows[1]);
    assert_eq!((first.start, first.end, second.start, second.end), (0, 3600, 3600, 5400));
    assert!(
        close(figures(first, "b").entitled_gpu_hours, 2.5)
            && close(figures(first, "b").delivered_gpu_hours, 0.0)
    );
    assert!(
        close(figures(second, "b").entitled_gpu_hours, 2.5)
            && close(figures(second, "b").delivered_gpu_hours, 2.5)
    );
    // The windows add up to the whole.
    for project in ["a", "b"] {
        let sum: f64 = result
            .windows
            .iter()
            .filter_map(|w| w.budgets.iter().find(|b| b.project == project))
            .map(|b| b.entitled_gpu_hours)
            .sum();
        assert!(close(sum, figures(&result.whole, project).entitled_gpu_hours));
    }
}

#[test]
fn caps_and_the_hierarchy_shape_entitlement() {
    // org (cap 6) holds x and y; z beside it. Everyone asks for 10 on 12 GPUs:
    // org and z get 6 each (equal weights), org's 6 split 3/3.
    let text = "cluster c gpus=12 gpu-type=h100 gpus-per-node=4\ncontract batch min-runtime=\"1h\" default=#true\n\
        project org share=1 max-gpus=6 {\n    project x share=1\n    project y share=1\n}\nproject z share=1\n";
    let trace = "id,project,gpus,submit,start,end\n1,org/x,10,0,0,3600\n2,y,10,0,0,3600\n3,z,10,0,0,3600\n";
    let result = run(&model(text), trace, 86_400, false).unwrap();
    for (project, hours) in [("org", 6.0), ("org/x", 3.0), ("org/y", 3.0), ("z", 6.0)] {
        assert!(close(figures(&result.whole, project).entitled_gpu_hours, hours), "{project}");
    }
}

#[test]
fn unbudgeted_work_is_entitled_to_nothing() {
    let trace = "id,project,gpus,submit,start,end\n1,stranger,4,0,0,3600\n";
    let result = run(&model(TWO), trace, 86_400, false).unwrap();
    let outside = figures(&result.whole, "(unbudgeted)");
    assert!(close(outside.used_gpu_hours, 4.0) && close(outside.entitled_gpu_hours, 0.0));
}

#[test]
fn bad_input_is_an_error_or_skipped() {
    let trace = "id,project,gpus,submit,start,end\n1,a,1,0,0,10\n2,a,lots,5,5,10\n3,a,1,6,6,10\n";
    match run(&model(TWO), trace, 86_400, false) {
        Err(AuditError::Trace(e)) => assert_eq!(e.line, 3),
        other => panic!("{other:?}"),
    }
    let result = run(&model(TWO), trace, 86_400, true).unwrap();
    assert_eq!((result.jobs, result.skipped_rows), (2, 1));
    let unsorted = "id,project,gpus,submit,start,end\n1,a,1,50,50,60\n2,a,1,10,10,20\n";
    assert!(matches!(run(&model(TWO), unsorted, 86_400, false), Err(AuditError::NotSorted { .. })));
    let elsewhere = "id,project,cluster,gpus,submit,start,end\n1,a,mars,1,0,0,10\n";
    assert!(matches!(run(&model(TWO), elsewhere, 86_400, false), Err(AuditError::Job { .. })));
}

#[test]
fn skipped_rows_are_counted_and_the_rows_after_them_audited() {
    // One file whose first data row is bad (and one more later): rows 2 and 4 are skipped.
    // a: 2 GPUs from 100 to 3700 = 2 GPU-h; b: 2 GPUs from 300 to 3800 = 3500/1800 GPU-h.
    // The span starts at the first job audited (100), not at the bad row's time (0).
    let trace = "id,project,gpus,submit,start,end\n1,a,lots,0,0,10\n2,a,2,100,100,3700\n\
        3,a,x,200,200,300\n4,b,2,200,300,3800\n";
    match run(&model(TWO), trace, 86_400, false) {
        Err(AuditError::Trace(e)) => assert_eq!(e.line, 2),
        other => panic!("{other:?}"),
    }
    let result = run(&model(TWO), trace, 86_400, true).unwrap();
    assert_eq!((result.jobs, result.skipped_rows), (2, 2));
    assert!(close(figures(&result.whole, "a").used_gpu_hours, 2.0));
    assert!(close(figures(&result.whole, "b").used_gpu_hours, 3500.0 / 1800.0));
    assert_eq!((result.whole.start, result.whole.end), (100, 3800));

    // A folder: each file's first data row is bad, and b's third. 3 skipped; a and b each
    // run 1 GPU for an hour (1 GPU-h each), from 10 (b's first good row) to 3650.
    let a = "id,project,gpus,submit,start,end\n1,a,bad,0,0,10\n2,a,1,50,50,3650\n";
    let b = "id,project,gpus,submit,start,end\n1,b,1,xx,0,10\n2,b,1,10,10,3610\n3,b,y,20,20,30\n";
    let readers =
        [a, b].map(|text| Reader::new(text.as_bytes(), Format::Csv, "").unwrap()).into_iter().collect();
    let result = audit(&model(TWO), Merged::new(readers), 86_400, true).unwrap();
    assert_eq!((result.jobs, result.skipped_rows), (2, 3));
    for project in ["a", "b"] {
        assert!(close(figures(&result.whole, project).used_gpu_hours, 1.0), "{project}");
    }
    assert_eq!((result.whole.start, result.whole.end), (10, 3650));
}

#[test]
fn the_whole_trace_spans_from_its_first_submission() {
    // One day of the full cluster (10 GPUs) under a 7-day window, starting on day 20
    // (1,728,000 s; not a multiple of 7 days). Used: 10 × 24 = 240 GPU-h over a span of
    // one day × 10 GPUs = 240 GPU-h: 100%. (Rounding the start down to a multiple of the
    // window, at 1,209,600, made the span 7 days and the utilisation 1/7 = 14%.)
    let trace = "id,project,gpus,submit,start,end\n1,a,10,1728000,1728000,1814400\n";
    let result = run(&model(TWO), trace, 7 * 86_400, false).unwrap();
    assert_eq!((result.whole.start, result.whole.end), (1_728_000, 1_814_400));
    assert!(close(result.whole.utilisation(&result.whole.clusters[0]), 1.0));
    // Its one window is the day: shorter than the window.
    let window = &result.windows[0];
    assert_eq!(
        (result.windows.len(), window.start, window.end, window.partial),
        (1, 1_728_000, 1_814_400, true)
    );
    assert!(!result.whole.partial);
}

#[test]
fn windows_align_to_the_first_submission_or_to_the_epoch() {
    // 10 GPUs for two days from noon of day 0 (43,200 s to 216,000 s), one-day windows.
    // First submission: two full days, [43200, 129600) and [129600, 216000), 240 GPU-h each.
    // Epoch: [43200, 86400) partial (12 h: 120 GPU-h), [86400, 172800) full (240),
    // [172800, 216000) partial (120).
    let trace = "id,project,gpus,submit,start,end\n1,a,10,43200,43200,216000\n";
    let windows = |align| {
        let mut reader = Reader::new(trace.as_bytes(), Format::Csv, "").unwrap();
        let options = Options { window: 86_400, skip_bad_rows: false, align };
        let result = audit_with(&model(TWO), std::iter::from_fn(move || reader.next_job()), options).unwrap();
        assert_eq!((result.whole.start, result.whole.end), (43_200, 216_000));
        result
            .windows
            .iter()
            .map(|w| (w.start, w.end, w.partial, figures(w, "a").used_gpu_hours.round() as i64))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        windows(Alignment::FirstSubmit),
        [(43_200, 129_600, false, 240), (129_600, 216_000, false, 240)]
    );
    assert_eq!(
        windows(Alignment::Epoch),
        [(43_200, 86_400, true, 120), (86_400, 172_800, false, 240), (172_800, 216_000, true, 120)]
    );
}

const PARTITIONS: &str = "cluster tern gpus=8 gpu-type=a100 gpus-per-node=4 {\n    slurm cluster=tern partition=a100\n}\n\
    cluster tern-l40s gpus=4 gpu-type=l40s gpus-per-node=4 {\n    slurm cluster=tern partition=l40s\n}\n\
    contract batch min-runtime=\"1h\" default=#true\nproject a share=1\n";

#[test]
fn a_partition_picks_among_the_clusters_bound_to_one_slurm_cluster() {
    // Slurm cluster tern holds allot's tern (partition a100) and tern-l40s (partition l40s).
    //   1: tern/a100, 8 GPUs for 1 h          -> tern: 8 GPU-h
    //   2: tern/l40s, 4 GPUs for 30 min       -> tern-l40s: 2 GPU-h
    //   3: tern, no partition                 -> bad row
    //   4: tern/h100, a partition of neither  -> bad row
    //   5: mars, no such cluster              -> bad row
    //   6: tern-l40s (allot's name), 2 GPUs for 1 h -> tern-l40s: 2 more GPU-h (4 in all)
    let trace = "id,project,cluster,partition,gpus,submit,start,end\n1,a,tern,a100,8,0,0,3600\n\
        2,a,tern,l40s,4,0,0,1800\n3,a,tern,,1,0,0,10\n4,a,tern,h100,1,0,0,10\n5,a,mars,,1,0,0,10\n\
        6,a,tern-l40s,,2,0,0,3600\n";
    let result = run(&model(PARTITIONS), trace, 86_400, true).unwrap();
    assert_eq!((result.jobs, result.skipped_rows), (3, 3));
    let used: Vec<(&str, f64)> =
        result.whole.clusters.iter().map(|c| (c.cluster.as_str(), c.used_gpu_hours)).collect();
    assert_eq!(used, [("tern", 8.0), ("tern-l40s", 4.0)]);
    // Without --skip-bad-rows the first of them stops the audit, naming the job and why.
    let error = run(&model(PARTITIONS), trace, 86_400, false).unwrap_err();
    let partitions = vec!["a100".to_string(), "l40s".to_string()];
    assert_eq!(
        error,
        AuditError::Job {
            id: "3".into(),
            error: JobError::NoPartition { cluster: "tern".into(), partition: String::new(), partitions },
        }
    );
    assert_eq!(
        error.to_string(),
        "job 3: Slurm cluster `tern` holds several clusters of the budgets, on partitions a100, l40s, and the job names no partition"
    );
    let unknown = "id,project,cluster,gpus,submit,start,end\n5,a,mars,1,0,0,10\n";
    assert_eq!(
        run(&model(PARTITIONS), unknown, 86_400, false).unwrap_err().to_string(),
        "job 5: cluster `mars` is not in the budgets"
    );
}

#[test]
fn jobs_that_never_started_wait_until_cancelled_or_until_the_trace_ends() {
    //   1: a, batch, submitted 0, started 0        wait 0
    //   2: a, batch, submitted 0, started 600      wait 600
    //   3: b, batch, submitted 100, cancelled at 1900 without starting: wait 1800
    //   4: b, batch, submitted 200, never started nor ended: waits to the trace's end (its
    //      last event, job 5's end at 10000): 9800, censored
    //   5: b, debug, submitted 1000, started 1000  wait 0
    // batch: [0, 600, 1800, 9800]: p50 = 2nd = 600, p90 = p99 = 4th = 9800; 1 censored.
    // a: [0, 600]: p50 = 0, p90 = 600.  b: [0, 1800, 9800]: p50 = 1800, p90 = 9800.
    let trace = "id,project,gpus,submit,start,end,contract\n1,a,4,0,0,3600,batch\n2,a,4,0,600,4200,batch\n\
        3,b,4,100,,1900,batch\n4,b,4,200,,,batch\n5,b,2,1000,1000,10000,debug\n";
    let result = run(&model(TWO), trace, 3600, false).unwrap();
    assert_eq!((result.jobs, result.whole.end), (5, 10_000));
    let contract = |span: &allot_verify::figures::Span, name: &str| {
        span.contracts.iter().find(|c| c.contract == name).unwrap().waits.clone()
    };
    let batch = contract(&result.whole, "batch");
    assert_eq!(
        (
            batch.jobs(),
            batch.censored(),
            batch.percentile(50.0),
            batch.percentile(90.0),
            batch.percentile(99.0)
        ),
        (4, 1, Some(600), Some(9800), Some(9800))
    );
    let debug = contract(&result.whole, "debug");
    assert_eq!((debug.jobs(), debug.censored(), debug.percentile(50.0)), (1, 0, Some(0)));
    let a = &figures(&result.whole, "a").waits;
    assert_eq!((a.jobs(), a.censored(), a.percentile(50.0), a.percentile(90.0)), (2, 0, Some(0), Some(600)));
    let b = &figures(&result.whole, "b").waits;
    assert_eq!(
        (b.jobs(), b.censored(), b.percentile(50.0), b.percentile(90.0)),
        (3, 1, Some(1800), Some(9800))
    );
    // Every job was submitted in the first window (0 to 3600), which counts them all; the
    // last window (7200 to 10000) is partial.
    let first = &result.windows[0];
    let b = &figures(first, "b").waits;
    assert_eq!((b.jobs(), b.censored()), (3, 1));
    assert_eq!((contract(first, "batch").jobs(), contract(first, "batch").censored()), (4, 1));
    let last = result.windows.last().unwrap();
    assert_eq!((last.start, last.end, last.partial), (7200, 10_000, true));
}

#[test]
fn demand_starts_at_eligibility() {
    // a: 10 GPUs from 0 to 3600. b: 10 GPUs submitted at 0, held until 3600, run 3600-7200.
    // Eligible at 3600: only a asks until 3600 (entitled 10, delivered 10 GPU-h), only b
    // after (entitled 10, delivered 10): both delivered 100%, b waited 0 from eligibility.
    // Without the eligibility, b asks from 0: 0-3600 splits 5/5, so a is entitled 5 + 0 and
    // b 5 + 10 = 15, delivered 10: 66.7%, and b waited 3600.
    let held = "id,project,gpus,submit,eligible,start,end\n1,a,10,0,,0,3600\n2,b,10,0,3600,3600,7200\n";
    let result = run(&model(TWO), held, 86_400, false).unwrap();
    for project in ["a", "b"] {
        let f = figures(&result.whole, project);
        assert!(close(f.entitled_gpu_hours, 10.0) && close(f.delivered_gpu_hours, 10.0), "{f:?}");
    }
    assert_eq!(figures(&result.whole, "b").waits.percentile(50.0), Some(0));
    let submitted = "id,project,gpus,submit,start,end\n1,a,10,0,0,3600\n2,b,10,0,3600,7200\n";
    let result = run(&model(TWO), submitted, 86_400, false).unwrap();
    let b = figures(&result.whole, "b");
    assert!(close(b.entitled_gpu_hours, 15.0) && close(b.delivered_gpu_hours, 10.0), "{b:?}");
    assert!(close(figures(&result.whole, "a").entitled_gpu_hours, 5.0));
    assert_eq!(b.waits.percentile(50.0), Some(3600));
}

#[test]
fn submissions_only_are_not_audited_and_no_job_is_an_error() {
    // A duration without a start: a submission for a simulation, counted, not audited.
    let mixed = "id,project,gpus,submit,start,duration\n1,a,1,0,0,3600\n2,b,1,10,,3600\n";
    let result = run(&model(TWO), mixed, 86_400, false).unwrap();
    assert_eq!((result.jobs, result.not_audited), (1, 1));
    assert!(close(figures(&result.whole, "b").used_gpu_hours, 0.0));
    let only = "id,project,gpus,submit,duration\n1,a,1,0,100\n2,b,1,10,100\n";
    assert_eq!(
        run(&model(TWO), only, 86_400, false).unwrap_err().to_string(),
        "no job of the trace could be used: the trace's rows record submissions only (no start times): \
         `allot replay simulate` replays them"
    );
    let bad = "id,project,gpus,submit,start,end\n1,a,x,0,0,1\n2,a,y,0,0,1\n";
    assert_eq!(
        run(&model(TWO), bad, 86_400, true).unwrap_err(),
        AuditError::NoJobs("every row was skipped as bad (2)".into())
    );
    let empty = "id,project,gpus,submit,start,end\n";
    assert_eq!(
        run(&model(TWO), empty, 86_400, false).unwrap_err(),
        AuditError::NoJobs("the trace has no jobs".into())
    );
}

#[test]
fn a_window_that_straddles_a_grants_end_is_audited_against_the_shares_of_each_part() {
    // a 40% with +20% until 10 h, b 40%, 20% unallocated (no unbudgeted work, so its part
    // goes to a and b by weight). Both ask 10 GPUs for 20 hours (a runs 6 and waits with 4
    // more, b runs 4 and waits with 6 more) in one window of a day.
    //   0-10 h:  weights 60:40: a entitled 6, delivered min(6, 6) = 6; b 4 and 4
    //   10-20 h: weights 40:40: a 5, delivered min(6, 5) = 5; b 5, delivered min(4, 5) = 4
    // a: entitled 60 + 50 = 110 GPU-h, delivered 110; b: entitled 40 + 50 = 90, delivered 80.
    let text = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\ncontract batch min-runtime=\"0s\" default=#true\n\
        project a share=\"40%\" {\n    grant share=\"+20%\" until=\"1970-01-01T10:00:00Z\" reason=\"deadline\"\n}\n\
        project b share=\"40%\"\n";
    let trace = "id,project,gpus,submit,start,end\n1,a,6,0,0,72000\n2,a,4,0,,72000\n3,b,4,0,0,72000\n4,b,6,0,,72000\n";
    let budgets = allot_compiler::test_support::model_at(text, 0);
    assert_eq!(budgets.timeline.len(), 2, "before and after the grant's end");
    let result = run(&budgets, trace, 86_400, false).unwrap();
    assert_eq!(result.windows.len(), 1);
    for span in [&result.whole, &result.windows[0]] {
        let (a, b) = (figures(span, "a"), figures(span, "b"));
        assert!(close(a.entitled_gpu_hours, 110.0) && close(a.delivered_gpu_hours, 110.0), "{a:?}");
        assert!(close(b.entitled_gpu_hours, 90.0) && close(b.delivered_gpu_hours, 80.0), "{b:?}");
    }
    // The same trace against the shares as written: 100 and 100, delivered 100 and 80.
    let written = model(
        &text.replace("    grant share=\"+20%\" until=\"1970-01-01T10:00:00Z\" reason=\"deadline\"\n", ""),
    );
    let result = run(&written, trace, 86_400, false).unwrap();
    let (a, b) = (figures(&result.whole, "a"), figures(&result.whole, "b"));
    assert!(close(a.entitled_gpu_hours, 100.0) && close(a.delivered_gpu_hours, 100.0), "{a:?}");
    assert!(close(b.entitled_gpu_hours, 100.0) && close(b.delivered_gpu_hours, 80.0), "{b:?}");
}
