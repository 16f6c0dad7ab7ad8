//! Units of the budget language: durations (`"8h"`, `"1h30m"`), percentages (`"12.5%"`),
//! weights (`share=3`) and moments (`"2027-01-10"`, RFC 3339), read as the files write them and bounded so that no sum or
//! product of them overflows; durations written back the same way.
//! `lower` parses them (the command line parses its `--window` too); the diff, the targets'
//! fidelity reports and KAI's SchedulingShard `windowSize` write durations with
//! [`format_duration`]. Kubernetes quantities (`"8"`, `"2k"`, `"1500m"`), which the
//! Kubernetes targets write and the live Kueue reads back, are read by [`parse_quantity`].

use std::collections::BTreeSet;

/// Seconds.
pub type Seconds = u64;

/// The longest duration the language takes: 10 years of 365 days. Every target carries it
/// (Slurm counts minutes in 32 bits, Go durations hours in 63).
pub const MAX_DURATION: Seconds = 10 * 365 * 86_400;

/// The smallest weight, and the step between weights: weights have at most 3 decimals.
pub const MIN_WEIGHT: f64 = 0.001;
/// The largest weight: 10^9, so that a weight in thousandths fits in 40 bits and a sum of
/// a million of them in 64.
pub const MAX_WEIGHT: f64 = 1e9;

/// Why `weight` is not a weight the language takes (zero and negatives aside, which
/// `check` reports as such).
pub fn weight_problem(weight: f64) -> Option<&'static str> {
    let thousandths = weight * 1000.0;
    if !weight.is_finite() || weight > MAX_WEIGHT {
        Some("a weight is at most 1000000000")
    } else if weight < MIN_WEIGHT {
        Some("a weight is at least 0.001")
    } else if (thousandths - thousandths.round()).abs() > 1e-6 * thousandths.max(1.0) {
        Some("a weight has at most 3 decimals")
    } else {
        None
    }
}

/// A weight the language took, in thousandths: exact.
pub fn weight_thousandths(weight: f64) -> u64 {
    (weight * 1000.0).round().max(0.0) as u64
}

/// `"90s"`, `"8h"`, `"7d"`, `"1h30m"`: whole numbers with units s, m, h, d, w.
pub fn parse_duration(text: &str) -> Option<Seconds> {
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut units_seen = BTreeSet::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return None,
        };
        if digits.is_empty() || !units_seen.insert(c) {
            return None;
        }
        let n: u64 = digits.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        digits.clear();
    }
    (digits.is_empty() && !units_seen.is_empty()).then_some(total)
}

/// Seconds written back as the language writes durations: `"0s"`, `"90s"`, `"8h"`,
/// `"1h30m"`, `"7d"`.
pub fn format_duration(seconds: Seconds) -> String {
    if seconds == 0 {
        return "0s".into();
    }
    let units = [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)];
    let mut rest = seconds;
    let mut out = String::new();
    for (unit, size) in units {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}

/// `"35%"`, `"12.5%"`: a non-negative number with up to 6 decimals and `%`.
pub fn parse_percent(text: &str) -> Option<f64> {
    let number = text.strip_suffix('%')?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let valid = !whole.is_empty()
        && whole.len() <= 6
        && digits(whole)
        && digits(fraction)
        && fraction.len() <= 6
        && (number.contains('.') <= !fraction.is_empty());
    valid.then(|| number.parse().ok()).flatten()
}

/// A moment: seconds since 1970-01-01T00:00:00Z (a Unix time), as traces count them.
pub type Instant = i64;

/// `"2027-01-10"` (the day's first second, UTC) or an RFC 3339 time with its offset
/// (`"2027-01-10T09:00:00+01:00"`), from year 1970 to 9999. A time without an offset is
/// refused: its moment depends on the reader's zone.
pub fn parse_instant(text: &str) -> Option<Instant> {
    let instant = if text.len() == 10 {
        let date: jiff::civil::Date = text.parse().ok()?;
        date.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp()
    } else {
        text.parse::<jiff::Timestamp>().ok()?
    };
    Some(instant.as_second()).filter(|&s| s >= 0)
}

/// A moment written back: `"2027-01-10"` at midnight UTC, else `"2027-01-10T08:00:00Z"`.
pub fn format_instant(instant: Instant) -> String {
    match jiff::Timestamp::from_second(instant) {
        Ok(t) if instant % 86_400 == 0 => t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string(),
        Ok(t) => t.to_string(),
        Err(_) => instant.to_string(),
    }
}

/// How often Slurm's decay thread passes over the usage in allot's configuration
/// (`PriorityCalcPeriod`, written in minutes): the Slurm target emits it, and the simulator
/// decays usage at the same passes.
pub const DECAY_PERIOD: Seconds = 300;

/// The decay half-life that gives past usage the weight a sliding window of
/// `window_seconds` gives it in total: `window × ln 2`, in whole seconds. allot's Slurm
/// output sets it as `PriorityDecayHalfLife`, and the simulator decays usage with it.
pub fn decay_half_life(window_seconds: Seconds) -> Seconds {
    (window_seconds as f64 * std::f64::consts::LN_2).round() as Seconds
}

