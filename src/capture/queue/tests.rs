//! The queue's tests: accepts under concurrency, coalescing and drop
//! rules, budgets, links, failures and what a restart resumes.

use std::collections::HashMap;
use std::fs;

use super::log::SyncFile;
use super::*;

fn trigger(kind: Kind, session: &str, repo: &str) -> Trigger {
    Trigger {
        id: Uuid::now_v7(),
        kind,
        session_id: session.parse().unwrap(),
        turn_id: None,
        repo: repo.parse().unwrap(),
        user: "ana".parse().unwrap(),
        window: vec![StoredLine {
            role: "user".into(),
            text: "hi".into(),
        }],
        accepted_at: Utc::now(),
        attempts: 0,
        last_error: None,
        commit: None,
        observed_at: None,
        files: Vec::new(),
    }
}

/// Accepts `trigger` from a thread, as a request's task would, its pair
/// not held by a budget.
fn enqueue(queue: &Queue, trigger: Trigger) -> Result<EnqueueStatus, Error> {
    enqueue_held(queue, trigger, false)
}

/// [`enqueue`], its pair held by a daily token budget or not.
fn enqueue_held(queue: &Queue, trigger: Trigger, held: bool) -> Result<EnqueueStatus, Error> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(queue.enqueue(trigger, held))
}

fn limits(capacity: usize) -> Limits {
    Limits {
        capacity,
        session_bytes: 1 << 20,
        total_bytes: 1 << 30,
        min_free_disk_bytes: 0,
    }
}

fn with_text(mut trigger: Trigger, bytes: usize) -> Trigger {
    trigger.window[0].text = "x".repeat(bytes);
    trigger
}

fn files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().path().is_file())
        .count()
}

#[test]
fn concurrent_accepts_are_all_on_disk_and_one_session_keeps_one_turn() {
    let dir = tempfile::tempdir().unwrap();
    let queue = std::sync::Arc::new(Queue::open(dir.path(), limits(64)).unwrap());
    let accept = |trigger: Trigger| {
        let queue = queue.clone();
        std::thread::spawn(move || (trigger.id, enqueue(&queue, trigger).unwrap()))
    };
    let compactions: Vec<_> = (0..16)
        .map(|n| accept(trigger(Kind::Compaction, &format!("c{n}"), "forge")))
        .collect();
    let turns: Vec<_> = (0..16)
        .map(|_| accept(trigger(Kind::Turn, "s1", "forge")))
        .collect();
    for handle in compactions {
        let (id, status) = handle.join().unwrap();
        assert_eq!(status, EnqueueStatus::Queued);
        assert!(
            log::live_ids(dir.path()).contains(&id),
            "acknowledged, so on disk"
        );
    }
    let statuses: Vec<_> = turns.into_iter().map(|h| h.join().unwrap().1).collect();
    assert!(
        statuses.iter().all(|s| *s != EnqueueStatus::Dropped),
        "{statuses:?}"
    );
    assert_eq!(queue.depth(), 17, "16 compactions and one turn of s1");
    assert!(queue.sync_rounds() >= 1);
    assert!(
        queue.sync_rounds() < 32,
        "accepts that arrive together share a sync"
    );
    assert_eq!(queue.bytes(), {
        let state = queue.lock();
        state.sizes.values().map(|(_, bytes)| bytes).sum::<u64>()
    });
}

#[test]
fn turns_coalesce_per_session_and_drop_when_full_but_compactions_never() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path(), limits(2)).unwrap();
    let first = trigger(Kind::Turn, "s1", "r");
    assert_eq!(enqueue(&queue, first).unwrap(), EnqueueStatus::Queued);
    let newer = trigger(Kind::Turn, "s1", "r");
    assert_eq!(
        enqueue(&queue, newer.clone()).unwrap(),
        EnqueueStatus::Coalesced
    );
    assert_eq!(queue.depth(), 1);
    assert_eq!(
        enqueue(&queue, trigger(Kind::Turn, "s2", "r")).unwrap(),
        EnqueueStatus::Queued
    );
    assert_eq!(
        enqueue(&queue, trigger(Kind::Turn, "s3", "r")).unwrap(),
        EnqueueStatus::Dropped
    );
    assert_eq!(
        enqueue(&queue, trigger(Kind::Turn, "s1", "r")).unwrap(),
        EnqueueStatus::Coalesced,
        "a full queue still takes a turn that replaces one"
    );
    for _ in 0..3 {
        assert_eq!(
            enqueue(&queue, trigger(Kind::Compaction, "s9", "r")).unwrap(),
            EnqueueStatus::Queued
        );
    }
    assert_eq!(queue.depth(), 5);
}

