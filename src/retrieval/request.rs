//! A retrieval as the retriever takes it: parsed and checked by the route
//! (or the MCP tool), with the configured settings already overridden.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::config;
use crate::memory::{Category, Confidence, Memory, MemoryId, Scope};
use crate::store::{Reach, Store};
use crate::window::Line;

use super::session::{Injecting, Turn};
use super::time_words::TimeInQuestion;

/// A parsed, validated retrieval.
#[derive(Clone, Debug)]
pub struct Request {
    pub turn_id: String,
    /// The namespaces searched: the pair's, or one of them (see `Reach`).
    pub pair: Reach,
    pub input: Input,
    /// The configured defaults with the request's overrides, checked.
    pub tuning: config::Tuning,
    pub filters: Filters,
    pub exclude_ids: HashSet<MemoryId>,
    pub use_cache: bool,
    pub expand_query: bool,
    /// Text whose similarity lifts related memories.
    pub context_boost: Option<String>,
    /// Answer as of this moment: what was observed after it is left out,
    /// each chain is answered by its version of then, and recency is
    /// measured from it.
    pub as_of: Option<DateTime<Utc>>,
    /// The time the query or the latest user message names, resolved
    /// against `as_of` or the moment the request came.
    pub time: Option<TimeInQuestion>,
    /// The agent session it is made for: what it injects is then decided
    /// per session ([`super::session`]).
    pub session: Option<Injecting>,
}

/// What to search for.
#[derive(Clone, Debug)]
pub enum Input {
    /// Search for this text directly.
    Query(String),
    /// A conversation window: HyDE when a retrieval model is configured,
    /// else its latest user message. It holds at least one user line.
    Window(Vec<Line>),
    /// No text: rank what the filters admit by recency, importance and use.
    Filters,
}

/// Which memories may be returned at all.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    pub scope: Option<Scope>,
    /// Any of these; `None` means every category.
    pub categories: Option<Vec<Category>>,
    /// Only confirmed memories (a session's brief).
    pub confirmed_only: bool,
}

impl Filters {
    /// Whether the filters admit `memory`; a memory whose code is gone or
    /// that was let go is never admitted (it is never injected).
    pub(super) fn admit(&self, memory: &Memory) -> bool {
        memory.lifecycle.is_injectable()
            && self
                .scope
                .is_none_or(|scope| memory.namespace.scope() == scope)
            && self.admit_category(memory.category)
            && (!self.confirmed_only || memory.lifecycle.confidence == Confidence::Confirmed)
    }

    pub(super) fn admit_category(&self, category: Category) -> bool {
        self.categories
            .as_ref()
            .is_none_or(|categories| categories.contains(&category))
    }
}

impl Request {
    /// Its turn of the session it is made for, if it is.
    pub fn session_turn(&self) -> Option<Turn> {
        let injecting = self.session.clone()?;
        Some(Turn::new(self.pair.clone(), &self.turn_id, injecting))
    }

    /// The moment the answer is for: `as_of`, else now.
    pub fn moment(&self) -> DateTime<Utc> {
        self.as_of.unwrap_or_else(Utc::now)
    }

    /// The version of `id`'s chain that answers for it: the head, or with
    /// `as_of` the version that stood then (none when the chain began
    /// after it). A question about a past span ("last March") is answered
    /// by the version that stood at its end, when the chain had begun.
    pub(super) fn version_of(&self, store: &Store, id: MemoryId) -> Option<Arc<Memory>> {
        if let Some(end) = self.past_window_end()
            && let Some(then) = store.version_at(id, end)
        {
            return Some(then);
        }
        match self.as_of {
            None => store.head_of(id),
            Some(at) => store.version_at(id, at),
        }
    }

    /// The end of the span the question names, when it lies in the past.
    fn past_window_end(&self) -> Option<DateTime<Utc>> {
        let window = self.time.as_ref()?.window.as_ref()?;
        (window.end < self.moment()).then_some(window.end)
    }

    /// The version that answers for a match on version `matched`: that of
    /// [`Self::version_of`], unless `matched` itself was observed after
    /// `as_of` (what was said later is no evidence of what stood then).
    pub(super) fn answer_for_match(&self, store: &Store, matched: MemoryId) -> Option<Arc<Memory>> {
        if self.as_of.is_some() && !self.observed_by_then(&*store.get(matched)?) {
            return None;
        }
        self.version_of(store, matched)
    }

    /// Whether `memory` was observed by the moment the answer is for.
    pub(super) fn observed_by_then(&self, memory: &Memory) -> bool {
        self.as_of.is_none_or(|at| memory.observed() <= at)
    }

    /// A digest of everything the answer depends on besides the turn and
    /// the namespaces: the input, the settings, the filters, the excluded
    /// ids and the options. Two requests of one turn share a cached answer
    /// only when their fingerprints are equal.
    pub fn fingerprint(&self) -> [u8; 32] {
        // Destructured so that a new field has to be placed on one side.
        let Self {
            turn_id: _,
            pair: _,
            use_cache: _,
            input,
            tuning,
            filters,
            exclude_ids,
            expand_query,
            context_boost,
            as_of,
            // Read from the input, against `as_of` or now.
            time: _,
            // The answer the cache keeps is every session's: what one
            // session injects of it is decided after the cache.
            session: _,
        } = self;
        let mut excluded: Vec<&MemoryId> = exclude_ids.iter().collect();
        excluded.sort_unstable();
        // `Debug` is exact for every part (floats print their shortest
        // round-trip form) and the digest lives only in this process's
        // cache, so its wording never has to be stable across builds.
        let described = format!(
            "{input:?}\n{tuning:?}\n{filters:?}\n{excluded:?}\n{expand_query}\n{context_boost:?}\n{as_of:?}"
        );
        Sha256::digest(described.as_bytes()).into()
    }
}
