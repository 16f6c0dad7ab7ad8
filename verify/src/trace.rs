//! The verifier's input: job traces, read as a stream from any reader (allot's own CSV and
//! JSON Lines, Slurm's `sacct --parsable2` output, and the Microsoft ITP layout). Rows
//! become [`Job`]s one at a time, so a million-row trace never sits in memory as text; a
//! bad row is an error naming its line (or, when the caller asks, counted and skipped).
//!
//! A trace is untrusted: no row is held beyond [`MAX_ROW_BYTES`] (the bytes are counted as
//! they are read, before a longer row is gathered), and every time must lie within years
//! -9999 to 9999, so that no arithmetic on times overflows.

use std::collections::BinaryHeap;
use std::io::{BufRead, Read};

pub use compact_str::CompactString;

/// The longest row (line) of a trace allot reads: 1 MiB.
pub const MAX_ROW_BYTES: usize = 1 << 20;
/// What the CSV reader reads ahead of the row it parses.
const READ_AHEAD_BYTES: usize = 64 << 10;

/// One job of a trace. Times are seconds (since the epoch, or since the trace's own origin).
/// Its names are [`CompactString`]s: one of up to 24 bytes (ids, budgets, clusters and
/// contracts nearly always are) is held in place, so reading a row of allot's CSV or JSON
/// Lines allocates nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Job {
    pub id: CompactString,
    /// A project path, a project name, or a scheduler's account or queue name; empty: the
    /// user's default project.
    pub project: CompactString,
    pub user: CompactString,
    /// An allot cluster, or a scheduler's cluster name; empty: the only cluster.
    pub cluster: CompactString,
    /// The scheduler's partition (sacct's `Partition`); empty: the cluster's only binding.
    pub partition: CompactString,
    pub gpus: u32,
    pub submit: i64,
    /// When it could first run (sacct's `Eligible`: after a hold or a dependency), kept
    /// between its submission and its start (or, never started, its end); `None`: when
    /// submitted.
    pub eligible: Option<i64>,
    pub start: Option<i64>,
    /// When it ended (ran to its end, failed, or was cancelled while waiting).
    pub end: Option<i64>,
    /// Seconds of work, when the trace gives a `duration`: with a start and no end it gives
    /// the end; without a start it is the work a simulation runs.
    pub duration: Option<i64>,
    /// The time limit the job asked for, in seconds (`time_limit`, sacct's `Timelimit`);
    /// `None`: none given (or unlimited). What Slurm's backfill plans with.
    pub time_limit: Option<i64>,
    /// A contract, or a QOS named like one; empty: the default contract.
    pub contract: CompactString,
    /// The Kueue queue it was submitted to (`queue`): `NAMESPACE/LOCALQUEUE`, or a
    /// ClusterQueue's name; empty: its budget's. Read by the `kueue` simulation policy.
    pub queue: CompactString,
    /// Its priority (`priority`, an integer), where the scheduler gave it one apart from its
    /// contract; `None`: its contract's. Read by the `kueue` simulation policy.
    pub priority: Option<i32>,
    /// How the audit counts the job's wait.
    pub wait: WaitCount,
}

/// How the audit counts a job's wait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitCount {
    /// From when it could run to its start (or, never started, to its end or the trace's).
    #[default]
    Measured,
    /// A simulated job's time queued over all its runs, counted with its first run.
    Total(i64),
    /// A later run of a simulated job: its first run counts the job's wait.
    Elsewhere,
}

/// A row of a trace that is not a job, with its line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct TraceError {
    pub line: usize,
    pub problem: RowError,
}

/// What is wrong with a row of a trace (or with its header).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// What the CSV reader said: a header or row it cannot read.
    #[error("{0}")]
    Unreadable(String),
    #[error("the header lacks the {}", columns(.0))]
    MissingColumns(Vec<&'static str>),
    #[error("not a JSON object: {0}")]
    NotJson(String),
    #[error("`{0}` is not a time (RFC 3339 or seconds)")]
    NotATime(String),
    #[error("`{0}` is not a number of seconds")]
    NotSeconds(String),
    #[error("`{0}` is not a Slurm time limit ([D-]HH:MM:SS, MM:SS, minutes or UNLIMITED)")]
    NotATimeLimit(String),
    #[error("`{0}` is not a GPU count")]
    NotAGpuCount(String),
    #[error("`{0}` is not a priority (an integer from -2147483648 to 2147483647)")]
    NotAPriority(String),
    #[error("`{0}` is not a wait (seconds, 0 or more; empty on a job's later runs)")]
    NotAWait(String),
    #[error("starts ({start}) before it is submitted ({submit})")]
    StartsBeforeSubmit { start: i64, submit: i64 },
    #[error("ends ({end}) before it starts")]
    EndsBeforeStart { end: i64 },
    #[error("time {0} is outside years -9999 to 9999")]
    TimeOutOfRange(i64),
    #[error("the row is longer than {} MiB; allot reads rows of at most that", MAX_ROW_BYTES >> 20)]
    TooLong,
}

