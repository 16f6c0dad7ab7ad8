//! Job traces from disk, as the verifier's commands take them (`--trace`, `--trace-format`,
//! `--skip-bad-rows`): one file, or a folder of files merged in submit order, each read as a
//! stream by allot-verify's readers, and handed to a replay (the audit, the simulator) in
//! submit order. A trace in submit order is streamed; one that turns out not to be (the
//! replay stops with `NotSorted`) is read again whole, up to [`MAX_SORTED_JOBS`] jobs, and
//! sorted by submit time (stable: ties keep the files' order, then the rows').
//!
//! Only regular files are read (a named pipe or a device is refused on the opened handle,
//! without blocking); in a folder, only files whose real location is inside the folder's
//! real location: a symbolic link that leads out of it is an error. Rows are bounded by
//! the readers ([`allot_verify::trace::MAX_ROW_BYTES`]).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

use allot_compiler::ir::Model;
use allot_verify::audit::AuditError;
use allot_verify::trace::{Format, Job, Merged, Reader, TraceError, first_line};

use crate::input::read::{Links, open_regular};
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
#[derive(Clone, clap::Args)]
pub struct TraceInput {
    /// The trace: a file, or a folder of ITP files (one per budget).
    #[arg(long, required_unless_present = "live", conflicts_with = "live")]
    pub trace: Option<PathBuf>,
    /// The trace's format [default: detected from its first line].
    #[arg(long, value_enum)]
    pub trace_format: Option<TraceFormat>,
    /// Count and skip rows that do not parse instead of stopping.
    #[arg(long)]
    pub skip_bad_rows: bool,
    /// Read the trace from the live scheduler instead (`slurm`: `sacct`, every job of the
    /// budgets' Slurm clusters since --since).
    #[arg(long, value_enum, conflicts_with = "trace_format")]
    pub live: Option<LiveTrace>,
    /// With --live: how far back, e.g. `7d`, `36h` [default: the policy window].
    #[arg(long, requires = "live")]
    pub since: Option<String>,
    /// What errors call a fetched live trace.
    #[arg(skip)]
    label: Option<String>,
}

/// The schedulers a trace can be read from live: those that keep an account of finished
/// jobs (Kueue does not: a finished Workload is deleted with its job).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LiveTrace {
    Slurm,
}

/// A live trace, in a temporary file of its own while it is read (removed after).
pub struct Fetched {
    pub input: TraceInput,
    _file: Option<tempfile::TempPath>,
}

/// The most jobs of a trace not in submit order that allot reads into memory to sort.
pub const MAX_SORTED_JOBS: usize = 2_000_000;
/// About what a job read for sorting takes in memory (the job, its names, the vector's room).
const BYTES_PER_SORTED_JOB: usize = 400;

/// Rows a streamed trace's reading thread hands over at a time.
const BATCH_ROWS: usize = 4096;
/// Batches read ahead of the replay, at most.
const BATCHES_AHEAD: usize = 4;

/// A row of a trace: a job, or why it is not one.
type Row = Result<Job, TraceError>;

/// The jobs of a trace, in submit order (bad rows among them, or first when sorted).
pub enum Jobs {
    /// Read as they come, by a thread of their own: the files are in submit order (each of
    /// them, for a folder).
    Streamed(ReadAhead),
    /// Read whole and sorted.
    Sorted(std::vec::IntoIter<Row>),
}

impl Iterator for Jobs {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        match self {
            Jobs::Streamed(rows) => rows.next(),
            Jobs::Sorted(rows) => rows.next(),
        }
    }
}

/// Rows read on a thread of their own, at most [`BATCHES_AHEAD`] batches ahead. Dropped
/// before the end (the replay stopped), it stops the thread at its next batch and waits
/// for it. A panic of the reading thread is raised again in the replay's.
pub struct ReadAhead {
    batches: Option<Receiver<Vec<Row>>>,
    batch: std::vec::IntoIter<Row>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    fn new(mut rows: Merged<BufReader<File>>) -> std::io::Result<ReadAhead> {
        let (sender, batches) = sync_channel(BATCHES_AHEAD);
        let thread = std::thread::Builder::new().name("trace reader".into()).spawn(move || {
            loop {
                let batch: Vec<Row> = rows.by_ref().take(BATCH_ROWS).collect();
                // An empty batch is the end; a failed send, a replay that stopped.
                if batch.is_empty() || sender.send(batch).is_err() {
                    return;
                }
            }
        })?;
        Ok(ReadAhead { batches: Some(batches), batch: Vec::new().into_iter(), thread: Some(thread) })
    }
}

