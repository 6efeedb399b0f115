//! Watching the data directory, so that changes made on disk while Engram
//! runs reach the store, the index and the caches without a restart.
//!
//! A `notify` watcher (inotify on Linux) reports events under the data
//! directory on its own thread; they are gathered into one [`Targets`]
//! (bounded: past [`MAX_GATHERED`] entries, or when the watcher reports an
//! overflow or an error, it becomes "rescan everything"), and the watch
//! task runs a reconciliation pass (`sync`) once they have been quiet for
//! the debounce time, or at the latest [`MAX_DELAY`] after the first.
//! The task owns the watcher and the reconciler; [`spawn`]'s caller owns
//! the task and stops it through the cancellation token. One pass over
//! everything runs at start, for changes made between the load and the
//! watch.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::blocking;
use crate::store::sync::{Reconciler, Targets};
use crate::store::{Error, Fingerprints, Store, atomic};

/// The longest a stream of events defers a pass.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// Entries gathered between passes before they give way to a rescan.
pub const MAX_GATHERED: usize = 65_536;

/// What the watcher's thread hands the watch task.
#[derive(Default)]
struct Inbox {
    gathered: Mutex<Targets>,
    wake: Notify,
}

impl Inbox {
    fn receive(&self, root: &Path, event: notify::Result<notify::Event>) {
        let mut gathered = self.gathered.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Err(err) => {
                tracing::warn!(error = %err, "the data directory watcher failed; rescanning everything");
                *gathered = Targets::everything();
            }
            // Opening and closing files (the reconciler's own reads among
            // them) change nothing; a write also reports a modification.
            Ok(event) if matches!(event.kind, EventKind::Access(_)) => return,
            Ok(event) => {
                if event.need_rescan() {
                    tracing::warn!("the data directory watcher lost events; rescanning everything");
                    *gathered = Targets::everything();
                }
                for path in &event.paths {
                    if let Ok(relative) = path.strip_prefix(root) {
                        gathered.add(relative);
                    }
                }
                if gathered.len() > MAX_GATHERED {
                    *gathered = Targets::everything();
                }
            }
        }
        if !gathered.is_empty() {
            drop(gathered);
            self.wake.notify_one();
        }
    }

    fn take(&self) -> Targets {
        std::mem::take(&mut *self.gathered.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Starts watching the store's data directory (creating `repos/` and
/// `users/` when absent) and the task that takes changes in, which runs
/// until `stop` is cancelled. Passes wait for events to be quiet for
/// `debounce`. The files of `fingerprints` are not read again unless they
/// changed (see [`Store::open`]).
pub fn spawn(
    store: &Store,
    fingerprints: Fingerprints,
    debounce: Duration,
    stop: CancellationToken,
) -> Result<JoinHandle<()>, Error> {
    let root = prepare(store.root())?;
    let inbox = Arc::new(Inbox::default());
    let watcher_error = |source| Error::Watch {
        path: root.clone(),
        source,
    };
    let handler = {
        let inbox = inbox.clone();
        let root = root.clone();
        move |event| inbox.receive(&root, event)
    };
    let mut watcher = notify::RecommendedWatcher::new(
        handler,
        notify::Config::default().with_follow_symlinks(false),
    )
    .map_err(watcher_error)?;
    watcher
        .watch(&root, RecursiveMode::Recursive)
        .map_err(watcher_error)?;
    store.inner.sync.watching.store(true, Ordering::Relaxed);
    *inbox
        .gathered
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Targets::everything();
    inbox.wake.notify_one();
    let task = WatchTask {
        store: store.clone(),
        reconciler: Reconciler::new(store.clone(), fingerprints),
        inbox,
        debounce,
        _watcher: watcher,
    };
    Ok(tokio::spawn(task.run(stop)))
}

/// Creates the data directory and its scope directories when absent (a
/// scope directory that is a link is left alone, and reported), and
/// returns the data directory's real path, which events are named by.
fn prepare(root: &Path) -> Result<PathBuf, Error> {
    let io_error = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Write { path, source }
    };
    atomic::create_dir_all_durably(root).map_err(io_error(root))?;
    for scope_dir in ["repos", "users"] {
        let dir = root.join(scope_dir);
        match fs::symlink_metadata(&dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                atomic::create_dir_durably(&dir).map_err(io_error(&dir))?;
            }
            Err(source) => return Err(Error::Read { path: dir, source }),
            Ok(_) => {}
        }
    }
    fs::canonicalize(root).map_err(|source| Error::Read {
        path: root.to_owned(),
        source,
    })
}

struct WatchTask {
    store: Store,
    reconciler: Reconciler,
    inbox: Arc<Inbox>,
    debounce: Duration,
    /// Kept for as long as the task runs: dropping it stops the watching.
    _watcher: notify::RecommendedWatcher,
}

impl WatchTask {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = self.inbox.wake.notified() => {}
            }
            if !self.settle(&stop).await {
                break;
            }
            let targets = self.inbox.take();
            if targets.is_empty() {
                continue;
            }
            let mut reconciler = self.reconciler;
            self.reconciler = blocking::run(move || {
                reconciler.pass(targets);
                reconciler
            })
            .await;
        }
        self.store
            .inner
            .sync
            .watching
            .store(false, Ordering::Relaxed);
    }

    /// Waits until events have been quiet for the debounce time, or
    /// [`MAX_DELAY`] has passed; false when `stop` came first.
    async fn settle(&self, stop: &CancellationToken) -> bool {
        let latest = tokio::time::Instant::now() + MAX_DELAY;
        loop {
            let quiet =
                tokio::time::sleep_until(latest.min(tokio::time::Instant::now() + self.debounce));
            tokio::select! {
                () = stop.cancelled() => return false,
                () = quiet => return true,
                () = self.inbox.wake.notified() => {
                    if tokio::time::Instant::now() >= latest {
                        return true;
                    }
                }
            }
        }
    }
}
