//! The simulator's jobs: each job read and not finished in a slot, its runs as they end on
//! their way to the audit, and the events that are due.

use std::ops::{Index, IndexMut};
use std::sync::Arc;

use allot_compiler::ir::Model;
use allot_verify::trace::CompactString;

use super::EndedBy;

/// A contract's terms, as the simulator applies them.
pub(super) struct Terms {
    pub(super) name: Arc<str>,
    pub(super) min_runtime: i64,
    pub(super) max_runtime: Option<i64>,
    pub(super) resumable: bool,
    /// GPUs of each cluster held for its jobs (0: none; see [`Holding`]).
    pub(super) reserve: u32,
}

impl Terms {
    /// The terms of the model's contracts, in their order.
    pub(super) fn of(model: &Model) -> Vec<Terms> {
        model
            .contracts
            .iter()
            .map(|c| Terms {
                name: c.name.as_str().into(),
                min_runtime: c.min_runtime_seconds as i64,
                max_runtime: c.max_runtime_seconds.map(|s| s as i64),
                resumable: c.resumable,
                reserve: c.reserve_gpus.map_or(0, |r| u32::try_from(r).unwrap_or(u32::MAX)),
            })
            .collect()
    }
}

/// What a run holds its GPUs as, as a contract's `reserve` has it (docs/language.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Holding {
    /// Its own: the rule of its policy decides whether it may be preempted.
    #[default]
    Own,
    /// Its contract's reserve, which it runs within: never preempted.
    Reserve,
    /// On loan from a reserve (it started leaving fewer GPUs free than the reserves still
    /// held): a job of that reserve's contract may take it back at once.
    Loan,
}

/// A job in the simulation: its number in trace order, which orders it among jobs wherever
/// they are otherwise equal (in queues, among victims, among events), and the slot that
/// holds it. Numbers come first: slots never decide an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct JobId {
    pub(super) number: u32,
    pub(super) slot: u32,
}

/// The jobs in the simulation (read and not finished), each in a slot that a later job takes
/// once it has finished.
#[derive(Default)]
pub(super) struct Slots {
    slots: Vec<Option<SimJob>>,
    free: Vec<u32>,
    /// Jobs taken in so far: the next job's number.
    pub(super) added: u32,
}

impl Slots {
    /// Takes in the job `make` makes of its number.
    pub(super) fn add(&mut self, make: impl FnOnce(u32) -> SimJob) -> JobId {
        let number = self.added;
        self.added += 1;
        let job = Some(make(number));
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = job;
                slot
            }
            None => {
                self.slots.push(job);
                (self.slots.len() - 1) as u32
            }
        };
        JobId { number, slot }
    }

    /// The job `id` names, unless it has finished (its slot then is empty, or another's).
    pub(super) fn get(&self, id: JobId) -> Option<&SimJob> {
        self.slots[id.slot as usize].as_ref().filter(|job| job.number == id.number)
    }

    /// Takes a finished job out, freeing its slot.
    pub(super) fn remove(&mut self, id: JobId) -> SimJob {
        self.free.push(id.slot);
        self.slots[id.slot as usize].take().expect("a job in the simulation")
    }
}

impl Index<JobId> for Slots {
    type Output = SimJob;

    fn index(&self, id: JobId) -> &SimJob {
        self.get(id).expect("a job in the simulation")
    }
}

impl IndexMut<JobId> for Slots {
    fn index_mut(&mut self, id: JobId) -> &mut SimJob {
        self.slots[id.slot as usize]
            .as_mut()
            .filter(|job| job.number == id.number)
            .expect("a job in the simulation")
    }
}

