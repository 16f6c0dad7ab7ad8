//! The simulated schedule written out: the [`Run`]s a [`simulate_into`](crate::simulate_into)
//! hands over, as rows of allot's own CSV trace (see [`trace`](allot_verify::trace)), one run a row,
//! written as they come to any [`Write`] (through the csv writer's buffer; nothing is held
//! beyond a row). It sits after the simulator in the flow, beside its audit: the rows are the
//! ones that audit reads, in its order, so that reading the file back as a trace (`allot
//! replay audit --trace`) gives the simulation's own figures. Users read it to see what the
//! simulator did to their jobs; tests check the scheduling rules on it.
//!
//! A row's `submit` is when the run entered its queue (the job's eligibility for its first
//! run, its preemption for a later one) and `wait` the job's whole wait on its first run,
//! empty on the others: the reader takes them as [`WaitCount::Total`](allot_verify::trace::WaitCount)
//! and [`WaitCount::Elsewhere`](allot_verify::trace::WaitCount). `attempt`, `ended_by` and
//! `preempted_for` say which run it is, what ended it and, when it was preempted, for which
//! job; the reader passes over them. Names come from an untrusted
//! trace: the csv writer quotes every field that holds a comma, a quote or a line break, and
//! writes the rest as it is (the file is data for allot and programs, as the traces it reads
//! are).

use std::io::Write;

use crate::Run;

/// The header of a schedule, its columns in order.
pub const COLUMNS: [&str; 13] = [
    "id",
    "project",
    "user",
    "cluster",
    "gpus",
    "submit",
    "start",
    "end",
    "contract",
    "wait",
    "attempt",
    "ended_by",
    "preempted_for",
];

/// Writes runs as a schedule: the header first, then a row per [`write`](Self::write).
pub struct ScheduleWriter<W: Write> {
    csv: csv::Writer<W>,
    /// A field being formatted (numbers), kept to format the next one without allocating.
    field: String,
}

impl<W: Write> ScheduleWriter<W> {
    /// A writer to `out`, the header written (to its buffer).
    pub fn new(out: W) -> std::io::Result<ScheduleWriter<W>> {
        let mut csv = csv::WriterBuilder::new().buffer_capacity(64 << 10).from_writer(out);
        csv.write_record(COLUMNS)?;
        Ok(ScheduleWriter { csv, field: String::new() })
    }

    /// Writes `run` as a row.
    pub fn write(&mut self, run: &Run) -> std::io::Result<()> {
        let csv = &mut self.csv;
        csv.write_field(run.id.as_bytes())?;
        csv.write_field(run.project.as_bytes())?;
        csv.write_field(run.user.as_bytes())?;
        csv.write_field(run.cluster.as_bytes())?;
        let numbers = [i64::from(run.gpus), run.queued, run.start, run.end];
        for n in numbers {
            number(csv, &mut self.field, n)?;
        }
        csv.write_field(run.contract.as_bytes())?;
        match run.wait {
            Some(wait) => number(csv, &mut self.field, wait)?,
            None => csv.write_field("")?,
        }
        number(csv, &mut self.field, i64::from(run.attempt))?;
        csv.write_field(run.ended_by.as_str())?;
        csv.write_field(run.preempted_for.as_ref().map_or("", |(id, _)| id).as_bytes())?;
        csv.write_record(None::<&[u8]>)?;
        Ok(())
    }

    /// Writes out what is buffered and gives back the writer.
    pub fn finish(self) -> std::io::Result<W> {
        self.csv.into_inner().map_err(csv::IntoInnerError::into_error)
    }
}

fn number<W: Write>(csv: &mut csv::Writer<W>, field: &mut String, n: i64) -> std::io::Result<()> {
    use std::fmt::Write as _;
    field.clear();
    let _ = write!(field, "{n}");
    csv.write_field(field.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::EndedBy;
    use allot_verify::trace::{Format, Reader, WaitCount};

    fn run(id: &str, user: &str, attempt: u32, wait: Option<i64>, ended_by: EndedBy) -> Run {
        Run {
            id: id.into(),
            user: user.into(),
            cluster: "c".into(),
            project: "olmo/pretrain".into(),
            contract: Arc::from("batch"),
            gpus: 8,
            submit: 100,
            queued: 100 + 1000 * i64::from(attempt - 1),
            start: 160 + 1000 * i64::from(attempt - 1),
            end: 700 + 1000 * i64::from(attempt - 1),
            wait,
            attempt,
            ended_by,
            preempted_for: (ended_by == EndedBy::Preempted).then(|| (Arc::from("7"), 1)),
            start_order: 0,
            nodes: vec![(0, 8)],
        }
    }

    fn written(runs: &[Run]) -> String {
        let mut writer = ScheduleWriter::new(Vec::new()).unwrap();
        for r in runs {
            writer.write(r).unwrap();
        }
        String::from_utf8(writer.finish().unwrap()).unwrap()
    }

    #[test]
    fn runs_are_rows_quoted_where_they_must_be() {
        let runs = [
            run("1", "alice", 1, Some(360), EndedBy::Preempted),
            run("1", "alice", 2, None, EndedBy::Finished),
            run("a,\"b\"", "x\ny", 1, Some(0), EndedBy::MaxRuntime),
            run("=cmd", "bob", 1, Some(60), EndedBy::TimeLimit),
        ];
        assert_eq!(
            written(&runs),
            "id,project,user,cluster,gpus,submit,start,end,contract,wait,attempt,ended_by,preempted_for\n\
             1,olmo/pretrain,alice,c,8,100,160,700,batch,360,1,preempted,7\n\
             1,olmo/pretrain,alice,c,8,1100,1160,1700,batch,,2,finished,\n\
             \"a,\"\"b\"\"\",olmo/pretrain,\"x\ny\",c,8,100,160,700,batch,0,1,max-runtime,\n\
             =cmd,olmo/pretrain,bob,c,8,100,160,700,batch,60,1,time-limit,\n"
        );
    }

    #[test]
    fn a_schedule_reads_back_as_the_rows_the_audit_took() {
        let runs = [
            run("1", "alice", 1, Some(360), EndedBy::Preempted),
            run("1", "alice", 2, None, EndedBy::Finished),
            run("a,\"b\"", "x\ny", 1, Some(0), EndedBy::MaxRuntime),
        ];
        let text = written(&runs);
        let mut reader = Reader::new(text.as_bytes(), Format::detect(&text), "").unwrap();
        let jobs: Vec<_> = std::iter::from_fn(|| reader.next_job()).map(Result::unwrap).collect();
        let read: Vec<_> = jobs
            .iter()
            .map(|j| (j.id.as_str(), j.user.as_str(), j.submit, j.start, j.end, j.eligible, j.wait))
            .collect();
        assert_eq!(
            read,
            [
                ("1", "alice", 100, Some(160), Some(700), None, WaitCount::Total(360)),
                ("1", "alice", 1100, Some(1160), Some(1700), None, WaitCount::Elsewhere),
                ("a,\"b\"", "x\ny", 100, Some(160), Some(700), None, WaitCount::Total(0)),
            ]
        );
        assert!(jobs.iter().all(|j| j.project == "olmo/pretrain" && j.contract == "batch" && j.gpus == 8));
    }
}
