//! The lock an apply holds on a live Slurm, so that two administrators' applies never
//! interleave, from any machine: QOS that Slurm's database holds, one per apply that wants
//! the lock, named [`APPLY_LOCK`]`-` and a number of its own, whose description says who holds it
//! (`allot apply lock: USER@HOST pid PID since SECONDS`).
//!
//! `sacctmgr add qos` is no lock by itself: two adds of one name at the same moment both
//! succeed (sacctmgr looks for the name before slurmdbd writes it; tests/slurm_faults.rs
//! saw it). So each apply adds a QOS of its own, then lists the locks: it goes on only when
//! its own is the only one; otherwise it deletes its own and tries again after a random
//! pause (four times at most), and one of the two then finds the other's lock and is
//! refused. Never do both go on: whichever lists second sees the other's QOS, added before
//! its list.
//!
//! A lock left by an apply that was killed is stale. One of this host whose process is gone
//! is taken over at once; any other is broken only on request (`allot apply slurm PLAN
//! --break-lock`), since allot cannot tell whether a process on another machine still runs.
//! allot deletes only a lock whose description is in its own format. The live state allot
//! reads (`plan --live`, the apply's drift check) leaves the locks out, and the drift check
//! stays the second line of defence.

use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use crate::exit::Error;
use crate::systems::slurm::{self, APPLY_LOCK, is_apply_lock};

/// How a lock's description starts.
const PREFIX: &str = "allot apply lock: ";

/// A lock this process holds, deleted when dropped.
pub struct Lock {
    name: String,
}

/// How many times an apply tries to take the lock when it meets another's added at the same
/// moment. Between tries it pauses at random, up to 1 s, then 2, 4 and 8 s: adding a lock
/// and listing them takes about 0.6 s, and two applies whose pauses differ by more than that
/// no longer meet (with pauses of 0.1 to 1 s, the two applies of one of two rounds of
/// tests/slurm_faults.rs met three times).
const ATTEMPTS: u32 = 5;

impl Lock {
    /// Takes the lock: a stale one of this host is taken over, any other held one refused
    /// naming its holder, unless `break_lock`.
    pub fn take(break_lock: bool) -> Result<Lock, Error> {
        let mut attempt = 1;
        loop {
            // Only the first look may break a lock: one seen after it is of an apply that runs.
            clear_the_way(break_lock && attempt == 1)?;
            let lock = Lock::add()?;
            let Some(other) = lock.other()? else { return Ok(lock) };
            drop(lock);
            if attempt == ATTEMPTS {
                return Err(Error::failed(format!(
                    "another apply took this Slurm's apply lock at the same moment ({other}): nothing was applied; run again"
                )));
            }
            std::thread::sleep(Duration::from_millis(random(&other) % (500 << attempt)));
            attempt += 1;
        }
    }

    /// Adds this apply's lock.
    fn add() -> Result<Lock, Error> {
        let description = format!(
            "{PREFIX}{}@{} pid {} since {}",
            whoami(),
            hostname(),
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
        );
        let name = format!("{APPLY_LOCK}-{:016x}", random(&description));
        slurm::run(&["add".into(), "qos".into(), name.clone(), format!("description={description}")])
            .map_err(|e| {
                Error::failed(format!(
                    "cannot take the apply lock (sacctmgr add qos {name}): {e}\n  nothing was applied"
                ))
            })?;
        Ok(Lock { name })
    }

    /// Another apply's lock beside this one, if there is one: its description.
    fn other(&self) -> Result<Option<String>, Error> {
        Ok(locks()?
            .into_iter()
            .find(|(n, _)| *n != self.name)
            .map(|(_, holder)| allot_compiler::escape::line(&holder)))
    }
}

/// The locks Slurm holds: (QOS name, description).
fn locks() -> Result<Vec<(String, String)>, Error> {
    let all = slurm::qos_descriptions().map_err(|e| {
        Error::failed(format!("cannot read the apply lock (QOS {APPLY_LOCK}...): {e}\n  nothing was applied"))
    })?;
    Ok(all.into_iter().filter(|(name, _)| is_apply_lock(name)).collect())
}

