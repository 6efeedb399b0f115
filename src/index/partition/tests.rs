//! The approximate index against the exact scan: its recall on clustered
//! vectors, removals and updates, selective filters, passages, and
//! snapshots read while it is built and rebuilt.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::index::chunk::{CHUNK_CAPACITY, Chunk};
use crate::index::partition::Partition;
use crate::index::quantized::{Coder, Query};
use crate::index::{Change, Entry, Grouping, Hit, Index, Snapshot, Vectors, lexical};
use crate::memory::{Category, MemoryId, Namespace};

const DIMENSIONS: usize = 128;
/// The threshold the tests lower `index.approximate_above` to.
const ABOVE: usize = 1000;

fn namespace() -> Namespace {
    Namespace::Repo("big".parse().unwrap())
}

/// A seeded generator (SplitMix64), for vectors the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in -1..1.
    #[expect(clippy::cast_precision_loss, reason = "53 random bits")]
    fn unit(&mut self) -> f32 {
        ((self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0) as f32
    }

    fn vector(&mut self) -> Vec<f32> {
        (0..DIMENSIONS).map(|_| self.unit()).collect()
    }

    /// `centre` moved by noise of `spread`.
    fn near(&mut self, centre: &[f32], spread: f32) -> Vec<f32> {
        centre.iter().map(|c| c + spread * self.unit()).collect()
    }
}

/// Memories around `clusters` centres, `per_cluster` each: the shape of
/// real embeddings (topics), where an inverted file has lists to find.
struct Corpus {
    centres: Vec<Vec<f32>>,
    rows: Vec<(MemoryId, Vec<f32>)>,
}

fn corpus(rng: &mut Rng, clusters: usize, per_cluster: usize) -> Corpus {
    let centres: Vec<Vec<f32>> = (0..clusters).map(|_| rng.vector()).collect();
    let rows = centres
        .iter()
        .flat_map(|centre| (0..per_cluster).map(|_| centre.clone()).collect::<Vec<_>>())
        .map(|centre| (MemoryId::new(), rng.near(&centre, 0.6)))
        .collect();
    Corpus { centres, rows }
}

fn upsert(id: MemoryId, vector: Vec<f32>) -> Change {
    Change::Upsert(entry(id), vector.into())
}

fn entry(id: MemoryId) -> Entry {
    Entry {
        id,
        namespace: namespace(),
        category: Category::Patterns,
        terms: lexical::Terms::default(),
    }
}

fn index_of(rows: &[(MemoryId, Vec<f32>)]) -> Index {
    let index = Index::new(DIMENSIONS).approximate_above(ABOVE);
    index.apply(
        rows.iter()
            .map(|(id, vector)| upsert(*id, vector.clone()))
            .collect(),
    );
    index
}

fn all(_: MemoryId, _: Category) -> bool {
    true
}

/// Of `found`'s first ten, how many score at least the exact tenth's.
fn recall(exact: &[Hit], found: &[Hit]) -> usize {
    let tenth = exact[9.min(exact.len() - 1)].similarity;
    found
        .iter()
        .take(10)
        .filter(|hit| hit.similarity >= tenth - 1e-6)
        .count()
}

#[test]
fn the_approximate_index_finds_what_the_exact_scan_does_in_a_quarter_of_the_rows() {
    let mut rng = Rng(7);
    let corpus = corpus(&mut rng, 60, 100);
    let index = index_of(&corpus.rows);
    let snapshot = index.snapshot();
    let lists: Vec<usize> = snapshot.approximate().map(|(_, lists)| lists).collect();
    assert_eq!(
        lists.len(),
        1,
        "6,000 rows are above the threshold of 1,000"
    );
    assert!(lists[0] > 4, "{lists:?}");
    assert_finds_what_the_scan_does(&snapshot, &corpus, &mut rng, 1500);
}

/// Recall@10 of 50 queries near `corpus`'s centres, probing `rows` (a
/// quarter of the corpus), is at least 95 % of the exact scan's.
fn assert_finds_what_the_scan_does(
    snapshot: &Snapshot,
    corpus: &Corpus,
    rng: &mut Rng,
    rows: usize,
) {
    let ns = [namespace()];
    let (mut found, mut asked) = (0, 0);
    for query in 0..50 {
        let query = [rng.near(&corpus.centres[query % corpus.centres.len()], 0.6)];
        let exact = snapshot.exact_search(&ns, &query, 10);
        let hits = snapshot.search_probing(&ns, &query, 10, rows, all).hits;
        found += recall(&exact, &hits);
        asked += 10;
    }
    assert!(
        found * 100 >= asked * 95,
        "recall@10 {found} of {asked} probing a quarter of the rows"
    );
}

