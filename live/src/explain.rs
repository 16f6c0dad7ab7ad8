//! Why a pending Slurm job waits, in budget language: Slurm's reason translated, the jobs
//! ahead of it in its partition, the running jobs it could preempt and when their
//! protection ends, and a start estimate from the queue as it stands. With allot's floors:
//! which tier a running job runs in, and whether a pending job's floor has room for it and
//! when the protection of the work it would preempt ends.

use crate::squeue::{NODES_TAKEN, QueuedJob};
use crate::standing::{FloorPartition, Holder, home_partition};

/// Slurm's reason for a pending job, said in budget language (an unknown reason is named as
/// it is).
pub fn reason(reason: &str) -> String {
    let known = match reason {
        "Priority" => {
            "jobs of higher priority wait ahead of it in its partition: their budgets used less of their share over the fair-share window, or they waited longer"
        }
        "Resources" => {
            "it is next in line, and waits for enough GPUs to free up (or for jobs it may preempt to pass their minimum runtime)"
        }
        "AssocGrpGRES" | "AssocGrpGRESLimit" => {
            "its budget, or a budget above it, runs as many GPUs as its `max-gpus` allows"
        }
        "AssocGrpGRESMinutes" | "AssocGrpGRESRunMinutes" => {
            "its budget, or a budget above it, reached a GPU-minutes limit set on the account"
        }
        "QOSMaxGRESPerJob" => {
            "it asks for more GPUs per job than its contract allows (`max-gpus` of the contract): it will not start as it is"
        }
        "QOSMaxWallDurationPerJobLimit" => {
            "its time limit is longer than its contract's `max-runtime`: it will not start as it is"
        }
        "PartitionTimeLimit" => {
            "its time limit is longer than the partition allows: it will not start as it is"
        }
        "QOSGrpGRES" => "its contract's QOS runs as many GPUs as that QOS allows",
        "BeginTime" => {
            "it may not start before its begin time (a job requeued after preemption waits about 20 minutes)"
        }
        "Dependency" => "it waits for the jobs it depends on",
        "DependencyNeverSatisfied" => "the jobs it depends on ended so that it can never run: cancel it",
        "JobHeldUser" => "its owner holds it (`scontrol release` lets it go)",
        "JobHeldAdmin" => "an administrator holds it",
        "ReqNodeNotAvail" => "the nodes it needs are down, drained or reserved",
        "QOSNotAllowed" | "InvalidQOS" => "its budget may not use this contract",
        "AccountNotAllowed" | "InvalidAccount" => {
            "it names an account the partition or the budgets do not allow"
        }
        "None" => "Slurm has not looked at it yet",
        NODES_TAKEN => {
            "the nodes it could use are taken by, or kept for, jobs of a partition of a higher tier (with allot's floors: jobs in the budgets' floors), or are down or drained"
        }
        _ if reason.starts_with("ReqNodeNotAvail") => "the nodes it needs are down, drained or reserved",
        _ => return format!("Slurm says `{reason}`"),
    };
    format!("{known} (Slurm: `{reason}`)")
}

/// The pending jobs waiting for GPUs ahead of `job` in its partition: higher priority
/// first, then earlier submission, then lower id (the order Slurm's main scheduler takes
/// them in).
pub fn ahead<'q>(jobs: &'q [QueuedJob], job: &QueuedJob) -> Vec<&'q QueuedJob> {
    let key = |q: &QueuedJob| (std::cmp::Reverse(q.priority), q.job.submit, id_number(&q.job.id));
    let mut ahead: Vec<&QueuedJob> = jobs
        .iter()
        .filter(|q| q.waits_for_gpus() && q.job.partition == job.job.partition && q.job.id != job.job.id)
        .filter(|q| key(q) < key(job))
        .collect();
    ahead.sort_by_key(|q| key(q));
    ahead
}

/// A job id's number, for ordering (`123`, `123_4`).
fn id_number(id: &str) -> u64 {
    id.split(['_', '+', '.']).next().and_then(|n| n.parse().ok()).unwrap_or(u64::MAX)
}

/// A running job `job` may preempt, and when its protection ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Preemptible<'q> {
    pub job: &'q QueuedJob,
    /// Its start plus its QOS's `PreemptExemptTime`.
    pub protected_until: i64,
}