/// Billionths: a Kubernetes quantity held exactly.
pub type Nanos = i128;

/// A Kubernetes quantity (`"8"`, `"-1.5"`, `"2k"`, `"1Gi"`, `"1500m"`, `"1e3"`), exactly, in
/// billionths: `None` when it is not one, or is beyond ±10^27 (far beyond any count).
pub fn parse_quantity(text: &str) -> Option<Nanos> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || whole.len() + fraction.len() > 30 {
        return None;
    }
    // The digits as one integer, and the power of ten they are scaled by.
    let digits: i128 = format!("{whole}{fraction}").parse().ok()?;
    let mut exponent: i32 = -(fraction.len() as i32) + 9;
    let mut binary: u32 = 0;
    match suffix {
        "" => {}
        "n" => exponent -= 9,
        "u" => exponent -= 6,
        "m" => exponent -= 3,
        "k" => exponent += 3,
        "M" => exponent += 6,
        "G" => exponent += 9,
        "T" => exponent += 12,
        "P" => exponent += 15,
        "E" => exponent += 18,
        "Ki" => binary = 10,
        "Mi" => binary = 20,
        "Gi" => binary = 30,
        "Ti" => binary = 40,
        "Pi" => binary = 50,
        "Ei" => binary = 60,
        _ => {
            let power = suffix.strip_prefix(['e', 'E'])?;
            let digits_only = power.strip_prefix(['+', '-']).unwrap_or(power);
            if digits_only.is_empty()
                || digits_only.len() > 3
                || !digits_only.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            exponent += power.parse::<i32>().ok()?;
        }
    }
    let mut value = digits.checked_mul(1i128.checked_shl(binary)?)?;
    if exponent >= 0 {
        value = value.checked_mul(10i128.checked_pow(exponent.try_into().ok()?)?)?;
    } else {
        // Below a billionth: kept only when it is whole there.
        let divisor = 10i128.checked_pow(exponent.unsigned_abs())?;
        if value % divisor != 0 {
            return None;
        }
        value /= divisor;
    }
    (value <= 10i128.pow(36)).then_some(sign * value)
}

/// A quantity that is a whole number of at least 0 (GPUs, pods), else `None`.
pub fn whole_quantity(text: &str) -> Option<u64> {
    let nanos = parse_quantity(text)?;
    (nanos >= 0 && nanos % 1_000_000_000 == 0).then(|| u64::try_from(nanos / 1_000_000_000).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("8h"), Some(28_800));
        assert_eq!(parse_duration("7d"), Some(604_800));
        assert_eq!(parse_duration("1h30m"), Some(5_400));
        assert_eq!(parse_duration("0s"), Some(0));
        for bad in ["", "8", "h", "8 h", "8hr", "1h1h", "-1h", "1.5h", "99999999999999999999w"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        for seconds in [0, 1, 90, 3600, 5400, 86_400, 604_800, 694_861] {
            assert_eq!(parse_duration(&format_duration(seconds)), Some(seconds));
        }
        assert_eq!(format_duration(604_800), "7d");
    }

    #[test]
    fn kubernetes_quantities() {
        for (text, whole) in [
            ("8", Some(8)),
            ("+8", Some(8)),
            ("8000m", Some(8)),
            ("2k", Some(2000)),
            ("1Ki", Some(1024)),
            ("1e3", Some(1000)),
            ("1E+3", Some(1000)),
            ("8.0", Some(8)),
            ("0.5k", Some(500)),
            ("1500m", None),
            ("1.5", None),
            ("-1", None),
            ("1Ei", Some(1 << 60)),
        ] {
            assert_eq!(whole_quantity(text), whole, "{text}");
        }
        assert_eq!(parse_quantity("1500m"), Some(1_500_000_000));
        assert_eq!(parse_quantity("1n"), Some(1));
        assert_eq!(parse_quantity("2k"), parse_quantity("2000"));
        for bad in [
            "",
            "k",
            "8x",
            "8 ",
            ".",
            "1e",
            "1e1000",
            "1..5",
            "--1",
            "8Ki8",
            "999999999999999999999999999999999E",
        ] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
    }

    #[test]
    fn weights() {
        for ok in [0.001, 1.0, 1.5, 60.0, 0.125, 1e9] {
            assert_eq!(weight_problem(ok), None, "{ok}");
        }
        for bad in [0.0004, 1e-12, 1.0001, 1e9 + 1.0, 1e300, f64::INFINITY, f64::NAN] {
            assert!(weight_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(weight_thousandths(0.125), 125);
        assert_eq!(weight_thousandths(1e9), 1_000_000_000_000);
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("35%"), Some(35.0));
        assert_eq!(parse_percent("12.5%"), Some(12.5));
        assert_eq!(parse_percent("0%"), Some(0.0));
        for bad in ["35", "%", "35 %", "-5%", "1e2%", "5.%", ".5%", "3.1234567%"] {
            assert_eq!(parse_percent(bad), None, "{bad}");
        }
    }
}
