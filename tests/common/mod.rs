//! What the command-line tests of the verifier share.

use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The ITP trace's folder in the shared reference material (`ALLOT_SHARED_DIR`, or
/// `../shared`); `None`, said on stderr, when it is absent and not required
/// (`ALLOT_REQUIRE_SHARED`).
pub fn itp_trace() -> Option<PathBuf> {
    let shared =
        std::env::var_os("ALLOT_SHARED_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared"));
    let trace = shared.join("traces/itp-2021");
    if trace.is_dir() {
        return Some(trace);
    }
    assert!(std::env::var_os("ALLOT_REQUIRE_SHARED").is_none(), "no ITP trace at {}", trace.display());
    eprintln!("skipped: no ITP trace at {}", trace.display());
    None
}
