//! The verifier's figures: what an [`audit`](crate::audit) measures in a trace (and a
//! [`simulation`](crate::simulate) in the schedule it makes), per budget, contract and
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

/// Waits of a set of jobs, in seconds, for exact nearest-rank percentiles.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waits(Vec<u32>);

impl Waits {
    /// Adds one job's wait, in seconds (a negative wait counts as none).
    pub(crate) fn push(&mut self, seconds: i64) {
        self.0.push(seconds.clamp(0, u32::MAX as i64) as u32);
    }

    pub fn jobs(&self) -> usize {
        self.0.len()
    }

    /// Every wait, in seconds, in the order the jobs were recorded (for histograms).
    pub fn values(&self) -> &[u32] {
        &self.0
    }

    /// The nearest-rank percentile: the smallest wait that `p`% of the jobs do not exceed.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.0.is_empty() {
            return None;
        }
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted.get(rank.min(sorted.len()) - 1).map(|&w| u64::from(w))
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
    pub whole: Span,
    pub windows: Vec<Span>,
    /// Leaf budgets' paths (for the overall ratio and the per-budget expectation).
    pub leaves: Vec<String>,
    pub jobs: usize,
    pub skipped_rows: usize,
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