/// "column gpus", "columns gpus, submit".
fn columns(names: &[&str]) -> String {
    format!("column{} {}", if names.len() == 1 { "" } else { "s" }, names.join(", "))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `id,project,user,cluster,gpus,submit,start,end,contract` (or `duration` for `end`),
    /// and optional columns (`partition`, `eligible`, `time_limit`, `wait`, `queue`,
    /// `priority`).
    Csv,
    /// One JSON object per line with the same fields.
    Jsonl,
    /// `sacct --parsable2` with `JobID|...|Account|...|AllocTRES|...` columns.
    Sacct,
    /// `job_id,submission_time,duration,num_gpu`: one file per budget.
    Itp,
}

impl Format {
    /// The format of a trace from its first line.
    pub fn detect(first_line: &str) -> Format {
        let line = first_line.trim_start_matches('\u{feff}').trim();
        if line.starts_with('{') {
            Format::Jsonl
        } else if line.contains('|') {
            Format::Sacct
        } else if line.starts_with("job_id,submission_time") {
            Format::Itp
        } else {
            Format::Csv
        }
    }
}

/// A time: RFC 3339 (`2021-03-04T10:00:00Z`), a civil time without zone, read as UTC
/// (`2021-03-04T10:00:00`, as sacct prints), or seconds.
pub fn parse_time(text: &str) -> Result<i64, RowError> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<i64>() {
        return Ok(seconds);
    }
    if let Ok(seconds) = text.parse::<f64>()
        && seconds.is_finite()
    {
        return Ok(seconds.round() as i64);
    }
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t.as_second());
    }
    if let Ok(civil) = text.parse::<jiff::civil::DateTime>()
        && let Ok(zoned) = civil.to_zoned(jiff::tz::TimeZone::UTC)
    {
        return Ok(zoned.timestamp().as_second());
    }
    Err(RowError::NotATime(text.to_owned()))
}

/// The GPU count of a Slurm TRES list (`cpu=1,gres/gpu=4` or `gres/gpu:a100=4`), as written.
pub fn tres_gpus(tres: &str) -> Option<&str> {
    tres.split(',')
        .find_map(|p| p.trim().strip_prefix("gres/gpu=").or_else(|| p.trim().strip_prefix("gres/gpu:")))
        .map(|n| n.rsplit('=').next().unwrap_or(n))
}

pub fn optional_time(text: &str) -> Result<Option<i64>, RowError> {
    match text.trim() {
        "" | "Unknown" | "None" | "null" => Ok(None),
        t => parse_time(t).map(Some),
    }
}

/// The first line of a trace (to [`detect`](Format::detect) its format), read up to
/// [`MAX_ROW_BYTES`] only.
pub fn first_line(input: impl BufRead) -> std::io::Result<String> {
    let mut line = Vec::new();
    input.take(MAX_ROW_BYTES as u64).read_until(b'\n', &mut line)?;
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// A reader that counts the bytes read since the last row ended, and fails past
/// [`MAX_ROW_BYTES`] (and what the CSV reader reads ahead) instead of handing them on.
struct Bounded<R> {
    input: R,
    since_row: usize,
    overflowed: bool,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let room = (MAX_ROW_BYTES + READ_AHEAD_BYTES).saturating_sub(self.since_row);
        if room == 0 {
            self.overflowed = true;
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, RowError::TooLong));
        }
        let cap = buf.len().min(room);
        let read = self.input.read(&mut buf[..cap])?;
        self.since_row += read;
        Ok(read)
    }
}

/// The columns allot reads, found once from the header (a row's fields are then taken by
/// index, not looked up by name on every row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Id,
    Project,
    User,
    Cluster,
    Partition,
    Gpus,
    Submit,
    Eligible,
    Start,
    End,
    Duration,
    TimeLimit,
    Contract,
    Wait,
    Queue,
    Priority,
    JobId,
    Account,
    Qos,
    AllocTres,
    ReqTres,
    SubmissionTime,
    ItpJobId,
    NumGpu,
    Timelimit,
}

impl Column {
    const ALL: [Column; 25] = [
        Column::Id,
        Column::Project,
        Column::User,
        Column::Cluster,
        Column::Partition,
        Column::Gpus,
        Column::Submit,
        Column::Eligible,
        Column::Start,
        Column::End,
        Column::Duration,
        Column::TimeLimit,
        Column::Contract,
        Column::Wait,
        Column::Queue,
        Column::Priority,
        Column::JobId,
        Column::Account,
        Column::Qos,
        Column::AllocTres,
        Column::ReqTres,
        Column::SubmissionTime,
        Column::ItpJobId,
        Column::NumGpu,
        Column::Timelimit,
    ];

