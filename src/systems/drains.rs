//! The drains allot makes on a live Slurm, as `allot drain` and `allot status` read them: the
//! reason that marks a drain as allot's, which nodes are allot's or unavailable, what each
//! QOS lets a drain do (the contracts merged with the live QOS), and the nodes allot drains
//! now with when each will be empty.

use std::collections::HashMap;

use allot_compiler::escape;
use allot_compiler::ir::Model;
use allot_compiler::names::PREEMPTIBLE_QOS;
use allot_live::drain::{self, Terms};
use allot_targets::slurm::qos;
use allot_verify::render::time;
use serde_json::{Value, json};

use crate::exit::Error;
use crate::systems::slurm::{self, Node};

/// How the reason of a drain allot made starts.
pub const REASON: &str = "allot drain: ";

/// What each QOS lets a drain do: the budgets' contracts (and the preemptible QOS: no
/// protection, resumable), each merged with its `live` QOS when Slurm has it (the longer
/// protection; resumable only when the live QOS requeues too).
pub fn terms(model: &Model, live: &[qos::Qos]) -> HashMap<String, Terms> {
    let live: HashMap<&str, &qos::Qos> = live.iter().map(|q| (q.name.as_str(), q)).collect();
    let contracts = model
        .contracts
        .iter()
        .map(|c| (c.name.as_str(), c.min_runtime_seconds, c.resumable, c.max_runtime_seconds));
    let preemptible = std::iter::once((PREEMPTIBLE_QOS, 0, true, None));
    contracts
        .chain(preemptible)
        .map(|(name, protected, resumable, max_runtime)| {
            let terms = match live.get(name) {
                None => Terms { protected_seconds: protected, resumable, max_runtime_seconds: max_runtime },
                Some(q) => Terms {
                    protected_seconds: protected.max(q.preempt_exempt.unwrap_or(0)),
                    resumable: resumable && q.preempt_mode.split(',').any(|m| m == "requeue"),
                    max_runtime_seconds: max_runtime,
                },
            };
            (name.to_string(), terms)
        })
        .collect()
}

/// A node allot drains, as `allot status` shows it.
pub struct Draining {
    pub node: String,
    /// Its reason, after allot's prefix.
    pub reason: String,
    /// The jobs still on it.
    pub jobs: usize,
    /// When it will be empty (`None`: a job on it has no known end).
    pub empty_at: Option<i64>,
}

/// The nodes of `cluster` that allot drains, each with the jobs still on it and when it
/// will be empty at `now` under the contracts and the `live` QOS (one `squeue` a node;
/// none when no node is allot's).
pub fn draining(model: &Model, live: &[qos::Qos], cluster: &str, now: i64) -> Result<Vec<Draining>, Error> {
    let ours: Vec<Node> = slurm::nodes(cluster, &[])?.into_iter().filter(drained_by_allot).collect();
    if ours.is_empty() {
        return Ok(Vec::new());
    }
    let terms = terms(model, live);
    ours.into_iter()
        .map(|node| {
            let plan = drain::plan(&slurm::node_jobs(cluster, &[&node.name])?, &terms, now);
            Ok(Draining {
                reason: node.reason.strip_prefix(REASON).unwrap_or(&node.reason).to_string(),
                node: node.name,
                jobs: plan.jobs.len(),
                empty_at: plan.empty_at,
            })
        })
        .collect()
}

impl Draining {
    /// One line: `gpu01 (disk failing): 2 jobs left, empty at 2026-12-03T11:02:10Z`.
    pub fn said(&self, now: i64) -> String {
        let jobs = match self.jobs {
            0 => "empty".to_string(),
            1 => "1 job left".to_string(),
            n => format!("{n} jobs left"),
        };
        let when = match self.empty_at {
            _ if self.jobs == 0 => String::new(),
            Some(at) if at > now => format!(", empty at {}", time(at)),
            Some(_) => {
                ", empty as soon as the jobs due leave (run `allot drain` again, or with --wait)".to_string()
            }
            None => ", no time to be empty (a job has no known end)".to_string(),
        };
        format!("{} ({}): {jobs}{when}", escape::line(&self.node), escape::line(&self.reason))
    }

    pub fn json(&self) -> Value {
        json!({ "node": self.node, "reason": self.reason, "jobs": self.jobs, "empty_at": self.empty_at })
    }
}

/// Whether `node` cannot take jobs: drained, draining, down, failed or in maintenance.
pub fn unavailable(node: &Node) -> bool {
    node.state
        .split('+')
        .any(|f| matches!(f, "drain" | "drained" | "draining" | "down" | "fail" | "failing" | "maint"))
}

/// Whether allot drained `node`: draining or drained, with allot's reason.
pub fn drained_by_allot(node: &Node) -> bool {
    node.state.split('+').any(|f| matches!(f, "drain" | "drained" | "draining"))
        && node.reason.starts_with(REASON)
}
