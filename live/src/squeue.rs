//! A live Slurm queue as `squeue` lists it: the fields of [`FORMAT`] asked for with `-O`
//! (each with a `|` after it, so none is cut to a width), times as epoch seconds
//! (`SLURM_TIME_FORMAT=%s`), one job per line. Running jobs become [`Job`]s with a start
//! and no end, pending ones [`Job`]s without a start; beside each, what `squeue` says of it
//! that a trace does not hold.

use allot_verify::trace::{Job, RowError, optional_time, parse_time, tres_gpus};

/// The `squeue -O` fields read, in order. `Reason` comes last: it may hold spaces and
/// commas (`ReqNodeNotAvail, UnavailableNodes:vm`).
pub const FORMAT: &str = "JobID:|,UserName:|,Account:|,QOS:|,Partition:|,State:|,SubmitTime:|,EligibleTime:|,StartTime:|,TimeLimit:|,tres-alloc:|,PriorityLong:|,Reason:";

/// The most jobs a queue is read with.
pub const MAX_JOBS: usize = 1_000_000;

/// One job of the queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueuedJob {
    /// The job; pending: no start.
    pub job: Job,
    /// `squeue`'s state: `PENDING`, `RUNNING`, `SUSPENDED`, `COMPLETING`, ...
    pub state: String,
    /// Why it waits (`Priority`, `Resources`, `AssocGrpGRES`, ...); `None` when running.
    pub reason: String,
    /// Its time limit, in seconds (`None`: unlimited).
    pub time_limit: Option<i64>,
    pub priority: u64,
    /// A pending job's start as Slurm's backfill scheduler expects it, when it planned one.
    pub expected_start: Option<i64>,
}

impl QueuedJob {
    pub fn is_pending(&self) -> bool {
        self.job.start.is_none()
    }

    /// Whether it is pending and waits for GPUs (Slurm's `Priority`, `Resources`,
    /// [`NODES_TAKEN`], or not looked at yet), rather than for a limit, a hold, a dependency
    /// or a time: only such jobs ask for GPUs now, and hold back the jobs behind them.
    pub fn waits_for_gpus(&self) -> bool {
        self.is_pending() && matches!(self.reason.as_str(), "Priority" | "Resources" | "None" | NODES_TAKEN)
    }
}

/// What Slurm says of a job whose nodes are taken by, or kept for, jobs of a partition of a
/// higher `PriorityTier` (and of one whose nodes are down or drained): with allot's floors,
/// a job waiting beyond its floor, or in its floor for the protection of the jobs it would
/// preempt to pass.
pub const NODES_TAKEN: &str =
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions";

/// The jobs of a queue that ask for GPUs now: those running, and those pending that wait
/// for GPUs.
pub fn demand(jobs: &[QueuedJob]) -> impl Iterator<Item = &Job> {
    jobs.iter().filter(|q| !q.is_pending() || q.waits_for_gpus()).map(|q| &q.job)
}

/// Why a line of `squeue` output cannot be read, with its number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct QueueError {
    pub line: usize,
    pub problem: String,
}

/// Reads `squeue --noheader -O `[`FORMAT`] output of Slurm cluster `cluster` (its
/// `CLUSTER:` heading passed over). Jobs in a
/// state that holds no GPUs and waits for nothing (completed, cancelled, failed) are passed
/// over.
pub fn parse(text: &str, cluster: &str) -> Result<Vec<QueuedJob>, QueueError> {
    let mut jobs = Vec::new();
    // With `--clusters`, squeue heads the jobs with `CLUSTER: name`.
    for (i, line) in
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with("CLUSTER: "))
    {
        let fail = |problem: String| QueueError { line: i + 1, problem };
        let fields: Vec<&str> = line.splitn(13, '|').map(str::trim).collect();
        let [
            id,
            user,
            account,
            qos,
            partition,
            state,
            submit,
            eligible,
            start,
            limit,
            tres,
            priority,
            reason,
        ] = fields[..]
        else {
            return Err(fail(format!("{} fields, not the 13 of {FORMAT}", fields.len())));
        };
        let state = state.to_ascii_uppercase();
        let pending = match state.as_str() {
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" => true,
            "RUNNING" | "SUSPENDED" | "COMPLETING" | "CONFIGURING" | "STAGE_OUT" | "RESIZING"
            | "SIGNALING" => false,
            _ => continue,
        };
        if jobs.len() == MAX_JOBS {
            return Err(fail(format!("more than {MAX_JOBS} jobs")));
        }
        let time = |text: &str| -> Result<Option<i64>, String> {
            match text {
                "N/A" | "(null)" => Ok(None),
                t => optional_time(t).map_err(|e: RowError| e.to_string()),
            }
        };
        let start = time(start).map_err(&fail)?;
        let gpus = tres_gpus(tres).unwrap_or("0");
        let job = Job {
            id: id.into(),
            project: account.into(),
            user: user.into(),
            cluster: cluster.into(),
            partition: partition.into(),
            gpus: gpus.parse().map_err(|_| fail(format!("GPU count {gpus:?} is not a number")))?,
            submit: parse_time(submit).map_err(|e| fail(e.to_string()))?,
            eligible: time(eligible).map_err(&fail)?,
            start: if pending { None } else { start },
            end: None,
            duration: None,
            contract: qos.into(),
            ..Job::default()
        };
        if !pending && job.start.is_none() {
            return Err(fail(format!("job {id} is {state} without a start time")));
        }
        jobs.push(QueuedJob {
            job,
            state,
            reason: reason.to_string(),
            time_limit: duration(limit).map_err(&fail)?,
            priority: priority.parse().map_err(|_| fail(format!("priority {priority:?} is not a number")))?,
            expected_start: if pending { start } else { None },
        });
    }
    Ok(jobs)
}

