//! A live Kueue as its API server lists it (`kueue.x-k8s.io/v1beta2`): the ClusterQueues
//! with their quota and usage, the Cohorts, the LocalQueues, and the Workloads with their
//! admission and conditions, read from the objects' JSON. A Workload holding quota
//! (`QuotaReserved`) becomes a running [`Job`], one waiting for it a pending [`Job`]; beside
//! each, what Kueue says of it that a trace does not hold.

use std::collections::HashMap;

use serde_json::Value;

use crate::trace::Job;

/// The most objects of one kind read.
pub const MAX_OBJECTS: usize = 200_000;

/// A ClusterQueue: the quota of one budget (its GPUs), and what it holds of them now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterQueue {
    pub name: String,
    pub cohort: Option<String>,
    /// Its GPUs' `nominalQuota`, over every flavor.
    pub nominal_gpus: u64,
    /// How far above its quota it may borrow (`None`: as far as its cohort lends).
    pub borrowing_limit: Option<u64>,
    /// GPUs its admitted workloads reserve (`flavorsReservation`), and of those, borrowed.
    pub reserved_gpus: u64,
    pub borrowed_gpus: u64,
    /// Fair Sharing's weighted share: its borrowing against what its cohort can lend,
    /// over its weight, in thousandths (0: within its quota); `None` when Fair Sharing is off.
    pub weighted_share: Option<i64>,
    /// Whether Kueue says it can admit workloads (its `Active` condition; no condition: yes).
    pub active: bool,
}

/// A Cohort: an inner budget, with Fair Sharing's weighted share of its borrowing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cohort {
    pub name: String,
    pub parent: Option<String>,
    pub weighted_share: Option<i64>,
}

/// A LocalQueue: the queue a namespace submits to, and its ClusterQueue.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalQueue {
    pub namespace: String,
    pub name: String,
    pub cluster_queue: String,
}

/// One condition of a Workload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
    pub at: Option<i64>,
}

/// A Workload: a job as Kueue queues it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    pub namespace: String,
    pub name: String,
    /// Its LocalQueue (`spec.queueName`).
    pub queue: String,
    /// Its ClusterQueue: where it holds quota, or where its LocalQueue sends it.
    pub cluster_queue: Option<String>,
    pub gpus: u64,
    pub priority: i64,
    /// Its WorkloadPriorityClass: allot's contract.
    pub priority_class: String,
    pub created: i64,
    /// When its quota was reserved, while it holds it.
    pub reserved_at: Option<i64>,
    pub finished: bool,
    /// `spec.active`: a deactivated workload is never admitted.
    pub active: bool,
    /// `spec.maximumExecutionTimeSeconds`: Kueue evicts it past that.
    pub max_execution: Option<i64>,
    /// When an evicted workload re-enters the queue.
    pub requeue_at: Option<i64>,
    pub conditions: Vec<Condition>,
}

impl Workload {
    /// `namespace/name`, as `explain` names it.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_pending(&self) -> bool {
        self.reserved_at.is_none() && !self.finished
    }

    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    /// Why it is not admitted, as Kueue says it: its `QuotaReserved` condition when false.
    pub fn pending_condition(&self) -> Option<&Condition> {
        self.condition("QuotaReserved").filter(|c| !c.status)
    }

    /// Whether it is pending and waits for GPUs, rather than being unable to be queued, too
    /// large for its ClusterQueue ever, deactivated, or backing off after an eviction until
    /// a later time than `now`: only such workloads ask for GPUs now.
    pub fn waits_for_gpus(&self, now: i64) -> bool {
        self.is_pending()
            && self.active
            && self.requeue_at.is_none_or(|t| t <= now)
            && !self.pending_condition().is_some_and(|c| blocked(&c.reason, &c.message))
    }

    /// As a job of allot cluster `cluster` in budget `project` (a project path; empty: the
    /// work no budget covers).
    pub fn job(&self, cluster: &str, project: &str) -> Job {
        Job {
            id: self.id().into(),
            project: project.into(),
            // A namespace is no user: the budget comes from the queue, never from a default.
            user: "".into(),
            cluster: cluster.into(),
            gpus: u32::try_from(self.gpus).unwrap_or(u32::MAX),
            submit: self.created,
            start: self.reserved_at,
            contract: self.priority_class.as_str().into(),
            ..Job::default()
        }
    }
}