/// Refuses when another apply holds the lock; deletes a stale lock of this host, and any
/// lock of allot's when `break_lock`.
fn clear_the_way(break_lock: bool) -> Result<(), Error> {
    for (name, holder) in locks()? {
        let shown = allot_compiler::escape::line(&holder);
        if !holder.starts_with(PREFIX) {
            return Err(Error::failed(format!(
                "Slurm has a QOS {name} that allot did not make (its description: {shown}): allot uses that name for the lock of its applies; nothing was applied"
            )));
        }
        if !(break_lock || stale(&holder)) {
            return Err(Error::failed(format!(
                "another apply holds this Slurm's apply lock (QOS {name}: {shown}): nothing was applied\n  wait for it to end; if it is no longer running (killed, or its machine lost), run again with --break-lock"
            )));
        }
        eprintln!("allot: taking over the apply lock left by {shown}");
        slurm::run(&["delete".into(), "qos".into(), name])?;
    }
    Ok(())
}

impl Drop for Lock {
    /// Deletes the lock. Its name is this apply's alone, so nothing else is deleted; when
    /// another apply broke it (`--break-lock`), there is nothing to delete.
    fn drop(&mut self) {
        let name = &self.name;
        if let Err(e) = slurm::run(&["delete".into(), "qos".into(), name.clone()]) {
            eprintln!(
                "allot: could not release the apply lock (QOS {name}; another apply may have broken it): {e}\n  if it is still there, delete it with `sacctmgr -i delete qos {name}`"
            );
        }
    }
}

/// A random number, `seed` hashed with a random key (for a lock's name: two applies never
/// share one; for a pause: two applies seldom pause as long).
fn random(seed: &str) -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    seed.hash(&mut hasher);
    std::time::Instant::now().hash(&mut hasher);
    hasher.finish()
}

/// Whether a lock `description` is of this host and its process is gone.
fn stale(description: &str) -> bool {
    let Some((holder, pid)) = parse(description) else { return false };
    holder.rsplit_once('@').is_some_and(|(_, host)| host == hostname()) && !alive(pid)
}

/// The holder (`USER@HOST`) and the process of a lock's description.
fn parse(description: &str) -> Option<(&str, u32)> {
    let rest = description.strip_prefix(PREFIX)?;
    let (holder, rest) = rest.split_once(" pid ")?;
    let (pid, _) = rest.split_once(" since ")?;
    Some((holder, pid.parse().ok()?))
}

/// Whether process `pid` of this host runs.
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// This host's name: a Slurm description's characters only.
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    plain(name.trim())
}

/// Who runs allot.
fn whoami() -> String {
    plain(&std::env::var("SUDO_USER").or_else(|_| std::env::var("USER")).unwrap_or_else(|_| "unknown".into()))
}

/// `text` as a QOS description keeps it (Slurm stores descriptions in lower case): lower-case
/// letters, digits, `-`, `_` and `.` only, at most 64 characters.
fn plain(text: &str) -> String {
    let kept: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .map(|c| c.to_ascii_lowercase())
        .take(64)
        .collect();
    if kept.is_empty() { "unknown".into() } else { kept }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_says_who_holds_it_and_only_a_gone_process_of_this_host_is_stale() {
        let here = hostname();
        assert_eq!(parse(&format!("{PREFIX}ann@{here} pid 42 since 1")), Some((&*format!("ann@{here}"), 42)));
        assert_eq!(parse("someone's QOS"), None);
        assert_eq!(parse(&format!("{PREFIX}ann@x pid many since 1")), None);
        // This process runs; a pid beyond the kernel's range does not.
        let mine = std::process::id();
        assert!(!stale(&format!("{PREFIX}ann@{here} pid {mine} since 1")));
        assert!(stale(&format!("{PREFIX}ann@{here} pid 4294967295 since 1")));
        // Another host's lock is never stale: allot cannot see its processes.
        assert!(!stale(&format!("{PREFIX}ann@elsewhere-{here} pid 4294967295 since 1")));
        assert_eq!(plain("A b;c$(d)`e"), "abcde");
        assert_eq!(plain(""), "unknown");
    }
}
