//! The index's tests: both searches against brute force, and how
//! updates, removals and the two sides behave.

use proptest::prelude::*;

use super::vector::dot;
use super::*;

fn repo(name: &str) -> Namespace {
    Namespace::Repo(name.parse().unwrap())
}

/// An entry with its vector, as the indexer applies it.
#[derive(Clone, Debug)]
struct Embedded {
    id: MemoryId,
    entry: Entry,
    vector: Vec<f32>,
}

impl Embedded {
    fn upsert(&self) -> Change {
        Change::Upsert(self.entry.clone(), self.vector.clone().into())
    }

    fn words(&self) -> Change {
        Change::Words(self.entry.clone())
    }
}

fn entry(namespace: &Namespace, vector: Vec<f32>) -> Embedded {
    let id = MemoryId::new();
    Embedded {
        id,
        entry: Entry {
            id,
            namespace: namespace.clone(),
            category: Category::Patterns,
            terms: lexical::Terms::default(),
        },
        vector,
    }
}

fn text_entry(namespace: &Namespace, text: &str) -> Embedded {
    let mut embedded = entry(namespace, vec![1.0, 0.0]);
    embedded.entry.terms = lexical::terms(text);
    embedded
}

#[test]
fn lexical_search_ranks_by_bm25_and_survives_removals() {
    let ns = repo("a");
    let index = Index::new(2);
    let exact = text_entry(&ns, "postgres connection pool size");
    let partial = text_entry(&ns, "the connection to the old office printer downstairs");
    let none = text_entry(&ns, "lunch on fridays");
    let gone = text_entry(&ns, "postgres postgres postgres pool");
    index.apply(
        [&exact, &partial, &none, &gone]
            .map(Embedded::upsert)
            .into(),
    );
    index.apply(vec![Change::Remove(gone.id)]);
    let query = lexical::query_terms("Postgres pool?");
    let hits = index
        .snapshot()
        .lexical_search(std::slice::from_ref(&ns), &query, &[], 10, all)
        .hits;
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [exact.id]);
    assert!(
        (hits[0].coverage - 1.0).abs() < 1e-6,
        "both query words match"
    );
    assert_eq!(hits[0].matched_terms, 2);
    let query = lexical::query_terms("connection");
    let hits = index
        .snapshot()
        .lexical_search(&[ns], &query, &[], 10, all)
        .hits;
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0].id, exact.id, "the shorter document ranks first");
}

#[test]
fn lexical_hits_carry_their_cosine_to_the_closest_query() {
    let ns = repo("a");
    let index = Index::new(2);
    let hit = text_entry(&ns, "postgres pool"); // its vector is (1, 0)
    index.apply(vec![hit.upsert()]);
    let query = lexical::query_terms("postgres");
    let hits = index
        .snapshot()
        .lexical_search(&[ns], &query, &[vec![0.0, 2.0], vec![3.0, 4.0]], 10, all)
        .hits;
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [hit.id]);
    assert!((hits[0].similarity - 0.6).abs() < 1e-6, "{hits:?}");
}

#[test]
fn lexical_hits_judged_again_by_other_vectors_are_the_search_of_them() {
    let ns = repo("a");
    let index = Index::new(2);
    let near = text_entry(&ns, "postgres pool"); // its vector is (1, 0)
    // Its words are in, its vector still on its way.
    let pending = text_entry(&ns, "postgres replica");
    index.apply(vec![near.upsert(), pending.words()]);
    let snapshot = index.snapshot();
    let query = lexical::query_terms("postgres");
    let first = snapshot.lexical_search(
        std::slice::from_ref(&ns),
        &query,
        &[vec![0.0, 2.0]],
        10,
        all,
    );
    assert!(
        first.hits.iter().all(|hit| hit.similarity.abs() < 1e-6),
        "{:?}",
        first.hits
    );
    let others = [vec![0.0, 2.0], vec![3.0, 4.0]];
    let again = snapshot.rejudged(first, &others);
    assert_eq!(
        again.hits,
        snapshot
            .lexical_search(&[ns], &query, &others, 10, all)
            .hits
    );
    let by_id = |id| again.hits.iter().find(|hit| hit.id == id).unwrap();
    assert!((by_id(near.id).similarity - 0.6).abs() < 1e-6);
    assert!(by_id(pending.id).vector_pending);
}

