//! Clusters: at least one, and whole nodes.

use crate::diagnostic::{Code, Diagnostic};
use crate::model::Budget;

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
        let (Some(gpus), Some(per_node)) = (&cluster.gpus, &cluster.gpus_per_node) else {
            continue;
        };
        if gpus.value % per_node.value != 0 {
            out.push(
                Diagnostic::warning(
                    Code::ClusterPartialNode,
                    format!(
                        "{} GPUs is not a whole number of {}-GPU nodes",
                        gpus.value, per_node.value
                    ),
                )
                .label(gpus.span, format!("{} nodes and {} GPUs", gpus.value / per_node.value, gpus.value % per_node.value))
                .label(per_node.span, "GPUs per node")
                .help("give the GPUs schedulers can use; a partial node distorts placement in the verifier"),
            );
        }
    }
}
