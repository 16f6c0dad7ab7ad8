//! The audit on small traces checked by hand, and its errors.

use allot_compiler::ir::Model;
use allot_verify::audit::{AuditError, audit};
use allot_verify::trace::{Format, Reader};

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