#[test]
fn words_come_first_and_the_vector_moves_the_entry_across() {
    let ns = repo("a");
    let index = Index::new(2);
    let early = text_entry(&ns, "zanzibar deployment key");
    index.apply(vec![early.words()]);
    let query = lexical::query_terms("zanzibar deployment");
    let search = |snapshot: &Snapshot| {
        snapshot
            .lexical_search(
                std::slice::from_ref(&ns),
                &query,
                &[vec![1.0, 0.0]],
                10,
                all,
            )
            .hits
    };
    let snapshot = index.snapshot();
    let hits = search(&snapshot);
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [early.id]);
    assert!(hits[0].vector_pending);
    assert!(
        hits[0].similarity.abs() < f32::EPSILON,
        "no vector, no cosine"
    );
    assert!(
        snapshot
            .search(std::slice::from_ref(&ns), &[vec![1.0, 0.0]], 10, all)
            .is_empty(),
        "the vector search sees only what has a vector"
    );
    assert_eq!((snapshot.len(), snapshot.words_only()), (0, 1));
    assert!(
        snapshot
            .lexical_search(std::slice::from_ref(&ns), &query, &[], 10, |_, _| false)
            .hits
            .is_empty(),
        "the filters apply to words-only entries too"
    );

    index.apply(vec![early.upsert()]);
    let snapshot = index.snapshot();
    assert_eq!((snapshot.len(), snapshot.words_only()), (1, 0));
    let hits = search(&snapshot);
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [early.id]);
    assert!(!hits[0].vector_pending);
    assert!((hits[0].similarity - 1.0).abs() < 1e-6);
    assert_eq!(
        snapshot.search(&[ns], &[vec![1.0, 0.0]], 10, all)[0].id,
        early.id
    );
}

#[test]
fn a_removal_clears_either_side() {
    let ns = repo("a");
    let index = Index::new(2);
    let pending = text_entry(&ns, "zanzibar rotation");
    let embedded = text_entry(&ns, "zanzibar keys");
    let same_batch = text_entry(&ns, "zanzibar tuesdays");
    index.apply(vec![pending.words(), embedded.upsert()]);
    index.apply(vec![
        Change::Remove(pending.id),
        Change::Remove(embedded.id),
        same_batch.words(),
        Change::Remove(same_batch.id),
    ]);
    let snapshot = index.snapshot();
    assert_eq!((snapshot.len(), snapshot.words_only()), (0, 0));
    let query = lexical::query_terms("zanzibar");
    assert!(
        snapshot
            .lexical_search(&[ns], &query, &[], 10, all)
            .hits
            .is_empty()
    );
}

#[test]
fn words_and_vectors_of_one_batch_count_once_in_the_statistics() {
    let ns = repo("a");
    let index = Index::new(2);
    let memories: Vec<Embedded> = (0..5)
        .map(|i| text_entry(&ns, &format!("shared word{i}")))
        .collect();
    index.apply(memories.iter().map(Embedded::words).collect());
    index.apply(memories[..2].iter().map(Embedded::upsert).collect());
    let snapshot = index.snapshot();
    assert_eq!((snapshot.len(), snapshot.words_only()), (2, 3));
    let hits = snapshot
        .lexical_search(&[ns], &lexical::query_terms("word3"), &[], 10, all)
        .hits;
    // idf of a word one document in five holds, as if all were embedded.
    assert_eq!(hits.len(), 1);
    assert!((hits[0].matched_idf - lexical::idf(5, 1)).abs() < 1e-6);
}

fn all(_: MemoryId, _: Category) -> bool {
    true
}

#[test]
fn search_ranks_by_cosine_and_normalises_both_sides() {
    let ns = repo("a");
    let index = Index::new(3);
    let near = entry(&ns, vec![10.0, 1.0, 0.0]);
    let far = entry(&ns, vec![0.0, 0.0, 5.0]);
    let middle = entry(&ns, vec![1.0, 1.0, 0.0]);
    index.apply([&near, &far, &middle].map(Embedded::upsert).into());
    let hits = index
        .snapshot()
        .search(&[ns], &[vec![3.0, 0.0, 0.0]], 2, all);
    assert_eq!(
        hits.iter().map(|h| h.id).collect::<Vec<_>>(),
        [near.id, middle.id]
    );
    assert!((hits[0].similarity - 10.0 / 101f32.sqrt()).abs() < STORAGE_ERROR);
}

