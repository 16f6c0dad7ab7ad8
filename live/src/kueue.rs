//! A live Kueue as its API server lists it (`kueue.x-k8s.io/v1beta2`): the ClusterQueues
//! with their quota, preemption and usage, the Cohorts, the LocalQueues, and the Workloads
//! with their admission and conditions, read from the objects' JSON, every field allot uses
//! checked for its type. A Workload holding quota (`QuotaReserved`) becomes a running
//! [`Job`], one waiting for GPUs a pending [`Job`] ([`demand`]); beside each, what Kueue says
//! of it that a trace does not hold: why it waits ([`reason`]), its place in its queue
//! ([`ahead`]), what Kueue may preempt for it ([`preemptible`]) and when it may be admitted
//! ([`simulated_start`], replaying Kueue's rules from now on; [`estimated_start`], from the
//! maximum execution times alone).

use std::cmp::Reverse;
use std::collections::HashMap;

use allot_compiler::ir::Model;
use allot_compiler::units::whole_quantity;
use allot_simulate::kueue::objects::{self, ObjectError};
use allot_simulate::{Policy, simulate_from};
use allot_verify::audit::AuditError;
use allot_verify::trace::Job;
use serde_json::Value;

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
    /// `spec.preemption`: `reclaimWithinCohort` and `withinClusterQueue` (Kueue's default
    /// when unset: `Never`).
    pub reclaim_within_cohort: String,
    pub within_cluster_queue: String,
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
    /// Kueue's last tie-break in a queue.
    pub uid: String,
    /// Its LocalQueue (`spec.queueName`).
    pub queue: String,
    /// Its ClusterQueue: where it holds quota, or where its LocalQueue sends it.
    pub cluster_queue: Option<String>,
    pub gpus: u32,
    pub priority: i32,
    /// Its WorkloadPriorityClass: allot's contract.
    pub priority_class: String,
    pub created: i64,
    /// Where Kueue orders it in its queue: its creation, or its eviction by a timeout or
    /// an admission check, or its preemption while its queue was borrowing.
    pub queued_at: i64,
    /// When its quota was reserved, while it holds it.
    pub reserved_at: Option<i64>,
    /// When it was admitted (its admission checks passed), while it is.
    pub admitted_at: Option<i64>,
    /// Seconds it ran in earlier admissions (`accumulatedPastExecutionTimeSeconds`).
    pub past_execution: i64,
    pub finished: bool,
    /// `spec.active`: a deactivated workload is never admitted.
    pub active: bool,
    /// `spec.maximumExecutionTimeSeconds`: Kueue evicts it past that much admitted time.
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

    /// A condition of `kind` that holds (`status: True`).
    fn holds(&self, kind: &str) -> Option<&Condition> {
        self.condition(kind).filter(|c| c.status)
    }

    /// Why it is not admitted, as Kueue says it: its `QuotaReserved` condition when false.
    pub fn pending_condition(&self) -> Option<&Condition> {
        self.condition("QuotaReserved").filter(|c| !c.status)
    }

    /// When its maximum execution time ends it, while it holds quota: counted from its
    /// admission (its reservation, while its admission checks run), less the time it ran
    /// before.
    pub fn ends_at(&self) -> Option<i64> {
        let from = self.admitted_at.or(self.reserved_at)?;
        Some(from.saturating_add(self.max_execution?).saturating_sub(self.past_execution))
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
            gpus: self.gpus,
            submit: self.created,
            start: self.reserved_at,
            contract: self.priority_class.as_str().into(),
            ..Job::default()
        }
    }
}

/// Why a pending workload is not admitted, from Kueue's `QuotaReserved=False` condition
/// (its reason first, its message where the reason is the generic `Pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Kueue is preempting workloads for it.
    Preempting,
    /// The quota it may use is in use.
    Quota,
    /// Another workload took the GPUs it was to have.
    Overtaken,
    /// It asks for more than its ClusterQueue may ever hold.
    TooLarge,
    /// No flavor of its ClusterQueue fits it.
    NoFlavor,
    /// Its LocalQueue or ClusterQueue is missing, stopped or inactive.
    Inadmissible,
    /// Anything else: quoted.
    Other,
}

impl Held {
    fn of(condition: &Condition) -> Held {
        let (reason, message) = (condition.reason.as_str(), condition.message.as_str());
        match reason {
            "WaitingForPreemptedWorkloads" => Held::Preempting,
            "WaitingForQuota" => Held::Quota,
            "ExceedsMaxQuota" => Held::TooLarge,
            "NoMatchingFlavor" => Held::NoFlavor,
            "Inadmissible" | "Misconfigured" => Held::Inadmissible,
            _ if message.contains("Pending the preemption") => Held::Preempting,
            // One flavor's lack of unused quota means it may fit once GPUs free up, whatever
            // another flavor says.
            _ if message.contains("insufficient unused quota") => Held::Quota,
            _ if message.contains("maximum capacity") => Held::TooLarge,
            _ if message.contains("no longer fits") => Held::Overtaken,
            _ if message.contains("is inactive") || message.contains("is stopped") => Held::Inadmissible,
            _ => Held::Other,
        }
    }

    /// Whether it cannot be admitted as things are, whatever frees up.
    fn blocks(self) -> bool {
        matches!(self, Held::TooLarge | Held::NoFlavor | Held::Inadmissible)
    }

