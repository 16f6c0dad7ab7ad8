//! Why a pending Slurm job waits, in budget language: Slurm's reason translated, the jobs
//! ahead of it in its partition, the running jobs it could preempt and when their
//! protection ends, and a start estimate from the queue as it stands.

use crate::squeue::QueuedJob;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Job;

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
}
