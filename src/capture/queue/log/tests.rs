//! The log's tests: no append acknowledged before its sync, torn tails,
//! segment deletion and compaction, and decoding any bytes.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::AtomicBool;

use chrono::Utc;
use proptest::prelude::*;

use super::segments::{Record, decode};
use super::*;
use crate::capture::queue::{Kind, StoredLine, file_name};

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
        commit: None,
        observed_at: None,
        files: Vec::new(),
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
    assert_eq!(
        log.segments(),
        0,
        "the one written last goes too: nothing in it is live, and no round is being written"
    );
    assert!(
        segment_files(dir.path()).is_empty(),
        "no window stays on disk"
    );
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

/// A task that joins the next round while a thread leads one is not left
/// waiting when the thread's round is done and nobody else comes.
#[test]
fn a_thread_that_leads_writes_the_round_a_task_joined_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let (syncing, first_sync) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Mutex::new(released);
    let held = AtomicBool::new(true);
    let hold_first: SyncFile = Arc::new(move |file: &File| {
        if held.swap(false, Ordering::SeqCst) {
            syncing.send(()).unwrap();
            released.lock().unwrap().recv().unwrap();
        }
        file.sync_data()
    });
    let (log, _) = Log::open(dir.path(), hold_first).unwrap();
    let log = Arc::new(log);
    let leader = {
        let log = log.clone();
        std::thread::spawn(move || append(&log, &trigger(10)))
    };
    first_sync.recv().unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let joined = trigger(10);
    let task = {
        let log = log.clone();
        let json = serde_json::to_vec(&joined).unwrap();
        runtime.spawn(async move { log.append_durably(joined.id, &json).await })
    };
    while !log.lock().open.waited {
        std::thread::yield_now();
    }
    release.send(()).unwrap();

    leader.join().unwrap().unwrap();
    // A guard against hanging, not a measure of speed.
    let joined = runtime
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(30), task).await });
    joined
        .expect("the task's round was written")
        .unwrap()
        .unwrap();
}