/// The longest time limit read, in days (Slurm's 32-bit minutes).
const MAX_DAYS: i64 = u32::MAX as i64 / 1440;

/// A Slurm time limit (`[D-]HH:MM:SS`, `MM:SS`, `UNLIMITED`), in seconds.
pub(crate) fn duration(text: &str) -> Result<Option<i64>, String> {
    if matches!(text, "UNLIMITED" | "NOT_SET" | "INVALID" | "N/A" | "") {
        return Ok(None);
    }
    let bad = || format!("time limit {text:?} is not [D-]HH:MM:SS");
    let (days, clock) = text.split_once('-').unwrap_or(("0", text));
    let days: i64 = days.parse().map_err(|_| bad())?;
    let parts: Vec<i64> = clock.split(':').map(|p| p.parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
    let (h, m, s) = match parts[..] {
        [h, m, s] => (h, m, s),
        [m, s] => (0, m, s),
        _ => return Err(bad()),
    };
    // Slurm keeps time limits in 32 bits of minutes (squeue prints INVALID past a year).
    if !(0..=MAX_DAYS).contains(&days)
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..60).contains(&s)
    {
        return Err(bad());
    }
    Ok(Some(days * 86_400 + h * 3600 + m * 60 + s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_and_pending_jobs_read_as_squeue_prints_them() {
        let text = "\
12|priya|sft|batch|gpu|PENDING|1767225600|1767225600|N/A|1-00:00:00|cpu=1,mem=1G,node=1,billing=9,gres/gpu=2|33333|Priority
11|rosa|rlvr|batch|gpu|RUNNING|1767225500|1767225500|1767225510|30:00|cpu=1,node=1,billing=33,gres/gpu=8|50000|None
13|omar|rlvr|short|gpu|PENDING|1767225700|N/A|1767229000|UNLIMITED|cpu=1,gres/gpu:a100=4|1|ReqNodeNotAvail, UnavailableNodes:vm
14|omar|rlvr|short|gpu|COMPLETED|1767225700|N/A|1767225700|UNLIMITED|cpu=1|1|None
";
        let jobs = parse(text, "jupiter").unwrap();
        assert_eq!(jobs.len(), 3, "a completed job holds nothing");
        let [pending, running, later] = &jobs[..] else { unreachable!() };
        assert!(pending.is_pending() && !running.is_pending());
        assert_eq!(
            (pending.job.gpus, pending.job.project.as_str(), pending.job.contract.as_str()),
            (2, "sft", "batch")
        );
        assert_eq!(pending.time_limit, Some(86_400));
        assert_eq!(pending.expected_start, None);
        assert_eq!(
            (running.job.start, running.time_limit, running.job.gpus),
            (Some(1_767_225_510), Some(1800), 8)
        );
        assert_eq!(running.job.cluster, "jupiter");
        assert_eq!((later.job.gpus, later.expected_start, later.time_limit), (4, Some(1_767_229_000), None));
        assert_eq!(later.reason, "ReqNodeNotAvail, UnavailableNodes:vm");
        assert_eq!(later.job.eligible, None);
    }

    #[test]
    fn a_line_squeue_did_not_print_is_refused_with_its_number() {
        for (text, why) in [
            ("1|u|a|q|p|PENDING|x|N/A|N/A|1:00|gres/gpu=1|1|Priority\n", "line 1: "),
            (
                "1|u|a|q|p|RUNNING|5|N/A|N/A|1:00|gres/gpu=1|1|None\n",
                "line 1: job 1 is RUNNING without a start",
            ),
            ("\n1|u|a|q|p|PENDING|5\n", "line 2: 7 fields"),
            ("1|u|a|q|p|PENDING|5|N/A|N/A|1:00:00:00|gres/gpu=1|1|Priority\n", "line 1: time limit"),
            ("1|u|a|q|p|PENDING|5|N/A|N/A|1:00|gres/gpu=x|1|Priority\n", "line 1: GPU count"),
        ] {
            let error = parse(text, "c").unwrap_err().to_string();
            assert!(error.starts_with(why), "{text:?}: {error}");
        }
    }
}
