//! The lock an apply holds on a live Slurm, so that two administrators' applies never
//! interleave, from any machine: a QOS, [`NAME`], that Slurm's database holds. An apply
//! creates it before it reads the live state again and deletes it when it ends; creating a
//! QOS that exists fails in slurmdbd, so one apply at a time gets it. Its description says
//! who holds it (`allot apply lock: USER@HOST pid PID since SECONDS`).
//!
//! A lock left by an apply that was killed is stale. One of this host whose process is gone
//! is taken over at once; any other is broken only on request (`allot apply slurm PLAN
//! --break-lock`), since allot cannot tell whether a process on another machine still runs.
//! allot deletes only a lock whose description is in its own format. The live state allot
//! reads (`plan --live`, the apply's drift check) leaves the lock out, and the drift check
//! stays the second line of defence.

use crate::exit::Error;
use crate::slurm;

/// The QOS that is the lock (on every cluster of the Slurm database).
pub const NAME: &str = "allot-apply-lock";

/// How a lock's description starts.
const PREFIX: &str = "allot apply lock: ";

/// A lock this process holds, deleted when dropped (if it is still this process's).
pub struct Lock {
    description: String,
}

impl Lock {
    /// Takes the lock: a stale one of this host is taken over, any other held one refused
    /// naming its holder, unless `break_lock`.
    pub fn take(break_lock: bool) -> Result<Lock, Error> {
        let description = format!(
            "{PREFIX}{}@{} pid {} since {}",
            whoami(),
            hostname(),
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
        );
        let wanted = format!("description={description}");
        for attempt in 0..2 {
            let added = match slurm::run(&["add".into(), "qos".into(), NAME.into(), wanted.clone()]) {
                Ok(()) => return Ok(Lock { description }),
                Err(added) => added,
            };
            let holder = slurm::qos_description(NAME).map_err(|e| {
                Error::failed(format!("cannot read the apply lock (QOS {NAME}): {e}\n  nothing was applied"))
            })?;
            let Some(holder) = holder else {
                return Err(Error::failed(format!(
                    "cannot take the apply lock (sacctmgr add qos {NAME}): {added}; nothing was applied"
                )));
            };
            let shown = allot_compiler::escape::controls(&holder, false).into_owned();
            if !holder.starts_with(PREFIX) {
                return Err(Error::failed(format!(
                    "Slurm has a QOS {NAME} that allot did not make (its description: {shown}): allot uses that name as the lock of its applies; nothing was applied"
                )));
            }
            if attempt == 0 && (break_lock || stale(&holder)) {
                eprintln!("allot: taking over the apply lock left by {shown}");
                slurm::run(&["delete".into(), "qos".into(), NAME.into()])?;
                continue;
            }
            return Err(Error::failed(format!(
                "another apply holds this Slurm's apply lock (QOS {NAME}: {shown}): nothing was applied\n  wait for it to end; if it is no longer running (killed, or its machine lost), run again with --break-lock"
            )));
        }
        Err(Error::failed(format!(
            "another apply took this Slurm's apply lock (QOS {NAME}) at the same moment: nothing was applied; run again"
        )))
    }
}

impl Drop for Lock {
    /// Deletes the lock, if it is still this process's.
    fn drop(&mut self) {
        match slurm::qos_description(NAME) {
            Ok(Some(holder)) if holder == self.description => {
                if let Err(e) = slurm::run(&["delete".into(), "qos".into(), NAME.into()]) {
                    eprintln!(
                        "allot: could not release the apply lock (QOS {NAME}): {e}; delete it with `sacctmgr -i delete qos {NAME}`"
                    );
                }
            }
            Ok(_) => {
                eprintln!("allot: the apply lock (QOS {NAME}) was no longer this apply's: left as it is")
            }
            Err(e) => eprintln!("allot: could not read the apply lock (QOS {NAME}) to release it: {e}"),
        }
    }
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
