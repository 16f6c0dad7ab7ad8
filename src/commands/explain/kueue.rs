//! `allot explain NAMESPACE/NAME --live kueue [PATH]`: for a pending Workload, in budget
//! language, why Kueue holds it back and what would change that: Kueue's condition
//! translated, its budget now, its ClusterQueue's quota and borrowing, the workloads ahead
//! of it, the admitted workloads Kueue may preempt for it, and when it may be admitted
//! (allot's estimate, simulating Kueue's admission and preemption on the live objects from
//! now on; Kueue gives none). An admitted or finished workload gets a short account.
//! Nothing is written to the live system.

use std::sync::Arc;

use allot_compiler::escape;
use allot_compiler::ir::Model;
use allot_live::kueue::{self, Kueue, Preemption, Workload};
use allot_live::standing::{self, BudgetNow};
use allot_simulate::{ClusterObjects, Policy};
use allot_targets::kubernetes::kueue::{configuration, queue_names};
use allot_verify::render;
use serde_json::{Value, json};

use super::{AHEAD_SHOWN, ExplainFormat, budget_lines, span};
use crate::exit::{Error, Exit, Outcome};
use crate::output::print;
use crate::systems::kubernetes;

pub fn run(
    model: &Model,
    id: &str,
    cluster: Option<&str>,
    context: Option<&str>,
    format: ExplainFormat,
) -> Outcome {
    let Some((namespace, name)) = id.split_once('/').filter(|(ns, n)| is_name(ns) && is_name(n)) else {
        return Err(Error::failed(format!(
            "{id:?} is not a Kueue workload: name it NAMESPACE/NAME (lower-case letters, digits, '-' and '.')"
        )));
    };
    let (cluster, binding) = kubernetes::live_cluster(model, cluster)?;
    let connection = kubernetes::Connection::open(context)?;
    let reading = kubernetes::Reading::read(&connection, &binding.resource, true)?;
    let live_kueue = reading.kueue;
    let now = crate::budgets::now();
    let Some(workload) = live_kueue.workloads.iter().find(|w| w.namespace == namespace && w.name == name)
    else {
        eprintln!("error: Kueue holds no workload {id} on cluster {}", cluster.name);
        return Ok(Exit::Problems);
    };
    let jobs = kubernetes::demand(model, &cluster.name, &live_kueue, now);
    let status = standing::status(model, &jobs, now).map_err(|e| Error::failed(e.to_string()))?;
    let path = workload.cluster_queue.as_ref().and_then(|q| {
        queue_names(model, &cluster.name).into_iter().find(|(n, _)| n == q).map(|(_, path)| path)
    });
    let budget = path.as_ref().and_then(|p| {
        status
            .clusters
            .iter()
            .filter(|c| c.name == cluster.name)
            .flat_map(|c| &c.budgets)
            .find(|b| &b.path == p)
    });
    // Kueue's own positions, where the server serves its visibility API.
    let positions = match (&workload.cluster_queue, workload.is_pending()) {
        (Some(queue), true) => connection.positions(queue),
        _ => None,
    };
    let position = positions.and_then(|p| p.into_iter().find(|(w, _)| *w == workload.id()).map(|(_, at)| at));
    let estimate = match workload.is_pending() {
        false => Estimate::Simulated(None),
        true => {
            let budgets = queue_names(model, &cluster.name);
            let budget_of = |queue: &str| budgets.iter().find(|(n, _)| n == queue).map(|(_, p)| p.as_str());
            let simulated = reading.written.map_err(|e| e.to_string()).and_then(|objects| {
                let policy = policy(&cluster.name, &binding.resource, &objects, &live_kueue)?;
                kueue::simulated_start(model, &cluster.name, &live_kueue, policy, workload, budget_of, now)
                    .map_err(|e| e.to_string())
            });
            match simulated {
                Ok(at) => Estimate::Simulated(at),
                Err(why) => Estimate::FromLimits {
                    at: kueue::estimated_start(&live_kueue, workload, cluster.gpus, now),
                    why,
                },
            }
        }
    };
    let facts = Facts {
        workload,
        cluster: &cluster.name,
        path: path.as_deref(),
        budget,
        kueue: &live_kueue,
        position,
        estimate,
        now,
    };
    print(&match format {
        ExplainFormat::Json => crate::output::json(&facts.json())?,
        ExplainFormat::Human => facts.text(),
    })?;
    Ok(Exit::Success)
}

