//! Clusters: at least one, and whole nodes.

use crate::ast::Budget;
use crate::diagnostic::{Code, Diagnostic};

pub(super) fn check(budget: &Budget, out: &mut Vec<Diagnostic>) {
    if budget.clusters.is_empty() {
        let mut d = Diagnostic::error(Code::ClusterMissing, "no cluster is defined")
            .help("add a pool of GPUs, e.g. `cluster main gpus=64 gpu-type=h100 gpus-per-node=8`");
        if let Some(origin) = budget.origin {
            d = d.label(origin, "no cluster in this file");
        }
        out.push(d);
    }
    for cluster in &budget.clusters {
        let Some(gpus) = &cluster.gpus else { continue };
        let per_node = cluster.gpus_per_node();
        if gpus.value % per_node != 0 {
            let mut d = Diagnostic::warning(
                Code::ClusterPartialNode,
                format!("{} GPUs is not a whole number of {per_node}-GPU nodes", gpus.value),
            )
            .label(gpus.span, format!("{} nodes and {} GPUs", gpus.value / per_node, gpus.value % per_node));
            d = match &cluster.gpus_per_node {
                Some(written) => d.label(written.span, "GPUs per node"),
                None => d.label(cluster.name.span, format!("{per_node} GPUs per node, the default")),
            };
            out.push(d.help("give the GPUs schedulers can use, and `gpus-per-node`; a partial node distorts placement in the verifier"));
        }
    }
}
