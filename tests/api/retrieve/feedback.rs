//! `POST /retrieve` searches twice: the query moved toward the first
//! search's best match (`retrieval.feedback_weight`), searched for beside
//! the query itself, finds that match's siblings; the answer names the
//! memory it was moved toward (`moved_toward`), and a memory the moved
//! query found closer says `feedback` in its reason. It runs only when the
//! two closest memories are near-tied, as a question about several like
//! things makes them.

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::id;
use crate::helpers::memory;

over_both_backends!(a_question_about_several_trips_finds_the_others_through_the_first,);

/// Three trips, the first put in the question's own words and told twice;
/// two notes that share its words but not its topic. With the embedded
/// model the note on the archive's order is closer to the question (0.32)
/// than the trips to Lisbon and Kyoto are (0.30, 0.29); the query moved
/// half of the way toward the Patagonia trip (0.54, its retelling 0.53: a
/// near-tie) is closer to both trips (0.35, 0.34), and further from the
/// note (0.25), which keeps the question's 0.32.
const FIRST_TRIP: &str = "My first trip this year was a week of hiking in Patagonia.";
const RETELLING: &str = "I took a trip to Patagonia in March to go hiking.";
const OTHER_TRIPS: [&str; 2] = [
    "In August we flew to Lisbon for a long weekend by the sea.",
    "We spent four days in Kyoto visiting temples in May.",
];
const ARCHIVE: &str = "The order of the files in the archive is alphabetical.";
const JOURNAL: &str = "I keep a journal of everything I did this year.";
const QUESTION: &str = "In what order did I take my trips this year?";

/// The answer at `feedback_weight`, by meaning alone, with the id of the
/// first trip; the first trip is told twice when `retold`.
async fn answer(backend: &Backend, feedback_weight: f64, retold: bool) -> (Value, String) {
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
    for content in OTHER_TRIPS.into_iter().chain([ARCHIVE, JOURNAL]) {
        create(content).await;
    }
    if retold {
        create(RETELLING).await;
    }
    app.wait_indexed().await;
    let result = app
        .retrieve(
            json!({"turn_id": "q", "user": "cy", "query": QUESTION, "top_k": 6,
            "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0, "access": 0.0}}),
        )
        .await;
    (result, first)
}

/// The place of a memory in `result`, by content.
fn place(result: &Value, content: &str) -> usize {
    result["memories"]
        .as_array()
        .unwrap()
        .iter()
        .position(|found| found["content"] == content)
        .unwrap_or_else(|| panic!("{content} is not found: {result:#}"))
}

/// Whether the reason of a memory in `result` says the moved query found it.
fn by_feedback(result: &Value, content: &str) -> bool {
    result["memories"][place(result, content)]["reason"]
        .get("feedback")
        .is_some_and(|feedback| feedback == true)
}

async fn a_question_about_several_trips_finds_the_others_through_the_first(backend: Backend) {
    let (once, first) = answer(&backend, 0.0, true).await;
    assert_eq!(once["memories"][0]["id"], first, "{once:#}");
    assert!(once.get("moved_toward").is_none(), "{once:#}");
    for trip in OTHER_TRIPS {
        assert!(
            place(&once, ARCHIVE) < place(&once, trip),
            "searched once, the archive note is closer than {trip}: {once:#}"
        );
        assert!(!by_feedback(&once, trip), "{once:#}");
    }

    let (twice, first) = answer(&backend.another().await, 0.5, true).await;
    assert_eq!(twice["moved_toward"], first, "{twice:#}");
    assert_eq!(twice["memories"][0]["id"], first, "{twice:#}");
    for trip in OTHER_TRIPS {
        assert!(
            place(&twice, trip) < place(&twice, ARCHIVE),
            "moved toward the first trip, the query finds {trip} first: {twice:#}"
        );
        assert!(by_feedback(&twice, trip), "{twice:#}");
    }
    assert!(
        !by_feedback(&twice, ARCHIVE),
        "the note keeps its closeness to the question itself: {twice:#}"
    );

    let (clear, _) = answer(&backend.another().await, 0.5, false).await;
    assert!(
        clear.get("moved_toward").is_none(),
        "told once, the first trip stands clear and the query stays: {clear:#}"
    );
    assert!(
        place(&clear, ARCHIVE) < place(&clear, OTHER_TRIPS[0]),
        "{clear:#}"
    );
}
