//! Usage decayed as Slurm decays it: the decay thread of `priority/multifactor` wakes every
//! `PriorityCalcPeriod`, multiplies every association's raw usage by the per-second decay
//! factor `d = 1 - 0.693 / PriorityDecayHalfLife` to the power of the seconds since its
//! last pass, and then adds each running job's new usage: GPUs × r × d^r, where r is the
//! time the job ran since that last pass (so a period's new usage is decayed too, by its
//! own length). A job that ends adds its last stretch the same way at once, and the next
//! pass decays it with everything else. This is what `sshare` shows as RawUsage at any
//! instant (with billing of one per GPU), and what the real-Slurm suite checks.
//!
//! [`Usage`] keeps that figure per node of a budget tree without walking every pass: a node
//! is brought up to date when a job on it starts or stops, and read at any time by a
//! closed form over the passes since (the GPUs running through whole periods add a
//! geometric series).

/// Slurm's decay: the per-second factor and the calculation period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decay {
    /// The per-second factor `1 - 0.693 / half-life` (1: no decay).
    factor: f64,
    /// Seconds between two passes of the decay thread.
    period: i64,
}

impl Decay {
    /// The decay of `PriorityDecayHalfLife` = `half_life` seconds (0: none) applied every
    /// `period` seconds (`PriorityCalcPeriod`; at least 1).
    pub fn new(half_life: f64, period: i64) -> Decay {
        let factor = if half_life > 0.0 { (1.0 - 0.693 / half_life).max(0.0) } else { 1.0 };
        Decay { factor, period: period.max(1) }
    }

    /// What usage is multiplied by after `seconds`: the factor to that power, floored at
    /// the smallest normal double as Slurm floors it.
    pub fn multiplier(&self, seconds: f64) -> f64 {
        if self.factor == 1.0 { 1.0 } else { self.factor.powf(seconds).max(f64::MIN_POSITIVE) }
    }

    /// The usage a GPU adds for a stretch of `seconds` when it is booked: `r × d^r`.
    pub fn new_usage(&self, seconds: f64) -> f64 {
        seconds * self.multiplier(seconds)
    }

    /// Seconds between two passes.
    pub fn period(&self) -> i64 {
        self.period
    }
}

/// One node's raw usage as of its last pass, and the GPUs running on it.
#[derive(Clone, Debug, Default)]
struct Account {
    raw: f64,
    /// The last pass applied (its index from the origin).
    pass: i64,
    /// GPUs running since before that pass: each adds `period × d^period` at the next one.
    through: f64,
    /// (start, GPUs) of the runs started after that pass.
    recent: Vec<(i64, f64)>,
}

/// Raw usage per node of a tree, decayed as Slurm decays it, with passes at `origin + k ×
/// period`.
#[derive(Clone, Debug)]
pub struct Usage {
    decay: Decay,
    /// A time of a pass, when known (see [`Usage::with_phase`]).
    phase: Option<i64>,
    origin: Option<i64>,
    accounts: Vec<Account>,
}

impl Usage {
    /// `nodes` nodes without usage; the first start sets the passes' origin.
    pub fn new(nodes: usize, decay: Decay) -> Usage {
        Usage { decay, phase: None, origin: None, accounts: vec![Account::default(); nodes] }
    }

    /// The same with its passes at `phase + k × period` when a phase is given (Slurm's
    /// decay thread makes its first pass when slurmctld starts, then one every period), not
    /// from the first start.
    pub fn with_phase(self, phase: Option<i64>) -> Usage {
        Usage { phase, ..self }
    }

    /// The index of the last pass at or before `t`. Usage read at `t` changes only with it,
    /// and when runs stop.
    pub fn pass_at(&self, t: i64) -> i64 {
        self.origin.map_or(0, |origin| (t - origin).div_euclid(self.decay.period))
    }

    fn pass_time(&self, pass: i64) -> i64 {
        self.origin.unwrap_or(0) + pass * self.decay.period
    }

    /// Node `i`'s raw usage at `t` (not before its last start or stop).
    pub fn raw(&self, i: usize, t: i64) -> f64 {
        self.accounts.get(i).map_or(0.0, |account| self.advanced(account, self.pass_at(t)).0)
    }

    /// The account's raw usage and running GPUs after the passes up to `pass`.
    fn advanced(&self, account: &Account, pass: i64) -> (f64, f64) {
        let passes = pass - account.pass;
        if passes <= 0 {
            return (account.raw, account.through);
        }
        let period = self.decay.period as f64;
        let per_pass = self.decay.multiplier(period);
        // The first pass: the decay, then every run's new usage since the last one.
        let at = self.pass_time(account.pass + 1);
        let mut raw = account.raw * per_pass + account.through * self.decay.new_usage(period);
        let mut through = account.through;
        for &(start, gpus) in &account.recent {
            raw += gpus * self.decay.new_usage((at - start) as f64);
            through += gpus;
        }
        // The others: the same GPUs through whole periods, a geometric series.
        let rest = (passes - 1) as f64;
        if rest > 0.0 {
            let decayed = self.decay.multiplier(period * rest);
            let added = if per_pass == 1.0 {
                through * period * rest
            } else {
                through * self.decay.new_usage(period) * (1.0 - decayed) / (1.0 - per_pass)
            };
            raw = raw * decayed + added;
        }
        (raw, through)
    }

    /// Applies the passes up to `t` to node `i`.
    fn bring_up_to(&mut self, i: usize, t: i64) {
        let pass = self.pass_at(t);
        let Some(account) = self.accounts.get(i) else { return };
        let (raw, through) = self.advanced(account, pass);
        if let Some(account) = self.accounts.get_mut(i) {
            if pass > account.pass {
                account.recent.clear();
            }
            account.raw = raw;
            account.through = through;
            account.pass = account.pass.max(pass);
        }
    }

