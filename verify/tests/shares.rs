//! Whose entitlement the parts of a parent that no share names are, worked out by hand: the
//! rest the top-level percentages leave (the work no budget covers), and the jobs charged
//! to a project that has sub-projects (its own jobs).

use allot_compiler::test_support::model;
use allot_verify::audit::audit;
use allot_verify::figures::{Audit, BudgetFigures};
use allot_verify::trace::{Format, Reader};

fn run(budgets: &str, trace: &str) -> Audit {
    let mut reader = Reader::new(trace.as_bytes(), Format::Csv, "").unwrap();
    audit(&model(budgets), std::iter::from_fn(move || reader.next_job()), 86_400, false).unwrap()
}

fn entitled(result: &Audit, project: &str) -> f64 {
    let figures: &BudgetFigures =
        result.whole.budgets.iter().find(|b| b.project == project).unwrap_or_else(|| panic!("{project}"));
    figures.entitled_gpu_hours
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

const THIRTY_THIRTY: &str = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
    contract batch min-runtime=\"1h\" default=#true\n\
    project a share=\"30%\"\nproject b share=\"30%\"\n";

#[test]
fn the_rest_of_the_top_level_is_the_entitlement_of_work_no_budget_covers() {
    // a, b and a stranger (no budget) each ask for 10 GPUs for an hour on 10 GPUs. The
    // percentages leave 40% to unbudgeted work: weights 0.3 / 0.3 / 0.4 give 3 / 3 / 4.
    // (Before, the rest was shared out among a and b: 5 / 5 / 0.)
    let trace = "id,project,gpus,submit,start,end\n1,a,10,0,0,3600\n2,b,10,0,,3600\n3,stranger,10,0,,3600\n";
    let result = run(THIRTY_THIRTY, trace);
    for (project, hours) in [("a", 3.0), ("b", 3.0), ("(unbudgeted)", 4.0)] {
        assert!(close(entitled(&result, project), hours), "{project}: {}", entitled(&result, project));
    }
}

#[test]
fn without_demand_outside_the_budgets_the_rest_is_shared_out() {
    // Only a and b ask for 10 each: the unbudgeted rest has no demand, so the 10 GPUs go
    // 5 / 5 by their equal shares.
    let trace = "id,project,gpus,submit,start,end\n1,a,10,0,0,3600\n2,b,10,0,,3600\n";
    let result = run(THIRTY_THIRTY, trace);
    assert!(close(entitled(&result, "a"), 5.0) && close(entitled(&result, "b"), 5.0));
    assert!(close(entitled(&result, "(unbudgeted)"), 0.0));
}

#[test]
fn without_a_rest_work_no_budget_covers_is_entitled_to_nothing() {
    let budgets = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
        contract batch min-runtime=\"1h\" default=#true\nproject a share=\"100%\"\n";
    let trace = "id,project,gpus,submit,start,end\n1,stranger,4,0,0,3600\n";
    let result = run(budgets, trace);
    assert!(close(entitled(&result, "(unbudgeted)"), 0.0));
}

const NESTED: &str = "cluster c gpus=10 gpu-type=h100 gpus-per-node=10\n\
    contract batch min-runtime=\"1h\" default=#true\n\
    project p share=\"100%\" {\n    users alice\n    project q share=\"50%\"\n    project r share=\"50%\"\n}\n";

#[test]
fn an_inner_projects_own_jobs_take_what_its_sub_projects_leave() {
    // p's own jobs (alice's default, and a row naming p) are p's, not unbudgeted: a leaf
    // beside q and r with no share of its own. q asks for 6, p's own jobs for 3 + 4 = 7,
    // r for nothing: q gets its 6 (under its half, r's half is shared out), p's own jobs
    // the 4 left.
    let trace =
        "id,project,user,gpus,submit,start,end\n1,p/q,,6,0,0,3600\n2,,alice,3,0,0,3600\n3,p,,4,0,,3600\n";
    let result = run(NESTED, trace);
    assert!(close(entitled(&result, "p/q"), 6.0), "{}", entitled(&result, "p/q"));
    assert!(close(entitled(&result, "p (own jobs)"), 4.0), "{}", entitled(&result, "p (own jobs)"));
    assert!(close(entitled(&result, "p"), 10.0));
    assert!(close(entitled(&result, "(unbudgeted)"), 0.0));
    let own = result.whole.budgets.iter().find(|b| b.project == "p (own jobs)").unwrap();
    assert!(close(own.used_gpu_hours, 3.0), "alice's job ran; the row naming p never started");
}

#[test]
fn an_inner_projects_own_jobs_yield_to_its_sub_projects_shares() {
    // q and r each ask for 5 and p's own jobs for 10 on 10 GPUs: q and r get their halves
    // (5 each), and p's own jobs, with no share, nothing beyond a rounding error.
    let trace = "id,project,gpus,submit,start,end\n1,p/q,5,0,0,3600\n2,p/r,5,0,0,3600\n3,p,10,0,,3600\n";
    let result = run(NESTED, trace);
    assert!(close(entitled(&result, "p/q"), 5.0) && close(entitled(&result, "p/r"), 5.0));
    assert!(close(entitled(&result, "p (own jobs)"), 0.0));
}

#[test]
fn an_inner_project_without_own_jobs_lists_none() {
    let trace = "id,project,gpus,submit,start,end\n1,p/q,5,0,0,3600\n";
    let result = run(NESTED, trace);
    assert!(result.whole.budgets.iter().all(|b| b.project != "p (own jobs)"));
    assert_eq!(result.leaves, ["p/q", "p/r"]);
}