#[test]
fn one_trigger_per_pair_at_a_time_and_backoff_is_respected() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path(), limits(10)).unwrap();
    let a1 = trigger(Kind::Compaction, "s1", "a");
    let a2 = trigger(Kind::Compaction, "s2", "a");
    let b1 = trigger(Kind::Compaction, "s3", "b");
    for t in [&a1, &a2, &b1] {
        enqueue(&queue, t.clone()).unwrap();
    }
    let first = queue.take_next(|_| true).unwrap();
    assert_eq!(first.id, a1.id);
    assert_eq!(
        queue.take_next(|_| true).unwrap().id,
        b1.id,
        "pair a is busy"
    );
    assert!(queue.take_next(|_| true).is_none());
    queue.retry_later(
        first,
        "timeout".into(),
        Instant::now() + std::time::Duration::from_secs(60),
    );
    assert_eq!(
        queue.take_next(|_| true).unwrap().id,
        a2.id,
        "the retrying one waits"
    );
    assert!(queue.next_retry_at().is_some());
}

#[test]
fn compactions_past_a_byte_budget_are_refused_until_the_backlog_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        session_bytes: 3_000,
        total_bytes: 5_500,
        ..limits(10)
    };
    let queue = Queue::open(dir.path(), limits).unwrap();
    let big = |session| with_text(trigger(Kind::Compaction, session, "r"), 1_000);
    for _ in 0..2 {
        assert_eq!(enqueue(&queue, big("s1")).unwrap(), EnqueueStatus::Queued);
    }
    let refused = enqueue(&queue, big("s1")).unwrap_err();
    assert!(
        matches!(
            refused,
            Error::OverBudget {
                key: "capture.session_queue_bytes",
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(enqueue(&queue, big("s2")).unwrap(), EnqueueStatus::Queued);
    assert_eq!(enqueue(&queue, big("s3")).unwrap(), EnqueueStatus::Queued);
    let refused = enqueue(&queue, big("s4")).unwrap_err();
    assert!(
        matches!(
            refused,
            Error::OverBudget {
                key: "capture.queue_bytes",
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(
        log::live_ids(dir.path()).len(),
        4,
        "nothing refused was written"
    );
    assert!(queue.bytes() <= 5_500);

    let done = queue.take_next(|_| true).unwrap();
    queue.finish(&done);
    assert_eq!(enqueue(&queue, big("s4")).unwrap(), EnqueueStatus::Queued);
    let alone = with_text(trigger(Kind::Compaction, "s5", "r"), 4_000);
    assert!(matches!(
        enqueue(&queue, alone),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(
        enqueue(&queue, with_text(trigger(Kind::Turn, "s6", "r"), 1_000)).unwrap(),
        EnqueueStatus::Queued,
        "turns keep their own rule"
    );
}

#[test]
fn nothing_is_queued_below_the_disk_floor() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        min_free_disk_bytes: u64::MAX,
        ..limits(10)
    };
    let queue = Queue::open(dir.path(), limits).unwrap();
    for kind in [Kind::Turn, Kind::Compaction] {
        let refused = enqueue(&queue, trigger(kind, "s1", "r")).unwrap_err();
        assert!(matches!(refused, Error::LowSpace(_)), "{refused}");
    }
    assert_eq!((files(dir.path()), queue.depth()), (0, 0));
}

#[test]
fn links_under_the_queue_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let planted = trigger(Kind::Compaction, "s1", "r");
    let target = outside.path().join("target.json");
    fs::write(&target, serialize(&planted)).unwrap();
    let queue_dir = dir.path().join("queue");
    fs::create_dir(&queue_dir).unwrap();
    let link = queue_dir.join(file_name(planted.id));
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let temp_link = queue_dir.join(format!("{}link", atomic::TEMP_PREFIX));
    std::os::unix::fs::symlink(&target, &temp_link).unwrap();
    let failed_target = outside.path().join("failed");
    fs::create_dir(&failed_target).unwrap();
    std::os::unix::fs::symlink(&failed_target, queue_dir.join("failed")).unwrap();

    let queue = Queue::open(&queue_dir, limits(10)).unwrap();
    assert_eq!(queue.depth(), 0, "a linked trigger is not read");
    assert_eq!(queue.skipped_symlinks(), 3);
    assert!(fs::symlink_metadata(&link).is_ok() && fs::symlink_metadata(&temp_link).is_ok());
    assert_eq!(fs::read(&target).unwrap(), serialize(&planted));

    let failing = trigger(Kind::Compaction, "s2", "r");
    enqueue(&queue, failing.clone()).unwrap();
    let taken = queue.take_next(|_| true).unwrap();
    queue.fail(taken, "boom".into());
    assert_eq!(
        fs::read_dir(&failed_target).unwrap().count(),
        0,
        "nothing is written through a linked failed/"
    );
    assert!(
        log::live_ids(&queue_dir).contains(&failing.id),
        "kept for the next start"
    );
    assert_eq!(queue.skipped_symlinks(), 4);
    assert_eq!(
        read_no_follow(&link).unwrap_err().raw_os_error(),
        Some(rustix::io::Errno::LOOP.raw_os_error())
    );
}

#[test]
fn a_failed_trigger_counts_every_attempt_including_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path(), limits(10)).unwrap();
    let queued = trigger(Kind::Compaction, "s1", "r");
    enqueue(&queue, queued.clone()).unwrap();
    for _ in 0..2 {
        let taken = queue.take_next(|_| true).unwrap();
        queue.retry_later(taken, "timeout".into(), Instant::now());
    }
    let taken = queue.take_next(|_| true).unwrap();
    queue.fail(taken, "timeout".into());
    let failed = dir.path().join("failed").join(file_name(queued.id));
    let kept: Trigger = serde_json::from_slice(&fs::read(failed).unwrap()).unwrap();
    assert_eq!(kept.attempts, 3, "three tries, three failed attempts");
    assert_eq!(queue.depth(), 0);
}

#[test]
fn a_failed_trigger_is_listed_and_a_retry_queues_it_again_once() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path(), limits(10)).unwrap();
    let failing = trigger(Kind::Turn, "s1", "forge");
    let hidden = trigger(Kind::Turn, "s2", "secret");
    for queued in [&failing, &hidden] {
        enqueue(&queue, queued.clone()).unwrap();
        let taken = queue.take_next(|_| true).unwrap();
        queue.fail(taken, "classifier said 503".into());
    }
    fs::write(dir.path().join("failed/garbage.json"), "{").unwrap();
    let forge = |pair: &NamespacePair| pair.repo.as_str() == "forge";
    let (listed, more) = queue.failed(10, forge).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(!more);
    assert_eq!(listed[0].id, failing.id);
    assert_eq!(listed[0].attempts, 1);
    assert_eq!(listed[0].last_error.as_deref(), Some("classifier said 503"));
    let (first, more) = queue.failed(1, |_| true).unwrap();
    assert_eq!(first[0].id, hidden.id, "newest first");
    assert!(more, "two triggers, one listed; the garbage is left out");

    assert!(matches!(
        queue.retry_failed(hidden.id, forge),
        Err(Error::NoSuchFailed(_))
    ));
    queue.retry_failed(failing.id, forge).unwrap();
    assert!(
        !dir.path()
            .join("failed")
            .join(file_name(failing.id))
            .exists()
    );
    assert!(log::live_ids(dir.path()).contains(&failing.id));
    assert_eq!(queue.depth(), 1);
    let queued = queue.queued(10, |_| true);
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].state, QueueState::Waiting);
    assert!(matches!(
        queue.retry_failed(failing.id, forge),
        Err(Error::NoSuchFailed(_))
    ));
    let taken = queue.take_next(|_| true).unwrap();
    assert_eq!(
        (taken.id, taken.attempts),
        (failing.id, 0),
        "attempts start over"
    );
    assert_eq!(queue.queued(10, |_| true)[0].state, QueueState::InFlight);
}

