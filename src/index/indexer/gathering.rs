//! The gather step: once a change is pending, the indexer waits up to
//! [`GATHER`] for more to share its batch, unless a full batch is there or
//! a reader waits for the vectors.

use std::time::Instant;

use super::{BATCH_SIZE, GATHER};

/// The gather step: when the pending changes make a batch to embed. Apart
/// from the clock and the store, so it can be tested alone.
#[derive(Debug, Default)]
pub struct Gathering {
    /// When this batch began to gather.
    since: Option<Instant>,
}

/// What to do next with the pending changes.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a, T> {
    /// Nothing is pending.
    Idle,
    /// Embed these now: the oldest pending changes, in order.
    Embed(&'a [T]),
    /// Wait for more changes until then, at the latest.
    Until(Instant),
}

impl Gathering {
    /// What to do at `now` with `pending` (oldest first): embed its oldest
    /// [`BATCH_SIZE`] at once when there are that many, or in a `hurry`
    /// (a reader waits for them), else once the batch has gathered for
    /// [`GATHER`].
    pub fn next<'a, T>(&mut self, pending: &'a [T], now: Instant, hurry: bool) -> Next<'a, T> {
        if pending.is_empty() {
            self.since = None;
            return Next::Idle;
        }
        let since = *self.since.get_or_insert(now);
        if hurry || pending.len() >= BATCH_SIZE || now >= since + GATHER {
            // The next batch gathers anew.
            self.since = None;
            return Next::Embed(&pending[..pending.len().min(BATCH_SIZE)]);
        }
        Next::Until(since + GATHER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_goes_at_once_and_a_trickle_waits_its_gather_window() {
        let start = Instant::now();
        let mut gathering = Gathering::default();
        let nothing: [u32; 0] = [];
        assert_eq!(gathering.next(&nothing, start, false), Next::Idle);

        let trickle = [1, 2, 3];
        assert_eq!(
            gathering.next(&trickle, start, false),
            Next::Until(start + GATHER)
        );
        // The window is the first change's: later arrivals do not extend it.
        let later = start + GATHER / 2;
        assert_eq!(
            gathering.next(&trickle, later, false),
            Next::Until(start + GATHER)
        );
        assert_eq!(
            gathering.next(&trickle, start + GATHER, false),
            Next::Embed(&trickle[..])
        );
        // A reader waiting for the vectors does not wait for the window.
        assert_eq!(
            gathering.next(&trickle, start, false),
            Next::Until(start + GATHER)
        );
        assert_eq!(
            gathering.next(&trickle, start, true),
            Next::Embed(&trickle[..])
        );

        let backlog: Vec<usize> = (0..2 * BATCH_SIZE + 44).collect();
        let now = start + GATHER * 3;
        assert_eq!(
            gathering.next(&backlog, now, false),
            Next::Embed(&backlog[..BATCH_SIZE]),
            "a full batch does not wait"
        );
        assert_eq!(
            gathering.next(&backlog[BATCH_SIZE..], now, false),
            Next::Embed(&backlog[BATCH_SIZE..2 * BATCH_SIZE])
        );
        assert_eq!(
            gathering.next(&backlog[2 * BATCH_SIZE..], now, false),
            Next::Until(now + GATHER),
            "the rest gathers anew"
        );
    }
}
