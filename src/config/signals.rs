//! The retrieval's signals, each declared once. The relevance signals, in
//! [`with_relevance_signals!`]: each one's name (its key under
//! `retrieval.weights` and a request's `weights`), its default weight and
//! the `scores` field its weight applies to. The configuration's
//! [`Weights`], a request's [`WeightsRequest`], their checks and overrides
//! and the bench's similarity-only runs expand the list here; the weighted
//! mean over a memory's scores expands it in `retrieval::rank`, where the
//! scores are. The match stage's settings, in [`with_match_settings!`]:
//! each one's key under `retrieval`, its default and what 0 does. The
//! configuration's `Retrieval` (field, default, check) expands that list in
//! `config::retrieval`, what the search reads ([`MatchSettings`]) here, and
//! the bench's flags in its `workload`.
//! `docs/guides/adding-a-retrieval-signal.md` says how to add either.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The list of relevance signals, handed to `$then!`: each line is
/// `name = default weight => scores field;`. The one place a signal is
/// declared; each layer that needs the list expands it with a macro of
/// its own.
macro_rules! with_relevance_signals {
    ($then:ident) => {
        $then! {
            /// How well it matches the query (`scores.match`).
            similarity = 0.6 => matched;
            /// How new it is.
            recency = 0.2 => recency;
            /// Its own `importance`.
            importance = 0.15 => importance;
            /// How often it was retrieved before.
            access = 0.05 => access;
        }
    };
}
pub(crate) use with_relevance_signals;

/// Expands the list of signals into the weights' two types and what
/// iterates them.
macro_rules! weights {
    ($($(#[doc = $doc:literal])* $name:ident = $default:literal => $score:ident;)+) => {
        /// How much each factor counts in a memory's relevance; each 0..1,
        /// not all zero. They are normalised by their sum.
        #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields, default)]
        pub struct Weights {
            $($(#[doc = $doc])* pub $name: f64,)+
        }

        impl Default for Weights {
            fn default() -> Self {
                Self { $($name: $default,)+ }
            }
        }

        /// Weights of the relevance factors, each 0..1, not all zero.
        #[derive(Clone, Debug, Default, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct WeightsRequest {
            $(pub $name: Option<f64>,)+
        }

        impl Weights {
            /// Every weight 0 (not a valid setting on its own): what
            /// weights that name only some signals start from.
            pub const ZERO: Self = Self { $($name: 0.0,)+ };

            /// Each weight with its key in the configuration
            /// (`weights.recency`), in the order of the declaration.
            pub fn named(&self) -> [(&'static str, f64); COUNT] {
                [$((concat!("weights.", stringify!($name)), self.$name),)+]
            }

            /// These weights, with those `request` sets replaced.
            #[must_use]
            pub fn overridden(self, request: &WeightsRequest) -> Self {
                Self { $($name: request.$name.unwrap_or(self.$name),)+ }
            }
        }

        /// How many signals there are.
        const COUNT: usize = [$(stringify!($name),)+].len();
    };
}

with_relevance_signals!(weights);

impl Weights {
    /// Ranking by the match alone: the bench's quality runs.
    #[must_use]
    pub fn similarity_only() -> Self {
        Self {
            similarity: 1.0,
            ..Self::ZERO
        }
    }
}

/// The list of the match stage's settings, handed to `$then!`: each line
/// is `name = default, zero: "what 0 does";`, the name being its key
/// under `retrieval`, each 0..1: what the search finds and how it weighs
/// the evidence into a memory's match score (`scores.match`) before
/// ranking. The one place such a setting is
/// declared; each layer that needs the list (the configuration, the
/// search, the bench's flags) expands it with a macro of its own.
#[macro_export]
#[doc(hidden)]
macro_rules! with_match_settings {
    ($then:ident) => {
        $then! {
            /// The words' (BM25) largest share of the match score against
            /// meaning, 0..1, taken where the vector search cannot tell the
            /// closest memories apart (an eighth of it where the best stands
            /// clear); 0 searches by vector only.
            lexical_weight = 0.8, zero: "vector search only";
            /// How much a memory's conversation (the memories that share its
            /// namespace and session) lifts its match by how well their
            /// words match the query together, 0..1; 0 judges each memory
            /// alone, and a memory without a session is never lifted.
            conversation_weight = 0.3, zero: "each memory judged alone";
            /// How much a memory's closest sentence counts against its
            /// whole text, 0..1: a memory of several sentences is also
            /// embedded sentence by sentence, and its closeness to a query
            /// is the larger of its whole text's cosine and this share of
            /// its closest sentence's. 0 embeds whole texts only. A change
            /// takes effect at the next start.
            passage_weight = 0.8, zero: "whole texts only";
            /// How far a query moves toward its best match for a second
            /// search, 0..1 (pseudo-relevance feedback), when the two
            /// closest memories are near-tied: the query's vector plus this
            /// share of the best match's, normalised, searched for beside
            /// the query itself. It finds what is like the answer as well as
            /// like the question (the other trips, when asked in what order
            /// trips were taken); 0 searches once.
            feedback_weight = 0.2, zero: "one search, no feedback";
            /// The least cosine similarity (0..1) at which the vector search
            /// counts a memory as found in a store larger than `top_k` (a
            /// smaller one answers with all of it); below it only the
            /// memory's words can bring it back. Unrelated sentences score
            /// about 0 to 0.1 with MiniLM.
            min_similarity = 0.1, zero: "every cosine counts as found";
        }
    };
}
pub use crate::with_match_settings;

/// Expands the match stage's settings into what the search reads.
macro_rules! match_settings {
    ($($(#[doc = $doc:literal])* $name:ident = $default:literal, zero: $zero:literal;)+) => {
        /// The match stage's settings, from `retrieval` in the
        /// configuration: how the search weighs the evidence.
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct MatchSettings {
            $($(#[doc = $doc])* pub $name: f64,)+
        }

        impl MatchSettings {
            /// Each setting with its key within `retrieval`
            /// (`lexical_weight`), in the order of the declaration.
            pub fn named(&self) -> [(&'static str, f64); MATCH_COUNT] {
                [$((stringify!($name), self.$name),)+]
            }
        }

        /// How many match-stage settings there are.
        const MATCH_COUNT: usize = [$(stringify!($name),)+].len();
    };
}

with_match_settings!(match_settings);
