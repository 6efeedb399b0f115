//! Residency's tests: which namespaces a pass drops, and how one comes
//! back.

use std::time::{Duration, Instant};

use super::*;
use crate::index::{Entry, lexical};
use crate::memory::{Category, MemoryId};

fn repo(name: &str) -> Namespace {
    Namespace::Repo(name.parse().unwrap())
}

fn upsert(namespace: &Namespace) -> Change {
    Change::Upsert(
        Entry {
            id: MemoryId::new(),
            namespace: namespace.clone(),
            category: Category::Patterns,
            terms: lexical::terms("a memory of its own"),
        },
        vec![1.0, 0.0].into(),
    )
}

fn sizes(index: &Index) -> HashMap<Namespace, usize> {
    index
        .snapshot()
        .namespace_sizes()
        .map(|(namespace, n)| (namespace.clone(), n))
        .collect()
}

/// Marks each namespace read at `at` plus its position in seconds.
fn read_in_order(index: &Index, namespaces: &[&Namespace], at: Instant) {
    let mut state = index.residency.state();
    for (seconds, namespace) in (0..).zip(namespaces) {
        state
            .last_read
            .insert((*namespace).clone(), at + Duration::from_secs(seconds));
    }
}

/// An empty index whose ceiling has room for two of three namespaces of
/// one row each, and those three.
fn room_for_two_of_three() -> (Index, [Namespace; 3]) {
    let namespaces = [repo("a"), repo("b"), repo("c")];
    let full = Index::new(2);
    full.apply(namespaces.each_ref().map(upsert).into());
    let each = full.snapshot().footprint().total() / 3;
    let index = Index::new(2).evicting(config::Residency {
        idle: None,
        max_bytes: Some(each * 2 + each / 2),
    });
    (index, namespaces)
}

#[test]
fn the_ceiling_drops_the_least_recently_read_first() {
    let (index, [a, b, c]) = room_for_two_of_three();
    index.apply([&a, &b, &c].map(upsert).into());
    let start = Instant::now();
    read_in_order(&index, &[&b, &a, &c], start);

    assert_eq!(
        index.sweep(start + Duration::from_secs(10)),
        std::slice::from_ref(&b)
    );
    assert!(index.cold_ids(&b).is_some());
    assert_eq!(sizes(&index), HashMap::from([(a, 1), (c, 1)]));
    assert_eq!(index.residency_view().evicted_namespaces, 1);
    assert_eq!(index.residency_view().resident_namespaces, 2);
}

#[test]
fn a_load_above_the_ceiling_drops_the_least_recently_read_at_once() {
    let (index, [a, b, c]) = room_for_two_of_three();
    let [row_a, row_b, row_c] = [&a, &b, &c].map(upsert);
    index.apply(vec![row_a, row_b]);
    index.apply(vec![row_c.clone()]);
    index.evict(std::slice::from_ref(&c));
    read_in_order(&index, &[&a, &b], Instant::now());

    // No pass runs: the load itself makes room, after handing its reader
    // a snapshot that holds what was loaded.
    let handed = index.load(&c, vec![row_c], Instant::now());
    assert_eq!(handed.ids_in(std::slice::from_ref(&c)).len(), 1);
    assert_eq!(index.snapshot().len(), 2);
    assert!(index.cold_ids(&a).is_some());
    assert_eq!(sizes(&index), HashMap::from([(b, 1), (c, 1)]));
}

#[test]
fn a_namespace_idle_longer_than_the_idle_time_is_dropped_keeping_its_ids() {
    let (idle, busy) = (repo("idle"), repo("busy"));
    let index = Index::new(2).evicting(config::Residency {
        idle: Some(Duration::from_secs(60)),
        max_bytes: None,
    });
    let changes = vec![upsert(&idle), upsert(&idle), upsert(&busy)];
    let mut ids: Vec<MemoryId> = changes[..2].iter().map(Change::id).collect();
    ids.sort_unstable();
    index.apply(changes);
    let start = Instant::now();
    read_in_order(&index, &[&idle], start);
    read_in_order(&index, &[&busy], start + Duration::from_secs(100));

    assert_eq!(
        index.sweep(start + Duration::from_secs(120)),
        std::slice::from_ref(&idle)
    );
    assert_eq!(index.cold_ids(&idle), Some(ids));
    assert_eq!(index.cold_sizes(), [(idle.clone(), 2)]);
    assert_eq!(sizes(&index), HashMap::from([(busy, 1)]));
    let view = index.residency_view();
    assert_eq!((view.evictions, view.loads), (1, 0));
}

#[test]
fn an_index_that_does_not_evict_keeps_everything() {
    let index = Index::new(2);
    index.apply(vec![upsert(&repo("a"))]);
    assert!(
        index
            .sweep(Instant::now() + Duration::from_secs(1 << 30))
            .is_empty()
    );
    assert_eq!(index.snapshot().len(), 1);
}

#[tokio::test]
async fn a_read_of_a_cold_namespace_waits_for_its_load() {
    let namespace = repo("a");
    let index = Arc::new(Index::new(2).evicting(config::Residency {
        idle: Some(Duration::ZERO),
        max_bytes: None,
    }));
    let row = upsert(&namespace);
    index.apply(vec![row.clone()]);
    assert_eq!(
        index.sweep(Instant::now()),
        std::slice::from_ref(&namespace)
    );
    assert_eq!(index.snapshot().len(), 0);

    // The indexer's part: load what the request names.
    let mut requests = index.load_requests().unwrap();
    let loader = index.clone();
    tokio::spawn(async move {
        while let Some(LoadRequest { namespace, done }) = requests.recv().await {
            let ids = loader.cold_ids(&namespace).unwrap();
            assert_eq!(ids, [row.id()]);
            let _ = done.send(loader.load(&namespace, vec![row.clone()], Instant::now()));
        }
    });
    let snapshot = index.resident(std::slice::from_ref(&namespace)).await;
    assert_eq!(snapshot.len(), 1);
    assert!(index.cold_ids(&namespace).is_none());
    assert_eq!(index.residency_view().loads, 1);
    // Warm now: a read asks for nothing.
    assert_eq!(
        index.resident(std::slice::from_ref(&namespace)).await.len(),
        1
    );
}