/// The `kueue` simulation policy of the live objects: Fair Sharing on (with the strategies
/// allot writes) when Kueue reports a weighted share for a ClusterQueue, else Kueue's
/// defaults (Kueue's own `Configuration` is not read from the cluster).
fn policy(cluster: &str, resource: &str, objects: &[Value], live: &Kueue) -> Result<Policy, String> {
    let fair_sharing = live.cluster_queues.iter().any(|q| q.weighted_share.is_some());
    let configuration = fair_sharing.then(configuration);
    let given = ClusterObjects {
        cluster,
        objects,
        configuration: configuration.as_ref(),
        resource,
        queues: &[],
        contracts: &[],
        later: &[],
    };
    let setup = allot_simulate::Kueue::new([given]).map_err(|e| format!("Kueue's {e}"))?;
    Ok(Policy::Kueue(Arc::new(setup)))
}

/// When a pending workload may be admitted, as allot estimates it.
enum Estimate {
    /// By the `kueue` policy, simulated from now (`None`: no estimate).
    Simulated(Option<i64>),
    /// From the maximum execution times alone, the objects not simulated (`why`).
    FromLimits { at: Option<i64>, why: String },
}

impl Estimate {
    fn at(&self) -> Option<i64> {
        match self {
            Estimate::Simulated(at) | Estimate::FromLimits { at, .. } => *at,
        }
    }

    /// The line of the human output.
    fn line(&self) -> String {
        let how = match self {
            Estimate::Simulated(_) => "Kueue's admission and preemption simulated from now on its objects: admitted workloads run to their maximum execution time, else their contract's max-runtime; nothing new arrives".to_string(),
            Estimate::FromLimits { why, .. } => format!(
                "every admitted workload runs to its maximum execution time, the workloads ahead of it in its ClusterQueue go first, no preemption; Kueue's objects could not be simulated: {}",
                escape::line(why)
            ),
        };
        match (self.at(), self) {
            (Some(t), _) => format!("  allot: {} ({how})\n", render::time(t)),
            (None, Estimate::Simulated(_)) => "  allot: no estimate (it waits for something else than GPUs, or could never be admitted, or, as simulated, waits for a workload with no maximum execution time)\n".to_string(),
            (None, Estimate::FromLimits { .. }) => format!("  allot: no estimate (it waits for something else than GPUs, an admitted workload has no maximum execution time, or it asks for more GPUs than the cluster has; {how})\n"),
        }
    }

    /// How it was made, in JSON.
    fn method(&self) -> &'static str {
        match self {
            Estimate::Simulated(_) => "simulated",
            Estimate::FromLimits { .. } => "maximum_execution_times",
        }
    }
}

/// A Kubernetes object name or namespace (a DNS subdomain).
fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// What `explain` found of one workload.
struct Facts<'a> {
    workload: &'a Workload,
    cluster: &'a str,
    /// Its budget's project path (none: no budget covers its ClusterQueue).
    path: Option<&'a str>,
    budget: Option<&'a BudgetNow>,
    kueue: &'a Kueue,
    /// Its position in its ClusterQueue, from Kueue's visibility API.
    position: Option<u64>,
    estimate: Estimate,
    now: i64,
}

