//! A request's commit point: the moment a durable change it makes can no
//! longer be called off (a PostgreSQL write sends its `COMMIT`). The
//! request timeout answers `503` only before it, when that `503` means
//! nothing changed: once a write has passed it, the request waits for the
//! write's outcome instead. A write that reaches it after the timeout has
//! answered calls itself off (rolls back).
//!
//! The request's point travels with its task (`tokio::task_local!`) and,
//! through [`crate::blocking::run`], onto the blocking thread that does
//! its work. Work outside a request (capture, the indexer) has none and
//! always passes.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

tokio::task_local! {
    static REQUEST: CommitPoint;
}

thread_local! {
    static BLOCKING: RefCell<Option<CommitPoint>> = const { RefCell::new(None) };
}

const OPEN: u8 = 0;
const PASSED: u8 = 1;
const ANSWERED: u8 = 2;

/// One request's commit point; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct CommitPoint(Arc<AtomicU8>);

impl CommitPoint {
    /// Runs `work` (the request's handling) within this point.
    pub async fn scope<F: Future>(&self, work: F) -> F::Output {
        REQUEST.scope(self.clone(), work).await
    }

    /// The request's time is up: whether it may be answered so (`true`:
    /// no write has passed its commit point, and none will), or must wait
    /// for a write that has.
    pub fn time_out(&self) -> bool {
        match self
            .0
            .compare_exchange(OPEN, ANSWERED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(state) => state == ANSWERED,
        }
    }

    /// The point of the request being handled here, on its task or on
    /// the blocking thread doing its work.
    pub fn current() -> Option<Self> {
        REQUEST
            .try_with(Clone::clone)
            .ok()
            .or_else(|| BLOCKING.with(|point| point.borrow().clone()))
    }

    /// Runs blocking `work` within `point` (taken by [`Self::current`] on
    /// the task that hands the work over).
    pub fn within<T>(point: Option<Self>, work: impl FnOnce() -> T) -> T {
        struct Restore(Option<CommitPoint>);
        impl Drop for Restore {
            fn drop(&mut self) {
                BLOCKING.with(|point| *point.borrow_mut() = self.0.take());
            }
        }
        let _restore = Restore(BLOCKING.with(|current| current.replace(point)));
        work()
    }
}

/// Called just before a change becomes irrevocable: whether it may go on
/// (`false`: its request was answered already, as changing nothing, so
/// the change must be called off).
pub fn pass() -> bool {
    CommitPoint::current().is_none_or(|point| {
        match point
            .0
            .compare_exchange(OPEN, PASSED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(state) => state == PASSED,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timeout_before_the_commit_point_calls_the_write_off() {
        let point = CommitPoint::default();
        assert!(point.time_out());
        assert!(!point.scope(async { pass() }).await);
        assert!(point.time_out(), "still answered as timed out");
    }

    #[tokio::test]
    async fn a_write_past_the_commit_point_is_waited_for() {
        let point = CommitPoint::default();
        let on_blocking_thread = CommitPoint::within(Some(point.clone()), pass);
        assert!(on_blocking_thread);
        assert!(!point.time_out());
        assert!(
            point.scope(async { pass() }).await,
            "a second write passes too"
        );
    }

    #[test]
    fn work_outside_a_request_always_passes() {
        assert!(pass());
        CommitPoint::within(None, || assert!(pass()));
    }
}
