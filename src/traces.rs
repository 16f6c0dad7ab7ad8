//! Job traces from disk, as the verifier's commands take them (`--trace`, `--trace-format`,
//! `--skip-bad-rows`): one file, or a folder of files merged in submit order, each read as a
//! stream by allot-verify's readers.
//!
//! Only regular files are read (a named pipe or a device is refused on the opened handle,
//! without blocking); in a folder, only files whose real location is inside the folder's
//! real location: a symbolic link that leads out of it is an error. Rows are bounded by
//! the readers ([`allot_verify::trace::MAX_ROW_BYTES`]).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use allot_verify::trace::{Format, Merged, Reader, first_line};

use crate::read::{Links, open_regular};
use clap::ValueEnum;

use crate::exit::Error;

/// A trace's format, as `--trace-format` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceFormat {
    Csv,
    Jsonl,
    Sacct,
    Itp,
}

impl TraceFormat {
    fn format(self) -> Format {
        match self {
            TraceFormat::Csv => Format::Csv,
            TraceFormat::Jsonl => Format::Jsonl,
            TraceFormat::Sacct => Format::Sacct,
            TraceFormat::Itp => Format::Itp,
        }
    }
}

/// A trace to read, as the replay commands take it.
#[derive(clap::Args)]
pub struct TraceInput {
    /// The trace: a file, or a folder of ITP files (one per budget).
    #[arg(long)]
    pub trace: PathBuf,
    /// The trace's format [default: detected from its first line].
    #[arg(long, value_enum)]
    pub trace_format: Option<TraceFormat>,
    /// Count and skip rows that do not parse instead of stopping.
    #[arg(long)]
    pub skip_bad_rows: bool,
}

/// The jobs of a trace, in submit order.
pub type Jobs = Merged<BufReader<File>>;

impl TraceInput {
    /// A trace file or folder in a detected format, stopping at a bad row.
    pub fn at(trace: &Path) -> TraceInput {
        TraceInput { trace: trace.to_path_buf(), trace_format: None, skip_bad_rows: false }
    }

    /// Opens the trace's files, ready to be read job by job.
    pub fn jobs(&self) -> Result<Jobs, Error> {
        let readers = files(&self.trace)?
            .iter()
            .map(|file| reader(file, self.trace_format))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Merged::new(readers))
    }
}

/// The trace's files: the file itself, or every `.csv` and `.jsonl` file of a folder (an
/// ITP trace: one file per budget, named after it), in name order.
fn files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let failed = |p: &Path, e: &dyn std::fmt::Display| Error::failed(format!("{}: {e}", p.display()));
    let root = path.canonicalize().map_err(|e| failed(path, &e))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| failed(path, &e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv" || x == "jsonl"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::failed(format!("{}: no trace files", path.display())));
    }
    // Each file where it really is, if that is inside the folder.
    files
        .iter()
        .map(|file| {
            let real = file.canonicalize().map_err(|e| failed(file, &e))?;
            if !real.starts_with(&root) {
                return Err(failed(file, &"is a symbolic link that leads outside the trace folder"));
            }
            Ok(real)
        })
        .collect()
}

/// A reader of one file, in the given format or the one its first line shows.
fn reader(file: &Path, format: Option<TraceFormat>) -> Result<Reader<BufReader<File>>, Error> {
    let failed = |e: &dyn std::fmt::Display| Error::failed(format!("{}: {e}", file.display()));
    // A file of a folder is its real path already: no link is followed there.
    let open = || open_regular(file, Links::Follow).map(BufReader::new).map_err(|e| failed(&e));
    let format = match format {
        Some(format) => format.format(),
        None => Format::detect(&first_line(open()?).map_err(|e| failed(&e))?),
    };
    let budget = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Reader::new(open()?, format, &budget).map_err(|e| failed(&e))
}
