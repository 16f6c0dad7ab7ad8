//! The decayed usage against a pass-by-pass replay of Slurm's decay thread on generated runs.

use allot_simulate::decay::{Decay, Usage};
use proptest::prelude::*;

/// Slurm's decay thread, pass by pass: a run that ends books its stretch since the last
/// pass at its end; each pass decays everything, then books the stretch of every run
/// going on.
fn replay(decay: Decay, runs: &[(i64, i64, f64)], query: i64) -> f64 {
    let period = decay.period();
    let mut raw = 0.0;
    let last = query.div_euclid(period);
    for pass in 1..=last + 1 {
        let (from, at) = ((pass - 1) * period, pass * period);
        for &(start, end, gpus) in runs {
            if end >= from && end < at && end <= query && start < end {
                raw += gpus * decay.new_usage((end - start.max(from)) as f64);
            }
        }
        if pass > last {
            break;
        }
        raw *= decay.multiplier(period as f64);
        for &(start, end, gpus) in runs {
            if start < at && end >= at {
                raw += gpus * decay.new_usage((at - start.max(from)) as f64);
            }
        }
    }
    raw
}

proptest! {
    #[test]
    fn the_closed_form_equals_the_pass_by_pass_replay(
        half_life in prop_oneof![Just(0.0), 60.0f64..100_000.0],
        period in 1i64..600,
        runs in proptest::collection::vec((0i64..5_000, any::<bool>(), 0i64..3_000, 1u32..8), 1..12),
        query in 0i64..10_000,
    ) {
        let decay = Decay::new(half_life, period);
        let runs: Vec<(i64, i64, f64)> =
            runs.into_iter()
                .map(|(start, on_a_pass, length, gpus)| {
                    // Some runs start on a pass.
                    let start = if on_a_pass { start - start % period } else { start };
                    (start, start + length, f64::from(gpus))
                })
                .collect();
        // Starts and stops in time order, up to the query; the origin at 0.
        let mut events: Vec<(i64, bool, usize)> = Vec::new();
        for (index, &(start, end, _)) in runs.iter().enumerate() {
            if start <= query {
                events.push((start, true, index));
            }
            if end <= query {
                events.push((end, false, index));
            }
        }
        // A run of no length starts, then stops.
        events.sort_by_key(|&(at, starts, index)| (at, index, !starts));
        let mut usage = Usage::new(1, decay);
        usage.start(0, 0, 0.0);
        for (at, starts, index) in events {
            let (start, _, gpus) = runs[index];
            if starts {
                usage.start(0, at, gpus);
            } else {
                usage.stop(0, at, gpus, start);
            }
        }
        let ours = usage.raw(0, query);
        let expected = replay(decay, &runs, query);
        prop_assert!((ours - expected).abs() <= 1e-6 * expected.abs().max(1.0), "{ours} vs {expected}");
    }
}