#[test]
fn a_restart_resumes_what_was_left_and_sets_aside_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let kept = trigger(Kind::Turn, "s1", "r");
    {
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        enqueue(&queue, kept.clone()).unwrap();
        let done = trigger(Kind::Turn, "s2", "other");
        enqueue(&queue, done).unwrap();
        let taken = queue.take_next(|_| true).unwrap();
        assert_eq!(taken.id, kept.id);
        let other = queue.take_next(|_| true).unwrap();
        queue.finish(&other);
    }
    fs::write(dir.path().join("garbage.json"), "{").unwrap();
    let queue = Queue::open(dir.path(), limits(10)).unwrap();
    assert_eq!(
        queue.take_next(|_| true).unwrap(),
        kept,
        "in flight at the crash: taken again"
    );
    assert!(queue.take_next(|_| true).is_none());
    assert!(dir.path().join("failed/garbage.json").exists());
}

#[test]
fn a_queue_whose_sync_fails_acknowledges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let failing: SyncFile =
        std::sync::Arc::new(|_: &File| Err(io::Error::other("injected sync failure")));
    let queue = Queue::open_with(dir.path(), limits(10), failing).unwrap();
    for kind in [Kind::Turn, Kind::Compaction] {
        let refused = enqueue(&queue, trigger(kind, "s1", "r")).unwrap_err();
        assert!(matches!(refused, Error::Write { .. }), "{refused}");
    }
    assert_eq!((queue.depth(), queue.bytes()), (0, 0));
    assert!(queue.take_next(|_| true).is_none());
}

