//! Invalidation along links: superseding or forgetting a memory puts the
//! current memories linked to it (either way) under review, naming it and
//! what happened; unlinked memories and the memory's own chain are never
//! flagged.

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id, memory};

async fn write(app: &TestApp, content: &str, related: &[(&Value, &str)]) -> Value {
    let mut body = memory("repo", "forge", "architectural-decisions", content);
    body["related"] = related
        .iter()
        .map(|(target, relationship)| json!({"id": target["id"], "relationship": relationship}))
        .collect();
    app.create(body).await
}

async fn under_review(app: &TestApp) -> Vec<(String, String)> {
    let listed = app.get("/memories?repo=forge&needs_review=true").await.json;
    let mut flagged: Vec<(String, String)> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| {
            (
                id(memory),
                memory["review_reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    flagged.sort();
    flagged
}

async fn a_changed_fact_puts_every_memory_linked_to_it_under_review_and_no_other(backend: Backend) {
    let app = backend.spawn_app().await;
    let cache = write(&app, "Sessions are cached in Redis.", &[]).await;
    let decision = write(&app, "We chose Redis for its TTLs.", &[(&cache, "extends")]).await;
    let depends = write(
        &app,
        "Logout clears the Redis key.",
        &[(&decision, "depends-on")],
    )
    .await;
    let unrelated = write(&app, "The API speaks JSON.", &[]).await;

    let mut next = memory(
        "repo",
        "forge",
        "architectural-decisions",
        "We chose Valkey for its TTLs.",
    );
    next["supersedes"] = decision["id"].clone();
    let replaced = app.create(next).await;

    let (decision_id, replaced_id) = (id(&decision), id(&replaced));
    let reason = format!("memory {decision_id} it is linked to was superseded by {replaced_id}");
    let mut expected = vec![(id(&cache), reason.clone()), (id(&depends), reason)];
    expected.sort();
    assert_eq!(
        under_review(&app).await,
        expected,
        "both ends of its edges, nothing else"
    );
    let read = app.get(&format!("/memories/{}", id(&unrelated))).await.json;
    assert_eq!(read["needs_review"], false, "{read}");
    let read = app.get(&format!("/memories/{replaced_id}")).await.json;
    assert_eq!(
        read["needs_review"], false,
        "its own chain is not flagged: {read}"
    );
    assert_eq!(
        app.get(&format!("/memories/{}", id(&depends))).await.json["version"],
        1,
        "a flag is not a new version"
    );

    for (flagged, _) in &expected {
        app.post(
            &format!("/memories/{flagged}/review"),
            &json!({"action": "keep"}),
        )
        .await;
    }
    let linked = write(
        &app,
        "Redis runs with appendonly on.",
        &[(&cache, "refines")],
    )
    .await;
    assert_eq!(
        app.delete(&format!("/memories/{}", id(&cache)))
            .await
            .status,
        204
    );
    // The new version carried the old one's edge to the cache: it is
    // linked too.
    let forgotten = format!("memory {} it is linked to was forgotten", id(&cache));
    let mut expected = vec![(id(&linked), forgotten.clone()), (replaced_id, forgotten)];
    expected.sort();
    assert_eq!(under_review(&app).await, expected);
}

over_both_backends!(a_changed_fact_puts_every_memory_linked_to_it_under_review_and_no_other,);