#[test]
fn a_backlog_with_its_grouping_deferred_is_one_run_until_grouped_then_searched_by_lists() {
    let mut rng = Rng(23);
    let corpus = corpus(&mut rng, 40, 100);
    let index = Index::new(DIMENSIONS).approximate_above(ABOVE);
    for batch in corpus.rows.chunks(256) {
        let changes = batch
            .iter()
            .map(|(id, vector)| upsert(*id, vector.clone()))
            .collect();
        index.apply_grouping(changes, Grouping::Deferred);
    }
    assert_eq!(index.snapshot().approximate().count(), 0, "one run");
    index.group();
    let snapshot = index.snapshot();
    let lists: Vec<usize> = snapshot.approximate().map(|(_, lists)| lists).collect();
    assert_eq!(lists.len(), 1, "4,000 rows are above the threshold");
    assert!(lists[0] > 4, "{lists:?}");
    assert_finds_what_the_scan_does(&snapshot, &corpus, &mut rng, 1000);
    // Past the backlog, changes keep the lists.
    index.apply(vec![upsert(MemoryId::new(), rng.vector())]);
    assert_eq!(index.snapshot().approximate().count(), 1);
}

#[test]
fn removals_and_updates_reach_the_approximate_index() {
    let mut rng = Rng(11);
    let corpus = corpus(&mut rng, 40, 100);
    let index = index_of(&corpus.rows);
    let ns = [namespace()];
    let removed: Vec<(MemoryId, Vec<f32>)> = corpus.rows.iter().step_by(20).cloned().collect();
    // Each moved to another cluster's centre, exactly.
    let moved: Vec<(MemoryId, Vec<f32>)> = corpus
        .rows
        .iter()
        .skip(7)
        .step_by(40)
        .enumerate()
        .map(|(serial, (id, _))| (*id, corpus.centres[(serial * 7) % 40].clone()))
        .collect();
    index.apply(
        removed
            .iter()
            .map(|(id, _)| Change::Remove(*id))
            .chain(moved.iter().map(|(id, vector)| upsert(*id, vector.clone())))
            .collect(),
    );
    let snapshot = index.snapshot();
    assert_eq!(snapshot.len(), corpus.rows.len() - removed.len());
    assert_eq!(snapshot.approximate().count(), 1);
    let gone: HashSet<MemoryId> = removed.iter().map(|(id, _)| *id).collect();
    for (_, vector) in &removed {
        let hits = snapshot
            .search_probing(&ns, std::slice::from_ref(vector), 10, 500, all)
            .hits;
        assert!(hits.iter().all(|hit| !gone.contains(&hit.id)));
    }
    for (id, vector) in &moved {
        let hits = snapshot
            .search_probing(&ns, std::slice::from_ref(vector), 50, 500, all)
            .hits;
        let hit = hits.iter().find(|hit| hit.id == *id);
        assert!(
            hit.is_some_and(|hit| hit.similarity > 0.999),
            "a moved memory is found where it went: {hit:?}"
        );
    }
}

/// `query` normalised, moved toward `toward` by `weight`, normalised
/// again: feedback's moved query.
fn moved(query: &[f32], toward: &[f32], weight: f32) -> Vec<f32> {
    let mut unit = query.to_vec();
    crate::index::normalise(&mut unit);
    let mut moved: Vec<f32> = unit
        .iter()
        .zip(toward)
        .map(|(q, t)| q + weight * t)
        .collect();
    crate::index::normalise(&mut moved);
    moved
}

