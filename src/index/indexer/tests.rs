//! The indexer's two steps against a real store: over any interleaving of
//! writes, deletes, words steps, gathers and finished batches, nothing is
//! lost, reordered or left pending.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::memory::{Category, Confidence, MemoryId, Namespace, Origin, Scope};
use crate::store::{NamespacePair, NewMemory};

/// What a test run does, one step at a time.
#[derive(Clone, Debug)]
enum Step {
    Write,
    /// Deletes the n-th memory written (modulo), if it still exists.
    Delete(usize),
    /// The words step.
    Words,
    /// The clock moves on this many milliseconds, and the indexer
    /// gathers (in a hurry: a reader waits): maybe it takes a batch
    /// (when none is in flight).
    Gather(u64, bool),
    /// The batch in flight gets its vectors.
    Embedded,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Write),
        1 => any::<usize>().prop_map(Step::Delete),
        2 => Just(Step::Words),
        2 => (0u64..8, any::<bool>()).prop_map(|(millis, hurry)| Step::Gather(millis, hurry)),
        2 => Just(Step::Embedded),
    ]
}

/// A batch in flight: the changes taken, and what the indexer found
/// of each when it took it (a deleted memory: a removal).
struct InFlight {
    batch: Vec<PendingChange>,
    changes: Vec<(PendingChange, Change)>,
}

/// The index as the indexer leaves it; `written` holds each memory's
/// unique word.
struct Run {
    store: Store,
    index: Index,
    gathering: Gathering,
    in_flight: Option<InFlight>,
    start: Instant,
    clock: Duration,
    written: Vec<(MemoryId, String)>,
    deleted: HashSet<MemoryId>,
    /// When each memory last changed (a count of recorded changes).
    changed_at: HashMap<MemoryId, usize>,
    recorded: usize,
    /// `changed_at` of every change taken into a batch, in order.
    taken: Vec<usize>,
}

impl Run {
    async fn write(&mut self) {
        let serial = self.written.len();
        let word = format!("unique{serial}");
        let memory = self
            .store
            .create(NewMemory {
                pair: NamespacePair {
                    repo: "forge".parse().unwrap(),
                    user: "ana".parse().unwrap(),
                },
                scope: Scope::Repo,
                category: Category::Patterns,
                content: format!("Note {word} about the build."),
                importance: None,
                supersedes: None,
                related: Vec::new(),
                session_id: None,
                trigger: Origin::Manual,
                anchors: Vec::new(),
                commit: None,
                observed_at: None,
                confidence: Confidence::Confirmed,
            })
            .await
            .unwrap();
        self.recorded += 1;
        self.changed_at.insert(memory.id, self.recorded);
        self.written.push((memory.id, word));
    }

    async fn delete(&mut self, n: usize) {
        if self.written.is_empty() {
            return;
        }
        let id = self.written[n % self.written.len()].0;
        if self.deleted.insert(id) {
            self.store.delete(id).await.unwrap();
            self.recorded += 1;
            self.changed_at.insert(id, self.recorded);
        }
    }

    fn gather(&mut self, millis: u64, hurry: bool) {
        self.clock += Duration::from_millis(millis);
        if self.in_flight.is_some() {
            return;
        }
        let now = self.start + self.clock;
        let pending = self.store.oldest_pending(BATCH_SIZE);
        if let Next::Embed(batch) = self.gathering.next(&pending, now, hurry) {
            assert!(batch.len() <= BATCH_SIZE);
            assert_eq!(batch, &pending[..batch.len()], "the oldest, in order");
            let changes = batch
                .iter()
                .map(|change| {
                    let found = match self.store.get(change.id) {
                        Some(memory) => Change::Upsert(entry_of(&memory), vec![1.0, 0.0].into()),
                        None => Change::Remove(change.id),
                    };
                    (*change, found)
                })
                .collect();
            self.taken
                .extend(batch.iter().map(|change| self.changed_at[&change.id]));
            self.in_flight = Some(InFlight {
                batch: batch.to_vec(),
                changes,
            });
        }
    }

    fn embedded(&mut self) {
        if let Some(InFlight { batch, changes }) = self.in_flight.take() {
            finish_batch(
                &self.store,
                &self.index,
                &batch,
                changes,
                Grouping::AsTheyGrow,
            );
        }
    }

    /// Whether a lexical search for `word` finds `id`, and whether its
    /// vector is pending.
    fn found(&self, id: MemoryId, word: &str) -> Option<bool> {
        let namespace = Namespace::Repo("forge".parse().unwrap());
        self.index
            .snapshot()
            .lexical_search(
                &[namespace],
                &lexical::query_terms(word),
                &[],
                10,
                |_, _| true,
            )
            .hits
            .into_iter()
            .find(|hit| hit.id == id)
            .map(|hit| hit.vector_pending)
    }

    /// Every live memory is found by its words (once its words step has
    /// run), no deleted one is, on either side.
    fn check_words(&self) {
        assert_eq!(
            self.store.pending_change_count(IndexStage::Words),
            0,
            "the words step took everything in"
        );
        for (id, word) in &self.written {
            let found = self.found(*id, word);
            if self.deleted.contains(id) {
                assert_eq!(found, None, "{word} was deleted");
            } else {
                assert!(found.is_some(), "{word} is live");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Over any interleaving of writes, deletes, words steps, gathers
    /// and finished batches: batches take changes in the order they
    /// were recorded; after a words step every live memory is findable
    /// by its words and no deleted one is; and once drained, every live
    /// memory has its vector and nothing is lost or left pending.
    #[test]
    fn gathering_never_loses_or_reorders_changes(steps in prop::collection::vec(step(), 1..60)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut run = Run {
                store: Store::open(dir.path()).unwrap().0,
                index: Index::new(2),
                gathering: Gathering::default(),
                in_flight: None,
                start: Instant::now(),
                clock: Duration::ZERO,
                written: Vec::new(),
                deleted: HashSet::new(),
                changed_at: HashMap::new(),
                recorded: 0,
                taken: Vec::new(),
            };
            for step in steps {
                match step {
                    Step::Write => run.write().await,
                    Step::Delete(n) => run.delete(n).await,
                    Step::Words => {
                        take_in_words(&run.store, &run.index);
                        run.check_words();
                    }
                    Step::Gather(millis, hurry) => run.gather(millis, hurry),
                    Step::Embedded => run.embedded(),
                }
            }
            // Drain, as the indexer's loop does.
            take_in_words(&run.store, &run.index);
            run.check_words();
            while run.in_flight.is_some() || run.store.pending_change_count(IndexStage::Vectors) > 0 {
                run.embedded();
                take_in_words(&run.store, &run.index);
                run.gather(u64::try_from(GATHER.as_millis()).unwrap(), false);
            }
            assert!(
                run.taken.windows(2).all(|pair| pair[0] < pair[1]),
                "changes are taken in the order they were recorded: {:?}",
                run.taken
            );
            let live = run.written.len() - run.deleted.len();
            let snapshot = run.index.snapshot();
            assert_eq!((snapshot.len(), snapshot.words_only()), (live, 0));
            for (id, word) in &run.written {
                let expected = (!run.deleted.contains(id)).then_some(false);
                assert_eq!(run.found(*id, word), expected, "{word}");
            }
        });
    }
}