/// Whether a `QuotaReserved=False` reason and message say the workload cannot be admitted
/// as things are, whatever frees up.
fn blocked(reason: &str, message: &str) -> bool {
    matches!(reason, "Inadmissible" | "ExceedsMaxQuota" | "NoMatchingFlavor" | "Misconfigured")
        || message.contains("maximum capacity")
        || message.contains("is inactive")
        || message.contains("not found")
}

/// Kueue's reason for a pending workload, said in budget language (an unknown one quoted).
pub fn reason(workload: &Workload, now: i64) -> String {
    if !workload.active {
        return "it is deactivated (`spec.active: false`): Kueue admits it only once it is active again"
            .into();
    }
    if let Some(at) = workload.requeue_at.filter(|t| *t > now) {
        return format!(
            "it was evicted and backs off: it re-enters the queue at {}",
            crate::render::time(at)
        );
    }
    let evicted = workload.condition("Evicted").filter(|c| c.status);
    let Some(c) = workload.pending_condition() else {
        return match evicted {
            Some(e) => format!("it was evicted ({}) and waits to be admitted again", e.reason),
            None => "Kueue has not looked at it yet".into(),
        };
    };
    let (reason, message) = (c.reason.as_str(), c.message.as_str());
    let said = if message.contains("Pending the preemption") || reason == "WaitingForPreemptedWorkloads" {
        "Kueue is preempting workloads to make room for it"
    } else if message.contains("maximum capacity") || reason == "ExceedsMaxQuota" {
        "it asks for more GPUs than its ClusterQueue may ever hold (its quota and what it may borrow): it will not start as it is"
    } else if message.contains("insufficient unused quota") || reason == "WaitingForQuota" {
        "its ClusterQueue's quota and what its cohort can lend it are in use: it waits for GPUs to free up, or for Kueue to reclaim GPUs lent to budgets beyond theirs"
    } else if message.contains("no longer fits") {
        "another workload took the GPUs it was to have: it waits for the next round"
    } else if message.contains("is inactive") || message.contains("not found") || reason == "Inadmissible" {
        "Kueue cannot queue it: its LocalQueue or ClusterQueue is missing or stopped"
    } else if reason == "NoMatchingFlavor" {
        "no flavor of its ClusterQueue fits what it asks for: it will not start as it is"
    } else {
        return format!("Kueue says {reason}: {message}");
    };
    format!("{said} (Kueue: {reason}: {message})")
}

/// The pending workloads of `workload`'s ClusterQueue that Kueue considers before it and
/// that wait for GPUs: higher priority first, then older (Kueue's `BestEffortFIFO` order,
/// the one allot's ClusterQueues use), ending with the closest to it.
pub fn ahead<'w>(workloads: &'w [Workload], workload: &Workload, now: i64) -> Vec<&'w Workload> {
    let key = |w: &Workload| (-w.priority, w.created, w.namespace.clone(), w.name.clone());
    let mut ahead: Vec<&Workload> = workloads
        .iter()
        .filter(|w| w.waits_for_gpus(now) && w.cluster_queue == workload.cluster_queue)
        .filter(|w| (w.namespace != workload.namespace || w.name != workload.name) && key(w) < key(workload))
        .collect();
    ahead.sort_by_key(|w| key(w));
    ahead
}

/// Why an admitted workload may be preempted for a pending one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// It has a lower priority in the same ClusterQueue (`withinClusterQueue: LowerPriority`).
    LowerPriority,
    /// Its ClusterQueue borrows more for its weight than the pending one's would
    /// (Fair Sharing's weighted share; `reclaimWithinCohort: Any`).
    Reclaim,
}