#[test]
fn a_second_look_judges_the_first_searchs_rows_and_finds_what_a_search_of_both_would() {
    let mut rng = Rng(19);
    let corpus = corpus(&mut rng, 60, 100);
    let index = index_of(&corpus.rows);
    let snapshot = index.snapshot();
    let ns = [namespace()];
    let whole = snapshot.search_probing(&ns, &[rng.vector()], 10, corpus.rows.len(), all);
    assert!(
        whole.probed.is_none(),
        "every list probed: nothing narrowed"
    );
    let (mut found, mut asked, mut by_moved) = (0, 0, 0);
    for query in 0..20 {
        let query = rng.near(&corpus.centres[query], 0.6);
        let first = snapshot.search_probing(&ns, std::slice::from_ref(&query), 10, 1500, all);
        let probed = first.probed.as_ref().expect("a quarter of the rows probed");
        assert_eq!(
            snapshot.rescore(probed, std::slice::from_ref(&query), 10),
            first.hits,
            "the first search's queries find its hits again"
        );
        let best = snapshot.vector(&ns[0], first.hits[0].id).unwrap();
        assert_eq!(
            snapshot.probed_vector(probed, first.hits[0].id),
            Some(best.clone())
        );
        let queries = [query.clone(), moved(&query, &best, 0.2)];
        let again = snapshot.rescore(probed, &queries, 10);
        for pair in again.windows(2) {
            assert!(pair[0].similarity >= pair[1].similarity, "{again:?}");
        }
        for hit in &again {
            let stored = snapshot.vector(&ns[0], hit.id).unwrap();
            let similarity = |query: &[f32]| crate::index::cosine(query, &stored);
            let (of_query, of_moved) = (similarity(&queries[0]), similarity(&queries[1]));
            assert!(
                (hit.similarity - of_query.max(of_moved)).abs() < 1e-3,
                "{hit:?}: {of_query} {of_moved}"
            );
            by_moved += usize::from(hit.query == 1);
        }
        found += recall(&snapshot.exact_search(&ns, &queries, 10), &again);
        asked += 10;
    }
    assert!(by_moved > 0, "the moved queries found none of their own");
    assert!(
        found * 100 >= asked * 95,
        "recall@10 {found} of {asked} against the exact search of both queries"
    );
}

fn unit(vector: &[f32]) -> Vec<f32> {
    let mut vector = vector.to_vec();
    crate::index::normalise(&mut vector);
    vector
}

/// `corpus`'s rows in chunks, grouped into an approximate index's lists.
fn partitioned(corpus: &Corpus, coder: &Coder) -> (Vec<Arc<Chunk>>, Partition) {
    let chunks: Vec<Arc<Chunk>> = corpus
        .rows
        .chunks(CHUNK_CAPACITY)
        .map(|rows| {
            let mut chunk = Chunk::with_room(coder, rows.len());
            for (id, vector) in rows {
                let vector = unit(vector);
                let code = coder.code(&vector);
                chunk.push(
                    *id,
                    Category::Patterns,
                    &vector,
                    &code,
                    &lexical::Terms::default(),
                );
            }
            Arc::new(chunk)
        })
        .collect();
    Partition::build(&chunks, coder, corpus.rows.len())
}

#[test]
fn each_query_probes_the_lists_it_would_alone_and_lists_they_share_once() {
    let mut rng = Rng(31);
    let corpus = corpus(&mut rng, 60, 100);
    let coder = Coder::new(DIMENSIONS);
    let (chunks, partition) = partitioned(&corpus, &coder);
    let probed = |queries: &[&Query]| {
        let queries: Vec<Query> = queries.iter().map(|&query| query.clone()).collect();
        let (probed, left_out) = partition.probe(&chunks, &queries, 1000);
        assert!(left_out, "1,000 rows of 6,000 leave lists out");
        let distinct: HashSet<*const Chunk> =
            probed.iter().map(|&chunk| Arc::as_ptr(chunk)).collect();
        assert_eq!(distinct.len(), probed.len(), "a chunk once");
        distinct
    };
    for centre in 0..10 {
        let near = |rng: &mut Rng, centre: usize| {
            Query::new(&coder, &unit(&rng.near(&corpus.centres[centre], 0.6)))
        };
        let (one, other) = (near(&mut rng, centre), near(&mut rng, centre + 10));
        let (alone, other_alone) = (probed(&[&one]), probed(&[&other]));
        let both: HashSet<*const Chunk> = alone.union(&other_alone).copied().collect();
        assert_eq!(probed(&[&one, &other]), both);
        assert_eq!(probed(&[&one, &one]), alone, "twice the same query is once");
    }
}

/// The rows of `chunks`.
fn rows(chunks: &[&Arc<Chunk>]) -> usize {
    chunks.iter().map(|chunk| chunk.ids.len()).sum()
}

