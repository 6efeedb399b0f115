//! The relevance signals, declared once: each one's name (its key under
//! `retrieval.weights` and a request's `weights`), its default weight and
//! the [`Scores`] field its weight applies to. The configuration's
//! [`Weights`], a request's [`WeightsRequest`], their checks and
//! overrides, the weighted mean ([`Scores::relevance`]) and the bench's
//! similarity-only runs all come from `relevance_signals!`'s one call;
//! a signal's own score is computed in `Scores::of` ([`super::rank`]).
//! `docs/guides/adding-a-retrieval-signal.md` says how to add one.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::outcome::Scores;

/// Expands the list of signals into the weights' two types and what
/// iterates them. Each line is `name = default weight => scores field`.
macro_rules! relevance_signals {
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

            /// Each weight with the score it applies to.
            fn applied_to(&self, scores: &Scores) -> [(f64, f64); COUNT] {
                [$((self.$name, scores.$score),)+]
            }
        }

        /// How many signals there are.
        const COUNT: usize = [$(stringify!($name),)+].len();
    };
}

relevance_signals! {
    /// How well it matches the query (`scores.match`).
    similarity = 0.6 => matched;
    /// How new it is.
    recency = 0.2 => recency;
    /// Its own `importance`.
    importance = 0.15 => importance;
    /// How often it was retrieved before.
    access = 0.05 => access;
}

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

impl Scores {
    /// The weighted mean of the scores, 0..1. `weights` are checked (0..1,
    /// not all zero) where they enter; a retrieval without a query drops the
    /// similarity weight, and with nothing left, recency alone ranks.
    pub fn relevance(&self, weights: &Weights) -> f64 {
        let applied = weights.applied_to(self);
        let total: f64 = applied.iter().map(|(weight, _)| weight).sum();
        if total == 0.0 {
            return self.recency;
        }
        let sum: f64 = applied.iter().map(|(weight, score)| weight * score).sum();
        (sum / total).clamp(0.0, 1.0)
    }
}
