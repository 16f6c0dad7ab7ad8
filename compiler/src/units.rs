//! Units of the budget language: durations (`"8h"`, `"1h30m"`) and percentages
//! (`"12.5%"`), read as the files write them, and durations written back the same way.
//! `lower` parses them (the command line parses its `--window` too); the diff, the targets'
//! fidelity reports and KAI's SchedulingShard `windowSize` write durations with
//! [`format_duration`].

use std::collections::BTreeSet;

/// Seconds.
pub type Seconds = u64;

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
    fn percentages() {
        assert_eq!(parse_percent("35%"), Some(35.0));
        assert_eq!(parse_percent("12.5%"), Some(12.5));
        assert_eq!(parse_percent("0%"), Some(0.0));
        for bad in ["35", "%", "35 %", "-5%", "1e2%", "5.%", ".5%", "3.1234567%"] {
            assert_eq!(parse_percent(bad), None, "{bad}");
        }
    }
}