pub(super) struct SimJob {
    /// Its number in trace order (see [`JobId`]).
    pub(super) number: u32,
    pub(super) id: CompactString,
    pub(super) user: CompactString,
    pub(super) cluster: u32,
    pub(super) leaf: u32,
    pub(super) terms: Option<u16>,
    pub(super) gpus: u32,
    /// Its place among the queue's tiers, served in order (see
    /// [`Admission`](super::engine::Admission)).
    pub(super) tier: u32,
    /// Its lane within its budget's queue: which of the policy's queues takes it, where
    /// one budget's jobs may go to several (the `kueue` policy's ClusterQueue, by the
    /// trace's `queue` column); 0 under every other policy.
    pub(super) lane: u32,
    /// See [`Admission::contractless`](super::engine::Admission).
    pub(super) contractless: bool,
    /// The time limit its runs are planned with, as its policy gave it; `None`: its
    /// remaining work.
    pub(super) limit: Option<i64>,
    /// Why its work was cut short, when it was (its contract's maximum runtime, or its own
    /// time limit): what its last run ended by.
    pub(super) cut: Option<EndedBy>,
    pub(super) submit: i64,
    /// When it first entered its queue (its eligibility, else its submission): its place in
    /// the queue, kept when it requeues.
    pub(super) entered: i64,
    /// When it last entered its queue: when it entered, or its last preemption.
    pub(super) queued_at: i64,
    /// Its place in its queue: when it first entered, kept when it requeues unless its
    /// policy's [`Requeue`](super::engine::Requeue) says otherwise.
    pub(super) place: i64,
    /// Seconds spent queued so far, over all its runs.
    pub(super) waited: i64,
    /// Seconds of work it does (the trace's runtime, cut at the contract's maximum).
    pub(super) work: i64,
    /// Seconds of work left.
    pub(super) remaining: i64,
    /// While it runs: its start plus its time limit (what a reservation counts on).
    pub(super) expected_end: i64,
    /// Its current run's place among all starts (see [`Run::start_order`](super::Run)).
    pub(super) start_order: u64,
    /// Counts its runs: an event of an earlier run is stale.
    pub(super) run: u32,
    pub(super) started: Option<i64>,
    /// The tree node whose floor it runs in (the GPUs guaranteed to a budget that no other
    /// work may take: the priority policy's high priority, a Slurm floor partition).
    pub(super) floor: Option<u32>,
    /// May be preempted (past its protection): among its budget's preemptible runs.
    pub(super) preemptible: bool,
    /// What it holds its GPUs as while it runs.
    pub(super) holding: Holding,
    /// (node, GPUs taken) while it runs.
    pub(super) placement: Vec<(u32, u32)>,
    /// Its first run, once preempted: it carries the job's wait, known when the job finishes.
    pub(super) first_run: Option<Ended>,
}

impl SimJob {
    /// The key of its group in its budget's queue: (tier, lane, GPUs).
    pub(super) fn group(&self) -> (u32, u32, u32) {
        (self.tier, self.lane, self.gpus)
    }

    /// Its next run's time limit from its start: the limit its policy gave it (a requeued
    /// job starts over with it), else its remaining work (the simulator knows it exactly).
    pub(super) fn limit(&self) -> i64 {
        self.limit.unwrap_or(self.remaining)
    }
}

/// A run that has ended, on its way to the audit. Ordered by when it entered its queue, then
/// by when it ended (the order of the audit's rows): the fields after those never decide.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Ended {
    pub(super) queued: i64,
    /// How many runs ended before it.
    pub(super) order: u64,
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) id: CompactString,
    pub(super) cluster: u32,
    pub(super) leaf: u32,
    pub(super) terms: Option<u16>,
    pub(super) gpus: u32,
    /// The job's wait (all its time queued), on its first run; none on the others.
    pub(super) wait: Option<i64>,
    /// What a schedule shows besides, when the runs are recorded.
    pub(super) detail: Option<Box<Detail>>,
}

/// What a recorded run shows besides what its audit reads.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Detail {
    pub(super) user: CompactString,
    pub(super) submit: i64,
    pub(super) attempt: u32,
    pub(super) ended_by: EndedBy,
    pub(super) nodes: Vec<(u32, u32)>,
    pub(super) start_order: u64,
    /// The job it was preempted for, and that job's attempt it made room for.
    pub(super) preempted_for: Option<(CompactString, u32)>,
}

/// What a [`Due`] event is.
pub(super) const END: u8 = 0;
/// The end of a run's protection: the job may be preempted from then on.
pub(super) const PROTECTED_UNTIL: u8 = 1;
/// A job becomes eligible and enters its queue.
pub(super) const ENTER: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Due {
    pub(super) at: i64,
    /// [`END`], [`PROTECTED_UNTIL`] or [`ENTER`].
    pub(super) kind: u8,
    pub(super) job: JobId,
    pub(super) run: u32,
}
