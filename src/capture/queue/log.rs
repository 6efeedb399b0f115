//! The queue's log: accepted triggers are appended to segment files in
//! `queue/` (`<sequence>.log`), and the appends that arrive together share
//! one write and one `fdatasync` (group commit).
//!
//! A record is `[body length: u32 LE][CRC-32 of the body: u32 LE][body]`;
//! the body is a tag byte and either a trigger as JSON (accepted, or
//! accepted again with a new attempt count) or a trigger id (gone:
//! finished, failed or replaced). A caller adds its record to the open
//! round and waits; whoever finds no write running leads: it takes the
//! round, writes and syncs it outside the lock while later callers gather
//! in the next round. A caller is answered only once a sync that began
//! after its record was written has succeeded. A failed write or sync fails
//! every caller of its round, and its segment is abandoned (the next round
//! starts a new one), so no later sync vouches for pages a failed one may
//! have dropped.
//!
//! At start the segments are read in order, each up to its first record
//! that is short or fails its checksum (a torn tail, never acknowledged). A
//! trigger is live from its accepted record until a gone record for it is
//! durable. A segment is deleted once no live trigger's latest record is
//! in it and every older segment is deleted (its gone records may speak
//! for triggers of older segments). The segment rounds are appended to
//! goes too once that holds and no round is being written (the next
//! round starts a new one): a processed trigger's window does not wait on
//! disk for its segment to fill.
//! When more than [`MAX_SEGMENTS`] are kept, the live triggers of the
//! oldest are moved to their own files (`<id>.json`, which the queue reads
//! at start beside the log) so that it can go.
//!
//! The parts: [`segments`] (the files' names, their records' format, and
//! reading them back) and [`upkeep`] (deleting and compacting segments);
//! this module is the writer and its group commit.

mod segments;
#[cfg(test)]
mod tests;
mod upkeep;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::sync::Notify;
use uuid::Uuid;

use super::Trigger;
use crate::blocking;
use crate::store::atomic;
#[cfg(test)]
pub(super) use segments::live_ids;
use segments::{ACCEPTED, GONE, push_record, read_segments, segment_name};
use upkeep::unlive;

const SEGMENT_BYTES: u64 = 4 << 20;
const MAX_SEGMENTS: usize = 8;

/// How a round is made durable: `File::sync_data`, or a fault in tests.
pub type SyncFile = Arc<dyn Fn(&File) -> io::Result<()> + Send + Sync>;

/// The log of one queue directory.
pub struct Log {
    dir: PathBuf,
    writer: Mutex<Writer>,
    round_done: Condvar,
    /// Held while segments are deleted or compacted, so deletions happen
    /// oldest first, each durable before the next.
    upkeep: Mutex<()>,
    sync_file: SyncFile,
    /// A segment takes no new round once it holds this many bytes.
    segment_bytes: u64,
    /// Segments kept before the oldest one's live triggers move to files.
    max_segments: usize,
    syncs: AtomicU64,
}

struct Writer {
    open: Round,
    /// A leader is writing a round now.
    writing: bool,
    active: Option<Active>,
    next_sequence: u64,
    /// Every segment on disk with the live triggers whose latest record is
    /// in it, oldest first.
    segments: BTreeMap<u64, HashSet<Uuid>>,
    /// The segment of every live trigger's latest record.
    homes: HashMap<Uuid, u64>,
}

/// The segment rounds are appended to.
struct Active {
    sequence: u64,
    file: Arc<File>,
    bytes: u64,
}

/// Records gathered for one write.
#[derive(Default)]
struct Round {
    bytes: Vec<u8>,
    accepted: Vec<Uuid>,
    gone: Vec<Uuid>,
    /// A caller waits for it (only "gone" records left by
    /// [`Log::forget_later`] or by a failed round do not).
    waited: bool,
    done: Arc<Done>,
}

/// A round's result, shared by its callers (`io::Error` is not `Clone`).
type Outcome = Result<(), (io::ErrorKind, String)>;

/// A round's result once its leader has it: threads wait for it on the
/// log's `round_done`, tasks on `notify`.
#[derive(Default)]
struct Done {
    outcome: OnceLock<Outcome>,
    notify: Notify,
}

impl Done {
    /// Waits, without holding a thread, for the round's outcome.
    async fn outcome(&self) -> io::Result<()> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a leader that sets the
            // outcome after it still wakes this task.
            notified.as_mut().enable();
            if let Some(outcome) = self.outcome.get() {
                return as_result(outcome);
            }
            notified.await;
        }
    }
}

fn as_result(outcome: &Outcome) -> io::Result<()> {
    outcome
        .clone()
        .map_err(|(kind, message)| io::Error::new(kind, message))
}

