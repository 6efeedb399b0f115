//! The relevance signals, declared once in [`with_relevance_signals!`]:
//! each one's name (its key under `retrieval.weights` and a request's
//! `weights`), its default weight and the `scores` field its weight
//! applies to. The configuration's [`Weights`], a request's
//! [`WeightsRequest`], their checks and overrides and the bench's
//! similarity-only runs expand the list here; the weighted mean over a
//! memory's scores expands it in `retrieval::rank`, where the scores are.
//! `docs/guides/adding-a-retrieval-signal.md` says how to add one.

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