/// The running jobs of `job`'s partition that `job` may preempt: those whose QOS its QOS
/// may preempt (`may_preempt`), each with the end of its protection (`exempt`: a QOS's
/// protected seconds), the first to end first.
pub fn preemptible<'q>(
    jobs: &'q [QueuedJob],
    job: &QueuedJob,
    may_preempt: impl Fn(&str) -> bool,
    exempt: impl Fn(&str) -> i64,
) -> Vec<Preemptible<'q>> {
    let mut out: Vec<Preemptible<'q>> = jobs
        .iter()
        .filter(|q| !q.is_pending() && q.job.partition == job.job.partition && may_preempt(&q.job.contract))
        .filter_map(|q| {
            let start = q.job.start?;
            Some(Preemptible { job: q, protected_until: start.saturating_add(exempt(&q.job.contract)) })
        })
        .collect();
    out.sort_by_key(|p| (p.protected_until, id_number(&p.job.job.id)));
    out
}

/// When `job` would start if every running job ran to its time limit and the pending jobs
/// of its partition started in priority order, each as soon as enough of the partition's
/// `gpus` are free, none passing another (no backfill, no preemption, GPUs counted over the
/// partition, not node by node). `None` when it waits for something else than GPUs (a
/// limit, a hold, a dependency), when a job it must wait for has no time limit, or when it
/// asks for more GPUs than the partition has.
pub fn estimated_start(jobs: &[QueuedJob], job: &QueuedJob, gpus: u64, now: i64) -> Option<i64> {
    if !job.waits_for_gpus() {
        return None;
    }
    let holding = jobs
        .iter()
        .filter(|q| !q.is_pending() && q.job.partition == job.job.partition)
        .map(|q| (q.job.start.zip(q.time_limit).map(|(s, l)| s.saturating_add(l)), u64::from(q.job.gpus)))
        .collect();
    let line: Vec<(u64, Option<i64>)> =
        ahead(jobs, job).into_iter().chain([job]).map(|q| (u64::from(q.job.gpus), q.time_limit)).collect();
    start_in_line(holding, &line, gpus, now)
}

/// When the last job of `line` starts, if the GPUs `holding` holds (each: when they free
/// up, `None` for never known, and how many) free up then, and the jobs of `line` (each: its
/// GPUs and its time limit) start in order, each as soon as enough of `gpus` are free, none
/// passing another. `None` when one asks for more than `gpus`, or must wait for GPUs whose
/// end is not known.
pub fn start_in_line(
    mut holding: Vec<(Option<i64>, u64)>,
    line: &[(u64, Option<i64>)],
    gpus: u64,
    now: i64,
) -> Option<i64> {
    for end in holding.iter_mut().filter_map(|(end, _)| end.as_mut()) {
        *end = (*end).max(now);
    }
    let mut clock = now;
    let mut start = now;
    for &(want, limit) in line {
        if want > gpus {
            return None;
        }
        // Free GPUs now, then the ends in order until enough are free.
        holding.sort_by_key(|(end, _)| end.map_or(i64::MAX, |e| e));
        let held = |at: i64, holding: &[(Option<i64>, u64)]| -> u64 {
            holding.iter().filter(|(end, _)| end.is_none_or(|e| e > at)).map(|(_, g)| g).sum()
        };
        start = clock;
        if gpus - held(start, &holding).min(gpus) < want {
            let ends: Vec<i64> = holding.iter().filter_map(|(end, _)| *end).filter(|e| *e > start).collect();
            start = ends.into_iter().find(|&e| gpus - held(e, &holding).min(gpus) >= want)?;
        }
        clock = start;
        holding.push((limit.map(|l| start.saturating_add(l)), want));
    }
    Some(start)
}

/// The GPUs of the jobs running in partition `partition` now.
pub fn running_in(jobs: &[QueuedJob], partition: &str) -> u64 {
    jobs.iter()
        .filter(|q| !q.is_pending() && q.job.partition == partition)
        .map(|q| u64::from(q.job.gpus))
        .sum()
}

