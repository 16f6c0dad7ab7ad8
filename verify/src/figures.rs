//! The verifier's figures: what an [`audit`](crate::audit) measures in a trace (and a
//! simulation (allot-simulate) in the schedule it makes), per budget, contract and
//! cluster, for each window and for the whole trace. The [`expectations`](crate::expectations)
//! are checked against them, and the [`render`](crate::render) and
//! [`report`](crate::report) modules show them.

/// Figures of one budget (or of everything) over a span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BudgetFigures {
    /// The project's path; `(unbudgeted)` for jobs no budget covers.
    pub project: String,
    pub cluster: String,
    pub used_gpu_hours: f64,
    pub entitled_gpu_hours: f64,
    pub delivered_gpu_hours: f64,
    pub waits: Waits,
}

impl BudgetFigures {
    /// Delivered over entitled GPU-hours; `None` when nothing was entitled.
    pub fn delivered_ratio(&self) -> Option<f64> {
        (self.entitled_gpu_hours > 0.0).then(|| self.delivered_gpu_hours / self.entitled_gpu_hours)
    }

    /// Something happened to the budget: it used GPUs, was entitled to some, or had jobs.
    pub fn has_activity(&self) -> bool {
        self.used_gpu_hours > 0.0 || self.entitled_gpu_hours > 0.0 || self.waits.jobs() > 0
    }
}

/// Waits of a set of jobs, in seconds, for exact nearest-rank percentiles. A job still
/// waiting when the trace ends counts as waiting until then: its wait is *censored* (the
/// real one is longer), and the waits say how many are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waits {
    values: Vec<u32>,
    censored: usize,
}

impl Waits {
    /// Adds one job's wait, in seconds (a negative wait counts as none).
    pub fn push(&mut self, seconds: i64) {
        self.values.push(seconds.clamp(0, u32::MAX as i64) as u32);
    }

    /// Adds the wait of a job still waiting when the trace ends, up to its end.
    pub fn push_censored(&mut self, seconds: i64) {
        self.push(seconds);
        self.censored += 1;
    }

    /// The jobs counted, censored or not.
    pub fn jobs(&self) -> usize {
        self.values.len()
    }

    /// How many of the waits end with the trace, the job still waiting.
    pub fn censored(&self) -> usize {
        self.censored
    }

    /// Every wait, in seconds, in the order the jobs were recorded (for histograms).
    pub fn values(&self) -> &[u32] {
        &self.values
    }

    /// The nearest-rank percentile: the smallest wait that `p`% of the jobs do not exceed.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.values.is_empty() {
            return None;
        }
        let rank = ((p / 100.0) * self.values.len() as f64).ceil().max(1.0) as usize;
        // The wait at that rank in sorted order, found without sorting them all.
        let index = rank.min(self.values.len()) - 1;
        let mut values = self.values.clone();
        let (_, &mut wait, _) = values.select_nth_unstable(index);
        Some(u64::from(wait))
    }
}

/// Waits of the jobs of one contract over a span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContractFigures {
    pub contract: String,
    pub waits: Waits,
}

/// GPU-hours used on one cluster over a span.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFigures {
    pub cluster: String,
    pub gpus: u64,
    pub used_gpu_hours: f64,
}

/// Figures between two instants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Span {
    pub start: i64,
    pub end: i64,
    /// A window shorter than the audit's window: the first (when windows are aligned to the
    /// epoch) or the last, cut to the trace's span. Never set on the whole trace's span.
    pub partial: bool,
    pub budgets: Vec<BudgetFigures>,
    pub contracts: Vec<ContractFigures>,
    pub clusters: Vec<ClusterFigures>,
}

impl Span {
    /// Delivered over entitled GPU-hours of all leaf budgets together.
    pub fn overall_ratio(&self, leaves: &[String]) -> Option<f64> {
        let leaf = |b: &&BudgetFigures| leaves.contains(&b.project);
        let entitled: f64 = self.budgets.iter().filter(leaf).map(|b| b.entitled_gpu_hours).sum();
        let delivered: f64 = self.budgets.iter().filter(leaf).map(|b| b.delivered_gpu_hours).sum();
        (entitled > 0.0).then(|| delivered / entitled)
    }

    /// Used GPU-hours over GPU-hours available, per cluster.
    pub fn utilisation(&self, cluster: &ClusterFigures) -> f64 {
        let hours = (self.end - self.start) as f64 / 3600.0;
        if hours <= 0.0 || cluster.gpus == 0 {
            0.0
        } else {
            cluster.used_gpu_hours / (hours * cluster.gpus as f64)
        }
    }
}

/// What an audit found: the figures of the whole trace and of each window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Audit {
    /// From the first submission to the last event (submission, eligibility, start or end).
    pub whole: Span,
    pub windows: Vec<Span>,
    /// The windows' length, in seconds.
    pub window: i64,
    /// Leaf budgets' paths (for the overall ratio and the per-budget expectation).
    pub leaves: Vec<String>,
    /// The jobs audited (started or not).
    pub jobs: usize,
    /// Rows skipped under `--skip-bad-rows`: rows that are not jobs, and jobs the budgets
    /// cannot place (an unknown cluster, a partition that picks none).
    pub skipped_rows: usize,
    /// Rows that record a submission only (a duration, no start): what a simulation
    /// replays, not what happened.
    pub not_audited: usize,
}

impl Audit {
    /// Whether `project` is a leaf budget.
    pub fn is_leaf(&self, project: &str) -> bool {
        self.leaves.iter().any(|leaf| leaf == project)
    }

    /// The whole trace's figures of the leaf budgets.
    pub fn leaf_budgets(&self) -> impl Iterator<Item = &BudgetFigures> {
        self.whole.budgets.iter().filter(|b| self.is_leaf(&b.project))
    }
}
