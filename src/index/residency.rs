//! Which namespaces the index keeps in memory (`index.idle_minutes`,
//! `index.max_memory_mb`).
//!
//! A namespace no read touched for the idle time, or the least recently
//! read ones while the index is above its ceiling, are dropped from the
//! snapshot ([`Index::evict`], through the writer like any change) and
//! marked cold, remembering only their ids. Dropping is memory only: the
//! store keeps the memories and the embedding cache their vectors. A read
//! of a cold namespace ([`Index::resident`]) asks the indexer to load it
//! again (its words from the store, its vectors from the cache) and waits
//! for that, so it answers as if the namespace had never left. A write
//! into a cold namespace goes into the snapshot as usual; the namespace
//! stays cold, so its next read loads the rest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use super::{Change, Index, Snapshot};
use crate::config;
use crate::memory::{MemoryId, Namespace};

/// The longest between two eviction passes.
const MAX_SWEEP_PERIOD: Duration = Duration::from_secs(60);
/// The shortest: an idle time of 0 evicts at this pace.
const MIN_SWEEP_PERIOD: Duration = Duration::from_secs(1);

/// A reader's request that a cold namespace be loaded; answered (or
/// dropped, if the indexer stops) once it is.
pub struct LoadRequest {
    pub namespace: Namespace,
    pub done: oneshot::Sender<Arc<Snapshot>>,
}

/// The residency of an index's namespaces.
pub(super) struct Residency {
    pub(super) settings: config::Residency,
    state: Mutex<State>,
    /// Held while a namespace leaves or comes back, so a pass and a load
    /// never interleave (a namespace marked warm while out of memory).
    moves: Mutex<()>,
    requests: mpsc::UnboundedSender<LoadRequest>,
    /// Taken by the indexer, which answers the requests.
    receiver: Mutex<Option<mpsc::UnboundedReceiver<LoadRequest>>>,
    loads: AtomicU64,
    evictions: AtomicU64,
    load_micros: AtomicU64,
}

#[derive(Default)]
struct State {
    /// When each namespace was last read (or first seen by a pass).
    last_read: HashMap<Namespace, Instant>,
    /// Namespaces dropped and not loaded again since, with the ids they
    /// held, which a load reads back.
    cold: HashMap<Namespace, Vec<MemoryId>>,
    /// Each namespace's bytes, with the address of the state they were
    /// counted in, so a pass recounts only namespaces that changed.
    bytes: HashMap<Namespace, (usize, usize)>,
}

/// What the index keeps in memory, and what it dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, ToSchema)]
#[schema(as = ResidencyStatsView)]
pub struct ResidencyView {
    /// Namespaces in memory.
    pub resident_namespaces: usize,
    /// Namespaces dropped from memory (idle, or the least recently read
    /// above the ceiling); each is loaded again by its next read. Their
    /// memories are still counted in `namespaces` and `memories`.
    pub evicted_namespaces: usize,
    /// Bytes of the index's columns in memory: vectors, their codes,
    /// ids and word postings.
    pub resident_bytes: usize,
    /// Namespaces loaded back into memory since start.
    pub loads: u64,
    /// Namespaces dropped from memory since start.
    pub evictions: u64,
    /// The mean time a load back took, in ms; null before the first.
    pub mean_load_ms: Option<f64>,
}

