//! Opening the queue: every trigger left in `queue/` after a crash or a
//! restart is taken in, from its own file or from the log, and what does
//! not parse is set aside in `queue/failed/`.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use super::failed::FailedDir;
use super::log::{Log, SyncFile};
use super::state::State;
use super::{Error, Limits, Queue, Trigger, file_name, read_no_follow};
use crate::store::atomic;

impl Queue {
    /// Opens `dir`, taking in every trigger left there (after a crash or a
    /// restart). A file that does not parse is moved to `failed/`; a
    /// symbolic link is left alone and counted.
    pub fn open(dir: &Path, limits: Limits) -> Result<Self, Error> {
        Self::open_with(dir, limits, std::sync::Arc::new(File::sync_data))
    }

    /// [`Queue::open`] with the log's rounds made durable by `sync_file`
    /// (a fault, in tests).
    pub(super) fn open_with(
        dir: &Path,
        limits: Limits,
        sync_file: SyncFile,
    ) -> Result<Self, Error> {
        atomic::create_dir_all_durably(dir)
            .and_then(|()| owners_alone(dir))
            .map_err(|source| Error::Write {
                path: dir.to_owned(),
                source,
            })?;
        let (log, logged) = Log::open(dir, sync_file).map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        let queue = Self {
            dir: dir.to_owned(),
            limits,
            state: Mutex::new(State::default()),
            log: Arc::new(log),
            skipped_symlinks: AtomicU64::new(0),
        };
        match queue.failed_dir_state() {
            FailedDir::Missing => {
                atomic::create_dir_durably(&queue.failed_dir()).map_err(|source| Error::Write {
                    path: queue.failed_dir(),
                    source,
                })?;
            }
            FailedDir::Link => queue.skip_symlink(&queue.failed_dir()),
            FailedDir::Ready | FailedDir::Other => {}
        }
        let entries = fs::read_dir(dir).map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        let mut state = queue.lock();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            // `DirEntry::file_type` does not follow links.
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_symlink() {
                if name != "failed" {
                    queue.skip_symlink(&path);
                }
                continue;
            }
            if !file_type.is_file() {
                continue;
            }
            if name.starts_with(atomic::TEMP_PREFIX) {
                let _ = fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let read = read_no_follow(&path);
            if read.as_ref().is_err_and(|err| {
                err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
            }) {
                // Swapped for a link since the listing.
                queue.skip_symlink(&path);
                continue;
            }
            match read.map_err(|err| err.to_string()).and_then(|bytes| {
                let trigger =
                    serde_json::from_slice::<Trigger>(&bytes).map_err(|err| err.to_string())?;
                Ok((trigger, bytes.len() as u64))
            }) {
                Ok((trigger, bytes)) if name == file_name(trigger.id) => {
                    state.resume(trigger, bytes);
                }
                Ok(_) | Err(_) => {
                    if queue.failed_dir_state() == FailedDir::Ready {
                        tracing::warn!(file.path = %path.display(), "moving an unreadable trigger to queue/failed/");
                        let _ = fs::rename(&path, queue.failed_dir().join(&name));
                    }
                }
            }
        }
        for (trigger, bytes) in logged {
            queue.take_in_logged(&mut state, trigger, bytes);
        }
        if !state.waiting.is_empty() {
            tracing::info!(
                triggers = state.waiting.len(),
                queue.bytes = state.total_bytes,
                "resuming queued capture triggers"
            );
        }
        drop(state);
        Ok(queue)
    }

    /// Takes in a trigger the log held at start. Should its own file hold
    /// it too (a crash while it moved), the copy with more attempts wins,
    /// the file on a tie (the log's compaction writes equal copies).
    fn take_in_logged(&self, state: &mut State, trigger: Trigger, bytes: u64) {
        if let Some(filed) = state.waiting.get(&trigger.id)
            && filed.trigger.attempts >= trigger.attempts
        {
            self.log.forget_later(trigger.id);
            return;
        }
        if state.waiting.contains_key(&trigger.id) {
            self.remove_file(trigger.id);
        }
        state.resume(trigger, bytes);
    }
}

/// Narrows `dir` to its owner, as [`atomic`] makes directories: a queue
/// directory an earlier version made open to others (`0755`) keeps the
/// files in it, written before their modes were narrowed too, from them.
fn owners_alone(dir: &Path) -> io::Result<()> {
    let mode = fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 == 0 {
        return Ok(());
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(mode & atomic::DIR_MODE))
}
