//! How long allot waits for a live system: each Slurm command it runs and each request to a
//! Kubernetes API server. Set once, from `--timeout`, before any is made; a read gets the
//! timeout, a write (`sacctmgr load` and the commands of an apply, which slurmdbd may take
//! long to commit) ten times as long.

use std::sync::OnceLock;
use std::time::Duration;

use allot_compiler::units::parse_duration;

use crate::exit::Error;

/// A read's bound when `--timeout` is not given.
pub const DEFAULT_READ: Duration = Duration::from_secs(30);

/// How many reads' bounds a write gets.
const WRITE_FACTOR: u32 = 10;

static READ: OnceLock<Duration> = OnceLock::new();

/// Sets the read bound from `--timeout` (`30s`, `2m`; at least a second), once.
pub fn set(text: Option<&str>) -> Result<(), Error> {
    let Some(text) = text else { return Ok(()) };
    let seconds = parse_duration(text).filter(|&s| s > 0).ok_or_else(|| {
        Error::failed(format!(
            "--timeout {}: not a duration of a second or more (write it as 30s, 2m or 1h)",
            allot_compiler::escape::line(text)
        ))
    })?;
    let _ = READ.set(Duration::from_secs(seconds));
    Ok(())
}

/// How long a read of a live system may take.
pub fn read() -> Duration {
    *READ.get().unwrap_or(&DEFAULT_READ)
}

/// How long a write to a live system may take.
pub fn write() -> Duration {
    read() * WRITE_FACTOR
}

/// `30 s`, `5 min`: a bound as errors say it.
pub fn shown(bound: Duration) -> String {
    match bound.as_secs() {
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        0 => format!("{} ms", bound.as_millis()),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_said_in_the_unit_they_were_given() {
        assert_eq!(shown(Duration::from_secs(30)), "30 s");
        assert_eq!(shown(Duration::from_secs(300)), "5 min");
        assert_eq!(shown(Duration::from_secs(90)), "90 s");
        assert_eq!(shown(Duration::from_millis(200)), "200 ms");
    }
}
