//! Injection per agent session: what a retrieval made for a session
//! (`POST /retrieve` with `session_id`) puts in the agent's context.
//!
//! The answer (the per-turn cache's, or fresh) is ranked as for any
//! retrieval; this stage then decides which of its memories go into
//! `injection`: none injected at an earlier turn of the session (it is in
//! the agent's context already), none below the relevance floor, and no
//! more than the session's token budget. Every memory is still returned,
//! and one left out says why (`not_injected`). A retry of a turn (the same
//! turn id) injects again what that turn injected: the agent may have
//! lost the first answer, and the cache answers it the same.
//!
//! A brief (a retrieval for a session with no query and no messages: its
//! start) begins the session anew: what was injected before no longer
//! counts, since an agent starts a session, or starts it again after
//! resuming, compacting or clearing its context, without it.
//!
//! What each session was given is this process's alone (a replica's), and
//! bounded: by entries, a session counting one plus each memory version
//! it holds, the least recently used session going first; by the versions
//! one session holds, its oldest going first; and by idle time.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{self, RetrievalOverrides};
use crate::memory::{MemoryId, MemoryView, SessionId};
use crate::store::Reach;

use super::inject;
use super::outcome::{NotInjected, Outcome, RetrievedMemory};

/// How many memories a brief considers when the request does not say:
/// its token budget, not a count, is what bounds it.
const BRIEF_TOP_K: usize = 50;
/// A brief's weight of `importance` when the request does not set it: a
/// brief is the most important memories first, then the most recent
/// and used (the configured weights of those).
const BRIEF_IMPORTANCE_WEIGHT: f64 = 1.0;
/// The most entries all sessions hold together (a session counts one,
/// each memory version it holds one more): about 15 MiB at most.
const MAX_ENTRIES: usize = 1 << 18;
/// The most memory versions one session holds; past it, its oldest are
/// forgotten (and may be injected again).
const MAX_PER_SESSION: usize = 1024;
/// A session unused for this long is forgotten.
const IDLE: Duration = Duration::from_secs(12 * 60 * 60);

/// What a retrieval for a session asks of its injection; made where the
/// request is parsed.
#[derive(Clone, Debug)]
pub struct Injecting {
    pub session: SessionId,
    /// The session's start: a brief, and the session begins anew.
    pub brief: bool,
    /// The most tokens injected: `inject.session_start_tokens` for a
    /// brief, `inject.prompt_tokens` for a prompt, capped by the
    /// request's own `token_budget`.
    pub token_budget: usize,
    /// The least relevance injected: `inject.min_relevance` for a
    /// prompt; none for a brief, which is ranked without a query.
    pub min_relevance: f64,
}

impl Injecting {
    /// For a retrieval of `session` (a `brief` when it searches for no
    /// text), under `settings`, capped by the request's own `token_budget`.
    pub fn new(
        session: SessionId,
        brief: bool,
        settings: &config::Inject,
        token_budget: Option<usize>,
    ) -> Self {
        let (budget, min_relevance) = if brief {
            (settings.session_start_tokens, 0.0)
        } else {
            (settings.prompt_tokens, settings.min_relevance)
        };
        Self {
            session,
            brief,
            token_budget: token_budget.map_or(budget, |own| own.min(budget)),
            min_relevance,
        }
    }
}

/// What a brief ranks by, where the request leaves it open: up to
/// [`BRIEF_TOP_K`] memories, importance first.
pub fn brief_overrides(overrides: &mut RetrievalOverrides) {
    overrides.top_k.get_or_insert(BRIEF_TOP_K);
    overrides
        .weights
        .importance
        .get_or_insert(BRIEF_IMPORTANCE_WEIGHT);
}

/// One retrieval's place in its session.
pub struct Turn {
    key: Key,
    /// A digest of the turn id.
    turn: u64,
    injecting: Injecting,
}

impl Turn {
    /// Turn `turn_id` of the session `injecting` names, under `pair`.
    pub fn new(pair: Reach, turn_id: &str, injecting: Injecting) -> Self {
        Self {
            key: Key {
                pair,
                session: injecting.session.clone(),
            },
            turn: digest(turn_id),
            injecting,
        }
    }
}

/// A session is one agent session of one (repo, user) reach: the same
/// session id under another pair (another key's, say) is another session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    pair: Reach,
    session: SessionId,
}

/// What each session was given; cheap to share behind the retriever.
#[derive(Default)]
pub struct Sessions {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<Key, Session>,
    /// Every session's key by the tick of its last use: the first is the
    /// least recently used.
    order: BTreeMap<u64, Key>,
    clock: u64,
    /// Sessions plus the memory versions they hold.
    entries: usize,
}