#[test]
fn search_never_leaves_the_requested_namespaces() {
    let (mine, theirs) = (repo("mine"), repo("theirs"));
    let index = Index::new(2);
    let own = entry(&mine, vec![0.0, 1.0]);
    let foreign = entry(&theirs, vec![1.0, 0.0]);
    index.apply(vec![own.upsert(), foreign.upsert()]);
    let hits = index.snapshot().search(&[mine], &[vec![1.0, 0.0]], 10, all);
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [own.id]);
}

#[test]
fn each_memory_keeps_its_best_query() {
    let ns = repo("a");
    let index = Index::new(2);
    let x = entry(&ns, vec![1.0, 0.0]);
    let y = entry(&ns, vec![0.0, 1.0]);
    index.apply(vec![x.upsert(), y.upsert()]);
    let hits = index.snapshot().search(
        std::slice::from_ref(&ns),
        &[vec![0.0, 1.0], vec![1.0, 0.1]],
        10,
        all,
    );
    let by_id: HashMap<_, _> = hits.iter().map(|h| (h.id, h.query)).collect();
    assert_eq!(by_id[&y.id], 0);
    assert_eq!(by_id[&x.id], 1);
    assert_eq!(hits.len(), 2, "one hit per memory, not per query");
}

#[test]
fn the_filter_is_applied_before_the_limit() {
    let ns = repo("a");
    let index = Index::new(2);
    let best = entry(&ns, vec![1.0, 0.0]);
    let second = entry(&ns, vec![1.0, 0.5]);
    index.apply(vec![best.upsert(), second.upsert()]);
    let hits = index
        .snapshot()
        .search(&[ns], &[vec![1.0, 0.0]], 1, |id, _| id != best.id);
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), [second.id]);
}

#[test]
fn a_held_snapshot_does_not_change_under_later_updates() {
    let ns = repo("a");
    let index = Index::new(2);
    let first = entry(&ns, vec![1.0, 0.0]);
    index.apply(vec![first.upsert()]);
    let before = index.snapshot();
    index.apply(vec![
        Change::Remove(first.id),
        entry(&ns, vec![0.0, 1.0]).upsert(),
    ]);
    assert_eq!(before.len(), 1);
    assert!(before.vector(&ns, first.id).is_some());
    assert!(index.snapshot().vector(&ns, first.id).is_none());
    assert_eq!(index.snapshot().len(), 1);
}

#[test]
fn an_upsert_replaces_and_an_emptied_namespace_disappears() {
    let ns = repo("a");
    let index = Index::new(2);
    let mut memory = entry(&ns, vec![1.0, 0.0]);
    index.apply(vec![memory.upsert()]);
    memory.vector = vec![0.0, 2.0];
    index.apply(vec![memory.upsert()]);
    assert_eq!(
        index.snapshot().vector(&ns, memory.id),
        Some(vec![0.0, 1.0])
    );
    assert_eq!(index.snapshot().len(), 1);
    index.apply(vec![Change::Remove(memory.id)]);
    assert_eq!(index.snapshot().namespace_sizes().count(), 0);
}

#[test]
fn a_zero_or_misshapen_query_matches_nothing_useful() {
    let ns = repo("a");
    let index = Index::new(2);
    index.apply(vec![entry(&ns, vec![1.0, 0.0]).upsert()]);
    let snapshot = index.snapshot();
    assert!(
        snapshot
            .search(std::slice::from_ref(&ns), &[vec![1.0, 0.0, 0.0]], 5, all)
            .is_empty()
    );
    let zero = snapshot.search(&[ns], &[vec![0.0, 0.0]], 5, all);
    assert!(zero.iter().all(|hit| hit.similarity == 0.0));
}