impl Log {
    /// Reads the segments in `dir` and returns the live triggers, each with
    /// the length of its JSON, oldest first; segments left with none are
    /// deleted. Segments that are symbolic links are neither read nor
    /// removed (the queue counts them).
    pub fn open(dir: &Path, sync_file: SyncFile) -> io::Result<(Self, Vec<(Trigger, u64)>)> {
        let read = read_segments(dir)?;
        let next_sequence = read.sequences.last().map_or(1, |last| last + 1);
        let mut segments: BTreeMap<u64, HashSet<Uuid>> = read
            .sequences
            .iter()
            .map(|sequence| (*sequence, HashSet::new()))
            .collect();
        let mut homes = HashMap::new();
        for (id, (sequence, _)) in &read.live {
            segments.entry(*sequence).or_default().insert(*id);
            homes.insert(*id, *sequence);
        }
        let mut triggers: Vec<(Trigger, u64)> = read
            .live
            .into_values()
            .map(|(_, trigger)| trigger)
            .collect();
        triggers.sort_unstable_by_key(|(trigger, _)| trigger.id);
        let log = Self {
            dir: dir.to_owned(),
            writer: Mutex::new(Writer {
                open: Round::default(),
                writing: false,
                active: None,
                next_sequence,
                segments,
                homes,
            }),
            round_done: Condvar::new(),
            upkeep: Mutex::new(()),
            sync_file,
            segment_bytes: SEGMENT_BYTES,
            max_segments: MAX_SEGMENTS,
            syncs: AtomicU64::new(0),
        };
        if let Err(err) = log.upkeep() {
            tracing::warn!(error = %err, "could not tidy the queue's log segments");
        }
        Ok((log, triggers))
    }

    /// Appends `json` (a serialized trigger) and returns once it is
    /// durable. A trigger appended again replaces its earlier record.
    /// Blocking.
    pub fn append(&self, id: Uuid, json: &[u8]) -> io::Result<()> {
        let mut writer = self.lock();
        writer.open.push_accepted(id, json);
        let done = writer.open.waited_for();
        self.wait(writer, &done)
    }

    /// [`Self::append`] for a task, which holds no thread while it waits:
    /// the record joins the open round at once; when no round is being
    /// written, this task leads (the writes and syncs run on the blocking
    /// pool, one hand-off for the whole round), and otherwise the round's
    /// leader wakes it.
    pub async fn append_durably(self: &Arc<Self>, id: Uuid, json: &[u8]) -> io::Result<()> {
        let (done, leads) = {
            let mut writer = self.lock();
            writer.open.push_accepted(id, json);
            // Claimed here, under the lock, so no thread starts this round
            // before the blocking pool does.
            let leads = !writer.writing;
            writer.writing = true;
            (writer.open.waited_for(), leads)
        };
        if leads {
            let log = self.clone();
            blocking::run(move || log.lead_claimed()).await;
        }
        done.outcome().await
    }

    /// Records that the trigger `id` is gone and returns once that is
    /// durable; nothing to do for a trigger the log does not hold. Blocking.
    pub fn forget(&self, id: Uuid) -> io::Result<()> {
        let mut writer = self.lock();
        if !writer.homes.contains_key(&id) {
            return Ok(());
        }
        writer.open.push_gone(id);
        let done = writer.open.waited_for();
        self.wait(writer, &done)
    }

    /// Records that the trigger `id` is gone with the next round, without
    /// waiting for it: should a crash lose the record, the trigger is
    /// processed once more, which is harmless.
    pub fn forget_later(&self, id: Uuid) {
        let mut writer = self.lock();
        if writer.homes.contains_key(&id) {
            writer.open.push_gone(id);
        }
    }

    /// Rounds written and synced so far (successful or not).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Segment files kept now.
    #[cfg(test)]
    pub fn segments(&self) -> usize {
        self.lock().segments.len()
    }

