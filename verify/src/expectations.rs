//! The budgets' expectations (their `expect` block) checked against an audit: the delivered
//! ratio of each leaf budget and of all of them, and each contract's wait percentiles. Each
//! check is a [`Verdict`]; `allot replay audit` fails when one is not met.

use allot_compiler::ir::Model;

use crate::figures::Audit;

/// One expectation of the budgets, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub expectation: String,
    pub subject: String,
    pub value: f64,
    pub threshold: f64,
    pub met: bool,
}

/// Every expectation of `model` that `audit` has figures for, checked.
pub fn check(model: &Model, audit: &Audit) -> Vec<Verdict> {
    let mut out = Vec::new();
    let e = &model.expectations;
    if let Some(threshold) = e.delivered_per_budget {
        for b in audit.leaf_budgets() {
            if let Some(ratio) = b.delivered_ratio() {
                out.push(Verdict {
                    expectation: "delivered per budget".into(),
                    subject: format!("{} on {}", b.project, b.cluster),
                    value: ratio,
                    threshold,
                    met: ratio + 1e-12 >= threshold,
                });
            }
        }
    }
    if let (Some(threshold), Some(ratio)) = (e.delivered_overall, audit.whole.overall_ratio(&audit.leaves)) {
        out.push(Verdict {
            expectation: "delivered overall".into(),
            subject: "all budgets".into(),
            value: ratio,
            threshold,
            met: ratio + 1e-12 >= threshold,
        });
    }
    for wait in &e.waits {
        let Some(contract) = audit.whole.contracts.iter().find(|c| c.contract == wait.contract) else {
            continue;
        };
        for (p, limit) in [(50.0, wait.p50_seconds), (90.0, wait.p90_seconds), (99.0, wait.p99_seconds)] {
            if let (Some(limit), Some(value)) = (limit, contract.waits.percentile(p)) {
                out.push(Verdict {
                    expectation: format!("p{p} wait"),
                    subject: format!("contract {}", wait.contract),
                    value: value as f64,
                    threshold: limit as f64,
                    met: value <= limit,
                });
            }
        }
    }
    out
}