    /// The column's header, lower case (headers are read without case).
    fn name(self) -> &'static str {
        match self {
            Column::Id => "id",
            Column::Project => "project",
            Column::User => "user",
            Column::Cluster => "cluster",
            Column::Partition => "partition",
            Column::Gpus => "gpus",
            Column::Submit => "submit",
            Column::Eligible => "eligible",
            Column::Start => "start",
            Column::End => "end",
            Column::Duration => "duration",
            Column::TimeLimit => "time_limit",
            Column::Contract => "contract",
            Column::Wait => "wait",
            Column::Queue => "queue",
            Column::Priority => "priority",
            Column::JobId => "jobid",
            Column::Account => "account",
            Column::Qos => "qos",
            Column::AllocTres => "alloctres",
            Column::ReqTres => "reqtres",
            Column::SubmissionTime => "submission_time",
            Column::ItpJobId => "job_id",
            Column::NumGpu => "num_gpu",
            Column::Timelimit => "timelimit",
        }
    }
}

/// Reads one trace file's rows as jobs.
pub struct Reader<R: BufRead> {
    format: Format,
    csv: csv::Reader<Bounded<R>>,
    /// A row could not be read (a failure to read, or a row too long): nothing follows.
    ended: bool,
    /// Where each column is in a row, by [`Column`].
    columns: [Option<usize>; Column::ALL.len()],
    record: csv::StringRecord,
    /// For ITP files: the budget every row belongs to.
    budget: String,
}

impl<R: BufRead> Reader<R> {
    /// `budget` names the budget of an ITP file (its file name); other formats ignore it.
    pub fn new(input: R, format: Format, budget: &str) -> Result<Reader<R>, TraceError> {
        let mut builder = csv::ReaderBuilder::new();
        builder.flexible(true).has_headers(true).buffer_capacity(READ_AHEAD_BYTES);
        match format {
            Format::Sacct => builder.delimiter(b'|').quoting(false),
            Format::Jsonl => builder.delimiter(b'\x00').quoting(false).has_headers(false),
            _ => &mut builder,
        };
        let mut csv = builder.from_reader(Bounded { input, since_row: 0, overflowed: false });
        let mut columns = [None; Column::ALL.len()];
        if format != Format::Jsonl {
            let headers = match csv.headers() {
                Ok(headers) => headers.clone(),
                Err(e) => {
                    let problem = if csv.get_ref().overflowed {
                        RowError::TooLong
                    } else {
                        RowError::Unreadable(e.to_string())
                    };
                    return Err(TraceError { line: 1, problem });
                }
            };
            for (i, name) in headers.iter().enumerate() {
                let name = name.trim().trim_start_matches('\u{feff}').to_lowercase();
                if let Some(&column) = Column::ALL.iter().find(|c| c.name() == name) {
                    columns[column as usize] = Some(i);
                }
            }
        }
        csv.get_mut().since_row = 0;
        let reader = Reader {
            format,
            csv,
            ended: false,
            columns,
            record: csv::StringRecord::new(),
            budget: budget.to_string(),
        };
        reader.check_columns()?;
        Ok(reader)
    }