/// The admitted workloads Kueue may preempt for `workload`, as allot's ClusterQueues set
/// preemption: those of lower priority in its ClusterQueue, and those of ClusterQueues with
/// a higher weighted share than its own (borrowing more for their weight), the lowest
/// priority first, then the latest admitted.
pub fn preemptible<'k>(kueue: &'k Kueue, workload: &Workload) -> Vec<(&'k Workload, Preemption)> {
    let share = |name: Option<&String>| {
        name.and_then(|n| kueue.cluster_queue(n)).and_then(|q| q.weighted_share).unwrap_or(0)
    };
    let own = share(workload.cluster_queue.as_ref());
    let mut out: Vec<(&Workload, Preemption)> = kueue
        .workloads
        .iter()
        .filter(|w| w.reserved_at.is_some())
        .filter_map(|w| {
            if w.cluster_queue == workload.cluster_queue {
                (w.priority < workload.priority).then_some((w, Preemption::LowerPriority))
            } else {
                (share(w.cluster_queue.as_ref()) > own).then_some((w, Preemption::Reclaim))
            }
        })
        .collect();
    out.sort_by_key(|(w, _)| (w.priority, std::cmp::Reverse(w.reserved_at)));
    out
}

/// When `workload` would be admitted if every admitted workload ran to its maximum
/// execution time and the workloads ahead of it in its ClusterQueue were admitted first, in
/// order, each as soon as enough of the cluster's `gpus` are free (no preemption; the other
/// ClusterQueues' pending workloads and borrowing limits not counted). `None` when it waits
/// for something else than GPUs, when a workload it must wait for has no maximum execution
/// time, or when it asks for more GPUs than the cluster has.
pub fn estimated_start(workloads: &[Workload], workload: &Workload, gpus: u64, now: i64) -> Option<i64> {
    if !workload.waits_for_gpus(now) {
        return None;
    }
    let holding = workloads
        .iter()
        .filter_map(|w| w.reserved_at.map(|at| (w.max_execution.map(|m| at.saturating_add(m)), w.gpus)))
        .collect();
    let line: Vec<(u64, Option<i64>)> = ahead(workloads, workload, now)
        .into_iter()
        .chain([workload])
        .map(|w| (w.gpus, w.max_execution))
        .collect();
    crate::explain::start_in_line(holding, &line, gpus, now)
}

/// The positions in a `PendingWorkloadsSummary` of Kueue's visibility API:
/// `namespace/name` and `positionInClusterQueue` (the first 0) of each item that has them.
pub fn positions(summary: &Value) -> Vec<(String, u64)> {
    array(&summary["items"])
        .iter()
        .filter_map(|i| {
            let metadata = &i["metadata"];
            let id = format!("{}/{}", metadata["namespace"].as_str()?, metadata["name"].as_str()?);
            Some((id, i["positionInClusterQueue"].as_u64()?))
        })
        .collect()
}

/// Why an object cannot be read, naming it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {problem}")]
pub struct ObjectError {
    pub object: String,
    pub problem: String,
}

/// A live Kueue, its objects as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kueue {
    pub cluster_queues: Vec<ClusterQueue>,
    pub cohorts: Vec<Cohort>,
    pub local_queues: Vec<LocalQueue>,
    pub workloads: Vec<Workload>,
}

/// The lists of each kind, as the API server returned their items.
pub struct Lists<'a> {
    pub cluster_queues: &'a [Value],
    pub cohorts: &'a [Value],
    pub local_queues: &'a [Value],
    pub workloads: &'a [Value],
}

