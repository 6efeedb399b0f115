//! The local embedder against vectors from the reference sentence-transformers
//! pipeline (`tests/fixtures/minilm_reference.json`, a copy of the project's
//! shared reference vectors).

use std::sync::LazyLock;

use engram_encoder::{DIMENSIONS, LocalEmbedder, Priority, Source};
use serde::Deserialize;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/minilm_reference.json"
);

/// Loading takes a while, so every test shares one embedder.
static EMBEDDER: LazyLock<LocalEmbedder> =
    LazyLock::new(|| LocalEmbedder::load(Source::Bundled).expect("the bundled model loads"));

static ITEMS: LazyLock<Vec<Item>> = LazyLock::new(|| {
    let json = std::fs::read(FIXTURE).expect("the fixture is readable");
    serde_json::from_slice::<Fixture>(&json)
        .expect("the fixture parses")
        .items
});

#[derive(Deserialize)]
struct Fixture {
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    text: String,
    token_ids: Vec<u32>,
    embedding: Vec<f32>,
}

fn texts() -> Vec<&'static str> {
    ITEMS.iter().map(|item| item.text.as_str()).collect()
}

/// Cosine of two vectors of any length (the reference's need not be unit).
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

/// Asserts each vector is unit-length, 384-wide and within the fixture's
/// tolerance of its reference.
fn assert_matches_reference(label: &str, vectors: &[Vec<f32>]) {
    assert_eq!(vectors.len(), ITEMS.len());
    for (item, vector) in ITEMS.iter().zip(vectors) {
        assert_eq!(vector.len(), DIMENSIONS);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{label}: norm {norm}");
        let similarity = cosine(vector, &item.embedding);
        let start: String = item.text.chars().take(40).collect();
        eprintln!("{label}: cosine {similarity:.7} for {start:?}");
        assert!(
            similarity >= 0.999,
            "{label}: cosine {similarity} for {:?}",
            item.text
        );
    }
}

#[test]
fn token_ids_match_reference() {
    let ids = EMBEDDER.token_ids(&texts()).expect("tokenizes");
    for (item, ids) in ITEMS.iter().zip(ids) {
        assert_eq!(ids, item.token_ids, "{:?}", item.text);
    }
}

#[test]
fn texts_embedded_one_by_one_match_reference() {
    let vectors: Vec<Vec<f32>> = texts()
        .into_iter()
        .map(|text| EMBEDDER.embed(&[text]).expect("embeds").remove(0))
        .collect();
    assert_matches_reference("single", &vectors);
}

#[test]
fn texts_embedded_in_one_batch_match_reference() {
    let vectors = EMBEDDER.embed(&texts()).expect("embeds");
    assert_matches_reference("batched", &vectors);
}

/// The model card's similarities for its first three example sentences.
#[test]
fn published_similarities_hold() {
    let vectors = EMBEDDER.embed(&texts()[..3]).expect("embeds");
    let expected = [((0, 1), 0.6660), ((0, 2), 0.1046), ((1, 2), 0.1411)];
    for ((a, b), published) in expected {
        let similarity = cosine(&vectors[a], &vectors[b]);
        assert!(
            (similarity - published).abs() < 1e-3,
            "sentences {a} and {b}: {similarity}, published {published}"
        );
    }
}

#[test]
fn no_texts_give_no_vectors() {
    assert!(EMBEDDER.embed(&[]).expect("embeds nothing").is_empty());
}

/// A call of several forward passes, in turn (a query's) or side by side
/// on the backlog's threads: each text still gets its own vector, in order.
#[test]
fn a_call_of_many_passes_keeps_every_vector_in_place() {
    let many: Vec<&str> = texts().into_iter().cycle().take(100).collect();
    let alone = EMBEDDER.embed(&texts()).expect("embeds");
    for priority in [Priority::Query, Priority::Backlog] {
        let vectors = EMBEDDER.embed_as(&many, priority).expect("embeds");
        assert_eq!(vectors.len(), many.len());
        for (at, vector) in vectors.iter().enumerate() {
            let reference = &alone[at % alone.len()];
            let similarity = cosine(vector, reference);
            assert!(
                similarity > 0.99999,
                "{priority:?}, text {at}: cosine {similarity}"
            );
        }
    }
}

#[test]
fn texts_embedded_on_the_backlog_threads_match_reference() {
    let vectors = EMBEDDER
        .embed_as(&texts(), Priority::Backlog)
        .expect("embeds");
    assert_matches_reference("backlog", &vectors);
}