impl Iterator for ReadAhead {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        loop {
            if let Some(row) = self.batch.next() {
                return Some(row);
            }
            match self.batches.as_ref()?.recv() {
                Ok(batch) => self.batch = batch.into_iter(),
                Err(_) => {
                    // The reader is done: at the end of the trace, or because it panicked,
                    // which is not an end of the trace and is raised here.
                    self.batches = None;
                    if let Some(Err(panic)) = self.thread.take().map(JoinHandle::join) {
                        std::panic::resume_unwind(panic);
                    }
                    return None;
                }
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // Without a receiver the thread's next send fails, and it ends.
        self.batches = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl TraceInput {
    /// A trace file or folder in a detected format, stopping at a bad row.
    pub fn at(trace: &Path) -> TraceInput {
        TraceInput {
            trace: Some(trace.to_path_buf()),
            trace_format: None,
            skip_bad_rows: false,
            live: None,
            since: None,
            label: None,
        }
    }

    /// The trace to replay: the file given, or, with `--live slurm`, `sacct`'s jobs of the
    /// Slurm clusters the budgets bind over the last `--since` (by default the policy
    /// window), read once into a temporary file so that every replay of it reads the same.
    pub fn fetched(&self, model: &Model) -> Result<Fetched, Error> {
        if self.live.is_none() {
            return Ok(Fetched { input: self.clone(), _file: None });
        }
        let seconds = match &self.since {
            Some(text) => {
                allot_compiler::units::parse_duration(text).filter(|s| *s > 0).ok_or_else(|| {
                    Error::failed(format!("--since {text:?} is not a duration such as 7d or 36h"))
                })?
            }
            None => model.policy.window_seconds,
        };
        let clusters = allot_targets::slurm::tree::slurm_clusters(model);
        if clusters.is_empty() {
            return Err(Error::failed("--live slurm: the budgets bind no Slurm cluster"));
        }
        let mut file = tempfile::Builder::new().prefix("allot-sacct-").suffix(".txt").tempfile()?;
        crate::systems::slurm::sacct_since(&clusters, seconds, file.as_file_mut())?;
        let path = file.into_temp_path();
        let input = TraceInput {
            trace: Some(path.to_path_buf()),
            trace_format: Some(TraceFormat::Sacct),
            skip_bad_rows: self.skip_bad_rows,
            live: None,
            since: None,
            label: Some(format!("sacct of {} since {seconds} s ago", clusters.join(", "))),
        };
        Ok(Fetched { input, _file: Some(path) })
    }

    /// The trace's path (a fetched live trace has its temporary file's).
    fn path(&self) -> &Path {
        self.trace.as_deref().unwrap_or(Path::new("-"))
    }

    /// The trace as errors name it.
    fn name(&self) -> String {
        self.label.clone().unwrap_or_else(|| self.path().display().to_string())
    }

    /// Runs `replay` on the trace's jobs in submit order: streamed, or, when `replay` finds
    /// them out of order, read again whole and sorted. Its error is said with the trace.
    pub fn replay<T>(&self, mut replay: impl FnMut(Jobs) -> Result<T, AuditError>) -> Result<T, Error> {
        let failed = |e: AuditError| Error::failed(format!("{}: {e}", self.name()));
        let streamed = ReadAhead::new(Merged::new(self.readers()?))
            .map_err(|e| Error::failed(format!("{}: cannot start reading: {e}", self.name())))?;
        match replay(Jobs::Streamed(streamed)) {
            Err(AuditError::NotSorted { .. }) => replay(self.sorted(MAX_SORTED_JOBS)?).map_err(failed),
            other => other.map_err(failed),
        }
    }

    /// A reader for each of the trace's files.
    fn readers(&self) -> Result<Vec<Reader<BufReader<File>>>, Error> {
        files(self.path())?.iter().map(|file| reader(file, self.trace_format)).collect()
    }

    /// Every row of the trace, read into memory (at most `limit` jobs) and sorted by submit
    /// time, stably; bad rows first, so that they stop the replay (or are counted) at once.
    fn sorted(&self, limit: usize) -> Result<Jobs, Error> {
        let mut rows: Vec<Row> = Vec::new();
        let mut count = 0usize;
        for mut reader in self.readers()? {
            while let Some(row) = reader.next_job() {
                count += 1;
                if count <= limit {
                    rows.push(row);
                } else {
                    rows = Vec::new();
                }
            }
        }
        if count > limit {
            return Err(Error::failed(format!(
                "{}: the trace is not in submit order, and it has {count} rows: more than the {limit} \
                 allot sorts in memory (sorting it would take about {} MiB). Sort it by submit time \
                 first{}",
                self.name(),
                (count * BYTES_PER_SORTED_JOB).div_ceil(1 << 20),
                self.how_to_sort()
            )));
        }
        rows.sort_by_key(|row| row.as_ref().map_or((false, 0), |job| (true, job.submit)));
        Ok(Jobs::Sorted(rows.into_iter()))
    }

    /// How to sort the trace's first file by submit time, from its header.
    fn how_to_sort(&self) -> String {
        let first = files(self.path()).ok().and_then(|files| files.into_iter().next());
        let header = first
            .and_then(|file| open_regular(&file, Links::Follow).ok())
            .map_or_else(String::new, |file| first_line(BufReader::new(file)).unwrap_or_default());
        let format = self.trace_format.map_or_else(|| Format::detect(&header), TraceFormat::format);
        let (separator, submit) = match format {
            Format::Jsonl => return ", e.g. `jq -c -s 'sort_by(.submit)[]' FILE`".to_string(),
            Format::Sacct => ('|', "submit"),
            Format::Itp => (',', "submission_time"),
            Format::Csv => (',', "submit"),
        };
        let column = header.trim().split(separator).position(|name| name.trim().eq_ignore_ascii_case(submit));
        match column.map(|c| c + 1) {
            Some(c) => format!(
                ", keeping the header line: `(head -n 1 FILE; tail -n +2 FILE | sort -s -t'{separator}' -k{c},{c})` \
                 (`-k{c},{c}n` for times in seconds)"
            ),
            None => String::new(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_trace_hands_over_every_row_in_order_and_stops_with_the_replay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        let rows = BATCH_ROWS * (BATCHES_AHEAD + 2) + 1;
        let mut text = "id,project,gpus,submit,start,end\n".to_string();
        for i in 0..rows {
            text.push_str(&format!("{i},a,1,{i},{i},{}\n", i + 1));
        }
        std::fs::write(&path, text).unwrap();
        let input = TraceInput::at(&path);
        let ids: Vec<String> =
            input.replay(|jobs| Ok(jobs.map(|row| row.unwrap().id.into()).collect())).unwrap();
        assert_eq!(ids, (0..rows).map(|i| i.to_string()).collect::<Vec<_>>());
        // A replay that stops early drops the rows: the reading thread ends, and is waited
        // for, though more batches than it may read ahead were left.
        let stopped = input.replay(|mut jobs| {
            jobs.next();
            Err::<(), _>(AuditError::NoJobs("stopped".into()))
        });
        assert!(stopped.unwrap_err().to_string().contains("stopped"));
    }

    #[test]
    fn a_trace_out_of_order_is_sorted_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.csv");
        std::fs::write(
            &path,
            "id,project,gpus,submit,start,end\n1,a,1,30,30,40\n2,a,x,0,0,0\n3,a,1,10,10,20\n4,a,1,10,12,20\n",
        )
        .unwrap();
        let input = TraceInput::at(&path);
        // Bad rows first, then by submit time, ties in the file's order.
        let rows: Vec<String> = input
            .sorted(4)
            .unwrap()
            .map(|row| row.map_or_else(|e| format!("line {}", e.line), |job| job.id.into()))
            .collect();
        assert_eq!(rows, ["line 3", "3", "4", "1"]);
        let Err(error) = input.sorted(3) else { panic!("sorted beyond the limit") };
        let message = error.to_string();
        assert!(message.contains("it has 4 rows: more than the 3 allot sorts in memory"), "{message}");
        assert!(message.contains("sort -s -t',' -k4,4)"), "{message}");
    }
}
