//! Draining nodes at the contracts' boundaries: for each job on the nodes, when it can leave
//! them without breaking its contract. A resumable job past its minimum runtime is requeued
//! at once; one still protected, when its protection ends; a job that is not resumable runs
//! to its end (its time limit, or its contract's maximum runtime). The nodes are empty when
//! the last job has left.
//!
//! A job is requeued only when everything agrees that it may be: its contract is resumable,
//! the live QOS of that contract requeues (when the live QOS is known), and Slurm may
//! requeue the job itself (not submitted with `--no-requeue`). Its protection is the longer
//! of its contract's minimum runtime and its live QOS's `PreemptExemptTime`. A job whose QOS
//! is no contract the budgets know runs to its end.

use std::collections::HashMap;

use allot_verify::trace::{RowError, optional_time};

use crate::squeue::{MAX_JOBS, duration};

/// The `squeue -O` fields read of the jobs on the nodes, in order (times as epoch seconds,
/// `SLURM_TIME_FORMAT=%s`).
pub const FORMAT: &str = "JobID:|,UserName:|,QOS:|,State:|,StartTime:|,TimeLimit:|,Requeue:|";

/// A line `squeue` printed that is not as [`FORMAT`] asks.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct NodeJobsError {
    pub line: usize,
    pub problem: String,
}

/// The jobs `squeue --nodelist NODES -O `[`FORMAT`] lists (with `--clusters`, its
/// `CLUSTER: name` line is passed over).
pub fn parse(text: &str) -> Result<Vec<NodeJob>, NodeJobsError> {
    let mut jobs = Vec::new();
    for (i, line) in
        text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with("CLUSTER: "))
    {
        let fail = |problem: String| NodeJobsError { line: i + 1, problem };
        let fields: Vec<&str> = line.trim_end().trim_end_matches('|').split('|').map(str::trim).collect();
        let [id, user, qos, state, start, limit, requeue] = fields[..] else {
            return Err(fail(format!("{} fields, not the 7 of {FORMAT}", fields.len())));
        };
        if jobs.len() == MAX_JOBS {
            return Err(fail(format!("more than {MAX_JOBS} jobs")));
        }
        let start = match start {
            "N/A" | "(null)" => None,
            t => optional_time(t).map_err(|e: RowError| fail(e.to_string()))?,
        };
        let requeue = match requeue {
            "1" => true,
            "0" => false,
            other => return Err(fail(format!("Requeue {other:?} is neither 1 nor 0"))),
        };
        jobs.push(NodeJob {
            id: id.into(),
            user: user.into(),
            qos: qos.into(),
            state: state.to_ascii_uppercase(),
            start,
            time_limit: duration(limit).map_err(fail)?,
            requeue,
        });
    }
    Ok(jobs)
}

/// A job on the nodes being drained, as `squeue --nodelist` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeJob {
    pub id: String,
    pub user: String,
    /// Its QOS: the contract of that name, if the budgets have one.
    pub qos: String,
    /// `squeue`'s state: `RUNNING`, `COMPLETING`, `SUSPENDED`, ...
    pub state: String,
    /// When it started, in seconds since the epoch.
    pub start: Option<i64>,
    /// Its time limit, in seconds (`None`: unlimited).
    pub time_limit: Option<i64>,
    /// Whether Slurm may requeue it (`squeue -O Requeue`).
    pub requeue: bool,
}

/// What a contract lets a drain do with a job under it: the budgets' contract, merged with
/// its live QOS where the caller knows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Terms {
    /// Its protection, in seconds from the job's start.
    pub protected_seconds: u64,
    /// Whether a job under it may be requeued once its protection ends.
    pub resumable: bool,
    /// Its maximum runtime, in seconds.
    pub max_runtime_seconds: Option<u64>,
}

/// Why a job is not requeued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Its contract is not resumable (or its live QOS does not requeue).
    NotResumable,
    /// It was submitted with `--no-requeue`.
    NoRequeue,
    /// Its QOS is no contract of the budgets.
    NoContract,
}

