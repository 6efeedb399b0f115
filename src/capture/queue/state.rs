//! The queue's in-memory state: the triggers waiting, pending (accepted,
//! not durable yet) and in flight, the pairs busy, and the bytes each
//! session's stored triggers take. It mirrors `queue/`; [`Queue`](super::Queue)
//! holds it behind one lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use uuid::Uuid;

use super::summary::TriggerSummary;
use super::{Kind, Trigger};
use crate::memory::SessionId;
use crate::store::NamespacePair;

/// Whose files a byte budget counts: one agent session of one pair.
pub(super) type SessionKey = (NamespacePair, SessionId);

#[derive(Default)]
pub(super) struct State {
    /// Triggers not in flight, oldest first (UUID v7 ids sort by time).
    pub(super) waiting: BTreeMap<Uuid, Waiting>,
    /// Accepted triggers whose files are not durable yet: counted against
    /// the capacity and the budgets, never handed to the worker.
    pub(super) pending: HashMap<Uuid, (SessionKey, Kind)>,
    /// The last acceptance number given (see `Waiting::accepted`).
    pub(super) accepted: u64,
    /// Triggers being processed, as summaries (the worker holds the rest).
    pub(super) in_flight: HashMap<Uuid, TriggerSummary>,
    /// Pairs with a trigger in flight: one at a time per pair.
    pub(super) busy: HashSet<NamespacePair>,
    /// The file size of every trigger waiting or in flight.
    pub(super) sizes: HashMap<Uuid, (SessionKey, u64)>,
    bytes_by_session: HashMap<SessionKey, u64>,
    pub(super) total_bytes: u64,
}

impl State {
    pub(super) fn account(&mut self, trigger: &Trigger, bytes: u64) {
        self.unaccount(trigger.id);
        let key = session_key(trigger);
        *self.bytes_by_session.entry(key.clone()).or_default() += bytes;
        self.total_bytes += bytes;
        self.sizes.insert(trigger.id, (key, bytes));
    }

    pub(super) fn unaccount(&mut self, id: Uuid) {
        let Some((key, bytes)) = self.sizes.remove(&id) else {
            return;
        };
        self.total_bytes -= bytes;
        if let Some(session) = self.bytes_by_session.get_mut(&key) {
            *session -= bytes;
            if *session == 0 {
                self.bytes_by_session.remove(&key);
            }
        }
    }

    /// Takes in a trigger found at start, waiting and ready.
    pub(super) fn resume(&mut self, trigger: Trigger, bytes: u64) {
        self.account(&trigger, bytes);
        self.waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                accepted: 0,
                not_before: None,
            },
        );
    }

    pub(super) fn session_bytes(&self, trigger: &Trigger) -> u64 {
        self.bytes_by_session
            .get(&session_key(trigger))
            .copied()
            .unwrap_or(0)
    }
}

pub(super) fn session_key(trigger: &Trigger) -> SessionKey {
    (trigger.pair(), trigger.session_id.clone())
}

/// Whether `trigger` is of `pair`, compared in place.
pub(super) fn is_of_pair(trigger: &Trigger, pair: &NamespacePair) -> bool {
    trigger.repo == pair.repo && trigger.user == pair.user
}

/// Whether `trigger` is of the session `key`, compared in place: the scans
/// under the queue's lock clone nothing.
pub(super) fn is_of_session(trigger: &Trigger, key: &SessionKey) -> bool {
    let (pair, session) = key;
    trigger.session_id == *session && is_of_pair(trigger, pair)
}

pub(super) struct Waiting {
    pub(super) trigger: Trigger,
    /// In which order the queue took triggers in: a turn accepted later
    /// replaces an earlier one of its session, whichever file is durable
    /// first. Triggers found at start or back from a retry count as 0.
    pub(super) accepted: u64,
    /// Not before this instant (a retry's backoff).
    pub(super) not_before: Option<Instant>,
}
