//! `POST /retrieve` judges a memory with its conversation: the memories
//! sharing its session lift it when their words match the question
//! together, and every result says how much (`scores.conversation`).

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::id;
use crate::helpers::memory;

over_both_backends!(
    a_memory_whose_conversation_holds_the_question_outranks_one_that_holds_more_alone,
);

/// Whether the trip's hotel memory ranks above the memory about hotel
/// prices in general, at `conversation_weight`: three memories of one
/// conversation, each holding part of the question, and memories without
/// a session, of which the one about prices holds more of the question's
/// words than the trip's hotel memory does.
async fn trip_hotel_ranks_first(backend: &Backend, conversation_weight: f64) -> (bool, Value) {
    let app = backend
        .builder()
        .config(|config| config.retrieval.conversation_weight = conversation_weight)
        .spawn()
        .await;
    let (mut trip_hotel, mut prices) = (String::new(), String::new());
    for (session, content) in [
        (
            Some("s-trip"),
            "We got the tickets for the Lisbon concert in June.",
        ),
        (
            Some("s-trip"),
            "Getting to Lisbon for the concert took all day.",
        ),
        (
            Some("s-trip"),
            "The hotel near the arena was ninety euros a night.",
        ),
        (
            None,
            "How much a hotel costs depends on the city and the season.",
        ),
        (None, "Ana prefers tabs over spaces."),
        (None, "Releases are deployed every Friday afternoon."),
    ] {
        let mut body = memory("user", "cy", "user-facts", content);
        if let Some(session) = session {
            body["session_id"] = json!(session);
        }
        let created = app.create(body).await;
        if content.contains("arena") {
            trip_hotel = id(&created);
        } else if content.contains("season") {
            prices = id(&created);
        }
    }
    app.wait_indexed().await;
    let result = app
        .retrieve(json!({"turn_id": "q", "user": "cy",
            "query": "How much did the hotel for the Lisbon concert cost?", "top_k": 5,
            "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0, "access": 0.0}}))
        .await;
    let place = |wanted: &str| {
        result["memories"]
            .as_array()
            .unwrap()
            .iter()
            .position(|found| found["id"] == wanted)
            .unwrap_or_else(|| panic!("{wanted} is not found: {result:#}"))
    };
    (place(&trip_hotel) < place(&prices), result)
}

async fn a_memory_whose_conversation_holds_the_question_outranks_one_that_holds_more_alone(
    backend: Backend,
) {
    let (first, alone) = trip_hotel_ranks_first(&backend, 0.0).await;
    assert!(
        !first,
        "judged alone, prices in general match better: {alone:#}"
    );
    let (first, together) = trip_hotel_ranks_first(&backend.another().await, 1.0).await;
    assert!(
        first,
        "with its conversation, the trip's hotel comes first: {together:#}"
    );
    let trip: Vec<&Value> = together["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|found| {
            found["content"].as_str().unwrap().contains("Lisbon")
                || found["content"].as_str().unwrap().contains("arena")
        })
        .collect();
    assert_eq!(trip.len(), 3, "{together:#}");
    for found in trip {
        assert_eq!(found["scores"]["conversation"], 1.0, "{found:#}");
    }
}