impl Kueue {
    /// Reads the objects, counting GPUs of `resource` (`nvidia.com/gpu`). A pending workload
    /// gets its ClusterQueue from its LocalQueue.
    pub fn read(lists: &Lists<'_>, resource: &str) -> Result<Kueue, ObjectError> {
        let mut kueue = Kueue {
            cluster_queues: each(lists.cluster_queues, "ClusterQueue", |o, f| cluster_queue(o, f, resource))?,
            cohorts: each(lists.cohorts, "Cohort", |o, f| {
                Ok(Cohort {
                    name: name(o),
                    parent: string(&o["spec"]["parentName"]),
                    weighted_share: share(&o["status"], f)?,
                })
            })?,
            local_queues: each(lists.local_queues, "LocalQueue", |o, f| {
                Ok(LocalQueue {
                    namespace: text(&o["metadata"]["namespace"]),
                    name: name(o),
                    cluster_queue: string(&o["spec"]["clusterQueue"])
                        .ok_or_else(|| f("no spec.clusterQueue"))?,
                })
            })?,
            workloads: each(lists.workloads, "Workload", |o, f| workload(o, f, resource))?,
        };
        let routes: HashMap<(&str, &str), &str> = kueue
            .local_queues
            .iter()
            .map(|q| ((q.namespace.as_str(), q.name.as_str()), q.cluster_queue.as_str()))
            .collect();
        let routed: Vec<Option<String>> = kueue
            .workloads
            .iter()
            .map(|w| {
                w.cluster_queue.clone().or_else(|| {
                    routes.get(&(w.namespace.as_str(), w.queue.as_str())).map(|cq| cq.to_string())
                })
            })
            .collect();
        for (w, cq) in kueue.workloads.iter_mut().zip(routed) {
            w.cluster_queue = cq;
        }
        Ok(kueue)
    }

    pub fn cluster_queue(&self, name: &str) -> Option<&ClusterQueue> {
        self.cluster_queues.iter().find(|q| q.name == name)
    }
}

/// Each object read by `read`, at most [`MAX_OBJECTS`]; an error names the object.
fn each<T>(
    items: &[Value],
    kind: &str,
    read: impl Fn(&Value, &dyn Fn(&str) -> ObjectError) -> Result<T, ObjectError>,
) -> Result<Vec<T>, ObjectError> {
    if items.len() > MAX_OBJECTS {
        return Err(ObjectError { object: format!("{kind}s"), problem: format!("more than {MAX_OBJECTS}") });
    }
    items
        .iter()
        .map(|o| {
            let namespace = o["metadata"]["namespace"].as_str().map(|n| format!("{n}/")).unwrap_or_default();
            let object = format!("{kind} {namespace}{}", name(o));
            read(o, &|problem: &str| ObjectError { object: object.clone(), problem: problem.to_string() })
        })
        .collect()
}