    fn check_columns(&self) -> Result<(), TraceError> {
        use Column::*;
        let required: &[Column] = match self.format {
            Format::Csv => &[Gpus, Submit],
            Format::Sacct => &[JobId, Account, Submit, Start, End],
            Format::Itp => &[SubmissionTime, Duration, NumGpu],
            Format::Jsonl => &[],
        };
        let missing: Vec<&'static str> =
            required.iter().filter(|&&c| self.columns[c as usize].is_none()).map(|c| c.name()).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(TraceError { line: 1, problem: RowError::MissingColumns(missing) })
        }
    }

    fn field(&self, column: Column) -> &str {
        self.columns[column as usize].and_then(|i| self.record.get(i)).unwrap_or("")
    }

    /// The next job, `None` at the end. Rows that are not jobs (sacct job steps) are passed.
    pub fn next_job(&mut self) -> Option<Result<Job, TraceError>> {
        loop {
            if self.ended {
                return None;
            }
            let next_line = self.csv.position().line() as usize;
            match self.csv.read_record(&mut self.record) {
                Ok(false) => return None,
                Ok(true) => self.csv.get_mut().since_row = 0,
                Err(e) => {
                    let line = e.position().map_or(next_line, |p| p.line() as usize);
                    let problem = if self.csv.get_ref().overflowed {
                        RowError::TooLong
                    } else {
                        RowError::Unreadable(e.to_string())
                    };
                    self.ended = e.is_io_error();
                    return Some(Err(TraceError { line, problem }));
                }
            }
            let line = self.record.position().map_or(0, |p| p.line() as usize);
            if self.record.iter().all(|f| f.trim().is_empty()) {
                continue;
            }
            let job = match self.format {
                Format::Csv => self.csv_job(),
                Format::Jsonl => self.json_job(),
                Format::Sacct => match self.sacct_job() {
                    Ok(None) => continue,
                    Ok(Some(job)) => Ok(job),
                    Err(e) => Err(e),
                },
                Format::Itp => self.itp_job(),
            };
            return Some(job.map_err(|problem| TraceError { line, problem }));
        }
    }

    fn csv_job(&self) -> Result<Job, RowError> {
        job(Row {
            id: self.field(Column::Id),
            project: self.field(Column::Project),
            user: self.field(Column::User),
            cluster: self.field(Column::Cluster),
            partition: self.field(Column::Partition),
            gpus: self.field(Column::Gpus),
            submit: parse_time(self.field(Column::Submit))?,
            eligible: optional_time(self.field(Column::Eligible))?,
            start: optional_time(self.field(Column::Start))?,
            end: optional_time(self.field(Column::End))?,
            duration: optional_seconds(self.field(Column::Duration))?,
            time_limit: optional_seconds(self.field(Column::TimeLimit))?,
            contract: self.field(Column::Contract),
            queue: self.field(Column::Queue),
            priority: self.field(Column::Priority),
            // Without the column, the wait is measured; with it, it is the row's.
            wait: match self.columns[Column::Wait as usize] {
                None => WaitCount::Measured,
                Some(_) => wait_count(self.field(Column::Wait))?,
            },
        })
    }

    fn json_job(&self) -> Result<Job, RowError> {
        let line = self.record.get(0).unwrap_or("");
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| RowError::NotJson(e.to_string()))?;
        let text = |key: &str| match &value[key] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => String::new(),
        };
        job(Row {
            id: &text("id"),
            project: &text("project"),
            user: &text("user"),
            cluster: &text("cluster"),
            partition: &text("partition"),
            gpus: &text("gpus"),
            submit: parse_time(&text("submit"))?,
            eligible: optional_time(&text("eligible"))?,
            start: optional_time(&text("start"))?,
            end: optional_time(&text("end"))?,
            duration: optional_seconds(&text("duration"))?,
            time_limit: optional_seconds(&text("time_limit"))?,
            contract: &text("contract"),
            queue: &text("queue"),
            priority: &text("priority"),
            wait: match value.get("wait") {
                None => WaitCount::Measured,
                Some(serde_json::Value::Null) => WaitCount::Elsewhere,
                Some(serde_json::Value::String(s)) => wait_count(s)?,
                Some(serde_json::Value::Number(n)) => wait_count(&n.to_string())?,
                Some(other) => return Err(RowError::NotAWait(other.to_string())),
            },
        })
    }

    /// A `sacct --parsable2` row; `None` for job steps (`123.batch`).
    fn sacct_job(&self) -> Result<Option<Job>, RowError> {
        let id = self.field(Column::JobId);
        if id.contains('.') {
            return Ok(None);
        }
        let tres = if self.field(Column::AllocTres).is_empty() {
            self.field(Column::ReqTres)
        } else {
            self.field(Column::AllocTres)
        };
        let gpus = tres_gpus(tres).unwrap_or("0");
        job(Row {
            id,
            project: self.field(Column::Account),
            user: self.field(Column::User),
            cluster: self.field(Column::Cluster),
            partition: self.field(Column::Partition),
            gpus,
            submit: parse_time(self.field(Column::Submit))?,
            eligible: optional_time(self.field(Column::Eligible))?,
            start: optional_time(self.field(Column::Start))?,
            end: optional_time(self.field(Column::End))?,
            duration: None,
            time_limit: slurm_time_limit(self.field(Column::Timelimit))?,
            contract: self.field(Column::Qos),
            // sacct's `Priority` is Slurm's, not a Kueue priority.
            queue: "",
            priority: "",
            wait: WaitCount::Measured,
        })
        .map(Some)
    }

    fn itp_job(&self) -> Result<Job, RowError> {
        let submit = parse_time(self.field(Column::SubmissionTime))?;
        // The trace records no start: each job is taken to start when submitted.
        job(Row {
            id: self.field(Column::ItpJobId),
            project: &self.budget,
            user: "",
            cluster: "",
            partition: "",
            gpus: self.field(Column::NumGpu),
            submit,
            eligible: None,
            start: Some(submit),
            end: None,
            duration: Some(parse_seconds(self.field(Column::Duration))?),
            time_limit: None,
            contract: "",
            queue: "",
            priority: "",
            wait: WaitCount::Measured,
        })
    }
}

/// A row's `wait`: seconds (the job's whole wait, on its first run), or empty (a later run:
/// the job's wait is counted on its first).
fn wait_count(text: &str) -> Result<WaitCount, RowError> {
    match text.trim() {
        "" => Ok(WaitCount::Elsewhere),
        t => parse_seconds(t).map(WaitCount::Total).map_err(|_| RowError::NotAWait(t.to_owned())),
    }
}

