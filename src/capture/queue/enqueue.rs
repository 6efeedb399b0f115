//! Accepting a trigger: a turn replaces a waiting older turn of its
//! session, or is dropped when its pair's triggers fill their capacity or
//! the queue holds its byte budget ([`admits_turn`], the rule of both
//! queues); a compaction is never dropped but is refused past a byte
//! budget; and what is accepted is durable in the log before the caller
//! hears so.

use std::{fs, io};

use uuid::Uuid;

use super::state::{SessionKey, State, Waiting, is_of_pair, is_of_session, session_key};
use super::{EnqueueStatus, Error, Kind, Limits, Queue, Trigger, file_name, to_json};
use crate::disk;

impl Queue {
    /// Stores `trigger` (or not) by the coalescing, capacity and budget
    /// rules, and returns once it is durable. `held`: a daily token budget
    /// holds the trigger's pair, so its turns wait whatever their number.
    ///
    /// Group commit: the decision is taken under the lock, the trigger is
    /// appended to the log outside it, the accepts that arrive together
    /// share one write and one sync (run on the blocking pool by the first
    /// of them; the others wait without a thread), and only then does the
    /// trigger become visible to the worker and replace an older turn of
    /// its session.
    ///
    /// Not to be dropped half-way: a future dropped between the log's sync
    /// and the bookkeeping after it would leave the trigger durable but
    /// unseen until a restart, and its reservation held. `Capture::enqueue`
    /// runs it on a task of its own for that reason.
    pub async fn enqueue(&self, trigger: Trigger, held: bool) -> Result<EnqueueStatus, Error> {
        let json = to_json(&trigger);
        let Some(accepted) = self.reserve(&trigger, json.len() as u64, held)? else {
            return Ok(EnqueueStatus::Dropped);
        };
        // One `statvfs`: quick enough for an async worker.
        let stored = match disk::ensure_free_space(&self.dir, self.limits.min_free_disk_bytes) {
            Ok(()) => self
                .log
                .append_durably(trigger.id, &json)
                .await
                .map_err(|source| self.write_error(source)),
            Err(err) => Err(Error::from(err)),
        };
        let mut state = self.lock();
        state.pending.remove(&trigger.id);
        if let Err(err) = stored {
            // Not acknowledged, so not kept: a record a crash keeps anyway
            // is processed once more at the next start, which is harmless.
            state.unaccount(trigger.id);
            return Err(err);
        }
        let key = session_key(&trigger);
        let same_session = |waiting: &Waiting| {
            trigger.kind == Kind::Turn
                && waiting.trigger.kind == Kind::Turn
                && is_of_session(&waiting.trigger, &key)
        };
        if state
            .waiting
            .values()
            .any(|waiting| same_session(waiting) && waiting.accepted > accepted)
        {
            // A later turn of the session got there first: its window holds
            // this one's.
            state.unaccount(trigger.id);
            drop(state);
            self.log.forget_later(trigger.id);
            return Ok(EnqueueStatus::Coalesced);
        }
        let replaced: Vec<Uuid> = state
            .waiting
            .iter()
            .filter(|(_, waiting)| same_session(waiting))
            .map(|(id, _)| *id)
            .collect();
        for old in &replaced {
            state.waiting.remove(old);
            state.unaccount(*old);
        }
        state.waiting.insert(
            trigger.id,
            Waiting {
                trigger,
                accepted,
                not_before: None,
            },
        );
        drop(state);
        for old in &replaced {
            self.forget_replaced(*old);
        }
        Ok(if replaced.is_empty() {
            EnqueueStatus::Queued
        } else {
            EnqueueStatus::Coalesced
        })
    }

