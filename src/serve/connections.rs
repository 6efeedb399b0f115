//! The open connections: a bounded registry of which are busy and which
//! are idle, and since when.
//!
//! Every served connection holds a [`Lease`] until it closes. At the cap a
//! new connection displaces the one idle the longest (it has no request in
//! flight, so closing it loses nothing); with every connection busy the new
//! one is refused. A request starts only on a connection not marked
//! closing, and a connection is marked closing only while idle, so closing
//! never cuts a request off. Lock order: the registry, then a connection.
//! [`Traffic`] reads the registry, so that a test can await a state (a
//! request in flight, a stop under way) instead of sleeping for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// The connections open now, at most `cap`.
pub struct Connections {
    cap: usize,
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    /// Set once the server stops accepting, to let the open requests finish.
    draining: AtomicBool,
}

impl Connections {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            draining: AtomicBool::new(false),
        })
    }

    /// A read-only view of these connections.
    pub fn traffic(self: &Arc<Self>) -> Traffic {
        Traffic(self.clone())
    }

    /// Marks the server as no longer accepting: it waits for the requests
    /// in flight.
    pub fn begin_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Room for one more connection, displacing the longest-idle one at
    /// the cap; `None` when every open connection is busy.
    pub fn admit(self: &Arc<Self>) -> Option<Lease> {
        let mut open = self.lock();
        if open.len() >= self.cap && !Self::close_longest_idle(&mut open) {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection {
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: Instant::now(),
                closing: false,
            }),
            closing: CancellationToken::new(),
        });
        open.insert(id, connection.clone());
        Some(Lease {
            id,
            connection,
            connections: self.clone(),
        })
    }

    /// Closes the connection idle the longest, to free its descriptor;
    /// whether there was one.
    pub fn close_longest_idle_now(&self) -> bool {
        Self::close_longest_idle(&mut self.lock())
    }

    fn close_longest_idle(open: &mut HashMap<u64, Arc<Connection>>) -> bool {
        let longest_idle = open
            .iter()
            .filter_map(|(id, connection)| connection.idle_since().map(|since| (since, *id)))
            .min();
        let Some((_, id)) = longest_idle else {
            return false;
        };
        let closed = open
            .get(&id)
            .is_some_and(|connection| connection.close_if_idle());
        if closed {
            open.remove(&id);
        }
        closed
    }

    /// How many connections are open.
    pub fn open_count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Connection>>> {
        // Poisoned only if a panic struck while holding it; the map is
        // still consistent (every change is one insert or remove).
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What a server's connections are doing, read-only; cheap to clone.
#[derive(Clone)]
pub struct Traffic(Arc<Connections>);

impl Traffic {
    /// How many connections are open.
    pub fn open_connections(&self) -> usize {
        self.0.open_count()
    }

    /// How many requests are in flight (from their headers' arrival until
    /// their response is sent), over every connection.
    pub fn requests_in_flight(&self) -> usize {
        self.0
            .lock()
            .values()
            .map(|connection| connection.lock().in_flight)
            .sum()
    }

    /// Whether the server has stopped accepting and is waiting for the
    /// requests in flight.
    pub fn draining(&self) -> bool {
        self.0.draining.load(Ordering::Acquire)
    }
}

/// One connection's place in the registry, given back when dropped.
pub struct Lease {
    id: u64,
    connection: Arc<Connection>,
    connections: Arc<Connections>,
}

impl Lease {
    pub fn connection(&self) -> &Arc<Connection> {
        &self.connection
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.connections.lock().remove(&self.id);
    }
}

/// One connection: its requests in flight and when it last fell idle.
pub struct Connection {
    state: Mutex<State>,
    /// Cancelled once the connection is to close (idle too long, or
    /// displaced at the cap).
    closing: CancellationToken,
}

struct State {
    in_flight: usize,
    idle_since: Instant,
    closing: bool,
}

/// What an idle check decided.
pub enum IdleCheck {
    /// Idle for the whole timeout: it is now closing.
    Close,
    /// Check again then.
    At(Instant),
}

impl Connection {
    /// Marks a request in flight until the guard drops; `None` if the
    /// connection is closing and must take no new work.
    pub fn begin_request(self: &Arc<Self>) -> Option<RequestGuard> {
        let mut state = self.lock();
        if state.closing {
            return None;
        }
        state.in_flight += 1;
        Some(RequestGuard(self.clone()))
    }

    /// Closes the connection if it has been idle for `timeout`; otherwise
    /// says when that could next be true.
    pub fn check_idle(&self, timeout: Duration) -> IdleCheck {
        let mut state = self.lock();
        let now = Instant::now();
        if state.in_flight > 0 {
            return IdleCheck::At(now + timeout);
        }
        let due = state.idle_since + timeout;
        if due > now {
            return IdleCheck::At(due);
        }
        state.closing = true;
        self.closing.cancel();
        IdleCheck::Close
    }

    /// Completes once the connection is to close.
    pub fn closing(&self) -> WaitForCancellationFuture<'_> {
        self.closing.cancelled()
    }

    fn idle_since(&self) -> Option<Instant> {
        let state = self.lock();
        (state.in_flight == 0 && !state.closing).then_some(state.idle_since)
    }

    fn close_if_idle(&self) -> bool {
        let mut state = self.lock();
        if state.in_flight > 0 {
            return false;
        }
        state.closing = true;
        self.closing.cancel();
        true
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is a single field update: consistent even if poisoned.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A request in flight on a connection; dropped when its response has been
/// written (or abandoned), which makes the connection idle again.
pub struct RequestGuard(Arc<Connection>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight -= 1;
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let connections = Connections::new(2);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        let busy = second.connection().begin_request().unwrap();
        let third = connections.admit().expect("the idle one is displaced");
        assert!(first.connection().closing.is_cancelled());
        assert!(first.connection().begin_request().is_none());
        assert_eq!(connections.open_count(), 2);

        let _busy_too = third.connection().begin_request().unwrap();
        assert_eq!(connections.traffic().requests_in_flight(), 2);
        assert!(connections.admit().is_none(), "every connection is busy");
        drop(busy);
        assert!(connections.admit().is_some());
    }

    #[test]
    fn a_connection_closes_once_idle_for_the_timeout_and_never_while_busy() {
        let connections = Connections::new(4);
        let lease = connections.admit().unwrap();
        let connection = lease.connection();
        let hour = Duration::from_secs(3600);
        assert!(matches!(connection.check_idle(hour), IdleCheck::At(_)));

        let request = connection.begin_request().unwrap();
        assert!(matches!(
            connection.check_idle(Duration::ZERO),
            IdleCheck::At(_)
        ));
        drop(request);
        assert!(matches!(connection.check_idle(hour), IdleCheck::At(_)));
        assert!(matches!(
            connection.check_idle(Duration::ZERO),
            IdleCheck::Close
        ));
        assert!(connection.begin_request().is_none());
        drop(lease);
        assert_eq!(connections.open_count(), 0);
    }
}