fn optional_seconds(text: &str) -> Result<Option<i64>, RowError> {
    match text.trim() {
        "" | "null" => Ok(None),
        t => parse_seconds(t).map(Some),
    }
}

/// A time limit as `sacct` shows it: `[D-]HH:MM:SS`, `MM:SS` or minutes; `UNLIMITED`,
/// `Partition_Limit` or nothing: none.
fn slurm_time_limit(text: &str) -> Result<Option<i64>, RowError> {
    let text = text.trim();
    if text.is_empty()
        || text.eq_ignore_ascii_case("unlimited")
        || text.eq_ignore_ascii_case("partition_limit")
    {
        return Ok(None);
    }
    let bad = || RowError::NotATimeLimit(text.to_owned());
    let (days, clock) = match text.split_once('-') {
        Some((days, clock)) => (days.parse::<u32>().map_err(|_| bad())?, clock),
        None => (0, text),
    };
    let parts: Vec<u32> =
        clock.split(':').map(|p| p.parse::<u32>().map_err(|_| bad())).collect::<Result<_, _>>()?;
    let [hours, minutes, seconds] = match parts[..] {
        [minutes] => [0, minutes, 0],
        [minutes, seconds] => [0, minutes, seconds],
        [hours, minutes, seconds] => [hours, minutes, seconds],
        _ => return Err(bad()),
    }
    .map(i64::from);
    let total = i64::from(days) * 86_400 + hours * 3600 + minutes * 60 + seconds;
    // Slurm keeps limits in 32 bits of minutes: anything longer is not Slurm's.
    if total > i64::from(u32::MAX) * 60 {
        return Err(bad());
    }
    Ok(Some(total))
}

fn parse_seconds(text: &str) -> Result<i64, RowError> {
    let text = text.trim();
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| s.round() as i64)
        .ok_or_else(|| RowError::NotSeconds(text.to_owned()))
}

/// `seconds` after `time`, if that is a time a trace may hold.
fn after(time: i64, seconds: i64) -> Result<i64, RowError> {
    time.checked_add(seconds).ok_or(RowError::TimeOutOfRange(i64::MAX))
}

/// `time` if it lies within years -9999 to 9999 (jiff's range, which keeps every sum of
/// two times and a window far from overflowing).
fn in_range(time: i64) -> Result<i64, RowError> {
    jiff::Timestamp::from_second(time).map(|_| time).map_err(|_| RowError::TimeOutOfRange(time))
}

/// A row's fields, its times read.
struct Row<'a> {
    id: &'a str,
    project: &'a str,
    user: &'a str,
    cluster: &'a str,
    partition: &'a str,
    gpus: &'a str,
    submit: i64,
    eligible: Option<i64>,
    start: Option<i64>,
    end: Option<i64>,
    duration: Option<i64>,
    time_limit: Option<i64>,
    contract: &'a str,
    queue: &'a str,
    priority: &'a str,
    wait: WaitCount,
}

/// The job of a row: its times in range and in order (a start and a duration without an
/// end give the end; an eligibility is kept between submission and start, or end).
fn job(row: Row<'_>) -> Result<Job, RowError> {
    let gpus: u32 =
        row.gpus.trim().parse().map_err(|_| RowError::NotAGpuCount(row.gpus.trim().to_owned()))?;
    let priority = match row.priority.trim() {
        "" => None,
        text => Some(text.parse().map_err(|_| RowError::NotAPriority(text.to_owned()))?),
    };
    let submit = in_range(row.submit)?;
    let start = row.start.map(in_range).transpose()?;
    let end = match (row.end, start, row.duration) {
        (Some(end), _, _) => Some(end),
        (None, Some(start), Some(duration)) => Some(after(start, duration)?),
        (None, _, _) => None,
    };
    let end = end.map(in_range).transpose()?;
    if let Some(duration) = row.duration {
        in_range(after(submit, duration)?)?;
    }
    if let Some(start) = start
        && start < submit
    {
        return Err(RowError::StartsBeforeSubmit { start, submit });
    }
    if let Some(end) = end
        && end < start.unwrap_or(submit)
    {
        return Err(RowError::EndsBeforeStart { end });
    }
    let eligible = row
        .eligible
        .map(in_range)
        .transpose()?
        .map(|e| e.max(submit).min(start.or(end).unwrap_or(i64::MAX)))
        .filter(|&e| e > submit);
    Ok(Job {
        id: row.id.trim().into(),
        project: row.project.trim().into(),
        user: row.user.trim().into(),
        cluster: row.cluster.trim().into(),
        partition: row.partition.trim().into(),
        gpus,
        submit,
        eligible,
        start,
        end,
        duration: row.duration,
        time_limit: row.time_limit,
        contract: row.contract.trim().into(),
        queue: row.queue.trim().into(),
        priority,
        wait: row.wait,
    })
}