impl Residency {
    pub(super) fn new(settings: config::Residency) -> Self {
        let (requests, receiver) = mpsc::unbounded_channel();
        Self {
            settings,
            state: Mutex::default(),
            moves: Mutex::default(),
            requests,
            receiver: Mutex::new(Some(receiver)),
            loads: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            load_micros: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a cache of times and sizes: usable after a panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Index {
    /// The current snapshot, with `namespaces` in it: a cold one is loaded
    /// first (by the indexer; this waits for it). Counts as their read.
    pub async fn resident(&self, namespaces: &[Namespace]) -> Arc<Snapshot> {
        let waits: Vec<_> = {
            let now = Instant::now();
            let mut state = self.residency.state();
            namespaces
                .iter()
                .filter_map(|namespace| {
                    state.last_read.insert(namespace.clone(), now);
                    state.cold.contains_key(namespace).then(|| {
                        let (done, answered) = oneshot::channel();
                        let request = LoadRequest {
                            namespace: namespace.clone(),
                            done,
                        };
                        // The indexer gone (shutting down): serve as is.
                        self.residency.requests.send(request).ok()?;
                        Some(answered)
                    })?
                })
                .collect()
        };
        let mut loaded = None;
        for answered in waits {
            // A dropped request (the indexer stopping) serves what is in.
            loaded = answered.await.ok().or(loaded);
        }
        // The snapshot the load made, which a pass may have left since.
        loaded.unwrap_or_else(|| self.snapshot())
    }

    /// The load requests, for the one indexer that answers them.
    pub fn load_requests(&self) -> Option<mpsc::UnboundedReceiver<LoadRequest>> {
        self.residency
            .receiver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The ids `namespace` held when it was dropped, if it is cold.
    pub fn cold_ids(&self, namespace: &Namespace) -> Option<Vec<MemoryId>> {
        self.residency.state().cold.get(namespace).cloned()
    }

    /// How many memories each cold namespace held when it was dropped.
    pub fn cold_sizes(&self) -> Vec<(Namespace, usize)> {
        self.residency
            .state()
            .cold
            .iter()
            .map(|(namespace, ids)| (namespace.clone(), ids.len()))
            .collect()
    }

    /// Loads `namespace` back with `changes` (its rows as the indexer
    /// found them), begun at `started`: it is no longer cold. A load that
    /// takes the index above its ceiling drops the least recently read
    /// namespaces at once, rather than at the next pass, so the ceiling
    /// holds however fast cold namespaces are read. The snapshot with it.
    pub fn load(
        &self,
        namespace: &Namespace,
        changes: Vec<Change>,
        started: Instant,
    ) -> Arc<Snapshot> {
        let moves = self
            .residency
            .moves
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.apply(changes);
        let mut state = self.residency.state();
        state.cold.remove(namespace);
        let now = Instant::now();
        state.last_read.insert(namespace.clone(), now);
        drop(state);
        // The reader searches this one, which holds the namespace whatever
        // the room made next takes.
        let snapshot = self.snapshot();
        drop(moves);
        if self.residency.settings.max_bytes.is_some() {
            self.sweep(now);
        }
        self.residency.loads.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.residency
            .load_micros
            .fetch_add(micros, Ordering::Relaxed);
        snapshot
    }

    /// Drops what the index holds of `namespaces` from memory (only: the
    /// store and the embedding cache keep it) and marks them cold.
    pub fn evict(&self, namespaces: &[Namespace]) {
        if namespaces.is_empty() {
            return;
        }
        let moves = self
            .residency
            .moves
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut locations = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.snapshot.load();
        let mut held: HashMap<&Namespace, Vec<MemoryId>> = HashMap::new();
        for namespace in namespaces {
            let ids = current.ids_in(std::slice::from_ref(namespace));
            for id in &ids {
                locations.remove(id);
            }
            held.insert(namespace, ids);
        }
        self.snapshot
            .store(Arc::new(current.without_namespaces(namespaces)));
        drop(locations);
        let mut state = self.residency.state();
        for (namespace, mut ids) in held {
            state.bytes.remove(namespace);
            // Cold already (rows written since it was dropped): it keeps
            // the ids it held then too.
            let cold = state.cold.entry(namespace.clone()).or_default();
            cold.append(&mut ids);
            cold.sort_unstable();
            cold.dedup();
        }
        drop(state);
        drop(moves);
        self.residency
            .evictions
            .fetch_add(namespaces.len() as u64, Ordering::Relaxed);
        tracing::debug!(
            namespaces = namespaces.len(),
            "dropped idle namespaces from memory"
        );
    }

    /// One eviction pass at `now`: drops the namespaces idle for longer
    /// than the idle time, then, while the index is above its ceiling, the
    /// least recently read ones, never the most recently read one. With
    /// the namespaces dropped.
    pub fn sweep(&self, now: Instant) -> Vec<Namespace> {
        let settings = self.residency.settings;
        if !settings.evicts() {
            return Vec::new();
        }
        let snapshot = self.snapshot();
        let mut victims = Vec::new();
        {
            let mut state = self.residency.state();
            let State {
                last_read, bytes, ..
            } = &mut *state;
            let mut resident: Vec<(Instant, &Namespace, usize)> = snapshot
                .namespace_footprints(|namespace, address, count| match bytes.get(namespace) {
                    Some(&(counted_at, size)) if counted_at == address => size,
                    _ => {
                        let size = count();
                        bytes.insert(namespace.clone(), (address, size));
                        size
                    }
                })
                .into_iter()
                .map(|(namespace, size)| {
                    let read = *last_read.entry(namespace.clone()).or_insert(now);
                    (read, namespace, size)
                })
                .collect();
            resident.sort_by_key(|(read, _, _)| *read);
            let mut total: usize = resident.iter().map(|(_, _, size)| size).sum();
            let newest = resident.len().saturating_sub(1);
            for (position, (read, namespace, size)) in resident.into_iter().enumerate() {
                let idle = settings
                    .idle
                    .is_some_and(|idle| now.saturating_duration_since(read) >= idle);
                let over = settings
                    .max_bytes
                    .is_some_and(|max| total > max && position < newest);
                if idle || over {
                    total -= size;
                    victims.push(namespace.clone());
                }
            }
        }
        self.evict(&victims);
        victims
    }

    /// What is resident, for `/stats` and `/metrics`.
    pub fn residency_view(&self) -> ResidencyView {
        let snapshot = self.snapshot();
        let state = self.residency.state();
        let namespaces = snapshot.namespaces();
        let loads = self.residency.loads.load(Ordering::Relaxed);
        let micros = self.residency.load_micros.load(Ordering::Relaxed);
        ResidencyView {
            resident_namespaces: namespaces
                .iter()
                .filter(|namespace| !state.cold.contains_key(*namespace))
                .count(),
            evicted_namespaces: state.cold.len(),
            resident_bytes: snapshot.footprint().total(),
            loads,
            evictions: self.residency.evictions.load(Ordering::Relaxed),
            #[expect(clippy::cast_precision_loss, reason = "a mean in ms")]
            mean_load_ms: (loads > 0).then(|| micros as f64 / loads as f64 / 1000.0),
        }
    }
}

/// Runs eviction passes until `stop`, if the index ever evicts.
pub fn spawn_sweeper(index: Arc<Index>, stop: CancellationToken) -> Option<JoinHandle<()>> {
    let settings = index.residency.settings;
    if !settings.evicts() {
        return None;
    }
    let period = settings
        .idle
        .map_or(MIN_SWEEP_PERIOD, |idle| {
            (idle / 4).clamp(MIN_SWEEP_PERIOD, MAX_SWEEP_PERIOD)
        })
        .min(if settings.max_bytes.is_some() {
            MIN_SWEEP_PERIOD
        } else {
            MAX_SWEEP_PERIOD
        });
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = stop.cancelled() => return,
            }
            let index = index.clone();
            crate::blocking::run(move || index.sweep(Instant::now())).await;
        }
    }))
}

#[cfg(test)]
mod tests;