#[test]
fn the_shortlist_takes_the_lists_a_ranking_of_every_list_would_and_more_when_it_falls_short() {
    let mut rng = Rng(43);
    let corpus = corpus(&mut rng, 60, 1000);
    let coder = Coder::new(DIMENSIONS);
    let (chunks, partition) = partitioned(&corpus, &coder);
    let lists = partition.lists();
    assert!(lists > 200, "60,000 rows in lists of about 256: {lists}");
    let (mut shared, mut all_rows) = (0, 0);
    for centre in 0..30 {
        let query = [Query::new(
            &coder,
            &unit(&rng.near(&corpus.centres[centre], 0.6)),
        )];
        let (every, _) = partition.probe_shortlisting(&chunks, &query, 2000, lists);
        let (shortlisted, _) = partition.probe(&chunks, &query, 2000);
        let every_set: HashSet<*const Chunk> =
            every.iter().map(|&chunk| Arc::as_ptr(chunk)).collect();
        shared += rows(
            &shortlisted
                .iter()
                .copied()
                .filter(|&chunk| every_set.contains(&Arc::as_ptr(chunk)))
                .collect::<Vec<_>>(),
        );
        all_rows += rows(&every);
        assert!(rows(&shortlisted) >= 2000, "the rows wanted");
        let (one, _) = partition.probe_shortlisting(&chunks, &query, 2000, 1);
        assert!(
            rows(&one) >= 2000,
            "a shortlist of one list falls short; the rest are ranked"
        );
    }
    assert!(
        shared * 100 >= all_rows * 90,
        "{shared} of the {all_rows} rows a ranking of every list took"
    );
}

#[test]
fn a_narrowed_search_rescores_a_pool_sized_for_its_whole_namespace() {
    let mut rng = Rng(47);
    let corpus = corpus(&mut rng, 40, 1000);
    let index = index_of(&corpus.rows);
    let snapshot = index.snapshot();
    let ns = [namespace()];
    let query = [rng.near(&corpus.centres[0], 0.6)];
    let found = snapshot.search_probing(&ns, &query, 10, 2000, all);
    let probed = found
        .probed
        .expect("2,000 rows of 40,000 narrow the search");
    // 1 % of 40,000 rows, where 1 % of the 2,000 or so scanned would be
    // the smallest pool, 256.
    assert_eq!(probed.len(), 400);
}

#[test]
fn a_selective_filter_widens_the_search_to_what_the_exact_scan_finds() {
    let mut rng = Rng(13);
    let corpus = corpus(&mut rng, 60, 100);
    let index = index_of(&corpus.rows);
    let snapshot = index.snapshot();
    let ns = [namespace()];
    // One row in a hundred, spread over every cluster.
    let admitted: HashSet<MemoryId> = corpus.rows.iter().step_by(100).map(|(id, _)| *id).collect();
    let admit = |id: MemoryId, _: Category| admitted.contains(&id);
    for query in 0..20 {
        let query = [rng.near(&corpus.centres[query], 0.6)];
        let exact: Vec<MemoryId> = snapshot
            .exact_search(&ns, &query, corpus.rows.len())
            .into_iter()
            .filter(|hit| admitted.contains(&hit.id))
            .take(10)
            .map(|hit| hit.id)
            .collect();
        let found: Vec<MemoryId> = snapshot
            .search_probing(&ns, &query, 10, 500, admit)
            .hits
            .into_iter()
            .map(|hit| hit.id)
            .collect();
        assert_eq!(found, exact);
    }
}

#[test]
fn passages_of_a_large_namespace_are_searched_through_their_own_lists() {
    let mut rng = Rng(17);
    let corpus = corpus(&mut rng, 30, 50);
    let index = Index::new(DIMENSIONS).approximate_above(ABOVE);
    // Each memory's whole text is noise; its one passage is its vector.
    index.apply(
        corpus
            .rows
            .iter()
            .map(|(id, vector)| {
                Change::Upsert(
                    entry(*id),
                    Vectors {
                        whole: rng.vector(),
                        passages: vec![vector.clone()],
                    },
                )
            })
            .collect(),
    );
    let snapshot = index.snapshot();
    assert_eq!(snapshot.passages(), corpus.rows.len());
    let ns = [namespace()];
    for (id, vector) in corpus.rows.iter().step_by(97) {
        let hits = snapshot
            .search_passages(&ns, std::slice::from_ref(vector), 5, 0.9, all)
            .hits;
        assert_eq!(
            hits.first().map(|hit| (hit.id, hit.passage)),
            Some((*id, true))
        );
    }
}

