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
//! durable. A segment is deleted once it is not the one being written, no
//! live trigger's latest record is in it, and every older segment is
//! deleted (its gone records may speak for triggers of older segments).
//! When more than [`MAX_SEGMENTS`] are kept, the live triggers of the
//! oldest are moved to their own files (`<id>.json`, which the queue reads
//! at start beside the log) so that it can go.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::sync::Notify;
use uuid::Uuid;

use super::{Trigger, file_name, read_no_follow, serialize};
use crate::blocking;
use crate::store::atomic;

const SEGMENT_BYTES: u64 = 4 << 20;
const MAX_SEGMENTS: usize = 8;
const HEADER_BYTES: usize = 8;
const ACCEPTED: u8 = 1;
const GONE: u8 = 2;
const SEGMENT_SUFFIX: &str = ".log";

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

enum Record {
    Accepted(Trigger, u64),
    Gone(Uuid),
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
                return;
            }
            drop(self.write_open_round(writer));
            // After every round, as a thread that led one does: under a
            // steady stream of accepts this loop may not end for a long
            // time, and finished segments must not pile up meanwhile.
            self.tidy();
        }
    }

    fn tidy(&self) {
        if let Err(err) = self.upkeep() {
            tracing::warn!(error = %err, "could not tidy the queue's log segments");
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
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits().cast_signed())
            .open(self.dir.join(segment_name(sequence)))?;
        atomic::sync_dir(&self.dir)?;
        Ok(file)
    }

    /// Deletes the segments no live trigger needs, oldest first, and
    /// compacts the oldest while too many are kept. Skipped while another
    /// thread does it.
    fn upkeep(&self) -> io::Result<()> {
        let Ok(_upkeep) = self.upkeep.try_lock() else {
            return Ok(());
        };
        loop {
            let next = {
                let writer = self.lock();
                let active = writer.active.as_ref().map(|active| active.sequence);
                match writer.segments.first_key_value() {
                    Some((sequence, _)) if Some(*sequence) == active => None,
                    Some((sequence, live)) if live.is_empty() => Some((*sequence, None)),
                    Some((sequence, live)) if writer.segments.len() > self.max_segments => {
                        Some((*sequence, Some(live.clone())))
                    }
                    _ => None,
                }
            };
            match next {
                None => return Ok(()),
                Some((sequence, None)) => self.delete_segment(sequence)?,
                Some((sequence, Some(live))) => self.compact(sequence, &live)?,
            }
        }
    }

    fn delete_segment(&self, sequence: u64) -> io::Result<()> {
        let path = self.dir.join(segment_name(sequence));
        if fs::symlink_metadata(&path).is_ok_and(|meta| meta.file_type().is_symlink()) {
            // Never removed; it was never read either.
        } else {
            atomic::remove(&path)?;
        }
        self.lock().segments.remove(&sequence);
        Ok(())
    }

    /// Moves the live triggers of segment `sequence` to their own files,
    /// which leaves it with none.
    fn compact(&self, sequence: u64, live: &HashSet<Uuid>) -> io::Result<()> {
        let bytes = read_no_follow(&self.dir.join(segment_name(sequence)))?;
        let mut latest = HashMap::new();
        for record in decode(&bytes).0 {
            if let Record::Accepted(trigger, _) = record
                && live.contains(&trigger.id)
            {
                latest.insert(trigger.id, trigger);
            }
        }
        for trigger in latest.values() {
            atomic::replace(&self.dir.join(file_name(trigger.id)), &serialize(trigger))?;
        }
        atomic::sync_dir(&self.dir)?;
        let mut moved_on = Vec::new();
        {
            let mut writer = self.lock();
            for id in live {
                if writer.homes.get(id) == Some(&sequence) {
                    // From now on its file holds it; a gone record is not
                    // needed, as the file wins over an equal record at start.
                    writer.homes.remove(id);
                    unlive(&mut writer.segments, sequence, *id);
                } else {
                    moved_on.push(*id);
                }
            }
        }
        // Finished or appended again while its file was written: the file
        // is stale.
        for id in moved_on {
            let _ = fs::remove_file(self.dir.join(file_name(id)));
        }
        tracing::info!(
            segment = sequence,
            triggers = latest.len(),
            "moved the live triggers of the oldest queue log segment to their own files"
        );
        Ok(())
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

fn unlive(segments: &mut BTreeMap<u64, HashSet<Uuid>>, sequence: u64, id: Uuid) {
    if let Some(live) = segments.get_mut(&sequence) {
        live.remove(&id);
    }
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

fn push_record(buffer: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    let length = u32::try_from(payload.len() + 1).expect("a record under 4 GiB");
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[tag]);
    crc.update(payload);
    buffer.extend_from_slice(&length.to_le_bytes());
    buffer.extend_from_slice(&crc.finalize().to_le_bytes());
    buffer.push(tag);
    buffer.extend_from_slice(payload);
}

/// The records of a segment up to its first short or damaged one, and how
/// many bytes that left unread.
fn decode(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut rest = bytes;
    while rest.len() >= HEADER_BYTES {
        let (header, after) = rest.split_at(HEADER_BYTES);
        let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        let Some(body) = after.get(..length).filter(|body| !body.is_empty()) else {
            break;
        };
        if crc32fast::hash(body) != crc {
            break;
        }
        rest = &after[length..];
        match (body[0], &body[1..]) {
            (ACCEPTED, json) => match serde_json::from_slice::<Trigger>(json) {
                Ok(trigger) => records.push(Record::Accepted(trigger, json.len() as u64)),
                Err(err) => {
                    tracing::warn!(error = %err, "skipped a queue log record that is not a trigger");
                }
            },
            (GONE, id) => match Uuid::from_slice(id) {
                Ok(id) => records.push(Record::Gone(id)),
                Err(err) => tracing::warn!(error = %err, "skipped a malformed gone record"),
            },
            (tag, _) => tracing::warn!(tag, "skipped a queue log record of an unknown kind"),
        }
    }
    (records, rest.len())
}

/// What the segments of a directory hold, read without changing anything.
struct Segments {
    /// Every segment's sequence, in order.
    sequences: Vec<u64>,
    /// Live triggers, each with the segment of its latest record.
    live: HashMap<Uuid, (u64, (Trigger, u64))>,
}

fn read_segments(dir: &Path) -> io::Result<Segments> {
    let mut sequences = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(sequence) = name
            .strip_suffix(SEGMENT_SUFFIX)
            .and_then(|stem| stem.parse::<u64>().ok())
        else {
            continue;
        };
        // `DirEntry::file_type` does not follow links.
        if entry.file_type().is_ok_and(|kind| kind.is_file()) {
            sequences.push(sequence);
        }
    }
    sequences.sort_unstable();
    let mut live = HashMap::new();
    let mut kept = Vec::with_capacity(sequences.len());
    for sequence in sequences {
        let path = dir.join(segment_name(sequence));
        let bytes = match read_no_follow(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                // Swapped for a link since the listing: left alone.
                continue;
            }
            Err(err) => return Err(err),
        };
        kept.push(sequence);
        let (records, unread) = decode(&bytes);
        if unread > 0 {
            tracing::warn!(file.path = %path.display(), bytes = unread, "ignoring the torn end of a queue log segment (never acknowledged)");
        }
        for record in records {
            match record {
                Record::Accepted(trigger, bytes) => {
                    live.insert(trigger.id, (sequence, (trigger, bytes)));
                }
                Record::Gone(id) => {
                    live.remove(&id);
                }
            }
        }
    }
    Ok(Segments {
        sequences: kept,
        live,
    })
}

