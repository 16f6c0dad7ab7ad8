//! The settings of a Slurm's scheduler that the simulator's Slurm policy follows, read from
//! a `slurm.conf` (the lines of it that set them; every other line is passed over).

use allot_compiler::units::DECAY_PERIOD;

/// The settings of a Slurm's scheduler that the [`Policy::Slurm`](crate::Policy::Slurm)
/// follows, in seconds. The defaults are Slurm's own and those allot writes
/// (`PriorityCalcPeriod`, `sched_interval`, floors); a test that scales time down sets them
/// as it set its Slurm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlurmSettings {
    /// `PriorityCalcPeriod`: how often usage is decayed and priorities are computed again.
    pub calc_period: i64,
    /// `sched_interval`: how often the main scheduler runs of itself (besides when jobs are
    /// submitted or end): the pass that notices a protection ending.
    pub sched_interval: i64,
    /// `bf_interval`: how often the backfill scheduler runs.
    pub backfill_interval: i64,
    /// `bf_resolution`: the backfill plan's unit of time.
    pub backfill_resolution: i64,
    /// `bf_max_job_test`: the most pending jobs one backfill run looks at.
    pub backfill_max_jobs: usize,
    /// `bf_window`: how far ahead the backfill scheduler plans (a job that cannot start
    /// within it is given no reservation).
    pub backfill_window: i64,
    /// How long a preempted job waits before it may start again (requeued, it is held until
    /// its credentials expire: `cred_expire` + 1).
    pub requeue_delay: i64,
    /// When slurmctld started, on the trace's clock: its decay thread passes then and every
    /// `PriorityCalcPeriod` after. No `slurm.conf` says it, and no trace does: `None` puts the
    /// first pass at the first start simulated. Over a trace of days the phase changes
    /// little; over minutes, with passes a minute apart, it moves budgets' ranks (a test
    /// that starts its own slurmctld knows it).
    pub started: Option<i64>,
    /// `PreemptType=preempt/partition_prio`: budgets' guaranteed GPUs are floor partitions
    /// of a higher `PriorityTier` than the partition where all other work runs, whose jobs
    /// they preempt (docs/slurm.md). Else `preempt/qos`: only jobs of the preemptible QOS
    /// are preempted.
    pub floors: bool,
}

impl Default for SlurmSettings {
    fn default() -> SlurmSettings {
        SlurmSettings {
            calc_period: DECAY_PERIOD as i64,
            sched_interval: 10,
            backfill_interval: 30,
            backfill_resolution: 60,
            backfill_max_jobs: 500,
            backfill_window: 86_400,
            requeue_delay: 121,
            started: None,
            floors: true,
        }
    }
}

/// Bounds of the settings read, in their units (Slurm's own, where it has them).
const BOUNDS: [(&str, i64, i64); 7] = [
    ("PriorityCalcPeriod", 1, 1440),
    ("sched_interval", 1, 86_400),
    ("bf_interval", 1, 10_800),
    ("bf_resolution", 1, 3600),
    ("bf_max_job_test", 1, 1_000_000),
    ("bf_window", 1, 43_200),
    ("cred_expire", 5, 86_400),
];

impl SlurmSettings {
    /// The settings a `slurm.conf` gives, Slurm's defaults for those it leaves out:
    /// `PriorityCalcPeriod` (minutes), `SchedulerParameters`' `sched_interval`,
    /// `bf_interval`, `bf_resolution`, `bf_max_job_test` and `bf_window` (minutes),
    /// `AuthInfo`'s `cred_expire` (seconds), and `PreemptType`.
    /// Keys are read without case, as Slurm reads them; a value out of Slurm's range, or not
    /// a number, is refused with its line.
    pub fn read(conf: &str) -> Result<SlurmSettings, String> {
        let mut settings = SlurmSettings::default();
        for (number, line) in conf.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let Some((key, value)) = line.split_once('=') else { continue };
            let (key, value) = (key.trim(), value.trim());
            if key.eq_ignore_ascii_case("PreemptType") {
                settings.floors = match value.to_ascii_lowercase().as_str() {
                    "preempt/partition_prio" => true,
                    "preempt/qos" => false,
                    _ => {
                        return Err(format!(
                            "line {}: PreemptType={}: the slurm policy models preempt/partition_prio (what allot writes) and preempt/qos",
                            number + 1,
                            value.escape_debug()
                        ));
                    }
                };
                continue;
            }
            let options: Vec<(&str, &str)> = if key.eq_ignore_ascii_case("PriorityCalcPeriod") {
                vec![("PriorityCalcPeriod", value)]
            } else if key.eq_ignore_ascii_case("SchedulerParameters") || key.eq_ignore_ascii_case("AuthInfo")
            {
                value.split(',').filter_map(|option| option.split_once('=')).collect()
            } else {
                continue;
            };
            for (name, text) in options {
                let Some(&(name, least, most)) =
                    BOUNDS.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(name.trim()))
                else {
                    continue;
                };
                let value =
                    text.trim().parse::<i64>().ok().filter(|v| (least..=most).contains(v)).ok_or_else(
                        || {
                            format!(
                                "line {}: {name}={}: not a number from {least} to {most}",
                                number + 1,
                                text.trim().escape_debug()
                            )
                        },
                    )?;
                match name {
                    "PriorityCalcPeriod" => settings.calc_period = value * 60,
                    "sched_interval" => settings.sched_interval = value,
                    "bf_interval" => settings.backfill_interval = value,
                    "bf_resolution" => settings.backfill_resolution = value,
                    "bf_max_job_test" => settings.backfill_max_jobs = value as usize,
                    "bf_window" => settings.backfill_window = value * 60,
                    _ => settings.requeue_delay = value + 1,
                }
            }
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_that_set_them_are_read_and_the_rest_passed_over() {
        let conf = "# time-scaled\nPriorityType=priority/multifactor\npriorityCalcPeriod=1\n\
                    SchedulerParameters=bf_continue,bf_interval=5,bf_resolution=5,sched_interval=10 # planning\n\
                    PreemptType=preempt/partition_prio\n\
                    AuthInfo=socket=/run/munge.socket,cred_expire=10\n";
        let settings = SlurmSettings::read(conf).unwrap();
        let expected = SlurmSettings {
            calc_period: 60,
            backfill_interval: 5,
            backfill_resolution: 5,
            sched_interval: 10,
            requeue_delay: 11,
            floors: true,
            ..SlurmSettings::default()
        };
        assert_eq!(settings, expected);
        assert_eq!(SlurmSettings::read("").unwrap(), SlurmSettings::default());
        assert!(!SlurmSettings::read("PreemptType=preempt/qos").unwrap().floors);
        for (bad, why) in [
            ("SchedulerParameters=bf_interval=0", "line 1: bf_interval=0"),
            ("\nPriorityCalcPeriod=5m", "line 2: PriorityCalcPeriod=5m"),
            ("AuthInfo=cred_expire=-1", "line 1: cred_expire=-1"),
            ("PreemptType=preempt/none", "line 1: PreemptType=preempt/none"),
        ] {
            let error = SlurmSettings::read(bad).unwrap_err();
            assert!(error.starts_with(why), "{bad}: {error}");
        }
    }
}
