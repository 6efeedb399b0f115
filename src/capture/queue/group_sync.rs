//! Group commit for directory syncs: many threads that each renamed a file
//! into one directory share a single `fsync` of it.
//!
//! A caller takes a ticket once its rename is done, then waits until a sync
//! that started after its ticket has succeeded. Whoever finds no sync
//! running becomes the leader: it syncs once for every ticket issued so far
//! while later callers queue behind it for the next round. A failed sync
//! fails only its leader; the callers it would have covered wake and try
//! again, so no caller is told its file is durable unless a sync that began
//! after its rename succeeded.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

#[derive(Default)]
pub struct GroupSync {
    rounds: Mutex<Rounds>,
    finished: Condvar,
    syncs: AtomicU64,
}

#[derive(Default)]
struct Rounds {
    /// The last ticket handed out.
    issued: u64,
    /// Every ticket up to this one is durable.
    synced: u64,
    /// A leader is syncing now.
    syncing: bool,
}

impl GroupSync {
    /// Returns once everything the caller did before this call is made
    /// durable by `sync`, which runs at most once per round of callers.
    /// Blocking.
    pub fn wait_durable(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut rounds = self.lock();
        rounds.issued += 1;
        let ticket = rounds.issued;
        loop {
            if rounds.synced >= ticket {
                return Ok(());
            }
            if !rounds.syncing {
                rounds.syncing = true;
                let covers = rounds.issued;
                drop(rounds);
                let result = sync();
                self.syncs.fetch_add(1, Ordering::Relaxed);
                let mut rounds = self.lock();
                rounds.syncing = false;
                if result.is_ok() {
                    rounds.synced = rounds.synced.max(covers);
                }
                self.finished.notify_all();
                return result;
            }
            rounds = self
                .finished
                .wait(rounds)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Syncs run so far (one per round).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Tickets handed out so far.
    #[cfg(test)]
    fn tickets(&self) -> u64 {
        self.lock().issued
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rounds> {
        // Nothing under this lock can panic.
        self.rounds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    use super::*;

    #[test]
    fn callers_that_arrive_during_a_sync_share_the_next_one() {
        let group = Arc::new(GroupSync::default());
        let callers: u64 = 16;
        // The first caller's sync holds until every other caller has taken
        // its ticket, so they all wait for the same next round.
        let syncing = Arc::new(Barrier::new(2));
        let first = {
            let group = group.clone();
            let syncing = syncing.clone();
            std::thread::spawn(move || {
                let inner = group.clone();
                group.wait_durable(move || {
                    syncing.wait();
                    while inner.tickets() < 1 + callers {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Ok(())
                })
            })
        };
        syncing.wait();
        let others: Vec<_> = (0..callers)
            .map(|_| {
                let group = group.clone();
                std::thread::spawn(move || group.wait_durable(|| Ok(())))
            })
            .collect();
        assert!(first.join().unwrap().is_ok());
        for other in others {
            assert!(other.join().unwrap().is_ok());
        }
        assert_eq!(group.syncs(), 2, "one sync for the first, one for the rest");
    }

    #[test]
    fn a_failed_sync_acknowledges_nobody_it_covered() {
        let group = GroupSync::default();
        let failed = group.wait_durable(|| Err(io::Error::other("disk gone")));
        assert!(failed.is_err());
        // The next caller is not covered by the failed round: it syncs itself.
        let mut ran = false;
        group
            .wait_durable(|| {
                ran = true;
                Ok(())
            })
            .unwrap();
        assert!(ran, "a caller after a failed round must sync again");
        assert_eq!(group.syncs(), 2);
    }
}