fn name(o: &Value) -> String {
    text(&o["metadata"]["name"])
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn string(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// A count of GPUs as Kubernetes writes quantities: `8`, `"8"`, `"8000m"`; absent: 0.
fn gpus(v: &Value, f: &dyn Fn(&str) -> ObjectError) -> Result<u64, ObjectError> {
    let bad = || f(&format!("GPU quantity {v} is not a whole number"));
    match v {
        Value::Null => Ok(0),
        Value::Number(n) => n.as_u64().ok_or_else(bad),
        Value::String(s) => match s.strip_suffix('m') {
            Some(milli) => {
                milli.parse::<u64>().ok().filter(|m| m % 1000 == 0).map(|m| m / 1000).ok_or_else(bad)
            }
            None => s.parse().map_err(|_| bad()),
        },
        _ => Err(bad()),
    }
}

/// A time as the API server writes it (RFC 3339), in epoch seconds.
fn time(v: &Value, f: &dyn Fn(&str) -> ObjectError) -> Result<Option<i64>, ObjectError> {
    match v.as_str() {
        None => Ok(None),
        Some(t) => t
            .parse::<jiff::Timestamp>()
            .map(|t| Some(t.as_second()))
            .map_err(|_| f(&format!("time {t:?} is not RFC 3339"))),
    }
}

fn share(status: &Value, f: &dyn Fn(&str) -> ObjectError) -> Result<Option<i64>, ObjectError> {
    match &status["fairSharing"]["weightedShare"] {
        Value::Null => Ok(None),
        v => v.as_i64().map(Some).ok_or_else(|| f(&format!("weightedShare {v} is not a whole number"))),
    }
}

/// The GPUs of `resource` over the flavors of a `flavorsReservation`, and of them borrowed.
fn flavors_usage(
    flavors: &Value,
    resource: &str,
    f: &dyn Fn(&str) -> ObjectError,
) -> Result<(u64, u64), ObjectError> {
    let (mut total, mut borrowed) = (0u64, 0u64);
    for flavor in array(flavors) {
        for r in array(&flavor["resources"]).iter().filter(|r| r["name"] == resource) {
            total = total.saturating_add(gpus(&r["total"], f)?);
            borrowed = borrowed.saturating_add(gpus(&r["borrowed"], f)?);
        }
    }
    Ok((total, borrowed))
}

fn cluster_queue(
    o: &Value,
    f: &dyn Fn(&str) -> ObjectError,
    resource: &str,
) -> Result<ClusterQueue, ObjectError> {
    let (mut nominal, mut limit) = (0u64, None::<u64>);
    for group in array(&o["spec"]["resourceGroups"]) {
        for flavor in array(&group["flavors"]) {
            for r in array(&flavor["resources"]).iter().filter(|r| r["name"] == resource) {
                nominal = nominal.saturating_add(gpus(&r["nominalQuota"], f)?);
                if !r["borrowingLimit"].is_null() {
                    limit = Some(limit.unwrap_or(0).saturating_add(gpus(&r["borrowingLimit"], f)?));
                }
            }
        }
    }
    let status = &o["status"];
    let (reserved, borrowed) = flavors_usage(&status["flavorsReservation"], resource, f)?;
    let active = array(&status["conditions"])
        .iter()
        .find(|c| c["type"] == "Active")
        .is_none_or(|c| c["status"] == "True");
    Ok(ClusterQueue {
        name: name(o),
        cohort: string(&o["spec"]["cohortName"]),
        nominal_gpus: nominal,
        borrowing_limit: limit,
        reserved_gpus: reserved,
        borrowed_gpus: borrowed,
        weighted_share: share(status, f)?,
        active,
    })
}

fn workload(o: &Value, f: &dyn Fn(&str) -> ObjectError, resource: &str) -> Result<Workload, ObjectError> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let conditions = array(&status["conditions"])
        .iter()
        .map(|c| {
            Ok(Condition {
                kind: text(&c["type"]),
                status: c["status"] == "True",
                reason: text(&c["reason"]),
                message: text(&c["message"]),
                at: time(&c["lastTransitionTime"], f)?,
            })
        })
        .collect::<Result<Vec<_>, ObjectError>>()?;
    let holds = |kind: &str| conditions.iter().any(|c| c.kind == kind && c.status);
    let reserved = conditions.iter().find(|c| c.kind == "QuotaReserved" && c.status);
    let finished = holds("Finished");
    let admission = &status["admission"];
    // What it holds, once admitted; else what its pod sets ask for: count × each pod's request.
    let gpus = if reserved.is_some() && !admission.is_null() {
        let mut sum = 0u64;
        for a in array(&admission["podSetAssignments"]) {
            sum = sum.saturating_add(gpus(&a["resourceUsage"][resource], f)?);
        }
        sum
    } else {
        let mut sum = 0u64;
        for set in array(&spec["podSets"]) {
            let count = set["count"].as_u64().unwrap_or(1);
            let mut per_pod = 0u64;
            for c in array(&set["template"]["spec"]["containers"]) {
                let resources = &c["resources"];
                let request = match &resources["requests"][resource] {
                    Value::Null => &resources["limits"][resource],
                    r => r,
                };
                per_pod = per_pod.saturating_add(gpus(request, f)?);
            }
            sum = sum.saturating_add(count.saturating_mul(per_pod));
        }
        sum
    };
    let class = &spec["priorityClassRef"];
    Ok(Workload {
        namespace: text(&o["metadata"]["namespace"]),
        name: name(o),
        queue: text(&spec["queueName"]),
        cluster_queue: string(&admission["clusterQueue"]).filter(|_| reserved.is_some()),
        gpus,
        priority: spec["priority"].as_i64().unwrap_or(0),
        priority_class: if class["kind"] == "WorkloadPriorityClass" {
            text(&class["name"])
        } else {
            String::new()
        },
        created: time(&o["metadata"]["creationTimestamp"], f)?.ok_or_else(|| f("no creationTimestamp"))?,
        reserved_at: if finished { None } else { reserved.map(|c| c.at.unwrap_or(0)) },
        finished,
        active: spec["active"].as_bool().unwrap_or(true),
        max_execution: spec["maximumExecutionTimeSeconds"].as_i64(),
        requeue_at: time(&status["requeueState"]["requeueAt"], f)?,
        conditions,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn workload(name: &str, gpus: u32, priority: i64, created: &str, reserved: Option<&str>) -> Value {
        let mut w = json!({
            "metadata": { "namespace": "team-a", "name": name, "creationTimestamp": created },
            "spec": {
                "queueName": "lq",
                "priority": priority,
                "priorityClassRef": { "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch" },
                "podSets": [{ "name": "main", "count": 2, "template": { "spec": { "containers": [
                    { "name": "c", "resources": { "requests": { "nvidia.com/gpu": gpus.to_string(), "cpu": "1" } } },
                ] } } }],
            },
        });
        match reserved {
            Some(at) => {
                w["status"] = json!({
                    "admission": { "clusterQueue": "a", "podSetAssignments": [
                        { "name": "main", "count": 2, "resourceUsage": { "nvidia.com/gpu": (2 * gpus).to_string() } },
                    ] },
                    "conditions": [{ "type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue a", "lastTransitionTime": at }],
                })
            }
            None => {
                w["status"] = json!({ "conditions": [{ "type": "QuotaReserved", "status": "False", "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default, 4 more needed",
                    "lastTransitionTime": created }] })
            }
        }
        w
    }

    #[test]
    fn workloads_read_as_kueue_writes_them() {
        let cq = json!({
            "metadata": { "name": "a" },
            "spec": { "cohortName": "root", "resourceGroups": [{ "coveredResources": ["nvidia.com/gpu"], "flavors": [
                { "name": "default", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2" }] },
            ] }] },
            "status": {
                "flavorsReservation": [{ "name": "default", "resources": [{ "name": "nvidia.com/gpu", "total": "6", "borrowed": "2" }] }],
                "fairSharing": { "weightedShare": 333 },
            },
        });
        let lq =
            json!({ "metadata": { "namespace": "team-a", "name": "lq" }, "spec": { "clusterQueue": "a" } });
        let items = [
            workload("running", 3, 100, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:30Z")),
            workload("old", 2, 100, "2026-12-01T10:01:00Z", None),
            workload("urgent", 1, 500, "2026-12-01T10:02:00Z", None),
            workload("new", 2, 100, "2026-12-01T10:03:00Z", None),
        ];
        let lists = Lists { cluster_queues: &[cq], cohorts: &[], local_queues: &[lq], workloads: &items };
        let kueue = Kueue::read(&lists, "nvidia.com/gpu").unwrap();
        let q = kueue.cluster_queue("a").unwrap();
        assert_eq!((q.nominal_gpus, q.borrowing_limit, q.reserved_gpus, q.borrowed_gpus), (4, Some(2), 6, 2));
        assert_eq!((q.weighted_share, q.active, q.cohort.as_deref()), (Some(333), true, Some("root")));
        let [running, old, urgent, new] = &kueue.workloads[..] else { unreachable!() };
        // Admitted: the admission's usage (6); pending: 2 pods × 2 GPUs.
        assert_eq!((running.gpus, running.reserved_at), (6, Some(1_796_119_230)));
        assert_eq!((old.gpus, old.reserved_at, old.cluster_queue.as_deref()), (4, None, Some("a")));
        assert_eq!((running.priority_class.as_str(), running.created), ("batch", 1_796_119_200));
        let job = old.job("c", "a");
        assert_eq!(
            (job.id.as_str(), job.gpus, job.start, job.contract.as_str()),
            ("team-a/old", 4, None, "batch")
        );
        // Ahead of `new`: `urgent` (priority 500), then `old` (older); the running one is not.
        let names: Vec<&str> = ahead(&kueue.workloads, new, 0).iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["urgent", "old"]);
        assert!(reason(new, 0).starts_with("its ClusterQueue's quota"), "{}", reason(new, 0));
    }

    #[test]
    fn an_admission_is_estimated_from_the_maximum_execution_times() {
        let w = |name: &str,
                 gpus: u64,
                 priority: i64,
                 created: i64,
                 reserved_at: Option<i64>,
                 max: Option<i64>| Workload {
            namespace: "ns".into(),
            name: name.into(),
            cluster_queue: Some("a".into()),
            gpus,
            priority,
            created,
            reserved_at,
            active: true,
            max_execution: max,
            ..Workload::default()
        };
        // 8 GPUs. Admitted: r1 (6 GPUs from 0 for 100 s), r2 (2 GPUs from 50 for 200 s).
        // Pending in order: p (4 GPUs, priority 10, 60 s), then q (6 GPUs, priority 0).
        // At now = 10 nothing is free. p waits for r1's end at 100 (6 free >= 4) and runs
        // to 160. q needs 6: at 160 p frees its 4 and r2 still holds 2 until 250: 6 free at
        // 160. So p is admitted at 100 and q at 160.
        let workloads = [
            w("r1", 6, 0, 0, Some(0), Some(100)),
            w("r2", 2, 0, 0, Some(50), Some(200)),
            w("p", 4, 10, 5, None, Some(60)),
            w("q", 6, 0, 1, None, None),
        ];
        assert_eq!(estimated_start(&workloads, &workloads[2], 8, 10), Some(100));
        assert_eq!(estimated_start(&workloads, &workloads[3], 8, 10), Some(160));
        // An admitted workload with no maximum execution time: no estimate behind it.
        let mut unbounded = workloads.clone();
        unbounded[0].max_execution = None;
        assert_eq!(estimated_start(&unbounded, &unbounded[2], 8, 10), None);
        // More GPUs than the cluster has.
        assert_eq!(estimated_start(&workloads, &workloads[3], 4, 10), None);
    }

    #[test]
    fn workloads_that_cannot_be_admitted_ask_for_no_gpus() {
        let mut w = Workload { active: true, ..Workload::default() };
        assert!(w.waits_for_gpus(0));
        w.conditions.push(Condition {
            kind: "QuotaReserved".into(),
            status: false,
            reason: "Pending".into(),
            message: "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)".into(),
            at: None,
        });
        assert!(!w.waits_for_gpus(0));
        assert!(reason(&w, 0).contains("will not start as it is"));
        let backing_off = Workload { active: true, requeue_at: Some(100), ..Workload::default() };
        assert!(!backing_off.waits_for_gpus(50) && backing_off.waits_for_gpus(100));
        let inactive = Workload { active: false, ..Workload::default() };
        assert!(!inactive.waits_for_gpus(0));
    }

    #[test]
    fn positions_read_as_the_visibility_api_gives_them() {
        let summary = json!({ "kind": "PendingWorkloadsSummary", "items": [
            { "metadata": { "namespace": "team-a", "name": "w1" }, "priority": 10, "localQueueName": "a",
              "positionInClusterQueue": 0, "positionInLocalQueue": 0 },
            { "metadata": { "namespace": "team-b", "name": "w2" }, "positionInClusterQueue": 1 },
            { "metadata": { "name": "no-namespace" }, "positionInClusterQueue": 2 },
        ] });
        assert_eq!(positions(&summary), [("team-a/w1".to_string(), 0), ("team-b/w2".to_string(), 1)]);
        assert!(positions(&json!({})).is_empty());
    }

    #[test]
    fn a_quantity_that_is_no_whole_gpu_count_names_its_object() {
        let mut w = workload("x", 1, 0, "2026-12-01T10:00:00Z", None);
        w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] =
            json!("1500m");
        let lists = Lists { cluster_queues: &[], cohorts: &[], local_queues: &[], workloads: &[w] };
        let error = Kueue::read(&lists, "nvidia.com/gpu").unwrap_err().to_string();
        assert_eq!(error, "Workload team-a/x: GPU quantity \"1500m\" is not a whole number");
    }
}