/// Every remaining entry's similarity to `query` in `f32`, best first.
fn brute_force(entries: &[Embedded], removed: &HashSet<MemoryId>, query: &[f32]) -> Vec<f32> {
    let mut q = query.to_vec();
    normalise(&mut q);
    let mut exact: Vec<f32> = entries
        .iter()
        .filter(|e| !removed.contains(&e.id))
        .map(|e| {
            let mut v = e.vector.clone();
            normalise(&mut v);
            dot(&q, &v)
        })
        .collect();
    exact.sort_by(|a, b| b.total_cmp(a));
    exact
}

/// The most half precision moves a unit vector's similarity to a unit
/// query: 2⁻¹¹ relative per component, plus `f32` rounding.
const STORAGE_ERROR: f32 = 1.0 / 2048.0 + 1e-5;

/// The ids of the `pool` remaining entries the one-bit scan ranks
/// first (ties by id, as the index breaks them).
fn pool_of(
    entries: &[Embedded],
    removed: &HashSet<MemoryId>,
    query: &[f32],
    pool: usize,
) -> HashSet<MemoryId> {
    let coder = quantized::Coder::new(query.len());
    let mut q = query.to_vec();
    normalise(&mut q);
    let coded = [quantized::Query::new(&coder, &q)];
    let mut estimated: Vec<(u16, MemoryId)> = entries
        .iter()
        .filter(|e| !removed.contains(&e.id))
        .map(|e| {
            let mut v = e.vector.clone();
            normalise(&mut v);
            let mut codes = quantized::Codes::new(coder.words());
            codes.push(&coder.code(&v));
            (quantized::scan(&coded, &codes, u16::MAX)[0].differing, e.id)
        })
        .collect();
    estimated.sort_unstable();
    estimated.iter().take(pool).map(|&(_, id)| id).collect()
}