#[test]
fn the_rows_a_search_probed_give_a_memorys_whole_vector_never_its_passages() {
    let mut rng = Rng(29);
    // Above the 16,384 rows a search probes, so that it is narrowed.
    let corpus = corpus(&mut rng, 100, 200);
    let index = Index::new(DIMENSIONS).approximate_above(ABOVE);
    let wholes: Vec<Vec<f32>> = corpus.rows.iter().map(|_| rng.vector()).collect();
    index.apply(
        corpus
            .rows
            .iter()
            .zip(&wholes)
            .map(|((id, vector), whole)| {
                let vectors = Vectors {
                    whole: whole.clone(),
                    passages: vec![vector.clone()],
                };
                Change::Upsert(entry(*id), vectors)
            })
            .collect(),
    );
    let snapshot = index.snapshot();
    let ns = [namespace()];
    let one = std::slice::from_ref;
    for (index, (id, vector)) in corpus.rows.iter().enumerate().step_by(1999) {
        let whole = snapshot.vector(&ns[0], *id);
        let by_passage = snapshot.search_passages(&ns, one(vector), 5, 0.9, all);
        assert_eq!(
            (by_passage.hits[0].id, by_passage.hits[0].passage),
            (*id, true)
        );
        let probed = by_passage.probed.expect("20,000 rows: narrowed");
        let looked_up = snapshot.probed_vector(&probed, *id);
        assert!(
            looked_up.is_none() || looked_up == whole,
            "not its passage's"
        );
        let by_whole = snapshot.search_passages(&ns, one(&wholes[index]), 5, 0.9, all);
        assert_eq!(
            (by_whole.hits[0].id, by_whole.hits[0].passage),
            (*id, false)
        );
        let probed = by_whole.probed.expect("20,000 rows: narrowed");
        assert_eq!(snapshot.probed_vector(&probed, *id), whole);
    }
}

#[test]
fn a_namespace_shrunk_to_half_the_threshold_is_scanned_again() {
    let mut rng = Rng(19);
    let corpus = corpus(&mut rng, 20, 100);
    let index = index_of(&corpus.rows);
    assert_eq!(index.snapshot().approximate().count(), 1);
    let (kept, removed) = corpus.rows.split_at(ABOVE / 2);
    index.apply(removed.iter().map(|(id, _)| Change::Remove(*id)).collect());
    let snapshot = index.snapshot();
    assert_eq!(snapshot.approximate().count(), 0);
    assert_eq!(snapshot.len(), kept.len());
    let ns = [namespace()];
    for (id, vector) in kept.iter().step_by(50) {
        let hits = snapshot.search(&ns, std::slice::from_ref(vector), 1, all);
        assert_eq!(hits[0].id, *id);
    }
}

#[test]
fn readers_see_whole_snapshots_while_the_index_is_built_and_rebuilt() {
    const BATCH: usize = 500;
    let mut rng = Rng(23);
    let corpus = corpus(&mut rng, 40, 200);
    let index = Arc::new(Index::new(DIMENSIONS).approximate_above(ABOVE));
    // The first batch's rows are what every reader looks for.
    let sentinels: Vec<(MemoryId, Vec<f32>)> = corpus
        .rows
        .iter()
        .take(BATCH)
        .step_by(25)
        .cloned()
        .collect();
    index.apply(
        corpus.rows[..BATCH]
            .iter()
            .map(|(id, vector)| upsert(*id, vector.clone()))
            .collect(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, done, sentinels) = (index.clone(), done.clone(), sentinels.clone());
            std::thread::spawn(move || {
                let ns = [namespace()];
                let mut reads = 0;
                while !done.load(Ordering::Acquire) || reads == 0 {
                    let snapshot = index.snapshot();
                    assert_eq!(snapshot.len() % BATCH, 0, "a whole number of batches");
                    assert_eq!(snapshot.entries().count(), snapshot.len());
                    for (id, vector) in &sentinels {
                        let query = std::slice::from_ref(vector);
                        let hits = snapshot.search_probing(&ns, query, 1, 500, all).hits;
                        assert_eq!(hits.first().map(|hit| hit.id), Some(*id));
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    // Past the threshold at the third batch, and four times it (trained
    // again) at the ninth.
    for batch in corpus.rows[BATCH..].chunks(BATCH) {
        index.apply(
            batch
                .iter()
                .map(|(id, vector)| upsert(*id, vector.clone()))
                .collect(),
        );
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        assert!(reader.join().expect("a reader failed") > 0);
    }
    let snapshot = index.snapshot();
    assert_eq!(snapshot.len(), corpus.rows.len());
    assert_eq!(snapshot.approximate().count(), 1);
}