impl Facts<'_> {
    fn state(&self) -> &'static str {
        let w = self.workload;
        if w.finished {
            "finished"
        } else if w.admitted_at.is_some() {
            "admitted"
        } else if w.reserved_at.is_some() {
            "quota reserved"
        } else {
            "pending"
        }
    }

    fn text(&self) -> String {
        let w = self.workload;
        let time = render::time;
        let contract =
            if w.priority_class.is_empty() { "-".to_string() } else { escape::line(&w.priority_class) };
        let queue = escape::line(w.cluster_queue.as_deref().unwrap_or("-"));
        let mut out = format!(
            "Workload {} on cluster {} (Kueue): {} GPUs for budget {} (ClusterQueue {queue}) under contract {contract}, {}\n",
            escape::line(&w.id()),
            self.cluster,
            w.gpus,
            self.path.unwrap_or("none"),
            self.state()
        );
        if w.finished {
            let finished = w.condition("Finished");
            out.push_str(&format!(
                "  submitted {}, finished {} ({})\n",
                time(w.created),
                finished.and_then(|c| c.at).map_or("-".to_string(), time),
                finished.map_or("-".to_string(), |c| escape::line(&c.reason))
            ));
            return out;
        }
        if let Some(reserved) = w.reserved_at {
            match w.admitted_at {
                Some(at) => {
                    out.push_str(&format!("  admitted at {} (waited {})\n", time(at), span(at - w.created)))
                }
                None => out.push_str(&format!(
                    "  quota reserved at {} (waited {}); its admission checks have not passed yet\n",
                    time(reserved),
                    span(reserved - w.created)
                )),
            }
            out.push_str("  Kueue has no minimum runtime: its contract's priority protects it only from lower-priority workloads of its ClusterQueue\n");
            if let Some(end) = w.admitted_at.and(w.ends_at()) {
                out.push_str(&format!("  its maximum execution time ends it at {}\n", time(end)));
            }
            out.push_str(&budget_lines(self.budget));
            return out;
        }
        out.push_str(&format!("  waiting since {} ({})\n", time(w.created), span(self.now - w.created)));
        out.push_str(&format!("\nWhy: {}\n", escape::line(&kueue::reason(self.kueue, w, self.now))));
        out.push_str(&budget_lines(self.budget));
        if let Some(q) = w.cluster_queue.as_deref().and_then(|q| self.kueue.cluster_queue(q)) {
            let borrowing = match q.borrowing_limit {
                Some(limit) => format!("may borrow up to {limit} more"),
                None => "may borrow what its cohort lends".to_string(),
            };
            out.push_str(&format!(
                "Its ClusterQueue {}: quota {} GPUs ({borrowing}), {} reserved now, {} of them borrowed; weighted share {}.\n",
                escape::line(&q.name),
                q.nominal_gpus,
                q.reserved_gpus,
                q.borrowed_gpus,
                q.weighted_share.map_or("- (Fair Sharing off)".to_string(), |s| s.to_string()),
            ));
            if let Some(cohort) = &q.cohort {
                out.push_str(&self.cohort_line(cohort));
            }
        }
        let ahead = kueue::ahead(self.kueue, w, self.now);
        let ahead_gpus: u64 = ahead.iter().map(|a| u64::from(a.gpus)).sum();
        out.push_str(&format!(
            "\nAhead of it in ClusterQueue {queue}: {} workloads waiting for {ahead_gpus} GPUs (higher priority first, then older){}\n",
            ahead.len(),
            self.position.map_or(String::new(), |p| format!("; Kueue's position: {p}"))
        ));
        for a in ahead.iter().take(AHEAD_SHOWN) {
            out.push_str(&format!(
                "  workload {} ({} GPUs, priority {})\n",
                escape::line(&a.id()),
                a.gpus,
                a.priority
            ));
        }
        let preemptible = kueue::preemptible(self.kueue, w);
        out.push_str(&format!("\nAdmitted workloads Kueue may preempt for it: {}\n", preemptible.len()));
        for (p, why) in preemptible.iter().take(AHEAD_SHOWN) {
            out.push_str(&format!(
                "  workload {} ({}, {} GPUs, priority {}): {}\n",
                escape::line(&p.id()),
                escape::line(p.cluster_queue.as_deref().unwrap_or("-")),
                p.gpus,
                p.priority,
                match why {
                    Preemption::LowerPriority => "lower priority in its ClusterQueue",
                    Preemption::Reclaim => "its ClusterQueue borrows from the cohort",
                }
            ));
        }
        out.push_str("\nWhen it may be admitted:\n");
        out.push_str(&self.estimate.line());
        out.push_str("  Kueue: gives no estimate\n");
        out
    }

    /// The ClusterQueues and Cohorts of `cohort` by Fair Sharing's weighted share, the
    /// lowest first: Kueue admits from the lowest first and reclaims from the highest.
    fn members(&self, cohort: &str) -> Vec<(String, Option<i64>)> {
        let queues = self.kueue.cluster_queues.iter().filter(|q| q.cohort.as_deref() == Some(cohort));
        let cohorts = self.kueue.cohorts.iter().filter(|c| c.parent.as_deref() == Some(cohort));
        let mut members: Vec<(String, Option<i64>)> = queues
            .map(|q| (q.name.clone(), q.weighted_share))
            .chain(cohorts.map(|c| (format!("cohort {}", c.name), c.weighted_share)))
            .collect();
        members.sort_by_key(|(name, share)| (share.unwrap_or(i64::MAX), name.clone()));
        members
    }

    fn cohort_line(&self, cohort: &str) -> String {
        let members: Vec<String> = self
            .members(cohort)
            .iter()
            .map(|(name, share)| {
                format!("{} {}", escape::line(name), share.map_or("-".to_string(), |s| s.to_string()))
            })
            .collect();
        format!(
            "In cohort {}, by weighted share: {}. Kueue admits from the lowest first, and reclaims from the highest.\n",
            escape::line(cohort),
            members.join(", ")
        )
    }

    fn json(&self) -> Value {
        let w = self.workload;
        let pending = w.is_pending();
        let ahead: Vec<Value> = if !pending {
            Vec::new()
        } else {
            kueue::ahead(self.kueue, w, self.now)
                .iter()
                .map(|a| json!({ "workload": a.id(), "gpus": a.gpus, "priority": a.priority }))
                .collect()
        };
        let candidates = if pending { kueue::preemptible(self.kueue, w) } else { Vec::new() };
        let preemptible: Vec<Value> = candidates
            .iter()
            .map(|(p, why)| {
                json!({
                    "workload": p.id(), "cluster_queue": p.cluster_queue, "gpus": p.gpus, "priority": p.priority,
                    "why": match why { Preemption::LowerPriority => "lower_priority", Preemption::Reclaim => "reclaim" },
                })
            })
            .collect();
        let conditions: Vec<Value> = w
            .conditions
            .iter()
            .map(|c| json!({ "type": c.kind, "status": c.status, "reason": c.reason, "message": c.message, "at": c.at }))
            .collect();
        json!({
            "workload": w.id(),
            "state": self.state(),
            "cluster": self.cluster,
            "cluster_queue": w.cluster_queue,
            "budget": self.path,
            "contract": w.priority_class,
            "priority": w.priority,
            "gpus": w.gpus,
            "created": w.created,
            "quota_reserved": w.reserved_at,
            "admitted": w.admitted_at,
            "ends": w.admitted_at.and(w.ends_at()),
            "conditions": conditions,
            "reason_explained": pending.then(|| kueue::reason(self.kueue, w, self.now)),
            "budget_now": self.budget.map(|b| json!({
                "running_gpus": b.running_gpus, "pending_gpus": b.pending_gpus,
                "entitled_gpus": b.entitled_gpus, "standing": b.standing.word(),
            })),
            "ahead": ahead,
            "position": self.position,
            "cohort": self.kueue.queue_of(w).and_then(|q| q.cohort.clone()).map(|c| {
                let members: Vec<Value> = self.members(&c).into_iter().map(|(name, share)| json!({ "name": name, "weighted_share": share })).collect();
                json!({ "name": c, "members": members })
            }),
            "preemptible": preemptible,
            "estimated_start": pending.then(|| self.estimate.at()).flatten(),
            "estimated_by": pending.then(|| self.estimate.method()),
            "estimate_not_simulated": match &self.estimate {
                Estimate::FromLimits { why, .. } if pending => Some(why.as_str()),
                _ => None,
            },
        })
    }
}