/// Where a running job runs, with allot's floors on Slurm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tier<'f> {
    /// In a budget's floor: never preempted.
    Floor(&'f FloorPartition),
    /// In a contract's reserve: never preempted.
    Reserve(&'f FloorPartition),
    /// In the bound partition `over`, beyond the floors: a job in a floor with room may
    /// preempt it from `from` (its start plus its contract's protection), the youngest first.
    Over { over: &'f str, from: i64 },
}

/// The tier running job `job` runs in (`exempt`: a QOS's protected seconds); `None` when it
/// is pending, or runs in a partition that is no floor and that no floor lies over.
pub fn tier<'f>(
    job: &QueuedJob,
    floors: &'f [FloorPartition],
    exempt: impl Fn(&str) -> i64,
) -> Option<Tier<'f>> {
    let start = job.job.start?;
    let partition = job.job.partition.as_str();
    if let Some(floor) = floors.iter().find(|f| f.partition == partition) {
        return Some(match floor.holder {
            Holder::Budget(_) => Tier::Floor(floor),
            Holder::Contract(_) => Tier::Reserve(floor),
        });
    }
    let over = floors.iter().find(|f| f.over == partition)?;
    Some(Tier::Over { over: &over.over, from: start.saturating_add(exempt(&job.job.contract)) })
}

/// A floor a pending job may run in, and its GPUs in use now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloorRoom<'f> {
    pub floor: &'f FloorPartition,
    pub in_use: u64,
}

impl FloorRoom<'_> {
    /// Whether `gpus` more fit under the floor's cap.
    pub fn has_room(&self, gpus: u64) -> bool {
        self.in_use.saturating_add(gpus) <= self.floor.gpus
    }
}

/// A pending job's floors on Slurm: whether one has room for it, and if the GPUs it lacks
/// are held by jobs beyond the floors, when their protection lets it preempt them.
#[derive(Clone, Debug, PartialEq)]
pub struct FloorWait<'f, 'q> {
    /// The floors it may run in (those its partitions list), the nearest first (the floor of
    /// the deepest budget: its own account's, then those above).
    pub floors: Vec<FloorRoom<'f>>,
    /// The bound partition they lie over, where it may run too (unless it runs in its floor
    /// only).
    pub over: &'f str,
    /// Whether it may run in `over` (its partitions list it).
    pub in_over: bool,
    /// The first of `floors` with room for it.
    pub room: Option<FloorRoom<'f>>,
    /// GPUs free on the bound partition's nodes now: their GPUs less those running in the
    /// partition and in its floors.
    pub free_gpus: u64,
    /// With room in a floor: the running jobs of `over` it may preempt, each with when its
    /// protection ends, the first to end first (Slurm takes the youngest of those past it).
    pub preemptible: Vec<Preemptible<'q>>,
    /// With room in a floor and fewer GPUs free than it asks for: when enough of
    /// `preemptible` are past their protection to make up the rest (`None`: they never are;
    /// the rest is held in floors, where nothing is preempted).
    pub preempt_from: Option<i64>,
}

impl FloorWait<'_, '_> {
    /// Whether it waits for the protection of jobs it would preempt from a floor with room.
    pub fn must_preempt(&self, gpus: u64) -> bool {
        self.room.is_some() && self.free_gpus < gpus
    }
}

