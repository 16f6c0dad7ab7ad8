//! A Slurm dump (`sacctmgr dump`) or usage file, as `plan`, `import` and `fairshare` read it.

use std::path::Path;

use allot_targets::slurm::tree::MAX_DUMP_BYTES;

use crate::exit::Error;

/// A `sacctmgr dump` (or a usage file) from a regular file, or from standard input for
/// `-`, within [`MAX_DUMP_BYTES`]; a file that cannot be read is an error naming it.
pub fn read(path: &Path) -> Result<String, Error> {
    let limit = MAX_DUMP_BYTES as u64;
    let text = if path == Path::new("-") {
        crate::input::read::read_stdin(limit)
    } else {
        crate::input::read::read_text(path, limit)
    };
    text.map_err(|e| Error::failed(format!("{}: {e}", path.display())))
}