    fn said(self) -> &'static str {
        match self {
            Held::Preempting => "Kueue is preempting workloads to make room for it",
            Held::Quota => {
                "its ClusterQueue's quota and what its cohort can lend it are in use: it waits for GPUs to free up, or for Kueue to reclaim GPUs lent to budgets beyond theirs"
            }
            Held::Overtaken => "another workload took the GPUs it was to have: it waits for the next round",
            Held::TooLarge => {
                "it asks for more GPUs than its ClusterQueue may ever hold (its quota and what it may borrow): it will not start as it is"
            }
            Held::NoFlavor => {
                "no flavor of its ClusterQueue fits what it asks for: it will not start as it is"
            }
            Held::Inadmissible => {
                "Kueue cannot queue it: its LocalQueue or ClusterQueue is missing, stopped or inactive"
            }
            Held::Other => "",
        }
    }
}

/// A live Kueue, its objects as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kueue {
    pub cluster_queues: Vec<ClusterQueue>,
    pub cohorts: Vec<Cohort>,
    pub local_queues: Vec<LocalQueue>,
    pub workloads: Vec<Workload>,
}

/// The queues of each kind, as the API server returned their items.
pub struct Lists<'a> {
    pub cluster_queues: &'a [Value],
    pub cohorts: &'a [Value],
    pub local_queues: &'a [Value],
}

impl Workload {
    /// A Workload as the API server returned it, counting GPUs of `resource`
    /// (`nvidia.com/gpu`). Read one by one, so that a long list need not be held whole.
    pub fn read(object: &Value, resource: &str) -> Result<Workload, ObjectError> {
        let mut read = each(std::slice::from_ref(object), "Workload", |o, f| workload(o, f, resource))?;
        Ok(read.remove(0))
    }
}

