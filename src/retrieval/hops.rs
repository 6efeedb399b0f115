//! Graph hops: from the ranked results, follow `related` edges in both
//! directions, up to `hop_depth` steps, to memories the request may see.
//!
//! Never into another namespace, never twice to one memory (so never in a
//! loop), and always to the current version of a chain. A memory reached
//! this way ranks below the one it was reached from.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::index::cosine;
use crate::memory::{Memory, MemoryId, Relationship};
use crate::store::Store;

use super::access::AccessCounts;
use super::outcome::{Direction, Reason, Scores};
use super::rank::{Boost, Ranked, Standing};

/// Each hop keeps this share of the relevance of the memory it starts from.
pub const HOP_DECAY: f64 = 0.8;

/// A memory reached by a hop.
#[derive(Clone, Debug)]
pub struct Hop {
    pub memory: Arc<Memory>,
    pub from: MemoryId,
    pub relationship: Relationship,
    pub direction: Direction,
    pub relevance: f64,
}

/// The memories `depth` hops or fewer from `seeds` (id and relevance), in
/// the order found, each once. `visible` says which memories the request
/// may get (its namespaces, filters and exclusions); `seeds` themselves are
/// never returned again.
pub fn follow(
    store: &Store,
    seeds: &[(MemoryId, f64)],
    depth: usize,
    visible: impl Fn(&Memory) -> bool,
) -> Vec<Hop> {
    let mut seen: HashSet<MemoryId> = seeds.iter().map(|(id, _)| *id).collect();
    let mut frontier: Vec<(MemoryId, f64)> = seeds.to_vec();
    let mut found = Vec::new();
    for _ in 0..depth {
        let mut next = Vec::new();
        for (from, relevance) in frontier {
            let edges = store.edges(from);
            let neighbours = edges
                .outgoing
                .iter()
                .map(|edge| (edge, Direction::Outgoing))
                .chain(
                    edges
                        .incoming
                        .iter()
                        .map(|edge| (edge, Direction::Incoming)),
                );
            for (edge, direction) in neighbours {
                let Some(head) = store.head_of(edge.id) else {
                    continue;
                };
                if !visible(&head) || !seen.insert(head.id) {
                    continue;
                }
                let relevance = relevance * HOP_DECAY;
                next.push((head.id, relevance));
                found.push(Hop {
                    memory: head,
                    from,
                    relationship: edge.relationship,
                    direction,
                    relevance,
                });
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    found
}

/// The hops as results: each keeps the relevance it was reached with,
/// lowered by its own standing as a found memory's is, and its scores say
/// how close it is to the best of `queries` (by its stored vector in
/// `vectors`; 0 when it has none yet) and to the context, its recency
/// measured at `at`.
pub fn ranked(
    hops: Vec<Hop>,
    vectors: &HashMap<MemoryId, Vec<f32>>,
    queries: &[Vec<f32>],
    access: &AccessCounts,
    boost: Option<&Boost<'_>>,
    standing: Standing,
    at: DateTime<Utc>,
) -> Vec<Ranked> {
    hops.into_iter()
        .map(|hop| {
            let similarity = vectors
                .get(&hop.memory.id)
                .map(|vector| {
                    queries
                        .iter()
                        .map(|query| cosine(query, vector))
                        .fold(0.0f32, f32::max)
                })
                .unwrap_or_default();
            let mut scores = Scores::of(&hop.memory, similarity, access.get(hop.memory.id), at);
            scores.context_boost = boost.and_then(|boost| boost.of(hop.memory.id));
            let relevance = standing.apply(&hop.memory, &mut scores, hop.relevance);
            Ranked {
                memory: hop.memory,
                scores,
                relevance,
                reason: Reason::Hop {
                    from: hop.from,
                    relationship: hop.relationship,
                    direction: hop.direction,
                },
            }
        })
        .collect()
}