struct Session {
    /// Its tick in [`State::order`].
    used: u64,
    used_at: Instant,
    /// Each memory version injected, with the turn it was first injected at.
    injected: HashMap<MemoryId, u64>,
    /// The same versions, oldest first.
    oldest: VecDeque<MemoryId>,
}

impl Sessions {
    /// Decides what of `outcome` is injected for `turn`'s session, and
    /// remembers it.
    pub fn inject(&self, turn: &Turn, outcome: &mut Outcome) {
        outcome.injection = self.inject_at(turn, &mut outcome.memories, Instant::now());
    }

    /// Sets what of `memories` is injected at `now` and remembers it;
    /// the injection text.
    fn inject_at(&self, turn: &Turn, memories: &mut [RetrievedMemory], now: Instant) -> String {
        // The text is rendered outside the lock: sessions do not wait on
        // each other's token counting.
        let earlier: Vec<bool> = {
            let mut state = self.lock();
            state.expire(now);
            let session = state.touch(&turn.key, now);
            let mut forgotten = 0;
            if turn.injecting.brief {
                forgotten = session.injected.len();
                session.injected.clear();
                session.oldest.clear();
            }
            let earlier = memories
                .iter()
                .map(|retrieved| {
                    session
                        .injected
                        .get(&retrieved.memory.id)
                        .is_some_and(|&at| at != turn.turn)
                })
                .collect();
            state.entries -= forgotten;
            earlier
        };
        let text = select(memories, &earlier, &turn.injecting);
        let injected = memories
            .iter()
            .filter(|retrieved| retrieved.injected)
            .map(|retrieved| retrieved.memory.id);
        self.lock().record(&turn.key, turn.turn, injected, now);
        text
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Poisoned only by a panic inside these short, infallible sections.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Forgets the sessions idle for longer than [`IDLE`].
    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.order.first_entry() {
            let idle = self
                .sessions
                .get(oldest.get())
                .is_none_or(|session| now.saturating_duration_since(session.used_at) >= IDLE);
            if !idle {
                break;
            }
            let key = oldest.remove();
            self.forget(&key);
        }
    }

    /// `key`'s session, made the most recently used (and made, if new).
    fn touch(&mut self, key: &Key, now: Instant) -> &mut Session {
        self.clock += 1;
        let tick = self.clock;
        self.order.insert(tick, key.clone());
        let session = match self.sessions.entry(key.clone()) {
            Entry::Occupied(known) => {
                let session = known.into_mut();
                self.order.remove(&session.used);
                session
            }
            Entry::Vacant(new) => {
                self.entries += 1;
                new.insert(Session {
                    used: tick,
                    used_at: now,
                    injected: HashMap::new(),
                    oldest: VecDeque::new(),
                })
            }
        };
        session.used = tick;
        session.used_at = now;
        session
    }

    /// Remembers that `key`'s session was given `injected` at `turn`,
    /// then keeps within the bounds.
    fn record(
        &mut self,
        key: &Key,
        turn: u64,
        injected: impl Iterator<Item = MemoryId>,
        now: Instant,
    ) {
        let session = self.touch(key, now);
        let mut added = 0;
        let mut dropped = 0;
        for id in injected {
            if session.injected.contains_key(&id) {
                continue;
            }
            session.injected.insert(id, turn);
            session.oldest.push_back(id);
            added += 1;
            if session.oldest.len() > MAX_PER_SESSION
                && let Some(oldest) = session.oldest.pop_front()
            {
                session.injected.remove(&oldest);
                dropped += 1;
            }
        }
        self.entries = self.entries + added - dropped;
        while self.entries > MAX_ENTRIES {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.forget(&oldest);
        }
    }

    /// Drops `key`'s session and what it held (its place in the order is
    /// the caller's to remove).
    fn forget(&mut self, key: &Key) {
        if let Some(session) = self.sessions.remove(key) {
            self.entries -= 1 + session.injected.len();
        }
    }
}