impl Kueue {
    /// Reads the queues, counting GPUs of `resource` (`nvidia.com/gpu`), beside the
    /// `workloads` read. A pending workload gets its ClusterQueue from its LocalQueue.
    pub fn read(lists: &Lists<'_>, workloads: Vec<Workload>, resource: &str) -> Result<Kueue, ObjectError> {
        let mut kueue = Kueue {
            cluster_queues: each(lists.cluster_queues, "ClusterQueue", |o, f| cluster_queue(o, f, resource))?,
            cohorts: each(lists.cohorts, "Cohort", |o, f| {
                Ok(Cohort {
                    name: name(o),
                    parent: objects::parent_of(&o["spec"]).map_err(|p| f(&p))?.map(str::to_string),
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
            workloads,
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

    /// The ClusterQueue `workload` holds quota in, or waits in.
    pub fn queue_of(&self, workload: &Workload) -> Option<&ClusterQueue> {
        workload.cluster_queue.as_deref().and_then(|q| self.cluster_queue(q))
    }

    /// The top of the cohort tree ClusterQueue `queue` is in (`None`: in no cohort).
    fn root<'k>(&'k self, queue: &'k ClusterQueue) -> Option<&'k str> {
        let mut at = queue.cohort.as_deref()?;
        // Bounded: a cycle of cohorts (which Kueue refuses) stops here too.
        for _ in 0..64 {
            match self.cohorts.iter().find(|c| c.name == at).and_then(|c| c.parent.as_deref()) {
                Some(parent) => at = parent,
                None => break,
            }
        }
        Some(at)
    }

    /// What holds `workload` back now, when it is pending (`None`: it waits for GPUs, or
    /// holds quota, or finished).
    fn held(&self, workload: &Workload) -> Option<Held> {
        if self.queue_of(workload).is_some_and(|q| !q.active) {
            return Some(Held::Inadmissible);
        }
        workload.pending_condition().map(Held::of)
    }

    /// Whether `workload` is pending and waits for GPUs, rather than being deactivated,
    /// backing off after an eviction until a later time than `now`, or unable to be
    /// admitted as things are: only such workloads ask for GPUs now.
    pub fn waits_for_gpus(&self, workload: &Workload, now: i64) -> bool {
        workload.is_pending()
            && workload.active
            && workload.requeue_at.is_none_or(|t| t <= now)
            && !self.held(workload).is_some_and(Held::blocks)
    }
}

/// The workloads that hold GPUs or wait for them, as jobs of allot cluster `cluster`, each
/// in the budget `budget_of` its ClusterQueue (none: the work no budget covers).
pub fn demand<'a>(
    kueue: &Kueue,
    cluster: &str,
    budget_of: impl Fn(&Workload) -> Option<&'a str>,
    now: i64,
) -> Vec<Job> {
    kueue
        .workloads
        .iter()
        .filter(|w| w.reserved_at.is_some() || kueue.waits_for_gpus(w, now))
        .map(|w| w.job(cluster, budget_of(w).unwrap_or("")))
        .collect()
}

/// Kueue's reason for a pending workload, said in budget language, with Kueue's words beside
/// it (one it does not know is quoted).
pub fn reason(kueue: &Kueue, workload: &Workload, now: i64) -> String {
    if !workload.active {
        return "it is deactivated (`spec.active: false`): Kueue admits it only once it is active again"
            .into();
    }
    if let Some(at) = workload.requeue_at.filter(|t| *t > now) {
        return format!(
            "it was evicted and backs off: it re-enters the queue at {}",
            allot_verify::render::time(at)
        );
    }
    let evicted =
        workload.holds("Evicted").map(|e| format!("it was evicted ({}: {}); ", e.reason, e.message));
    let evicted = evicted.unwrap_or_default();
    let Some(held) = kueue.held(workload) else {
        return if evicted.is_empty() {
            "Kueue has not looked at it yet".into()
        } else {
            format!("{evicted}it waits to be admitted again")
        };
    };
    let kueue_says = workload
        .pending_condition()
        .map(|c| format!("Kueue: {}: {}", c.reason, c.message))
        .unwrap_or_else(|| "Kueue: its ClusterQueue is not active".into());
    match held {
        Held::Other => format!("{evicted}{kueue_says}"),
        held => format!("{evicted}{} ({kueue_says})", held.said()),
    }
}

/// Kueue's order of a queue: higher priority first, then the earlier queue time, then the
/// workload's UID (as Kueue's `BestEffortFIFO` and `StrictFIFO` heads take them).
fn order(w: &Workload) -> (Reverse<i32>, i64, &str) {
    (Reverse(w.priority), w.queued_at, w.uid.as_str())
}

/// The pending workloads of `workload`'s ClusterQueue that wait for GPUs and that Kueue
/// orders before it, the closest to it last. (`BestEffortFIFO` lets a later workload pass
/// one that does not fit; this list is the order, not a promise that they go first.)
pub fn ahead<'k>(kueue: &'k Kueue, workload: &Workload, now: i64) -> Vec<&'k Workload> {
    let mut ahead: Vec<&Workload> = kueue
        .workloads
        .iter()
        .filter(|w| w.cluster_queue == workload.cluster_queue && kueue.waits_for_gpus(w, now))
        .filter(|w| w.id() != workload.id() && order(w) < order(workload))
        .collect();
    ahead.sort_by(|a, b| order(a).cmp(&order(b)));
    ahead
}

/// Why an admitted workload may be preempted for a pending one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// It has a lower priority in the same ClusterQueue (`withinClusterQueue`).
    LowerPriority,
    /// Its ClusterQueue, in the same cohort tree, borrows (`reclaimWithinCohort`): with
    /// Fair Sharing, more for its weight than the pending one's ClusterQueue.
    Reclaim,
}

/// The admitted workloads Kueue may preempt for `workload`, by the preemption its
/// ClusterQueue sets: with `withinClusterQueue` (not `Never`), those of its ClusterQueue of
/// lower priority; with `reclaimWithinCohort` (`Any`; `LowerPriority`: of lower priority
/// only), those of ClusterQueues of its cohort tree that borrow (with Fair Sharing: whose
/// weighted share is above its own ClusterQueue's; without: while its own stays within its
/// quota). Other ClusterQueues' first, then the lowest priority, then the latest admitted.
/// An approximation: Kueue's Fair Sharing compares shares at the cohort where the two
/// ClusterQueues meet, after the admission, and picks a minimal set.
pub fn preemptible<'k>(kueue: &'k Kueue, workload: &Workload) -> Vec<(&'k Workload, Preemption)> {
    let Some(own) = kueue.queue_of(workload) else { return Vec::new() };
    let root = kueue.root(own);
    let reclaims = |other: &ClusterQueue, w: &Workload| {
        let by_priority = match own.reclaim_within_cohort.as_str() {
            "Any" => true,
            "LowerPriority" => w.priority < workload.priority,
            _ => false,
        };
        let borrowing = match (other.weighted_share, own.weighted_share) {
            (Some(theirs), Some(ours)) => theirs > ours,
            _ => {
                other.borrowed_gpus > 0
                    && own.reserved_gpus.saturating_add(u64::from(workload.gpus)) <= own.nominal_gpus
            }
        };
        by_priority && borrowing && root.is_some() && kueue.root(other) == root
    };
    let mut out: Vec<(&Workload, Preemption)> = kueue
        .workloads
        .iter()
        .filter(|w| w.reserved_at.is_some() && !w.finished && w.gpus > 0)
        .filter_map(|w| {
            let theirs = kueue.queue_of(w)?;
            if theirs.name == own.name {
                let lower = own.within_cluster_queue != "Never" && w.priority < workload.priority;
                lower.then_some((w, Preemption::LowerPriority))
            } else {
                reclaims(theirs, w).then_some((w, Preemption::Reclaim))
            }
        })
        .collect();
    out.sort_by_key(|(w, why)| (*why == Preemption::LowerPriority, w.priority, Reverse(w.reserved_at)));
    out
}

/// When `workload` would be admitted if every workload holding quota ran to its maximum
/// execution time and the workloads ahead of it in its ClusterQueue were admitted first, in
/// order, each as soon as enough of the cluster's `gpus` are free (no preemption; the other
/// ClusterQueues' pending workloads and borrowing limits not counted). `None` when it waits
/// for something else than GPUs, when a workload it must wait for has no maximum execution
/// time, or when it asks for more GPUs than the cluster has.
pub fn estimated_start(kueue: &Kueue, workload: &Workload, gpus: u64, now: i64) -> Option<i64> {
    if !kueue.waits_for_gpus(workload, now) {
        return None;
    }
    let holding = kueue
        .workloads
        .iter()
        .filter(|w| w.reserved_at.is_some() && !w.finished)
        .map(|w| (w.ends_at(), u64::from(w.gpus)))
        .collect();
    let line: Vec<(u64, Option<i64>)> = ahead(kueue, workload, now)
        .into_iter()
        .chain([workload])
        .map(|w| (u64::from(w.gpus), w.max_execution))
        .collect();
    crate::explain::start_in_line(holding, &line, gpus, now)
}

/// What [`simulated_start`] takes a workload's run to be when neither it nor its contract
/// bounds it (no maximum execution time, no `max-runtime`): a year. A workload that would
/// wait that long gets no estimate.
pub const UNBOUNDED_RUN: i64 = 365 * 86_400;

/// When `workload` would be admitted, as the `kueue` simulation `policy` (the cluster's
/// Kueue objects) admits and preempts from `now` on: every workload holding quota runs on
/// for what its maximum execution time leaves it (else its contract's `max-runtime` of
/// `model`, else [`UNBOUNDED_RUN`]); every workload waiting for GPUs queues in its
/// ClusterQueue at its priority, in Kueue's order (its queue time, then its UID), and runs
/// as long once admitted; nothing else arrives. Each is a job of allot cluster `cluster` in
/// the budget `budget_of` its ClusterQueue. `None` when it waits for something else than
/// GPUs, or the simulation admits it only after [`UNBOUNDED_RUN`] (or never).
pub fn simulated_start<'a>(
    model: &Model,
    cluster: &str,
    kueue: &Kueue,
    policy: Policy,
    workload: &Workload,
    budget_of: impl Fn(&str) -> Option<&'a str>,
    now: i64,
) -> Result<Option<i64>, AuditError> {
    if !kueue.waits_for_gpus(workload, now) {
        return Ok(None);
    }
    let max_runtime = |w: &Workload| {
        let contract = model.contracts.iter().find(|c| c.name == w.priority_class);
        w.max_execution.or(contract.and_then(|c| c.max_runtime_seconds).map(|s| s as i64))
    };
    let as_job = |w: &Workload, work: Option<i64>| {
        let contract = model.contracts.iter().any(|c| c.name == w.priority_class);
        Job {
            start: None,
            submit: now,
            duration: Some(work.unwrap_or(UNBOUNDED_RUN).max(1)),
            queue: w.cluster_queue.as_deref().unwrap_or("").into(),
            priority: Some(w.priority),
            contract: if contract { w.priority_class.as_str().into() } else { "".into() },
            ..w.job(cluster, w.cluster_queue.as_deref().and_then(&budget_of).unwrap_or(""))
        }
    };
    let (mut running, mut waiting) = (Vec::new(), Vec::new());
    for w in kueue.workloads.iter().filter(|w| w.cluster_queue.is_some()) {
        if let (Some(from), false) = (w.admitted_at.or(w.reserved_at), w.finished) {
            let left = max_runtime(w).map(|max| from.saturating_add(max) - w.past_execution - now);
            running.push(as_job(w, left));
        } else if kueue.waits_for_gpus(w, now) {
            waiting.push(w);
        }
    }
    waiting.sort_by(|a, b| (a.queued_at, &a.uid, a.id()).cmp(&(b.queued_at, &b.uid, b.id())));
    let waiting = waiting.into_iter().map(|w| as_job(w, max_runtime(w).map(|max| max - w.past_execution)));
    let runs = match simulate_from(model, running, waiting, policy) {
        Ok((_, runs)) => runs,
        // Nothing Kueue could ever admit.
        Err(AuditError::NoJobs(_)) => return Ok(None),
        Err(error) => return Err(error),
    };
    let id = workload.id();
    Ok(runs
        .iter()
        .filter(|run| *run.id == *id)
        .map(|run| run.start)
        .min()
        .filter(|&start| start - now < UNBOUNDED_RUN))
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

/// A reader's way to say what is wrong with the object it reads.
type Fail<'a> = &'a dyn Fn(&str) -> ObjectError;

/// Each object read by `read`, at most [`MAX_OBJECTS`]; an error names the object.
fn each<T>(
    items: &[Value],
    kind: &str,
    read: impl Fn(&Value, Fail<'_>) -> Result<T, ObjectError>,
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

/// A whole number at `field` of `v`, of type `T`, when there is one.
fn integer<T: TryFrom<i64>>(v: &Value, field: &str, f: Fail<'_>) -> Result<Option<T>, ObjectError> {
    match &v[field] {
        Value::Null => Ok(None),
        n => n
            .as_i64()
            .and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| f(&format!("{field} {n} is not a whole number in range"))),
    }
}

/// A count of GPUs as Kubernetes writes quantities: `8`, `"8"`, `"8000m"`, `"2k"`;
/// absent: 0.
fn gpus(v: &Value, f: Fail<'_>) -> Result<u64, ObjectError> {
    let bad = || f(&format!("GPU quantity {v} is not a whole number"));
    match v {
        Value::Null => Ok(0),
        Value::Number(n) => n.as_u64().ok_or_else(bad),
        Value::String(s) => whole_quantity(s).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// A sum of GPUs that a job can hold (at most `u32::MAX`).
fn job_gpus(sum: u64, f: Fail<'_>) -> Result<u32, ObjectError> {
    u32::try_from(sum).map_err(|_| f(&format!("{sum} GPUs: more than a job can hold")))
}

/// A time as the API server writes it (RFC 3339), in epoch seconds.
fn time(v: &Value, f: Fail<'_>) -> Result<Option<i64>, ObjectError> {
    match v {
        Value::Null => Ok(None),
        Value::String(t) => t
            .parse::<jiff::Timestamp>()
            .map(|t| Some(t.as_second()))
            .map_err(|_| f(&format!("time {t:?} is not RFC 3339"))),
        other => Err(f(&format!("time {other} is not RFC 3339"))),
    }
}

fn share(status: &Value, f: Fail<'_>) -> Result<Option<i64>, ObjectError> {
    integer(&status["fairSharing"], "weightedShare", f)
}

/// The GPUs of `resource` over the flavors of a `flavorsReservation`, and of them borrowed.
fn flavors_usage(flavors: &Value, resource: &str, f: Fail<'_>) -> Result<(u64, u64), ObjectError> {
    let (mut total, mut borrowed) = (0u64, 0u64);
    for flavor in array(flavors) {
        for r in array(&flavor["resources"]).iter().filter(|r| r["name"] == resource) {
            total = total.saturating_add(gpus(&r["total"], f)?);
            borrowed = borrowed.saturating_add(gpus(&r["borrowed"], f)?);
        }
    }
    Ok((total, borrowed))
}

fn cluster_queue(o: &Value, f: Fail<'_>, resource: &str) -> Result<ClusterQueue, ObjectError> {
    let spec = &o["spec"];
    let quotas = objects::gpu_quotas(spec, resource).map_err(|p| f(&p))?;
    let nominal = quotas.iter().fold(0u64, |sum, q| sum.saturating_add(q.nominal));
    let borrowing_limit =
        quotas.iter().try_fold(0u64, |sum, q| q.borrowing_limit.map(|limit| sum.saturating_add(limit)));
    let cohort = objects::cohort_of(o).map_err(|p| f(&p))?;
    let status = &o["status"];
    let (reserved, borrowed) = flavors_usage(&status["flavorsReservation"], resource, f)?;
    let active = array(&status["conditions"])
        .iter()
        .find(|c| c["type"] == "Active")
        .is_none_or(|c| c["status"] == "True");
    let preemption = |field: &str| string(&spec["preemption"][field]).unwrap_or_else(|| "Never".into());
    Ok(ClusterQueue {
        name: name(o),
        cohort: cohort.map(str::to_string),
        nominal_gpus: nominal,
        borrowing_limit,
        reserved_gpus: reserved,
        borrowed_gpus: borrowed,
        weighted_share: share(status, f)?,
        active,
        reclaim_within_cohort: preemption("reclaimWithinCohort"),
        within_cluster_queue: preemption("withinClusterQueue"),
    })
}

fn workload(o: &Value, f: Fail<'_>, resource: &str) -> Result<Workload, ObjectError> {
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
    let since = |kind: &str| -> Result<Option<i64>, ObjectError> {
        match conditions.iter().find(|c| c.kind == kind && c.status) {
            None => Ok(None),
            Some(c) => {
                c.at.map(Some).ok_or_else(|| f(&format!("condition {kind} has no lastTransitionTime")))
            }
        }
    };
    let finished = conditions.iter().any(|c| c.kind == "Finished" && c.status);
    let reserved_at = if finished { None } else { since("QuotaReserved")? };
    let admission = &status["admission"];
    // What it holds, once admitted; before, what Kueue last counted it to need
    // (`resourceRequests`), else what its pod sets ask for: count × each pod's request.
    let mut sum = 0u64;
    if reserved_at.is_some() && !admission.is_null() {
        for a in array(&admission["podSetAssignments"]) {
            sum = sum.saturating_add(gpus(&a["resourceUsage"][resource], f)?);
        }
    } else if !array(&status["resourceRequests"]).is_empty() {
        for r in array(&status["resourceRequests"]) {
            sum = sum.saturating_add(gpus(&r["resources"][resource], f)?);
        }
    } else {
        for set in array(&spec["podSets"]) {
            let count: u64 = integer(set, "count", f)?.unwrap_or(1);
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
    }
    let created = time(&o["metadata"]["creationTimestamp"], f)?.ok_or_else(|| f("no creationTimestamp"))?;
    // Kueue queues a workload evicted by a timeout or an admission check from its eviction,
    // and one preempted while its queue borrowed from its preemption.
    let evicted = conditions.iter().find(|c| {
        c.kind == "Evicted" && c.status && matches!(c.reason.as_str(), "PodsReadyTimeout" | "AdmissionCheck")
    });
    let preempted = conditions
        .iter()
        .find(|c| c.kind == "Preempted" && c.status && c.reason == "InCohortReclaimWhileBorrowing");
    let queued_at = evicted.or(preempted).and_then(|c| c.at).unwrap_or(created);
    let class = &spec["priorityClassRef"];
    Ok(Workload {
        namespace: text(&o["metadata"]["namespace"]),
        name: name(o),
        uid: text(&o["metadata"]["uid"]),
        queue: text(&spec["queueName"]),
        cluster_queue: string(&admission["clusterQueue"]).filter(|_| reserved_at.is_some()),
        gpus: job_gpus(sum, f)?,
        priority: integer(spec, "priority", f)?.unwrap_or(0),
        priority_class: if class["kind"] == "WorkloadPriorityClass" {
            text(&class["name"])
        } else {
            String::new()
        },
        created,
        queued_at,
        reserved_at,
        admitted_at: reserved_at.and(since("Admitted")?),
        past_execution: integer(status, "accumulatedPastExecutionTimeSeconds", f)?.unwrap_or(0),
        finished,
        active: match &spec["active"] {
            Value::Null => true,
            Value::Bool(b) => *b,
            other => return Err(f(&format!("active {other} is not true or false"))),
        },
        max_execution: integer(spec, "maximumExecutionTimeSeconds", f)?,
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
            "metadata": { "namespace": "team-a", "name": name, "uid": format!("uid-{name}"), "creationTimestamp": created },
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
                        { "name": "main", "count": 2, "resourceUsage": { "nvidia.com/gpu": 2 * gpus } },
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

    fn queue(name: &str, nominal: &str, share: i64) -> Value {
        json!({
            "metadata": { "name": name },
            "spec": { "cohortName": "root",
                "preemption": { "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority" },
                "resourceGroups": [{ "coveredResources": ["nvidia.com/gpu"], "flavors": [
                { "name": "default", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": nominal, "borrowingLimit": "2" }] },
            ] }] },
            "status": {
                "flavorsReservation": [{ "name": "default", "resources": [{ "name": "nvidia.com/gpu", "total": "6", "borrowed": "2" }] }],
                "fairSharing": { "weightedShare": share },
            },
        })
    }

    fn read(queues: &[Value], workloads: &[Value]) -> Kueue {
        let lq =
            json!({ "metadata": { "namespace": "team-a", "name": "lq" }, "spec": { "clusterQueue": "a" } });
        let lists = Lists { cluster_queues: queues, cohorts: &[], local_queues: &[lq] };
        let workloads = workloads.iter().map(|w| Workload::read(w, "nvidia.com/gpu").unwrap()).collect();
        Kueue::read(&lists, workloads, "nvidia.com/gpu").unwrap()
    }

    #[test]
    fn workloads_read_as_kueue_writes_them() {
        let items = [
            workload("running", 3, 100, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:30Z")),
            workload("old", 2, 100, "2026-12-01T10:01:00Z", None),
            workload("urgent", 1, 500, "2026-12-01T10:02:00Z", None),
            workload("new", 2, 100, "2026-12-01T10:03:00Z", None),
        ];
        // Quotas as Kueue may write them back: "4", "2k"-style forms are the same numbers.
        let kueue = read(&[queue("a", "4000m", 333)], &items);
        let q = kueue.cluster_queue("a").unwrap();
        assert_eq!((q.nominal_gpus, q.borrowing_limit, q.reserved_gpus, q.borrowed_gpus), (4, Some(2), 6, 2));
        assert_eq!((q.weighted_share, q.active, q.cohort.as_deref()), (Some(333), true, Some("root")));
        assert_eq!(
            (q.reclaim_within_cohort.as_str(), q.within_cluster_queue.as_str()),
            ("Any", "LowerPriority")
        );
        let [running, old, _, new] = &kueue.workloads[..] else { unreachable!() };
        // Admitted: the admission's usage (6, a JSON number); pending: 2 pods × 2 GPUs.
        assert_eq!((running.gpus, running.reserved_at), (6, Some(1_796_119_230)));
        assert_eq!((old.gpus, old.reserved_at, old.cluster_queue.as_deref()), (4, None, Some("a")));
        assert_eq!((running.priority_class.as_str(), running.created), ("batch", 1_796_119_200));
        let job = old.job("c", "a");
        assert_eq!(
            (job.id.as_str(), job.gpus, job.start, job.contract.as_str()),
            ("team-a/old", 4, None, "batch")
        );
        // Ahead of `new`: `urgent` (priority 500), then `old` (older); the running one is not.
        let names: Vec<&str> = ahead(&kueue, new, 0).iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["urgent", "old"]);
        assert!(reason(&kueue, new, 0).starts_with("its ClusterQueue's quota"), "{}", reason(&kueue, new, 0));
        // The demand: the running one and the three waiting, in budget `a`.
        let jobs = demand(&kueue, "c", |w| (w.cluster_queue.as_deref() == Some("a")).then_some("a"), 0);
        assert_eq!(jobs.len(), 4);
        assert!(jobs.iter().all(|j| j.project == "a"));
    }

    #[test]
    fn cluster_queues_and_cohorts_read_as_the_kueue_policy_reads_them() {
        // v1beta1 names a ClusterQueue's cohort `spec.cohort`; two flavors' GPU quotas add
        // up, and one flavor without a borrowing limit leaves the queue without one.
        let mut old = queue("a", "4", 0);
        old["apiVersion"] = json!(objects::V1BETA1);
        old["spec"] = json!({ "cohort": "root", "resourceGroups": [{ "coveredResources": ["nvidia.com/gpu"], "flavors": [
            { "name": "h100", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": 1 }] },
            { "name": "a100", "resources": [{ "name": "nvidia.com/gpu", "nominalQuota": 2 }] },
        ] }] });
        let cohort = json!({ "metadata": { "name": "root" }, "spec": { "parentName": "org" } });
        let lists = Lists { cluster_queues: &[old], cohorts: &[cohort], local_queues: &[] };
        let kueue = Kueue::read(&lists, Vec::new(), "nvidia.com/gpu").unwrap();
        let q = kueue.cluster_queue("a").unwrap();
        assert_eq!((q.cohort.as_deref(), q.nominal_gpus, q.borrowing_limit), (Some("root"), 6, None));
        assert_eq!(kueue.cohorts[0].parent.as_deref(), Some("org"));
        // A fractional quota is refused with the policy's own words, naming the object.
        let bad = queue("b", "1500m", 0);
        let lists = Lists { cluster_queues: &[bad], cohorts: &[], local_queues: &[] };
        assert_eq!(
            Kueue::read(&lists, Vec::new(), "nvidia.com/gpu").unwrap_err().to_string(),
            "ClusterQueue b: nominalQuota of \"nvidia.com/gpu\" in flavor \"default\": \"1500m\" is a fractional GPU quantity; GPUs are whole"
        );
    }

    #[test]
    fn pending_requests_come_from_kueues_count_first() {
        // Kueue's `resourceRequests` (which counts init containers and overheads) over the
        // pod sets' containers.
        let mut w = workload("w", 1, 0, "2026-12-01T10:00:00Z", None);
        w["status"]["resourceRequests"] =
            json!([{ "name": "main", "resources": { "nvidia.com/gpu": "3", "cpu": "2" } }]);
        assert_eq!(read(&[], &[w]).workloads[0].gpus, 3);
    }

    #[test]
    fn an_evicted_workload_is_queued_from_its_eviction_and_says_so() {
        let mut w = workload("w", 1, 0, "2026-12-01T10:00:00Z", None);
        w["status"]["conditions"] = json!([
            { "type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor default, 2 more needed", "lastTransitionTime": "2026-12-01T10:05:00Z" },
            { "type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "message": "Exceeded the PodsReady timeout", "lastTransitionTime": "2026-12-01T10:05:00Z" },
        ]);
        let kueue = read(&[queue("a", "4", 0)], &[w]);
        let w = &kueue.workloads[0];
        assert_eq!(w.queued_at - w.created, 300);
        let said = reason(&kueue, w, 0);
        assert!(
            said.starts_with(
                "it was evicted (PodsReadyTimeout: Exceeded the PodsReady timeout); its ClusterQueue's quota"
            ),
            "{said}"
        );
    }

    #[test]
    fn preemption_follows_the_queues_settings() {
        // Queue a (share 0, LowerPriority within) holds `low` (priority 0) and `same` (100);
        // b (share 500) holds `borrowed`; c is of another cohort tree; `none` holds 0 GPUs.
        let mut c = queue("c", "4", 900);
        c["spec"]["cohortName"] = json!("elsewhere");
        let mut at_b = workload("borrowed", 2, 100, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:10Z"));
        at_b["status"]["admission"]["clusterQueue"] = json!("b");
        let mut at_c = workload("theirs", 2, 0, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:10Z"));
        at_c["status"]["admission"]["clusterQueue"] = json!("c");
        let mut none = workload("none", 0, 0, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:10Z"));
        none["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] = json!({});
        let items = [
            workload("low", 1, 0, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:10Z")),
            workload("same", 1, 100, "2026-12-01T10:00:00Z", Some("2026-12-01T10:00:10Z")),
            at_b,
            at_c,
            none,
            workload("pending", 2, 100, "2026-12-01T10:01:00Z", None),
        ];
        let kueue = read(&[queue("a", "4", 0), queue("b", "4", 500), c], &items);
        let pending = &kueue.workloads[5];
        let found: Vec<(&str, Preemption)> =
            preemptible(&kueue, pending).iter().map(|(w, why)| (w.name.as_str(), *why)).collect();
        assert_eq!(found, [("borrowed", Preemption::Reclaim), ("low", Preemption::LowerPriority)]);
        // A queue that never reclaims, nor preempts within, finds none.
        let mut never = queue("a", "4", 0);
        never["spec"]["preemption"] = json!({});
        let kueue = read(&[never, queue("b", "4", 500)], &items);
        assert!(preemptible(&kueue, &kueue.workloads[5]).is_empty());
    }

    #[test]
    fn an_admission_is_estimated_from_the_maximum_execution_times() {
        let w = |name: &str,
                 gpus: u32,
                 priority: i32,
                 created: i64,
                 reserved_at: Option<i64>,
                 max: Option<i64>| {
            Workload {
                namespace: "ns".into(),
                name: name.into(),
                cluster_queue: Some("a".into()),
                gpus,
                priority,
                created,
                queued_at: created,
                reserved_at,
                active: true,
                max_execution: max,
                ..Workload::default()
            }
        };
        // 8 GPUs. Holding quota: r1 (6 GPUs from 0 for 100 s), r2 (2 GPUs admitted at 50 for
        // 200 s, of which it ran 30 s before an eviction: it ends at 220).
        // Pending in order: p (4 GPUs, priority 10, 60 s), then q (6 GPUs, priority 0).
        // At now = 10 nothing is free. p waits for r1's end at 100 (6 free >= 4) and runs
        // to 160. q needs 6: at 160 p frees its 4 and r2 still holds 2 until 220: 6 free at
        // 160. So p is admitted at 100 and q at 160.
        let mut r2 = w("r2", 2, 0, 0, Some(40), Some(200));
        (r2.admitted_at, r2.past_execution) = (Some(50), 30);
        assert_eq!(r2.ends_at(), Some(220));
        let kueue = Kueue {
            workloads: vec![
                w("r1", 6, 0, 0, Some(0), Some(100)),
                r2,
                w("p", 4, 10, 5, None, Some(60)),
                w("q", 6, 0, 1, None, None),
            ],
            ..Kueue::default()
        };
        let at = |i: usize, gpus: u64| estimated_start(&kueue, &kueue.workloads[i], gpus, 10);
        assert_eq!((at(2, 8), at(3, 8)), (Some(100), Some(160)));
        // More GPUs than the cluster has.
        assert_eq!(at(3, 4), None);
        // A workload holding quota with no maximum execution time: no estimate behind it.
        let mut unbounded = kueue.clone();
        unbounded.workloads[0].max_execution = None;
        assert_eq!(estimated_start(&unbounded, &unbounded.workloads[2], 8, 10), None);
    }

    #[test]
    fn an_admission_is_simulated_with_kueues_reclaim() {
        use std::sync::Arc;

        use allot_simulate::{ClusterObjects, Kueue as Setup};
        // ClusterQueues a and b of 4 GPUs in cohort pool (8 GPUs on one node), both
        // reclaiming within the cohort. b holds all 8: b1 and b2 (4 GPUs each, admitted at 0
        // and 5, 1,000 s each): it borrows a's 4. At now = 10, p (a's, 4 GPUs, 100 s) waits.
        // From the maximum execution times alone, p waits for b1's end at 1,000; Kueue
        // reclaims: a is within its quota with p (0 + 4 ≤ 4), b is over its quota, and the
        // most recently admitted of b's, b2, is evicted: p is admitted at 10. q (a's, 4 GPUs,
        // created after p, no maximum execution time and no contract bounding it) then
        // waits behind p: a's quota is full and b is within its own: at p's end, 110 (before
        // b2, back in b's queue, which would borrow). b2 has b's quota back when b1 ends at
        // 1,000 and runs its 995 s left (it ran none of them before its eviction) to 1,995;
        // r (b's, 4 GPUs, no bound either) is admitted then. s (a's, 4 GPUs) waits behind
        // q, which holds a's quota, and then r, which holds b's, for ever: no estimate.
        let model = allot_compiler::test_support::model(
            "cluster c gpus=8 gpu-type=h100 gpus-per-node=8\n\
             contract batch min-runtime=\"0s\" default=#true\n\
             project a share=1\nproject b share=1\n",
        );
        let api = "kueue.x-k8s.io/v1beta2";
        let gpu = "nvidia.com/gpu";
        let cq = |name: &str| {
            json!({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
                "cohortName": "pool", "preemption": {"reclaimWithinCohort": "Any"},
                "resourceGroups": [{"coveredResources": [gpu], "flavors": [{"name": "gpu",
                    "resources": [{"name": gpu, "nominalQuota": 4}]}]}]}})
        };
        let objects = [
            json!({"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}, "spec": {}}),
            json!({"apiVersion": api, "kind": "Cohort", "metadata": {"name": "pool"}, "spec": {}}),
            cq("a"),
            cq("b"),
        ];
        let given = ClusterObjects {
            cluster: "c",
            objects: &objects,
            configuration: None,
            resource: gpu,
            queues: &[],
            contracts: &[],
            later: &[],
        };
        let policy = allot_simulate::Policy::Kueue(Arc::new(Setup::new([given]).unwrap()));
        let w =
            |name: &str, queue: &str, created: i64, reserved_at: Option<i64>, max: Option<i64>| Workload {
                namespace: "ns".into(),
                name: name.into(),
                uid: name.into(),
                cluster_queue: Some(queue.into()),
                gpus: 4,
                created,
                queued_at: created,
                reserved_at,
                admitted_at: reserved_at,
                active: true,
                max_execution: max,
                ..Workload::default()
            };
        let kueue = Kueue {
            workloads: vec![
                w("b1", "b", 0, Some(0), Some(1000)),
                w("b2", "b", 0, Some(5), Some(1000)),
                w("p", "a", 6, None, Some(100)),
                w("q", "a", 7, None, None),
                w("r", "b", 8, None, None),
                w("s", "a", 9, None, Some(100)),
            ],
            ..Kueue::default()
        };
        let budget_of = |queue: &str| Some(if queue == "a" { "a" } else { "b" });
        let at = |i: usize| {
            simulated_start(&model, "c", &kueue, policy.clone(), &kueue.workloads[i], budget_of, 10).unwrap()
        };
        assert_eq!(estimated_start(&kueue, &kueue.workloads[2], 8, 10), Some(1000));
        assert_eq!((at(2), at(3), at(4), at(5)), (Some(10), Some(110), Some(1995), None));
        // One that waits for something else than GPUs: no estimate.
        let mut inactive = kueue.clone();
        inactive.workloads[2].active = false;
        let got = simulated_start(&model, "c", &inactive, policy, &inactive.workloads[2], budget_of, 10);
        assert_eq!(got.unwrap(), None);
    }

    #[test]
    fn workloads_that_cannot_be_admitted_ask_for_no_gpus() {
        let kueue = Kueue::default();
        let mut w = Workload { active: true, ..Workload::default() };
        assert!(kueue.waits_for_gpus(&w, 0));
        w.conditions.push(Condition {
            kind: "QuotaReserved".into(),
            status: false,
            reason: "Pending".into(),
            message: "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)".into(),
            at: None,
        });
        assert!(!kueue.waits_for_gpus(&w, 0));
        assert!(reason(&kueue, &w, 0).contains("will not start as it is"));
        // One flavor full, another too small: it may fit once GPUs free up.
        w.conditions[0]
            .message
            .push_str(", insufficient unused quota for nvidia.com/gpu in flavor b, 2 more needed");
        assert!(kueue.waits_for_gpus(&w, 0));
        let backing_off = Workload { active: true, requeue_at: Some(100), ..Workload::default() };
        assert!(!kueue.waits_for_gpus(&backing_off, 50) && kueue.waits_for_gpus(&backing_off, 100));
        let inactive = Workload { active: false, ..Workload::default() };
        assert!(!kueue.waits_for_gpus(&inactive, 0));
        // A ClusterQueue that is not active admits nothing.
        let stopped = Kueue {
            cluster_queues: vec![ClusterQueue { name: "a".into(), active: false, ..ClusterQueue::default() }],
            ..Kueue::default()
        };
        let queued = Workload { active: true, cluster_queue: Some("a".into()), ..Workload::default() };
        assert!(!stopped.waits_for_gpus(&queued, 0));
        assert!(reason(&stopped, &queued, 0).starts_with("Kueue cannot queue it"));
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
    fn an_object_kueue_could_not_have_written_is_refused_with_its_name() {
        let bad = |edit: &dyn Fn(&mut Value)| {
            let mut w = workload("x", 1, 0, "2026-12-01T10:00:00Z", None);
            edit(&mut w);
            Workload::read(&w, "nvidia.com/gpu").unwrap_err().to_string()
        };
        let gpu = |q: Value| {
            move |w: &mut Value| {
                w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] =
                    q.clone()
            }
        };
        assert_eq!(
            bad(&gpu(json!("1500m"))),
            "Workload team-a/x: GPU quantity \"1500m\" is not a whole number"
        );
        assert_eq!(bad(&gpu(json!(-1))), "Workload team-a/x: GPU quantity -1 is not a whole number");
        assert_eq!(
            bad(&gpu(json!("5000000000"))),
            "Workload team-a/x: 10000000000 GPUs: more than a job can hold"
        );
        assert_eq!(
            bad(&|w| w["spec"]["priority"] = json!(i64::MIN)),
            "Workload team-a/x: priority -9223372036854775808 is not a whole number in range"
        );
        assert_eq!(
            bad(&|w| w["spec"]["active"] = json!("no")),
            "Workload team-a/x: active \"no\" is not true or false"
        );
        assert_eq!(
            bad(&|w| w["metadata"]["creationTimestamp"] = json!("yesterday")),
            "Workload team-a/x: time \"yesterday\" is not RFC 3339"
        );
    }
}