    /// Takes `trigger` into account as pending, or refuses it: `None` is a
    /// turn dropped by [`admits_turn`]; a compaction past a budget is an
    /// error.
    fn reserve(&self, trigger: &Trigger, bytes: u64, held: bool) -> Result<Option<u64>, Error> {
        let mut state = self.lock();
        let key = session_key(trigger);
        let replaces = trigger.kind == Kind::Turn
            && (state.waiting.values().any(|waiting| {
                waiting.trigger.kind == Kind::Turn && is_of_session(&waiting.trigger, &key)
            }) || state
                .pending
                .values()
                .any(|(pending, kind)| *kind == Kind::Turn && *pending == key));
        if !replaces && trigger.kind == Kind::Turn {
            let (pair, _) = &key;
            let of_pair = |(other, _): &SessionKey| other == pair;
            let pair_waiting = state
                .waiting
                .values()
                .filter(|waiting| is_of_pair(&waiting.trigger, pair))
                .count()
                + state
                    .pending
                    .values()
                    .filter(|(key, _)| of_pair(key))
                    .count();
            if !admits_turn(self.limits, trigger, pair_waiting, state.total_bytes, held) {
                return Ok(None);
            }
        }
        if trigger.kind == Kind::Compaction {
            self.check_budgets(&state, trigger, bytes)?;
        }
        state.account(trigger, bytes);
        state.pending.insert(trigger.id, (key, trigger.kind));
        state.accepted += 1;
        Ok(Some(state.accepted))
    }

    /// Forgets a trigger another one stands in for, without waiting for a
    /// sync: should a crash bring it back, it is processed once more and
    /// its memories are found already written.
    fn forget_replaced(&self, id: Uuid) {
        self.log.forget_later(id);
        let path = self.dir.join(file_name(id));
        if let Err(err) = fs::remove_file(&path)
            && err.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(file.path = %path.display(), error = %err, "could not remove a coalesced trigger");
        }
    }

    /// A compaction may not take its session's files, or the queue's, past
    /// their budget.
    pub(super) fn check_budgets(
        &self,
        state: &State,
        trigger: &Trigger,
        trigger_bytes: u64,
    ) -> Result<(), Error> {
        check_budgets(
            self.limits,
            trigger_bytes,
            state.session_bytes(trigger),
            state.total_bytes,
        )
    }
}

/// Whether a turn that replaces none may be queued beside the
/// `pair_waiting` triggers its pair has waiting (in flight ones aside) and
/// the `total_bytes` the whole queue holds: the one drop rule of both of
/// capture's queues. A turn is dropped when its pair's triggers fill
/// `capture.queue_capacity` (a team's pairs each have their own; and a
/// pair a daily token budget holds (`held`) is not counted against it,
/// as its triggers wait anyway), or when the queue already holds
/// `capture.queue_bytes`, the bound of everything queued. Each drop is
/// logged at `warn`, naming its reason.
pub(crate) fn admits_turn(
    limits: Limits,
    trigger: &Trigger,
    pair_waiting: usize,
    total_bytes: u64,
    held: bool,
) -> bool {
    let full = if total_bytes >= limits.total_bytes {
        Some(("capture.queue_bytes", total_bytes, limits.total_bytes))
    } else if !held && pair_waiting >= limits.capacity {
        Some((
            "capture.queue_capacity",
            pair_waiting as u64,
            limits.capacity as u64,
        ))
    } else {
        None
    };
    let Some((key, queued, limit)) = full else {
        return true;
    };
    tracing::warn!(
        trigger.id = %trigger.id,
        repo = %trigger.repo,
        user = %trigger.user,
        session_id = %trigger.session_id,
        config.key = key,
        queued,
        limit,
        "dropped a turn trigger: the queue holds {queued} against `{key}` of {limit}; the session's next turn brings its messages again"
    );
    false
}

/// Whether a compaction of `trigger_bytes` fits beside the `session_bytes`
/// its session has queued and the `total_bytes` the whole queue holds: the
/// one rule for both of capture's queues.
pub(crate) fn check_budgets(
    limits: Limits,
    trigger_bytes: u64,
    session_bytes: u64,
    total_bytes: u64,
) -> Result<(), Error> {
    if trigger_bytes > limits.session_bytes {
        return Err(Error::TooLarge {
            trigger_bytes,
            budget_bytes: limits.session_bytes,
        });
    }
    let budgets = [
        (
            "for this session",
            "capture.session_queue_bytes",
            session_bytes,
            limits.session_bytes,
        ),
        (
            "in all",
            "capture.queue_bytes",
            total_bytes,
            limits.total_bytes,
        ),
    ];
    for (whose, key, queued_bytes, budget_bytes) in budgets {
        if queued_bytes + trigger_bytes > budget_bytes {
            return Err(Error::OverBudget {
                whose,
                key,
                queued_bytes,
                trigger_bytes,
                budget_bytes,
            });
        }
    }
    Ok(())
}
