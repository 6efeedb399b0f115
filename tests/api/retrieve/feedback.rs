//! `POST /retrieve` searches twice: the query moved toward the first
//! search's best match (`retrieval.feedback_weight`) finds that match's
//! siblings, and the answer names the memory it was moved toward
//! (`moved_toward`).

use serde_json::{Value, json};

use super::id;
use crate::backends::{Backend, over_both_backends};
use crate::helpers::memory;

over_both_backends!(a_question_about_several_trips_finds_the_others_through_the_first,);

/// Three trips, the first put in the question's own words; two notes that
/// share its words but not its topic. With the embedded model the note on
/// the archive's order is closer to the question (0.32) than the trips to
/// Lisbon and Kyoto are (0.30, 0.29); moved a fifth of the way toward the
/// Patagonia trip, the query is closer to both trips (0.33, 0.32) than to
/// the note (0.29).
const FIRST_TRIP: &str = "My first trip this year was a week of hiking in Patagonia.";
const OTHER_TRIPS: [&str; 2] = [
    "In August we flew to Lisbon for a long weekend by the sea.",
    "We spent four days in Kyoto visiting temples in May.",
];
const ARCHIVE: &str = "The order of the files in the archive is alphabetical.";
const JOURNAL: &str = "I keep a journal of everything I did this year.";
const QUESTION: &str = "In what order did I take my trips this year?";

/// The answer at `feedback_weight`, by meaning alone, with the ids of the
/// first trip and the archive note.
async fn answer(backend: &Backend, feedback_weight: f64) -> (Value, String, String) {
    let app = backend
        .builder()
        .config(|config| {
            config.retrieval.feedback_weight = feedback_weight;
            config.retrieval.lexical_weight = 0.0;
        })
        .spawn()
        .await;
    let create = async |content| {
        id(&app
            .create(memory("user", "cy", "user-facts", content))
            .await)
    };
    let first = create(FIRST_TRIP).await;
    let archive = create(ARCHIVE).await;
    for content in OTHER_TRIPS.into_iter().chain([JOURNAL]) {
        create(content).await;
    }
    app.wait_indexed().await;
    let result = app
        .retrieve(
            json!({"turn_id": "q", "user": "cy", "query": QUESTION, "top_k": 5,
            "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0, "access": 0.0}}),
        )
        .await;
    (result, first, archive)
}

/// The place of each memory in `result`, by content.
fn place(result: &Value, content: &str) -> usize {
    result["memories"]
        .as_array()
        .unwrap()
        .iter()
        .position(|found| found["content"] == content)
        .unwrap_or_else(|| panic!("{content} is not found: {result:#}"))
}

async fn a_question_about_several_trips_finds_the_others_through_the_first(backend: Backend) {
    let (once, first, _) = answer(&backend, 0.0).await;
    assert_eq!(once["memories"][0]["id"], first, "{once:#}");
    assert!(once.get("moved_toward").is_none(), "{once:#}");
    for trip in OTHER_TRIPS {
        assert!(
            place(&once, ARCHIVE) < place(&once, trip),
            "searched once, the archive note is closer than {trip}: {once:#}"
        );
    }

    let (twice, first, archive) = answer(&backend.another().await, 0.2).await;
    assert_eq!(twice["moved_toward"], first, "{twice:#}");
    assert_eq!(twice["memories"][0]["id"], first, "{twice:#}");
    for trip in OTHER_TRIPS {
        assert!(
            place(&twice, trip) < place(&twice, ARCHIVE),
            "moved toward the first trip, the query finds {trip} first: {twice:#}"
        );
    }
    let archive_similarity = |result: &Value| {
        result["memories"][place(result, ARCHIVE)]["scores"]["similarity"]
            .as_f64()
            .unwrap()
    };
    assert!(
        archive_similarity(&twice) < archive_similarity(&once),
        "the similarities are to the moved query ({archive}): {twice:#}"
    );
}