/// Several readers merged into one stream in submit order (each must be in submit order).
///
/// A bad row is handed on as soon as its reader meets it; that reader goes on after it
/// (its next row is read when the error has been taken), so each reader holds at most one
/// job or one error.
pub struct Merged<R: BufRead> {
    readers: Vec<Reader<R>>,
    heads: BinaryHeap<std::cmp::Reverse<(i64, usize)>>,
    pending: Vec<Option<Job>>,
    /// Errors met, with the reader that met them (each then waits to be read on).
    errors: Vec<(usize, TraceError)>,
}

impl<R: BufRead> Merged<R> {
    pub fn new(readers: Vec<Reader<R>>) -> Merged<R> {
        let pending = readers.iter().map(|_| None).collect();
        let mut merged = Merged { readers, heads: BinaryHeap::new(), pending, errors: Vec::new() };
        for index in 0..merged.readers.len() {
            merged.fill(index);
        }
        merged
    }

    fn fill(&mut self, index: usize) {
        let Some(reader) = self.readers.get_mut(index) else { return };
        match reader.next_job() {
            Some(Ok(job)) => {
                self.heads.push(std::cmp::Reverse((job.submit, index)));
                self.pending[index] = Some(job);
            }
            Some(Err(e)) => self.errors.push((index, e)),
            None => {}
        }
    }
}

