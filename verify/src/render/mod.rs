//! The verifier's results as people and programs read them: an audit with the verdicts of
//! the budgets' expectations ([`audit`]) as aligned text, Markdown and JSON. Every table is
//! built once from the figures and rendered in each of those by [`table`], which the
//! simulator's and the live views' renderers share; the charts are the
//! [`report`](crate::report)'s.

pub mod audit;
pub mod table;

/// An instant in epoch seconds, as every output shows it: RFC 3339 in UTC.
pub fn time(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds).map_or_else(|_| seconds.to_string(), |t| t.to_string())
}

/// A wait, briefly: "42s", "12m05s", "3h07m", "50h00m". Every output shows waits so.
pub fn wait(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3_600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3_600, seconds % 3_600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::wait;

    #[test]
    fn waits_read_briefly() {
        assert_eq!([0, 42, 725, 11_220, 187_200].map(wait), ["0s", "42s", "12m05s", "3h07m", "52h00m"]);
    }
}