/// The floors of pending job `job` (see [`FloorWait`]): `gpus` the GPUs of the bound
/// partition's nodes, `exempt` a QOS's protected seconds. `None` when it is not pending or
/// its partitions list neither a floor nor a partition a floor lies over.
pub fn floor_wait<'f, 'q>(
    jobs: &'q [QueuedJob],
    job: &QueuedJob,
    floors: &'f [FloorPartition],
    gpus: u64,
    exempt: impl Fn(&str) -> i64,
) -> Option<FloorWait<'f, 'q>> {
    if !job.is_pending() {
        return None;
    }
    let listed: Vec<&str> = job.job.partition.split(',').map(str::trim).collect();
    let over = home_partition(&job.job.partition, floors)?;
    let mut mine: Vec<&FloorPartition> = floors
        .iter()
        .filter(|f| f.over == over && f.budget().is_some() && listed.contains(&f.partition.as_str()))
        .collect();
    // The deepest budget's floor is the nearest (its own account's, or the nearest above it).
    mine.sort_by_key(|f| std::cmp::Reverse(f.budget().map_or(0, |b| b.matches('/').count())));
    let mine: Vec<FloorRoom<'f>> = mine
        .into_iter()
        .map(|floor| FloorRoom { floor, in_use: running_in(jobs, &floor.partition) })
        .collect();
    let want = u64::from(job.job.gpus);
    let room = mine.iter().find(|f| f.has_room(want)).copied();
    let in_use = running_in(jobs, over)
        + floors.iter().filter(|f| f.over == over).map(|f| running_in(jobs, &f.partition)).sum::<u64>();
    let free_gpus = gpus.saturating_sub(in_use);
    let mut preemptible: Vec<Preemptible<'q>> = Vec::new();
    if room.is_some() {
        preemptible = jobs
            .iter()
            .filter(|q| !q.is_pending() && q.job.partition == over)
            .filter_map(|q| {
                let start = q.job.start?;
                Some(Preemptible { job: q, protected_until: start.saturating_add(exempt(&q.job.contract)) })
            })
            .collect();
        preemptible.sort_by_key(|p| (p.protected_until, id_number(&p.job.job.id)));
    }
    let mut preempt_from = None;
    if room.is_some() && free_gpus < want {
        let mut freed = free_gpus;
        for p in &preemptible {
            freed += u64::from(p.job.job.gpus);
            if freed >= want {
                preempt_from = Some(p.protected_until);
                break;
            }
        }
    }
    Some(FloorWait {
        floors: mine,
        over,
        in_over: listed.contains(&over),
        room,
        free_gpus,
        preemptible,
        preempt_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_verify::trace::Job;

    fn queued(id: &str, gpus: u32, start: Option<i64>, limit: i64, priority: u64, submit: i64) -> QueuedJob {
        QueuedJob {
            job: Job {
                id: id.into(),
                gpus,
                start,
                submit,
                partition: "gpu".into(),
                contract: if start.is_some() { "preemptible".into() } else { "batch".into() },
                ..Job::default()
            },
            state: if start.is_some() { "RUNNING" } else { "PENDING" }.into(),
            reason: "Priority".into(),
            time_limit: Some(limit),
            priority,
            expected_start: None,
        }
    }

    #[test]
    fn a_start_is_estimated_from_the_time_limits_of_what_runs_and_what_is_ahead() {
        // 8 GPUs. Running: r1 (4 GPUs, ends at 100), r2 (2 GPUs, ends at 300). Free now: 2.
        // Pending by priority: a (4 GPUs, 50 s), then b (2), then the job (6 GPUs, 10 s).
        // a starts at 100 (r1's 4 free, 2 free already: 6 >= 4) and ends at 150;
        // b starts at 100 too (6 - 4 = 2 free); it runs 1000 s.
        // The job needs 6: at 150 a's 4 free with 2 left: 6? held at 150 = r2 2 + b 2 = 4,
        // so 4 free: not enough; at 300 r2 ends: held = b 2, free 6: it starts at 300.
        let jobs = vec![
            queued("1", 4, Some(0), 100, 0, 0),
            queued("2", 2, Some(0), 300, 0, 0),
            queued("3", 4, None, 50, 30, 10),
            queued("4", 2, None, 1000, 20, 10),
            queued("5", 6, None, 10, 10, 5),
        ];
        let job = &jobs[4];
        let ahead: Vec<&str> = ahead(&jobs, job).iter().map(|q| q.job.id.as_str()).collect();
        assert_eq!(ahead, ["3", "4"]);
        assert_eq!(estimated_start(&jobs, job, 8, 0), Some(300));
        // More GPUs than the partition has: no estimate.
        assert_eq!(estimated_start(&jobs, job, 4, 0), None);
        // The running jobs it may preempt, the first protection to end first.
        let exempt = |qos: &str| if qos == "preemptible" { 60 } else { 0 };
        let preemptible = preemptible(&jobs, job, |q| q == "preemptible", exempt);
        assert_eq!(preemptible.iter().map(|p| p.protected_until).collect::<Vec<_>>(), [60, 60]);
        assert_eq!(preemptible[0].job.job.id, "1");
    }

    #[test]
    fn reasons_are_said_in_budget_language() {
        assert!(reason("AssocGrpGRES").contains("`max-gpus`"));
        assert!(reason("ReqNodeNotAvail, UnavailableNodes:vm").starts_with("the nodes it needs"));
        assert_eq!(reason("SomethingNew"), "Slurm says `SomethingNew`");
    }

    #[test]
    fn floors_say_where_a_job_runs_and_when_a_job_with_room_may_preempt() {
        // 8 GPUs bound to partition gpu; a and b have floors of 4. b runs 3 + 1 GPUs in its
        // floor and 2 in gpu (started at 500 under batch, protected an hour: until 4,100).
        let floor = |budget: &str| FloorPartition {
            cluster: "c".into(),
            holder: Holder::Budget(budget.into()),
            partition: format!("gpu-floor-{budget}"),
            over: "gpu".into(),
            gpus: 4,
        };
        let floors = [floor("a"), floor("b")];
        let on = |partition: &str, project: &str, q: QueuedJob| QueuedJob {
            reason: if q.is_pending() { NODES_TAKEN.into() } else { "None".into() },
            job: Job {
                partition: partition.into(),
                project: project.into(),
                contract: "batch".into(),
                ..q.job
            },
            ..q
        };
        let jobs = vec![
            on("gpu-floor-b", "b", queued("1", 3, Some(0), 86_400, 0, 0)),
            on("gpu-floor-b", "b", queued("2", 1, Some(100), 86_400, 0, 0)),
            on("gpu", "b", queued("3", 2, Some(500), 86_400, 0, 0)),
            // a asks for 4 in its floor or gpu; b for 1 more.
            on("gpu,gpu-floor-a", "a", queued("4", 4, None, 3_600, 10, 900)),
            on("gpu-floor-b,gpu", "b", queued("5", 1, None, 3_600, 10, 900)),
        ];
        let exempt = |qos: &str| if qos == "batch" { 3_600 } else { 0 };
        assert_eq!(tier(&jobs[0], &floors, exempt), Some(Tier::Floor(&floors[1])));
        assert_eq!(tier(&jobs[2], &floors, exempt), Some(Tier::Over { over: "gpu", from: 4_100 }));
        assert_eq!(tier(&jobs[3], &floors, exempt), None, "pending");
        assert!(jobs[3].waits_for_gpus(), "Slurm's reason for a job kept from nodes by a higher tier");
        // a's floor has room (0 of 4 in use); 2 GPUs are free (8 - 6), 2 more are b's job in
        // gpu: preemptible from 4,100.
        let a = floor_wait(&jobs, &jobs[3], &floors, 8, exempt).unwrap();
        assert_eq!(
            (
                a.floors.iter().map(|f| (f.floor.gpus, f.in_use)).collect::<Vec<_>>(),
                a.room.map(|r| r.floor),
                a.free_gpus
            ),
            (vec![(4, 0)], Some(&floors[0]), 2)
        );
        assert_eq!((a.over, a.in_over, a.preempt_from, a.must_preempt(4)), ("gpu", true, Some(4_100), true));
        assert_eq!(a.preemptible.iter().map(|p| p.job.job.id.as_str()).collect::<Vec<_>>(), ["3"]);
        // Asking for 2, the free GPUs do: nothing to wait for.
        let two = QueuedJob { job: Job { gpus: 2, ..jobs[3].job.clone() }, ..jobs[3].clone() };
        let a2 = floor_wait(&jobs, &two, &floors, 8, exempt).unwrap();
        assert_eq!((a2.preempt_from, a2.must_preempt(2)), (None, false));
        // b's floor is full (4 of 4): no room, nothing to preempt; it waits in gpu.
        let b = floor_wait(&jobs, &jobs[4], &floors, 8, exempt).unwrap();
        assert_eq!((b.floors[0].in_use, b.room, b.preemptible.len(), b.preempt_from), (4, None, 0, None));
        // A job of a partition no floor lies over has no floors.
        let elsewhere = on("debug", "a", queued("6", 1, None, 60, 0, 0));
        assert_eq!(floor_wait(&jobs, &elsewhere, &floors, 8, exempt), None);
        // A contract's reserve over gpu: a job running there is in it, never preempted; a
        // pending job listing it is still given its budget's floors only.
        let reserve = FloorPartition {
            holder: Holder::Contract("debug".into()),
            partition: "gpu-reserve-debug".into(),
            gpus: 2,
            ..floor("a")
        };
        let with_reserve = [floor("a"), floor("b"), reserve];
        let in_reserve = on("gpu-reserve-debug", "b", queued("7", 1, Some(900), 60, 0, 0));
        assert_eq!(tier(&in_reserve, &with_reserve, exempt), Some(Tier::Reserve(&with_reserve[2])));
        let listing = on("gpu-reserve-debug,gpu-floor-a,gpu", "a", queued("8", 4, None, 3_600, 10, 900));
        let a = floor_wait(&jobs, &listing, &with_reserve, 8, exempt).unwrap();
        assert_eq!(a.floors.iter().map(|f| f.floor.partition.as_str()).collect::<Vec<_>>(), ["gpu-floor-a"]);
        assert!(reason(NODES_TAKEN).starts_with("the nodes it could use are taken by, or kept for,"));
    }
}