impl Kept {
    pub fn said(self) -> &'static str {
        match self {
            Kept::NotResumable => "its contract is not resumable",
            Kept::NoRequeue => "it was submitted with --no-requeue",
            Kept::NoContract => "its QOS is no contract of the budgets",
        }
    }
}

/// When and how a job leaves the nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Leaves {
    /// Requeued now: resumable, past its protection.
    RequeueNow,
    /// Requeued when its protection ends, at this time.
    RequeueAt(i64),
    /// Runs to its end, at this time (`None`: no time limit, no maximum runtime).
    RunsToEnd { kept: Kept, end: Option<i64> },
    /// Already ending (`COMPLETING`).
    Ending,
    /// In a state a drain leaves alone, which holds the nodes until someone acts
    /// (`SUSPENDED`, or a state allot does not know).
    Held,
}

impl Leaves {
    /// When the job is gone from the nodes, if that is known.
    pub fn at(&self, now: i64) -> Option<i64> {
        match self {
            Leaves::RequeueNow | Leaves::Ending => Some(now),
            Leaves::RequeueAt(at) => Some(*at),
            Leaves::RunsToEnd { end, .. } => *end,
            Leaves::Held => None,
        }
    }
}

/// The plan of a drain: each job on the nodes and how it leaves, in the order they leave
/// (those that may never leave on their own last).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub jobs: Vec<(NodeJob, Leaves)>,
    /// When the nodes are empty: `None` when some job has no known end.
    pub empty_at: Option<i64>,
}

/// How each of `jobs` leaves the nodes at `now`, under `terms` (by QOS name).
pub fn plan(jobs: &[NodeJob], terms: &HashMap<String, Terms>, now: i64) -> Plan {
    let mut planned: Vec<(NodeJob, Leaves)> =
        jobs.iter().map(|job| (job.clone(), leaves(job, terms.get(&job.qos), now))).collect();
    planned.sort_by_key(|(job, leaves)| (leaves.at(now).unwrap_or(i64::MAX), job.id.clone()));
    let empty_at =
        planned.iter().map(|(_, leaves)| leaves.at(now)).try_fold(now, |last, at| Some(last.max(at?)));
    Plan { jobs: planned, empty_at }
}