/// The ids of the live triggers in `dir`'s segments, read without changing
/// anything (for tests of what a crash leaves).
#[cfg(test)]
pub fn live_ids(dir: &Path) -> HashSet<Uuid> {
    read_segments(dir)
        .map(|read| read.live.into_keys().collect())
        .unwrap_or_default()
}

fn segment_name(sequence: u64) -> String {
    format!("{sequence:020}{SEGMENT_SUFFIX}")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::sync::atomic::AtomicBool;

    use chrono::Utc;
    use proptest::prelude::*;

    use super::*;
    use crate::capture::queue::{Kind, StoredLine};

    fn trigger(text_bytes: usize) -> Trigger {
        Trigger {
            id: Uuid::now_v7(),
            kind: Kind::Compaction,
            session_id: "s1".parse().unwrap(),
            turn_id: None,
            repo: "forge".parse().unwrap(),
            user: "ana".parse().unwrap(),
            window: vec![StoredLine {
                role: "user".into(),
                text: "x".repeat(text_bytes),
            }],
            accepted_at: Utc::now(),
            attempts: 0,
            last_error: None,
        }
    }

    fn synced() -> SyncFile {
        Arc::new(File::sync_data)
    }

    fn append(log: &Log, trigger: &Trigger) -> io::Result<()> {
        log.append(trigger.id, &serde_json::to_vec(trigger).unwrap())
    }

    fn segment_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
            .collect();
        files.sort();
        files
    }

    /// A disk that keeps only what a successful sync covered: each sync
    /// records how long its file was, and after `crash_at` syncs every
    /// sync fails (the process is as good as dead).
    #[derive(Default)]
    struct Disk {
        durable: Mutex<HashMap<u64, u64>>,
        syncs: AtomicU64,
        crashed: AtomicBool,
    }

    impl Disk {
        fn hook(self: &Arc<Self>, crash_at: u64) -> SyncFile {
            let disk = self.clone();
            Arc::new(move |file: &File| {
                if disk.crashed.load(Ordering::SeqCst)
                    || disk.syncs.fetch_add(1, Ordering::SeqCst) + 1 >= crash_at
                {
                    disk.crashed.store(true, Ordering::SeqCst);
                    return Err(io::Error::other("injected crash before the sync"));
                }
                let meta = file.metadata()?;
                file.sync_data()?;
                disk.durable.lock().unwrap().insert(meta.ino(), meta.len());
                Ok(())
            })
        }

        /// Cuts every segment back to what its last successful sync covered.
        fn lose_what_was_not_synced(&self, dir: &Path) {
            let durable = self.durable.lock().unwrap();
            for path in segment_files(dir) {
                let keep = durable
                    .get(&fs::metadata(&path).unwrap().ino())
                    .copied()
                    .unwrap_or(0);
                OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(keep)
                    .unwrap();
            }
        }
    }

    /// Threads ([`Log::append`]) and tasks ([`Log::append_durably`])
    /// append together, so rounds led by either gather both.
    #[test]
    fn no_append_is_acknowledged_before_a_sync_after_it_succeeded() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        for crash_at in [1, 2, 3, 5] {
            let dir = tempfile::tempdir().unwrap();
            let disk = Arc::new(Disk::default());
            let (log, _) = Log::open(dir.path(), disk.hook(crash_at)).unwrap();
            let log = Arc::new(log);
            let threads: Vec<_> = (0..16)
                .map(|_| {
                    let log = log.clone();
                    std::thread::spawn(move || {
                        (0..8)
                            .filter_map(|_| {
                                let trigger = trigger(200);
                                append(&log, &trigger).ok().map(|()| trigger.id)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let log = log.clone();
                    runtime.spawn(async move {
                        let mut acknowledged = Vec::new();
                        for _ in 0..8 {
                            let trigger = trigger(200);
                            let json = serde_json::to_vec(&trigger).unwrap();
                            if log.append_durably(trigger.id, &json).await.is_ok() {
                                acknowledged.push(trigger.id);
                            }
                        }
                        acknowledged
                    })
                })
                .collect();
            let mut acknowledged: HashSet<Uuid> = threads
                .into_iter()
                .flat_map(|client| client.join().unwrap())
                .collect();
            for task in tasks {
                acknowledged.extend(runtime.block_on(task).unwrap());
            }
            assert!(
                !disk.crashed.load(Ordering::SeqCst) || acknowledged.len() < 32 * 8,
                "the crash refused the appends after it"
            );
            drop(log);
            disk.lose_what_was_not_synced(dir.path());
            let (_, replayed) = Log::open(dir.path(), synced()).unwrap();
            // The failed rounds' segments pile up, so the compaction may
            // have moved the oldest one's triggers to their own files.
            let filed = fs::read_dir(dir.path()).unwrap().filter_map(|entry| {
                let name = entry.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".json")?.parse::<Uuid>().ok()
            });
            let survived: HashSet<Uuid> = replayed
                .iter()
                .map(|(trigger, _)| trigger.id)
                .chain(filed)
                .collect();
            let lost: Vec<_> = acknowledged.difference(&survived).collect();
            assert!(
                lost.is_empty(),
                "crash at sync {crash_at}: acknowledged yet lost: {lost:?}"
            );
        }
    }

    #[test]
    fn a_failed_sync_refuses_its_round_and_the_next_round_starts_a_new_segment() {
        let dir = tempfile::tempdir().unwrap();
        let failures = Arc::new(AtomicU64::new(1));
        let hook: SyncFile = {
            let failures = failures.clone();
            Arc::new(move |file: &File| {
                if failures.load(Ordering::SeqCst) > 0 {
                    failures.fetch_sub(1, Ordering::SeqCst);
                    return Err(io::Error::other("disk gone"));
                }
                file.sync_data()
            })
        };
        let (log, _) = Log::open(dir.path(), hook).unwrap();
        let refused = trigger(10);
        assert!(append(&log, &refused).is_err());
        let kept = trigger(10);
        append(&log, &kept).unwrap();
        assert_eq!(log.syncs(), 2);
        assert_eq!(
            segment_files(dir.path()).len(),
            1,
            "the failed segment is abandoned, and deleted as nothing live is in it"
        );
        assert_eq!(live_ids(dir.path()), HashSet::from([kept.id]));
    }

    #[test]
    fn a_torn_tail_is_ignored_and_what_came_before_it_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), synced()).unwrap();
        let kept: Vec<Trigger> = (0..3).map(|_| trigger(50)).collect();
        for trigger in &kept {
            append(&log, trigger).unwrap();
        }
        let torn = trigger(50);
        append(&log, &torn).unwrap();
        drop(log);
        let segment = &segment_files(dir.path())[0];
        let length = fs::metadata(segment).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(segment)
            .unwrap()
            .set_len(length - 7)
            .unwrap();
        let (log, replayed) = Log::open(dir.path(), synced()).unwrap();
        let ids: Vec<Uuid> = replayed.iter().map(|(trigger, _)| trigger.id).collect();
        assert_eq!(ids, kept.iter().map(|t| t.id).collect::<Vec<_>>());
        let after = trigger(50);
        append(&log, &after).unwrap();
        assert!(live_ids(dir.path()).contains(&after.id), "a new segment");
    }

    #[test]
    fn segments_go_once_their_triggers_are_gone_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), synced()).unwrap();
        log.segment_bytes = 1_000;
        let triggers: Vec<Trigger> = (0..6).map(|_| trigger(1_100)).collect();
        for trigger in &triggers {
            append(&log, trigger).unwrap();
        }
        assert_eq!(log.segments(), 6, "one trigger per segment");
        for trigger in &triggers[1..] {
            log.forget(trigger.id).unwrap();
        }
        assert_eq!(
            log.segments(),
            7,
            "the oldest segment is live, so it and every later one stay (the 7th holds the gone records)"
        );
        log.forget(triggers[0].id).unwrap();
        assert_eq!(log.segments(), 1, "only the one being written is kept");
        assert!(live_ids(dir.path()).is_empty());
        drop(log);
        let (log, replayed) = Log::open(dir.path(), synced()).unwrap();
        assert!(replayed.is_empty());
        assert_eq!(log.segments(), 0, "an empty segment goes at start");
        assert!(segment_files(dir.path()).is_empty());
    }

    #[test]
    fn too_many_segments_move_the_oldest_ones_live_triggers_to_files() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), synced()).unwrap();
        log.segment_bytes = 1_000;
        log.max_segments = 3;
        let pinned = trigger(1_100);
        append(&log, &pinned).unwrap();
        for _ in 0..6 {
            let passing = trigger(1_100);
            append(&log, &passing).unwrap();
            log.forget(passing.id).unwrap();
        }
        assert!(log.segments() <= 3, "{} segments", log.segments());
        let file = dir.path().join(file_name(pinned.id));
        let moved: Trigger = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        assert_eq!(moved, pinned);
        assert!(!live_ids(dir.path()).contains(&pinned.id));
        log.forget(pinned.id).unwrap();
        assert!(file.is_file(), "the file is the queue's to remove");
    }

    proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn decoding_stops_at_damage_and_keeps_what_came_before(cut in 0usize..400, flip in any::<u8>()) {
            let first = trigger(20);
            let mut bytes = Vec::new();
            push_record(&mut bytes, ACCEPTED, &serde_json::to_vec(&first).unwrap());
            let whole = bytes.len();
            push_record(&mut bytes, GONE, first.id.as_bytes());
            push_record(&mut bytes, ACCEPTED, &serde_json::to_vec(&trigger(20)).unwrap());
            let cut = whole + cut % (bytes.len() - whole);
            bytes[cut] ^= flip | 1;
            let (records, _) = decode(&bytes);
            prop_assert!(matches!(records.first(), Some(Record::Accepted(t, _)) if t.id == first.id));
        }
    }
}