    /// `gpus` start running on node `i` at `t`.
    pub fn start(&mut self, i: usize, t: i64, gpus: f64) {
        if self.origin.is_none() {
            // The last pass at or before the first start: no usage before it to decay.
            let since_pass = self.phase.map_or(0, |phase| (t - phase).rem_euclid(self.decay.period));
            self.origin = Some(t - since_pass);
        }
        self.bring_up_to(i, t);
        if let Some(account) = self.accounts.get_mut(i) {
            account.recent.push((t, gpus));
        }
    }

    /// `gpus` that started at `started` stop on node `i` at `t`: their last stretch is
    /// booked at once.
    pub fn stop(&mut self, i: usize, t: i64, gpus: f64, started: i64) {
        self.bring_up_to(i, t);
        let last_pass = self.pass_time(self.pass_at(t));
        let decay = self.decay;
        let Some(account) = self.accounts.get_mut(i) else { return };
        let since = started.max(last_pass);
        account.raw += gpus * decay.new_usage((t - since) as f64);
        if started >= last_pass
            && let Some(at) = account.recent.iter().position(|&(s, g)| s == started && g == gpus)
        {
            account.recent.swap_remove(at);
        } else {
            account.through = (account.through - gpus).max(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn the_factor_is_slurms_first_order_one() {
        // A 7-day half-life: d = 1 - 0.693 / 604800; after 7 days usage is 0.50007, not 0.5.
        let decay = Decay::new(604_800.0, 300);
        assert!(close(decay.multiplier(604_800.0), 0.500_073_397_152_737_6));
        assert_eq!(Decay::new(0.0, 300).multiplier(1e9), 1.0);
    }

    #[test]
    fn a_job_through_three_passes() {
        // Half-life 60 s (d = 1 - 0.693/60 = 0.98845), passes every 60 s from t = 0; 2 GPUs
        // from t = 30 to t = 150.
        //   pass 60:  0 * d^60 + 2 * 30 * d^30                 = 60 d^30
        //   pass 120: (60 d^30) d^60 + 2 * 60 * d^60
        //   end 150:  + 2 * 30 * d^30 (booked at once)
        //   pass 180: everything * d^60, nothing new
        let d: f64 = 1.0 - 0.693 / 60.0;
        let mut usage = Usage::new(1, Decay::new(60.0, 60));
        usage.start(0, 0, 0.0); // sets the origin at 0
        usage.start(0, 30, 2.0);
        let at_60 = 60.0 * d.powi(30);
        assert!(close(usage.raw(0, 60), at_60));
        assert!(close(usage.raw(0, 119), at_60), "nothing changes between passes");
        let at_120 = at_60 * d.powi(60) + 120.0 * d.powi(60);
        assert!(close(usage.raw(0, 120), at_120));
        usage.stop(0, 150, 2.0, 30);
        let at_150 = at_120 + 60.0 * d.powi(30);
        assert!(close(usage.raw(0, 150), at_150));
        assert!(close(usage.raw(0, 180), at_150 * d.powi(60)));
        assert!(close(usage.raw(0, 600), at_150 * d.powi(480)));
    }

    #[test]
    fn a_phase_given_sets_when_passes_fall() {
        // Passes every 60 s at 20 + 60k (given by one of them: slurmctld started at t = -580);
        // 2 GPUs from t = 30.
        //   pass 80:  2 * 50 * d^50                            = 100 d^50
        //   pass 140: (100 d^50) d^60 + 2 * 60 * d^60
        // From the first start instead, the first pass would come at 90.
        let d: f64 = 1.0 - 0.693 / 60.0;
        let mut usage = Usage::new(1, Decay::new(60.0, 60)).with_phase(Some(20 - 600));
        usage.start(0, 30, 2.0);
        assert_eq!(usage.pass_at(79), usage.pass_at(30));
        assert_eq!(usage.raw(0, 79), 0.0);
        let at_80 = 100.0 * d.powi(50);
        assert!(close(usage.raw(0, 80), at_80));
        assert!(close(usage.raw(0, 140), at_80 * d.powi(60) + 120.0 * d.powi(60)));
    }

    #[test]
    fn whole_periods_add_a_geometric_series() {
        // 1 GPU from the origin through ten passes, read at once and pass by pass.
        let decay = Decay::new(3600.0, 300);
        let mut closed = Usage::new(1, decay);
        closed.start(0, 0, 1.0);
        let mut stepped = 0.0;
        for pass in 1..=10 {
            stepped = stepped * decay.multiplier(300.0) + decay.new_usage(300.0);
            assert!(close(closed.raw(0, pass * 300), stepped), "pass {pass}");
        }
        // Without decay usage is GPU-seconds.
        let mut plain = Usage::new(1, Decay::new(0.0, 300));
        plain.start(0, 0, 3.0);
        plain.stop(0, 1000, 3.0, 0);
        assert!(close(plain.raw(0, 5000), 3000.0));
    }

    #[test]
    fn a_run_inside_one_period_books_its_length_at_its_end() {
        let d: f64 = 1.0 - 0.693 / 600.0;
        let mut usage = Usage::new(1, Decay::new(600.0, 300));
        usage.start(0, 0, 4.0);
        usage.stop(0, 100, 4.0, 0);
        usage.start(0, 150, 1.0);
        usage.stop(0, 200, 1.0, 150);
        let booked = 400.0 * d.powi(100) + 50.0 * d.powi(50);
        assert!(close(usage.raw(0, 299), booked));
        assert!(close(usage.raw(0, 300), booked * d.powi(300)));
    }
}