proptest! {
    /// Over random contents spanning several chunks and random
    /// removals: the full scan matches a brute-force sort of the `f32`
    /// vectors within half precision's error, and the search returns
    /// exactly the full scan's best of the pool the one-bit codes
    /// rank first, with the same similarities, best first: all of the
    /// full scan's results whenever the pool holds every entry.
    #[test]
    fn search_is_the_full_scan_over_the_pool_of_best_codes(
        vectors in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, 40), 1..2500),
        query in prop::collection::vec(-1.0f32..1.0, 40),
        remove_every in 2usize..7,
        limit in 1usize..40,
        pool in 1usize..3000,
    ) {
        let ns = repo("a");
        let index = Index::new(40);
        let entries: Vec<Embedded> = vectors.into_iter().map(|v| entry(&ns, v)).collect();
        index.apply(entries.iter().map(Embedded::upsert).collect());
        let removed: HashSet<MemoryId> =
            entries.iter().step_by(remove_every).map(|e| e.id).collect();
        index.apply(removed.iter().copied().map(Change::Remove).collect());
        let remaining = entries.len() - removed.len();
        let snapshot = index.snapshot();
        prop_assert_eq!(snapshot.len(), remaining);

        let exact = brute_force(&entries, &removed, &query);
        let everything = snapshot.exact_search(std::slice::from_ref(&ns), std::slice::from_ref(&query), remaining);
        prop_assert_eq!(everything.len(), exact.len());
        for (hit, similarity) in everything.iter().zip(&exact) {
            prop_assert!((hit.similarity - similarity).abs() <= STORAGE_ERROR);
        }

        let pooled = pool_of(&entries, &removed, &query, pool.max(limit));
        let expected: Vec<Hit> = everything
            .iter()
            .filter(|hit| pooled.contains(&hit.id))
            .take(limit)
            .copied()
            .collect();
        let hits = snapshot.search_in_pool(std::slice::from_ref(&ns), std::slice::from_ref(&query), limit, pool, all);
        prop_assert_eq!(&hits, &expected);
        if pool >= remaining {
            let full = snapshot.exact_search(&[ns], std::slice::from_ref(&query), limit);
            prop_assert_eq!(hits, full);
        }
    }

    /// Over documents of a few words from a small vocabulary (so scores
    /// tie often) spanning several chunks, some with their vector
    /// pending, and a filter that turns some down: the lexical search
    /// returns exactly a brute-force BM25 ranking's best, best first,
    /// ties broken by id, each with its count of matched terms.
    #[test]
    fn lexical_search_is_the_brute_force_bm25_ranking(
        documents in prop::collection::vec(prop::collection::vec(0usize..8, 1..6), 1..2600),
        query in prop::collection::vec(0usize..10, 1..5),
        limit in 1usize..40,
        pending_every in 2usize..9,
        refuse_every in 2usize..11,
    ) {
        const WORDS: [&str; 10] = [
            "deploy", "helm", "postgres", "pool", "retry", "jitter", "tracing", "kafka", "absent", "missing",
        ];
        let ns = repo("a");
        let index = Index::new(2);
        let entries: Vec<Embedded> = documents
            .iter()
            .map(|words| {
                let text: Vec<&str> = words.iter().map(|&word| WORDS[word]).collect();
                text_entry(&ns, &text.join(" "))
            })
            .collect();
        index.apply(
            entries
                .iter()
                .enumerate()
                .map(|(n, e)| if n % pending_every == 0 { e.words() } else { e.upsert() })
                .collect(),
        );
        let refused: HashSet<MemoryId> =
            entries.iter().step_by(refuse_every).map(|e| e.id).collect();
        let text: Vec<&str> = query.iter().map(|&word| WORDS[word]).collect();
        let terms = lexical::query_terms(&text.join(" "));

        let total_length: u64 = entries.iter().map(|e| u64::from(e.entry.terms.length)).sum();
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let average_length = total_length as f32 / entries.len() as f32;
        let count = |e: &Embedded, term: &lexical::Term| {
            e.entry.terms.counts.iter().find(|(t, _)| t == term).map(|&(_, n)| n)
        };
        let idfs: Vec<f32> = terms
            .iter()
            .map(|term| {
                let frequency = entries.iter().filter(|e| count(e, term).is_some()).count();
                lexical::idf(entries.len(), frequency)
            })
            .collect();
        let mut expected: Vec<(f32, MemoryId, u32)> = entries
            .iter()
            .filter(|e| !refused.contains(&e.id))
            .map(|e| {
                let score = terms.iter().zip(&idfs).fold(0.0f32, |score, (term, idf)| {
                    count(e, term).map_or(score, |n| {
                        score + lexical::weight(*idf, n, e.entry.terms.length, average_length)
                    })
                });
                let matched = terms.iter().filter(|term| count(e, term).is_some()).count();
                (score, e.id, u32::try_from(matched).unwrap())
            })
            .filter(|(score, _, _)| *score > 0.0)
            .collect();
        expected.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        expected.truncate(limit);

        let hits = index.snapshot().lexical_search(&[ns], &terms, &[], limit, |id, _| {
            !refused.contains(&id)
        }).hits;
        let found: Vec<(f32, MemoryId, u32)> =
            hits.iter().map(|hit| (hit.score, hit.id, hit.matched_terms)).collect();
        prop_assert_eq!(found, expected);
    }
}

/// `embedded` with passages of these vectors.
fn with_passages(embedded: &Embedded, passages: &[[f32; 2]]) -> Change {
    Change::Upsert(
        embedded.entry.clone(),
        Vectors {
            whole: embedded.vector.clone(),
            passages: passages.iter().map(|passage| passage.to_vec()).collect(),
        },
    )
}

#[test]
fn a_memory_is_found_by_its_closest_passage_at_the_passage_weight_once() {
    let ns = repo("a");
    let index = Index::new(2);
    // About the query as a whole, at cosine 0.8.
    let whole = entry(&ns, vec![0.8, 0.6]);
    // Its whole text is far from the query; one passage points right at it.
    let aside = entry(&ns, vec![0.0, 1.0]);
    index.apply(vec![
        whole.upsert(),
        with_passages(&aside, &[[0.0, 1.0], [1.0, 0.0], [0.6, 0.8]]),
    ]);
    let snapshot = index.snapshot();
    assert_eq!(snapshot.len(), 2);
    assert_eq!(snapshot.passages(), 3);
    let query = [vec![1.0, 0.0]];
    let found = |weight| {
        snapshot
            .search_passages(std::slice::from_ref(&ns), &query, 10, weight, |_, _| true)
            .hits
            .iter()
            .map(|hit| (hit.id, (hit.similarity * 100.0).round()))
            .collect::<Vec<_>>()
    };
    assert_eq!(found(0.9), [(aside.id, 90.0), (whole.id, 80.0)]);
    assert_eq!(found(0.7), [(whole.id, 80.0), (aside.id, 70.0)]);
    assert_eq!(found(0.0), [(whole.id, 80.0), (aside.id, 0.0)]);
    let plain: Vec<MemoryId> = snapshot
        .search(std::slice::from_ref(&ns), &query, 10, |_, _| true)
        .iter()
        .map(|hit| hit.id)
        .collect();
    assert_eq!(
        plain,
        [whole.id, aside.id],
        "the plain search reads whole texts"
    );
}

