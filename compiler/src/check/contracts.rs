//! Contracts: exactly one default, a minimum runtime within the maximum, and reserves that
//! leave every cluster GPUs for the budgets.

use crate::ast::Budget;
use crate::diagnostic::{Code, Diagnostic};

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    let defaults: Vec<_> = budget.contracts.iter().filter(|c| c.is_default()).collect();
    match defaults.as_slice() {
        [] => {
            let mut d = Diagnostic::error(Code::ContractNoDefault, "no contract is the default")
                .help("mark the contract jobs get when they name none: `contract batch ... default=#true`");
            if let Some(first) = budget.contracts.first() {
                d = d.label(first.name.span, "e.g. this one could be the default");
            } else if let Some(origin) = budget.origin {
                d = d.label(origin, "no contract in this file");
                d.help = Some(
                    "define at least one contract, e.g. `contract batch min-runtime=\"1h\" default=#true`"
                        .into(),
                );
            }
            out.push(d);
        }
        [_] => {}
        [first, rest @ ..] => {
            for extra in rest {
                let span = extra.default.as_ref().map_or(extra.span, |d| d.span);
                let first_span = first.default.as_ref().map_or(first.span, |d| d.span);
                out.push(
                    Diagnostic::error(
                        Code::ContractMultipleDefaults,
                        "more than one contract is the default",
                    )
                    .label(span, format!("`{}` is a default", extra.name.value))
                    .label(first_span, format!("`{}` is the default already", first.name.value))
                    .help("keep `default=#true` on one contract"),
                );
            }
        }
    }
    for contract in &budget.contracts {
        if let (Some(min), Some(max)) = (&contract.min_runtime, &contract.max_runtime)
            && min.value > max.value
        {
            out.push(
                Diagnostic::error(
                    Code::ContractMinAboveMax,
                    format!("contract `{}` protects jobs longer than it lets them run", contract.name.value),
                )
                .label(min.span, "minimum")
                .label(max.span, "is above the maximum")
                .help("the minimum runtime is the protected window; it must fit inside the maximum runtime"),
            );
        }
    }
    let reserves: Vec<_> = budget.contracts.iter().filter_map(|c| Some((c, c.reserve.as_ref()?))).collect();
    let held: u64 = reserves.iter().map(|(_, r)| r.value).sum();
    if held > 0
        && let Some(cluster) = budget.clusters.iter().filter(|c| held >= c.gpus()).min_by_key(|c| c.gpus())
    {
        let mut d = Diagnostic::error(
            Code::ContractReserveTooLarge,
            format!(
                "the contracts' reserves hold {held} GPUs, all of cluster `{}`'s {}",
                cluster.name.value,
                cluster.gpus()
            ),
        );
        for (contract, reserve) in &reserves {
            d = d.label(reserve.span, format!("`{}` holds {}", contract.name.value, reserve.value));
        }
        out.push(d.help("a reserve is held on every cluster: keep the reserves together below the smallest cluster's GPUs"));
    }
}
