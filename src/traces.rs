//! Job traces from disk, as the verifier's commands take them (`--trace`, `--trace-format`,
//! `--skip-bad-rows`): one file, or a folder of files merged in submit order, each read as a
//! stream by allot-verify's readers.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use allot_verify::trace::{Format, Merged, Reader};
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
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::failed(format!("{}: {e}", path.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv" || x == "jsonl"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::failed(format!("{}: no trace files", path.display())));
    }
    Ok(files)
}

/// A reader of one file, in the given format or the one its first line shows.
fn reader(file: &Path, format: Option<TraceFormat>) -> Result<Reader<BufReader<File>>, Error> {
    let failed = |e: &dyn std::fmt::Display| Error::failed(format!("{}: {e}", file.display()));
    let open = || File::open(file).map(BufReader::new).map_err(|e| failed(&e));
    let format = match format {
        Some(format) => format.format(),
        None => {
            let mut first = String::new();
            open()?.read_line(&mut first).map_err(|e| Error::failed(e.to_string()))?;
            Format::detect(&first)
        }
    };
    let budget = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Reader::new(open()?, format, &budget).map_err(|e| failed(&e))
}