impl<R: BufRead> Iterator for Merged<R> {
    type Item = Result<Job, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some((index, error)) = self.errors.pop() {
            self.fill(index);
            return Some(Err(error));
        }
        let std::cmp::Reverse((_, index)) = self.heads.pop()?;
        let job = self.pending.get_mut(index)?.take()?;
        self.fill(index);
        Some(Ok(job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(text: &str, budget: &str) -> Vec<Result<Job, TraceError>> {
        let format = Format::detect(text.lines().next().unwrap_or(""));
        let mut reader = Reader::new(text.as_bytes(), format, budget).unwrap();
        std::iter::from_fn(|| reader.next_job()).collect()
    }

    #[test]
    fn reads_every_format() {
        let csv = "id,project,user,cluster,gpus,submit,start,end,contract\n1,olmo/pretrain,alice,jupiter,8,2021-03-04T10:00:00Z,2021-03-04T10:00:30Z,2021-03-04T11:00:30Z,batch\n2,tulu,bob,,1,100,,,\n";
        let read = jobs(csv, "");
        let first = read[0].clone().unwrap();
        assert_eq!(
            (first.gpus, first.end.unwrap() - first.start.unwrap(), first.start.unwrap() - first.submit),
            (8, 3600, 30)
        );
        assert_eq!(read[1].clone().unwrap().start, None);

        // A duration with a start gives the end; without one it is work for a simulation.
        let durations = "id,project,gpus,submit,start,duration,partition,eligible\n1,a,2,100,,50,gpu,\n2,a,2,100,120,50,,110\n";
        let read = jobs(durations, "");
        let (first, second) = (read[0].clone().unwrap(), read[1].clone().unwrap());
        assert_eq!((first.end, first.duration, first.partition.as_str()), (None, Some(50), "gpu"));
        assert_eq!((second.end, second.eligible), (Some(170), Some(110)));

        let jsonl = "{\"id\":\"1\",\"project\":\"a\",\"gpus\":4,\"submit\":10,\"start\":12,\"end\":20}\n";
        assert_eq!(jobs(jsonl, "")[0].clone().unwrap().gpus, 4);

        let sacct = "JobID|User|Account|Cluster|QOS|Submit|Start|End|AllocTRES\n7|alice|vision|test|batch|2021-03-04T10:00:00|2021-03-04T10:00:05|2021-03-04T10:00:35|billing=17,cpu=1,gres/gpu=4,node=1\n7.batch|||||||||\n8|bob|nlp|test|normal|2021-03-04T10:01:00|Unknown|2021-03-04T10:02:00|\n";
        let read = jobs(sacct, "");
        assert_eq!(read.len(), 2, "job steps are passed");
        let job = read[0].clone().unwrap();
        assert_eq!((job.project.as_str(), job.gpus, job.contract.as_str()), ("vision", 4, "batch"));
        assert_eq!(read[1].clone().unwrap().start, None);

        let itp = "job_id,submission_time,duration,num_gpu\nx,5,100,8\n";
        let job = jobs(itp, "cluster01")[0].clone().unwrap();
        assert_eq!((job.project.as_str(), job.start, job.end), ("cluster01", Some(5), Some(105)));
    }

    #[test]
    fn a_kueue_queue_and_priority_in_csv_and_json_lines_not_from_sacct() {
        let csv = "id,gpus,submit,duration,queue,priority\n1,1,0,10,team/gpus,-5\n2,1,0,10,,\n3,1,0,10,cq-a,2147483647\n";
        let read: Vec<(String, Option<i32>)> = jobs(csv, "")
            .into_iter()
            .map(|j| j.unwrap())
            .map(|j| (j.queue.to_string(), j.priority))
            .collect();
        let expected =
            [("team/gpus".into(), Some(-5)), (String::new(), None), ("cq-a".into(), Some(i32::MAX))];
        assert_eq!(read, expected);
        let lines = "{\"id\":\"1\",\"gpus\":1,\"submit\":0,\"duration\":10,\"queue\":\"team/gpus\",\"priority\":-5}\n";
        let job = jobs(lines, "").remove(0).unwrap();
        assert_eq!((job.queue.as_str(), job.priority), ("team/gpus", Some(-5)));
        for bad in ["high", "2147483648", "1.5"] {
            let row = format!("id,gpus,submit,duration,priority\n1,1,0,10,{bad}\n");
            let error = jobs(&row, "").remove(0).unwrap_err();
            assert_eq!(error.problem, RowError::NotAPriority(bad.into()), "{bad}");
        }
        // sacct's `Priority` is Slurm's: not read as a Kueue priority.
        let sacct = "JobID|Account|Submit|Start|End|AllocTRES|Priority\n7|a|0|0|10|gres/gpu=1|4294\n";
        let job = jobs(sacct, "").remove(0).unwrap();
        assert_eq!((job.queue.as_str(), job.priority), ("", None));
    }

    #[test]
    fn time_limits_in_seconds_or_as_sacct_shows_them() {
        let csv = "id,gpus,submit,duration,time_limit\n1,1,0,10,120\n2,1,0,10,\n";
        let read: Vec<Option<i64>> = jobs(csv, "").into_iter().map(|j| j.unwrap().time_limit).collect();
        assert_eq!(read, [Some(120), None]);
        let limits = ["1-02:03:04", "02:03:04", "05:06", "90", "UNLIMITED", "Partition_Limit", ""];
        let mut sacct = "JobID|Account|Submit|Start|End|Timelimit\n".to_string();
        for (i, limit) in limits.iter().enumerate() {
            sacct.push_str(&format!("{i}|a|0|0|10|{limit}\n"));
        }
        let read: Vec<Option<i64>> = jobs(&sacct, "").into_iter().map(|j| j.unwrap().time_limit).collect();
        assert_eq!(read, [Some(93_784), Some(7384), Some(306), Some(5400), None, None, None]);
        for bad in ["1:2:3:4", "x", "-5", "99999999-00:00:00", "1-"] {
            let row = format!("JobID|Account|Submit|Start|End|Timelimit\n1|a|0|0|10|{bad}\n");
            let problem = jobs(&row, "")[0].clone().unwrap_err().problem;
            assert!(matches!(problem, RowError::NotATimeLimit(_)), "{bad}: {problem}");
        }
    }

    #[test]
    fn a_wait_column_gives_the_wait_or_leaves_it_to_another_row() {
        // Seconds on a job's first run, empty on its later ones; extra columns are passed.
        let csv = "id,gpus,submit,start,end,wait,attempt,ended_by\n\
                   1,1,0,30,90,30,1,preempted\n1,1,90,100,150,,2,finished\n2,1,5,5,10,2.4,1,finished\n";
        let read: Vec<WaitCount> = jobs(csv, "").into_iter().map(|j| j.unwrap().wait).collect();
        assert_eq!(read, [WaitCount::Total(30), WaitCount::Elsewhere, WaitCount::Total(2)]);
        let jsonl = "{\"id\":\"1\",\"gpus\":1,\"submit\":0,\"start\":30,\"end\":90,\"wait\":30}\n\
                     {\"id\":\"1\",\"gpus\":1,\"submit\":90,\"start\":100,\"end\":150,\"wait\":null}\n\
                     {\"id\":\"2\",\"gpus\":1,\"submit\":95,\"start\":100,\"end\":150,\"wait\":\"7\"}\n\
                     {\"id\":\"3\",\"gpus\":1,\"submit\":95,\"start\":100,\"end\":150}\n";
        let read: Vec<WaitCount> = jobs(jsonl, "").into_iter().map(|j| j.unwrap().wait).collect();
        assert_eq!(
            read,
            [WaitCount::Total(30), WaitCount::Elsewhere, WaitCount::Total(7), WaitCount::Measured]
        );
        // Without the column the wait is measured, as before.
        let plain = jobs("id,gpus,submit,start,end\n1,1,0,30,90\n", "");
        assert_eq!(plain[0].clone().unwrap().wait, WaitCount::Measured);
        // A wait that is not seconds, or is negative, is a bad row naming it.
        for (bad, shown) in [("soon", "soon"), ("-5", "-5"), ("NaN", "NaN"), (" 1h ", "1h")] {
            let row = format!("id,gpus,submit,start,end,wait\n1,1,0,30,90,{bad}\n");
            let error = jobs(&row, "")[0].clone().unwrap_err();
            assert_eq!((error.line, error.problem.clone()), (2, RowError::NotAWait(shown.into())), "{bad}");
            assert_eq!(
                error.to_string(),
                format!("line 2: `{shown}` is not a wait (seconds, 0 or more; empty on a job's later runs)")
            );
        }
        let json = "{\"id\":\"1\",\"gpus\":1,\"submit\":0,\"start\":30,\"end\":90,\"wait\":-1}\n";
        assert_eq!(jobs(json, "")[0].clone().unwrap_err().problem, RowError::NotAWait("-1".into()));
        let json = "{\"id\":\"1\",\"gpus\":1,\"submit\":0,\"start\":30,\"end\":90,\"wait\":[1]}\n";
        assert_eq!(jobs(json, "")[0].clone().unwrap_err().problem, RowError::NotAWait("[1]".into()));
    }

    #[test]
    fn bad_rows_name_their_line() {
        let csv = "id,project,gpus,submit\n1,a,2,100\n2,a,many,100\n3,a,1,later\n";
        let read = jobs(csv, "");
        assert_eq!(read[1].clone().unwrap_err().line, 3);
        assert_eq!(read[2].clone().unwrap_err().line, 4);
        let missing = Reader::new("id,project\n".as_bytes(), Format::Csv, "").err().unwrap();
        assert!(missing.problem.to_string().contains("gpus, submit"));
    }

    #[test]
    fn a_bad_row_is_skipped_and_reading_goes_on() {
        let a = "job_id,submission_time,duration,num_gpu\na1,1,10,1\na2,2,x,1\na3,3,10,1\n";
        let read: Vec<_> = Merged::new(vec![Reader::new(a.as_bytes(), Format::Itp, "a").unwrap()]).collect();
        assert_eq!(read.len(), 3);
        assert_eq!(read[1].clone().unwrap_err().line, 3);
        assert_eq!(read[2].clone().unwrap().id, "a3");
    }

    #[test]
    fn times_beyond_years_9999_are_refused() {
        let csv = format!("id,gpus,submit,start,end\n1,1,0,0,{}\n2,1,0,0,9223372036854775\n", i64::MAX);
        let read = jobs(&csv, "");
        assert_eq!(read[0].clone().unwrap_err().problem, RowError::TimeOutOfRange(i64::MAX));
        assert!(matches!(read[1].clone().unwrap_err().problem, RowError::TimeOutOfRange(_)));
        let itp = format!("job_id,submission_time,duration,num_gpu\nx,{},{},8\n", i64::MAX - 1, 10);
        assert!(matches!(jobs(&itp, "b")[0].clone().unwrap_err().problem, RowError::TimeOutOfRange(_)));
        let durations = "id,gpus,submit,duration\n1,1,0,1e300\n";
        assert!(matches!(jobs(durations, "")[0].clone().unwrap_err().problem, RowError::TimeOutOfRange(_)));
    }

    #[test]
    fn a_row_longer_than_the_limit_ends_the_file_with_an_error() {
        // Rows are never gathered beyond the limit: an endless line stops there.
        let endless = "id,gpus,submit\n1,1,0\n".as_bytes().chain(std::io::repeat(b'x'));
        let mut reader = Reader::new(std::io::BufReader::new(endless), Format::Csv, "").unwrap();
        assert!(reader.next_job().unwrap().is_ok());
        let error = reader.next_job().unwrap().unwrap_err();
        assert_eq!((error.line, error.problem), (3, RowError::TooLong));
        assert!(reader.next_job().is_none());
        let header = std::io::repeat(b'x');
        let error = Reader::new(std::io::BufReader::new(header), Format::Csv, "").err().unwrap();
        assert_eq!(error.problem, RowError::TooLong);
        let line = first_line(std::io::BufReader::new(std::io::repeat(b'{'))).unwrap();
        assert_eq!(line.len(), MAX_ROW_BYTES);
    }

    #[test]
    fn merged_readers_keep_submit_order() {
        let a = "job_id,submission_time,duration,num_gpu\na1,1,10,1\na2,5,10,1\n";
        let b = "job_id,submission_time,duration,num_gpu\nb1,3,10,1\nb2,4,10,1\n";
        let readers = vec![
            Reader::new(a.as_bytes(), Format::Itp, "a").unwrap(),
            Reader::new(b.as_bytes(), Format::Itp, "b").unwrap(),
        ];
        let ids: Vec<String> = Merged::new(readers).map(|j| j.unwrap().id.into()).collect();
        assert_eq!(ids, ["a1", "b1", "b2", "a2"]);
    }
}