#[test]
fn finished_triggers_stay_gone_and_retries_keep_their_attempts_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let kept = trigger(Kind::Compaction, "s1", "a");
    {
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        enqueue(&queue, kept.clone()).unwrap();
        for n in 0..3 {
            enqueue(&queue, trigger(Kind::Compaction, &format!("d{n}"), "b")).unwrap();
        }
        let retried = queue.take_next(|_| true).unwrap();
        assert_eq!(retried.id, kept.id);
        let later = Instant::now() + std::time::Duration::from_secs(60);
        queue.retry_later(retried, "timeout".into(), later);
        while let Some(done) = queue.take_next(|_| true) {
            queue.finish(&done);
        }
        assert_eq!(queue.depth(), 1);
    }
    let queue = Queue::open(dir.path(), limits(10)).unwrap();
    assert_eq!(queue.depth(), 1, "the finished ones did not come back");
    let again = queue.take_next(|_| true).unwrap();
    assert_eq!(
        (again.id, again.attempts, again.last_error.as_deref()),
        (kept.id, 1, Some("timeout"))
    );
}

#[test]
fn a_trigger_both_in_its_own_file_and_in_the_log_keeps_the_copy_with_more_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let retried = trigger(Kind::Compaction, "s2", "b");
    let moved = trigger(Kind::Compaction, "s1", "a");
    {
        let queue = Queue::open(dir.path(), limits(10)).unwrap();
        enqueue(&queue, retried.clone()).unwrap();
        enqueue(&queue, moved.clone()).unwrap();
        let taken = queue.take_next(|_| true).unwrap();
        assert_eq!(taken.id, retried.id);
        queue.retry_later(taken, "timeout".into(), Instant::now());
    }
    // As a compaction of the log leaves one, and as a retry of a
    // trigger with its own file leaves one if the crash comes before
    // the file is removed.
    fs::write(dir.path().join(file_name(moved.id)), serialize(&moved)).unwrap();
    fs::write(dir.path().join(file_name(retried.id)), serialize(&retried)).unwrap();
    let queue = Queue::open(dir.path(), limits(10)).unwrap();
    assert_eq!(queue.depth(), 2);
    let listed: HashMap<Uuid, u32> = queue
        .queued(10, |_| true)
        .into_iter()
        .map(|queued| (queued.trigger.id, queued.trigger.attempts))
        .collect();
    assert_eq!(listed, HashMap::from([(moved.id, 0), (retried.id, 1)]));
    assert!(
        !dir.path().join(file_name(retried.id)).exists(),
        "the stale file goes"
    );
    assert!(dir.path().join(file_name(moved.id)).is_file());
}

#[test]
fn each_pair_has_its_own_capacity_and_a_pair_held_by_a_budget_drops_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    let queue = Queue::open(dir.path(), limits(2)).unwrap();
    for session in ["s1", "s2"] {
        assert_eq!(
            enqueue(&queue, trigger(Kind::Turn, session, "r")).unwrap(),
            EnqueueStatus::Queued
        );
    }
    assert_eq!(
        enqueue(&queue, trigger(Kind::Turn, "s3", "r")).unwrap(),
        EnqueueStatus::Dropped,
        "the pair's capacity is full"
    );
    for session in ["s4", "s5"] {
        assert_eq!(
            enqueue(&queue, trigger(Kind::Turn, session, "other")).unwrap(),
            EnqueueStatus::Queued,
            "another pair's turns are not dropped for it"
        );
    }
    for session in ["s6", "s7", "s8"] {
        assert_eq!(
            enqueue_held(&queue, trigger(Kind::Turn, session, "r"), true).unwrap(),
            EnqueueStatus::Queued,
            "held by a budget, the pair's turns wait whatever their number"
        );
    }
    assert_eq!(queue.depth(), 7);
}

#[test]
fn a_turn_is_dropped_once_the_queue_holds_its_byte_budget() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        total_bytes: 3_000,
        ..limits(10)
    };
    let queue = Queue::open(dir.path(), limits).unwrap();
    let big = |session| with_text(trigger(Kind::Turn, session, "r"), 1_000);
    for session in ["s1", "s2", "s3"] {
        assert_eq!(
            enqueue_held(&queue, big(session), true).unwrap(),
            EnqueueStatus::Queued,
            "room left, or the first past it"
        );
    }
    assert!(queue.bytes() >= 3_000);
    assert_eq!(
        enqueue_held(&queue, big("s4"), true).unwrap(),
        EnqueueStatus::Dropped,
        "held or not, a full queue takes no new turn"
    );
    assert_eq!(
        enqueue(&queue, big("s1")).unwrap(),
        EnqueueStatus::Coalesced,
        "one that replaces an older one is still taken"
    );
}