#[test]
fn a_memory_changed_removed_or_waiting_for_its_vector_keeps_no_passage() {
    let ns = repo("a");
    let index = Index::new(2);
    let first = entry(&ns, vec![0.0, 1.0]);
    let second = entry(&ns, vec![0.0, 1.0]);
    index.apply(vec![
        with_passages(&first, &[[1.0, 0.0], [0.0, 1.0]]),
        with_passages(&second, &[[1.0, 0.0]]),
    ]);
    assert_eq!(index.snapshot().passages(), 3);
    index.apply(vec![with_passages(&first, &[[0.6, 0.8]])]);
    assert_eq!(
        index.snapshot().passages(),
        2,
        "the new passages replace the old"
    );
    index.apply(vec![first.words()]);
    assert_eq!(index.snapshot().passages(), 1);
    index.apply(vec![Change::Remove(second.id)]);
    assert_eq!(index.snapshot().passages(), 0);
    index.apply(vec![with_passages(&first, &[[1.0, 0.0]]), first.upsert()]);
    assert_eq!(
        index.snapshot().passages(),
        0,
        "the later change of a batch wins"
    );
}

#[test]
fn removals_off_the_front_of_a_long_side_leave_exactly_the_rest_and_every_passage_goes() {
    let ns = repo("a");
    let index = Index::new(2);
    let backlog: Vec<Embedded> = (0..3 * chunk::CHUNK_CAPACITY)
        .map(|_| entry(&ns, vec![1.0, 0.0]))
        .collect();
    index.apply(backlog.iter().map(Embedded::words).collect());
    // Vectors arrive in the order the words went in, a batch at a time,
    // and the last batch out of order: each takes its memories off the
    // words-only side.
    let (first, rest) = backlog.split_at(1_500);
    index.apply(first.iter().map(Embedded::upsert).collect());
    let mut scattered: Vec<&Embedded> = rest.iter().step_by(7).collect();
    scattered.reverse();
    index.apply(scattered.iter().map(|embedded| embedded.upsert()).collect());
    let snapshot = index.snapshot();
    assert_eq!(snapshot.len(), 1_500 + scattered.len());
    assert_eq!(snapshot.words_only(), backlog.len() - snapshot.len());
    let mut held = snapshot.ids_in(std::slice::from_ref(&ns));
    held.sort_unstable();
    let mut expected: Vec<MemoryId> = backlog.iter().map(|embedded| embedded.id).collect();
    expected.sort_unstable();
    assert_eq!(held, expected, "every memory once, on one side");

    // A memory's passages may lie in two chunks: all go with it.
    let index = Index::new(2);
    let filler: Vec<Change> = (0..chunk::CHUNK_CAPACITY - 1)
        .map(|_| with_passages(&entry(&ns, vec![1.0, 0.0]), &[[1.0, 0.0]]))
        .collect();
    index.apply(filler);
    let straddling = entry(&ns, vec![0.0, 1.0]);
    index.apply(vec![with_passages(
        &straddling,
        &[[0.0, 1.0], [1.0, 0.0], [0.6, 0.8]],
    )]);
    assert_eq!(index.snapshot().passages(), chunk::CHUNK_CAPACITY + 2);
    index.apply(vec![Change::Remove(straddling.id)]);
    let snapshot = index.snapshot();
    assert_eq!(snapshot.passages(), chunk::CHUNK_CAPACITY - 1);
    assert!(
        snapshot
            .passage_entries()
            .all(|(id, _)| id != straddling.id)
    );
}