/// Sets each memory's `injected` and `not_injected` for a session and
/// renders the text: a memory injected at an earlier turn is left out,
/// then one below the floor, then, most relevant first, what does not
/// fit the budget. `earlier` says, memory by memory, whether it was
/// injected at an earlier turn.
fn select(memories: &mut [RetrievedMemory], earlier: &[bool], injecting: &Injecting) -> String {
    let mut candidates = Vec::new();
    for (slot, (retrieved, &earlier)) in memories.iter_mut().zip(earlier).enumerate() {
        retrieved.injected = false;
        retrieved.not_injected = if earlier {
            Some(NotInjected::EarlierInSession)
        } else if retrieved.relevance < injecting.min_relevance {
            Some(NotInjected::BelowMinRelevance)
        } else {
            candidates.push(slot);
            None
        };
    }
    let views: Vec<&MemoryView> = candidates
        .iter()
        .map(|&slot| &memories[slot].memory)
        .collect();
    let (text, fits) = inject::render(&views, injecting.token_budget);
    for (slot, fits) in candidates.into_iter().zip(fits) {
        memories[slot].injected = fits;
        memories[slot].not_injected = (!fits).then_some(NotInjected::OverBudget);
    }
    text
}

/// A digest of a turn id: a session remembers turns by it.
fn digest(turn_id: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    turn_id.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::memory::{Category, Memory, Namespace};
    use crate::retrieval::{Reason, Scores};

    fn retrieved(content: &str, relevance: f64) -> RetrievedMemory {
        let forge = Namespace::Repo("forge".parse().unwrap());
        let memory = Memory::example(forge, Category::ProjectConventions, content);
        RetrievedMemory {
            memory: MemoryView::from(&memory),
            relevance,
            scores: Scores::of(&memory, 0.5, 0, Utc::now()),
            reason: Reason::Filter,
            injected: true,
            not_injected: None,
        }
    }

    fn session(id: &str) -> Key {
        Key {
            pair: Reach::new("forge".parse().ok(), "ana".parse().ok()).unwrap(),
            session: id.parse().unwrap(),
        }
    }

    fn prompt(key: &Key, turn_id: &str) -> Turn {
        Turn {
            key: key.clone(),
            turn: digest(turn_id),
            injecting: Injecting {
                session: key.session.clone(),
                brief: false,
                token_budget: 1000,
                min_relevance: 0.5,
            },
        }
    }

    fn brief(key: &Key, turn_id: &str) -> Turn {
        let mut turn = prompt(key, turn_id);
        turn.injecting.brief = true;
        turn.injecting.min_relevance = 0.0;
        turn
    }

    fn why(memories: &[RetrievedMemory]) -> Vec<Option<NotInjected>> {
        memories.iter().map(|memory| memory.not_injected).collect()
    }

    fn injected(memories: &[RetrievedMemory]) -> Vec<bool> {
        memories.iter().map(|memory| memory.injected).collect()
    }

    #[test]
    fn a_memory_injected_at_an_earlier_turn_is_returned_but_not_injected_again() {
        let sessions = Sessions::default();
        let key = session("s-1");
        let now = Instant::now();
        let tabs = retrieved("forge indents Go with tabs.", 0.9);
        let mut first = vec![tabs.clone()];
        let text = sessions.inject_at(&prompt(&key, "t-1"), &mut first, now);
        assert!(text.contains("forge indents Go with tabs."), "{text}");
        assert_eq!(injected(&first), [true]);

        let mut second = vec![tabs, retrieved("forge vendors nothing.", 0.8)];
        let text = sessions.inject_at(&prompt(&key, "t-2"), &mut second, now);
        assert_eq!(injected(&second), [false, true]);
        assert_eq!(why(&second), [Some(NotInjected::EarlierInSession), None]);
        assert!(!text.contains("tabs"), "{text}");
        assert!(text.contains("vendors nothing"), "{text}");
    }

    #[test]
    fn a_retry_of_a_turn_injects_what_it_injected_again() {
        let sessions = Sessions::default();
        let key = session("s-1");
        let now = Instant::now();
        let answer = vec![retrieved("forge indents Go with tabs.", 0.9)];
        let first = sessions.inject_at(&prompt(&key, "t-1"), &mut answer.clone(), now);
        let mut again = answer.clone();
        let retried = sessions.inject_at(&prompt(&key, "t-1"), &mut again, now);
        assert_eq!(retried, first);
        assert_eq!(injected(&again), [true]);
        // Counted once: the next turn still finds it injected earlier.
        let mut next = answer;
        sessions.inject_at(&prompt(&key, "t-2"), &mut next, now);
        assert_eq!(why(&next), [Some(NotInjected::EarlierInSession)]);
        assert_eq!(sessions.lock().entries, 2, "one session, one memory");
    }

    #[test]
    fn the_brief_counts_for_the_session_and_the_next_brief_begins_it_anew() {
        let sessions = Sessions::default();
        let key = session("s-1");
        let now = Instant::now();
        let answer = vec![retrieved("forge indents Go with tabs.", 0.3)];
        let text = sessions.inject_at(&brief(&key, "start"), &mut answer.clone(), now);
        assert!(
            text.contains("tabs"),
            "a brief has no relevance floor: {text}"
        );
        let mut prompted = answer.clone();
        sessions.inject_at(&prompt(&key, "t-1"), &mut prompted, now);
        assert_eq!(why(&prompted), [Some(NotInjected::EarlierInSession)]);

        // The session starts again (after a compaction, say): the brief
        // is injected again, and what the prompts were given is forgotten.
        let mut prompted = vec![retrieved("forge vendors nothing.", 0.9)];
        sessions.inject_at(&prompt(&key, "t-2"), &mut prompted.clone(), now);
        let mut restarted = answer.clone();
        sessions.inject_at(&brief(&key, "start"), &mut restarted, now);
        assert_eq!(injected(&restarted), [true]);
        sessions.inject_at(&prompt(&key, "t-3"), &mut prompted, now);
        assert_eq!(injected(&prompted), [true]);
        assert_eq!(sessions.lock().entries, 3);
    }

    #[test]
    fn a_prompt_injects_above_the_floor_within_its_budget() {
        let sessions = Sessions::default();
        let key = session("s-1");
        let mut turn = prompt(&key, "t-1");
        let mut memories = vec![
            retrieved("forge indents Go with tabs.", 0.9),
            retrieved(&"long ".repeat(300), 0.8),
            retrieved("forge vendors nothing.", 0.7),
            retrieved("forge's logo is blue.", 0.2),
        ];
        turn.injecting.token_budget = 150;
        let text = sessions.inject_at(&turn, &mut memories, Instant::now());
        assert_eq!(injected(&memories), [true, false, true, false]);
        assert_eq!(
            why(&memories),
            [
                None,
                Some(NotInjected::OverBudget),
                None,
                Some(NotInjected::BelowMinRelevance)
            ]
        );
        assert!(crate::tokens::count(&text) <= 150);
    }

    #[test]
    fn the_same_session_id_under_another_pair_is_another_session() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let forge = session("s-1");
        let mut elsewhere = forge.clone();
        elsewhere.pair = Reach::new("atlas".parse().ok(), "ana".parse().ok()).unwrap();
        let answer = vec![retrieved("Shared text.", 0.9)];
        sessions.inject_at(&prompt(&forge, "t-1"), &mut answer.clone(), now);
        let mut other = answer.clone();
        sessions.inject_at(&prompt(&elsewhere, "t-2"), &mut other, now);
        assert_eq!(injected(&other), [true]);
    }

    #[test]
    fn an_idle_session_is_forgotten() {
        let sessions = Sessions::default();
        let key = session("s-1");
        let now = Instant::now();
        let answer = vec![retrieved("forge indents Go with tabs.", 0.9)];
        sessions.inject_at(&prompt(&key, "t-1"), &mut answer.clone(), now);
        let later = now + IDLE;
        let mut again = answer;
        sessions.inject_at(&prompt(&key, "t-2"), &mut again, later);
        assert_eq!(injected(&again), [true]);
        assert_eq!(sessions.lock().sessions.len(), 1);
    }

    #[test]
    fn sessions_stay_within_their_bounds() {
        let now = Instant::now();
        let mut state = State::default();
        let key = session("long");
        let ids: Vec<MemoryId> = (0..MAX_PER_SESSION + 10).map(|_| MemoryId::new()).collect();
        state.record(&key, 1, ids.iter().copied(), now);
        let held = &state.sessions[&key];
        assert_eq!(held.injected.len(), MAX_PER_SESSION);
        assert!(!held.injected.contains_key(&ids[0]), "the oldest went");
        assert!(held.injected.contains_key(&ids[MAX_PER_SESSION + 9]));
        assert_eq!(state.entries, 1 + MAX_PER_SESSION);

        let sessions = MAX_ENTRIES / MAX_PER_SESSION + 5;
        for number in 0..sessions {
            let ids = (0..MAX_PER_SESSION).map(|_| MemoryId::new());
            state.record(&session(&format!("s-{number}")), 1, ids, now);
            assert!(state.entries <= MAX_ENTRIES);
        }
        let counted: usize = state
            .sessions
            .values()
            .map(|session| 1 + session.injected.len())
            .sum();
        assert_eq!(counted, state.entries);
        assert_eq!(state.order.len(), state.sessions.len());
        assert!(
            !state.sessions.contains_key(&key),
            "the least recently used went first"
        );
        let newest = session(&format!("s-{}", sessions - 1));
        assert!(state.sessions.contains_key(&newest));
    }
}