    fn wait<'a>(&'a self, mut writer: MutexGuard<'a, Writer>, done: &Done) -> io::Result<()> {
        let mut led = false;
        loop {
            if let Some(outcome) = done.outcome.get() {
                drop(writer);
                if led {
                    self.tidy();
                }
                return as_result(outcome);
            }
            if writer.writing {
                writer = self
                    .round_done
                    .wait(writer)
                    .unwrap_or_else(PoisonError::into_inner);
            } else {
                writer.writing = true;
                writer = self.write_open_round(writer);
                // Tasks that joined the next round meanwhile saw a leader
                // and wait on that round alone, not on `round_done`: with
                // no round being written and no new caller, they would
                // wait forever. A leader writes what is waited for before
                // it gives the claim up, as `lead_claimed` does.
                while writer.open.waited {
                    writer = self.write_open_round(writer);
                }
                writer.writing = false;
                led = true;
            }
        }
    }

    /// Writes the open rounds one after another while a caller waits for
    /// one, for a task that claimed the writing ([`Self::append_durably`]);
    /// then gives the claim up. Blocking.
    fn lead_claimed(&self) {
        loop {
            let mut writer = self.lock();
            if !writer.open.waited {
                writer.writing = false;
                // A thread that gathered into a round meanwhile may lead now.
                self.round_done.notify_all();
                drop(writer);
                // Now that no round is being written, the segment written
                // last may go too.
                self.tidy();
                return;
            }
            drop(self.write_open_round(writer));
            // After every round, as a thread that led one does: under a
            // steady stream of accepts this loop may not end for a long
            // time, and finished segments must not pile up meanwhile.
            self.tidy();
        }
    }

    /// Writes and syncs the open round outside the lock, for a caller that
    /// has claimed the writing (`writing` is set), and wakes its callers.
    fn write_open_round<'a>(
        &'a self,
        mut writer: MutexGuard<'a, Writer>,
    ) -> MutexGuard<'a, Writer> {
        let round = std::mem::take(&mut writer.open);
        let target = match &writer.active {
            Some(active) if active.bytes < self.segment_bytes => {
                Target::Append(active.sequence, active.file.clone())
            }
            _ => {
                writer.next_sequence += 1;
                Target::New(writer.next_sequence - 1)
            }
        };
        drop(writer);
        let new_sequence = match &target {
            Target::New(sequence) => Some(*sequence),
            Target::Append(..) => None,
        };
        let written = self.write_round(target, &round.bytes);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let mut writer = self.lock();
        if let Some(sequence) = new_sequence {
            // Listed even if creating it failed half-way, so it is deleted
            // with the rest.
            writer.segments.entry(sequence).or_default();
        }
        let outcome = match written {
            Ok((sequence, file)) => {
                if new_sequence.is_some() {
                    writer.active = Some(Active {
                        sequence,
                        file,
                        bytes: 0,
                    });
                }
                if let Some(active) = &mut writer.active {
                    active.bytes += round.bytes.len() as u64;
                }
                for id in round.accepted {
                    if let Some(old) = writer.homes.insert(id, sequence) {
                        unlive(&mut writer.segments, old, id);
                    }
                    writer.segments.entry(sequence).or_default().insert(id);
                }
                for id in round.gone {
                    if let Some(old) = writer.homes.remove(&id) {
                        unlive(&mut writer.segments, old, id);
                    }
                }
                Ok(())
            }
            Err(err) => {
                tracing::error!(error = %err, "could not write the capture queue's log; the accepts of this round are refused");
                // A failed sync may have dropped pages that a later one
                // would then call durable: the segment takes no more.
                writer.active = None;
                for id in round.gone {
                    writer.open.push_gone(id);
                }
                Err((err.kind(), err.to_string()))
            }
        };
        let _ = round.done.outcome.set(outcome);
        round.done.notify.notify_waiters();
        self.round_done.notify_all();
        writer
    }

    fn write_round(&self, target: Target, bytes: &[u8]) -> io::Result<(u64, Arc<File>)> {
        let (sequence, file) = match target {
            Target::Append(sequence, file) => (sequence, file),
            Target::New(sequence) => (sequence, Arc::new(self.create_segment(sequence)?)),
        };
        (&*file).write_all(bytes)?;
        (self.sync_file)(&file)?;
        Ok((sequence, file))
    }

    /// A new, empty segment whose directory entry is durable.
    fn create_segment(&self, sequence: u64) -> io::Result<File> {
        // `create_new` never follows a link: one in the way is an error.
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(atomic::FILE_MODE)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits().cast_signed())
            .open(self.dir.join(segment_name(sequence)))?;
        atomic::sync_dir(&self.dir)?;
        Ok(file)
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        // Every section under this lock leaves the state consistent before
        // anything that could panic.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

enum Target {
    Append(u64, Arc<File>),
    New(u64),
}

impl Round {
    fn push_accepted(&mut self, id: Uuid, json: &[u8]) {
        push_record(&mut self.bytes, ACCEPTED, json);
        self.accepted.push(id);
    }

    fn push_gone(&mut self, id: Uuid) {
        push_record(&mut self.bytes, GONE, id.as_bytes());
        self.gone.push(id);
    }

    /// Marks the round as waited for, and returns what to wait on.
    fn waited_for(&mut self) -> Arc<Done> {
        self.waited = true;
        self.done.clone()
    }
}
