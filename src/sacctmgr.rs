//! Slurm's `sacctmgr`, run as a program (found on `PATH`) with its arguments as a list, never
//! through a shell: the live association tree read with `sacctmgr dump`, and a plan applied
//! (`sacctmgr load` of a flat file, then commands one by one).

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use allot_targets::slurm::tree::MAX_DUMP_BYTES;

use crate::exit::Error;

const PROGRAM: &str = "sacctmgr";

/// The live association tree of `cluster`, as `sacctmgr dump` writes it (at most
/// [`MAX_DUMP_BYTES`]).
pub fn dump(cluster: &str) -> Result<String, Error> {
    let mut child = Command::new(PROGRAM)
        .args(["dump", cluster, "file=/dev/stdout"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        // The dump echoes every line to standard error too.
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| missing(e, "read the live associations"))?;
    let mut text = String::new();
    let stdout = child.stdout.take().expect("piped");
    let read = stdout.take(MAX_DUMP_BYTES as u64 + 1).read_to_string(&mut text);
    let status = child.wait()?;
    read.map_err(|e| Error::failed(format!("sacctmgr dump {cluster}: {e}")))?;
    if text.len() > MAX_DUMP_BYTES {
        return Err(Error::failed(format!(
            "sacctmgr dump {cluster}: more than {MAX_DUMP_BYTES} bytes, more than allot reads"
        )));
    }
    if !status.success() || !text.lines().any(|l| l.starts_with("Cluster - ")) {
        return Err(Error::failed(format!(
            "sacctmgr dump {cluster} failed ({status}): is `{cluster}` a cluster of this Slurm database, and may this user read it?"
        )));
    }
    Ok(text)
}

/// Runs `sacctmgr -i load` of `flat_file` (written to a temporary file of its own, removed
/// after).
pub fn load(flat_file: &str) -> Result<(), Error> {
    let mut file = tempfile::Builder::new().prefix("allot-load-").suffix(".cfg").tempfile()?;
    file.write_all(flat_file.as_bytes())?;
    file.flush()?;
    run(&["load".to_string(), format!("file={}", file.path().display())])
}

/// Runs `sacctmgr -i ARGUMENTS`; on failure, what it said on standard error (at most
/// [`MAX_SAID`] bytes, control characters made visible). Its standard output, which echoes
/// every association a load touches, is not kept.
pub fn run(arguments: &[String]) -> Result<(), Error> {
    let mut child = Command::new(PROGRAM)
        .arg("-i")
        .args(arguments)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| missing(e, "apply the plan"))?;
    let mut said = Vec::new();
    let mut stderr = child.stderr.take().expect("piped");
    stderr.by_ref().take(MAX_SAID).read_to_end(&mut said)?;
    // The rest is read and dropped: a full pipe would stop the command.
    std::io::copy(&mut stderr, &mut std::io::sink())?;
    let status = child.wait()?;
    if status.success() {
        return Ok(());
    }
    let said = allot_compiler::escape::controls(String::from_utf8_lossy(&said).trim(), true).into_owned();
    Err(Error::failed(format!("{said} ({status})")))
}

/// The most of a failed command's standard error that is kept.
const MAX_SAID: u64 = 64 << 10;

fn missing(e: std::io::Error, to: &str) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::failed(format!(
            "`{PROGRAM}` is not on PATH: allot runs it to {to} (install Slurm's client tools, or run allot where they are)"
        ))
    } else {
        Error::failed(format!("cannot run `{PROGRAM}` to {to}: {e}"))
    }
}