/// How one job leaves.
fn leaves(job: &NodeJob, terms: Option<&Terms>, now: i64) -> Leaves {
    match job.state.as_str() {
        "COMPLETING" => return Leaves::Ending,
        "RUNNING" => {}
        _ => return Leaves::Held,
    }
    // A running job without a start time is Slurm's oddity: it started now at the latest.
    let start = job.start.unwrap_or(now);
    let Some(terms) = terms else {
        return Leaves::RunsToEnd { kept: Kept::NoContract, end: job.time_limit.map(|limit| start + limit) };
    };
    let kept = if !terms.resumable {
        Some(Kept::NotResumable)
    } else if !job.requeue {
        Some(Kept::NoRequeue)
    } else {
        None
    };
    if let Some(kept) = kept {
        let limit = job.time_limit.into_iter().chain(terms.max_runtime_seconds.map(|s| s as i64)).min();
        return Leaves::RunsToEnd { kept, end: limit.map(|limit| start + limit) };
    }
    let protected_until = start.saturating_add(terms.protected_seconds.min(i64::MAX as u64) as i64);
    if protected_until <= now { Leaves::RequeueNow } else { Leaves::RequeueAt(protected_until) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, qos: &str, state: &str, start: i64, limit: Option<i64>, requeue: bool) -> NodeJob {
        NodeJob {
            id: id.into(),
            user: "ann".into(),
            qos: qos.into(),
            state: state.into(),
            start: Some(start),
            time_limit: limit,
            requeue,
        }
    }

    fn terms() -> HashMap<String, Terms> {
        let t = |protected_seconds, resumable, max_runtime_seconds| Terms {
            protected_seconds,
            resumable,
            max_runtime_seconds,
        };
        HashMap::from([
            ("batch".to_string(), t(3_600, true, None)),
            ("interactive".to_string(), t(600, false, Some(7_200))),
            ("preemptible".to_string(), t(0, true, None)),
        ])
    }

    #[test]
    fn each_job_leaves_at_its_contracts_boundary() {
        // Now is 10,000. batch protects an hour and is resumable; interactive protects ten
        // minutes, is not resumable, and runs two hours at most.
        let now = 10_000;
        let jobs = [
            // Started at 5,000: protected until 8,600, past: requeued now.
            job("1", "batch", "RUNNING", 5_000, None, true),
            // Started at 9,000: protected until 12,600.
            job("2", "batch", "RUNNING", 9_000, Some(86_400), true),
            // Not resumable: its time limit (one hour) ends at 12,000, before its
            // contract's two hours.
            job("3", "interactive", "RUNNING", 8_400, Some(3_600), true),
            // Not resumable, no time limit: the contract's two hours, 9,500 + 7,200.
            job("4", "interactive", "RUNNING", 9_500, None, true),
            // Resumable contract, but submitted with --no-requeue: its time limit, 13,000.
            job("5", "batch", "RUNNING", 7_000, Some(6_000), false),
            // No contract of the budgets, no time limit: no known end.
            job("6", "normal", "RUNNING", 1_000, None, true),
            job("7", "batch", "COMPLETING", 1_000, None, true),
            job("8", "preemptible", "RUNNING", 9_999, None, true),
        ];
        let plan = plan(&jobs, &terms(), now);
        let order: Vec<(&str, &Leaves)> = plan.jobs.iter().map(|(j, l)| (j.id.as_str(), l)).collect();
        assert_eq!(
            order,
            [
                ("1", &Leaves::RequeueNow),
                ("7", &Leaves::Ending),
                ("8", &Leaves::RequeueNow),
                ("3", &Leaves::RunsToEnd { kept: Kept::NotResumable, end: Some(12_000) }),
                ("2", &Leaves::RequeueAt(12_600)),
                ("5", &Leaves::RunsToEnd { kept: Kept::NoRequeue, end: Some(13_000) }),
                ("4", &Leaves::RunsToEnd { kept: Kept::NotResumable, end: Some(16_700) }),
                ("6", &Leaves::RunsToEnd { kept: Kept::NoContract, end: None }),
            ]
        );
        // Job 6 has no known end.
        assert_eq!(plan.empty_at, None);
        // Without it, the last to leave is job 4, at 16,700.
        let plan = super::plan(&jobs[..5], &terms(), now);
        assert_eq!(plan.empty_at, Some(16_700));
    }

    #[test]
    fn jobs_on_nodes_read_as_squeue_prints_them() {
        let text = "CLUSTER: c\n101|ann|batch|RUNNING|1764700000|1-00:00:00|1|\n102|bob|interactive|COMPLETING|1764700100|UNLIMITED|0|\n";
        let jobs = parse(text).unwrap();
        assert_eq!(jobs[0], job("101", "batch", "RUNNING", 1_764_700_000, Some(86_400), true));
        assert_eq!(
            jobs[1],
            NodeJob {
                user: "bob".into(),
                ..job("102", "interactive", "COMPLETING", 1_764_700_100, None, false)
            }
        );
        let wrong = parse("101|ann|batch|RUNNING|1764700000|1:00:00|yes|\n").unwrap_err();
        assert_eq!(wrong.to_string(), "line 1: Requeue \"yes\" is neither 1 nor 0");
        assert!(parse("101|ann|batch\n").unwrap_err().to_string().starts_with("line 1: 3 fields"));
    }

    #[test]
    fn a_job_protected_to_this_second_is_requeued_and_odd_states_are_held() {
        let jobs = [
            job("1", "batch", "RUNNING", 6_400, None, true),
            job("2", "batch", "SUSPENDED", 1_000, None, true),
            job("3", "batch", "STAGE_OUT", 1_000, None, true),
        ];
        let plan = plan(&jobs, &terms(), 10_000);
        let leaves: Vec<&Leaves> = plan.jobs.iter().map(|(_, l)| l).collect();
        assert_eq!(leaves, [&Leaves::RequeueNow, &Leaves::Held, &Leaves::Held]);
        assert_eq!(plan.empty_at, None, "a suspended job holds the node until someone acts");
        // No job at all: the nodes are empty now.
        assert_eq!(super::plan(&[], &terms(), 10_000).empty_at, Some(10_000));
    }
}
