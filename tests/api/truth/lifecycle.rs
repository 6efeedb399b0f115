//! A memory's lifecycle over the API: shown on every memory, brought in
//! by an import, listed by filter (archived ones only when asked for),
//! changed by confirm, review and restore without a new version, kept
//! across a restart; and what retrieval does with it.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{exported, import};
use crate::backends::{Backend, over_both_backends};
use crate::helpers::{id, ids, memory};

fn listed(app_answer: &Value) -> Vec<String> {
    app_answer["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect()
}

async fn a_lifecycle_is_listed_changed_by_hand_and_kept_without_a_new_version(backend: Backend) {
    let app = backend.spawn_app().await;
    let plain = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Errors are wrapped with context.",
        ))
        .await;
    assert_eq!(plain["validity"], "unverified");
    assert_eq!(plain["confidence"], "confirmed");
    assert_eq!(plain["needs_review"], false);
    assert_eq!(plain["archived"], false);

    let gone = exported(
        "The retry loop lives in src/net/retry.rs.",
        &json!({"validity": "gone", "checked_at": "2026-11-20T09:00:00Z"}),
    );
    let review = exported(
        "Retries back off exponentially.",
        &json!({"confidence": "provisional", "needs_review": true,
                "review_reason": "memory 42 it refines was superseded"}),
    );
    let archived = exported("The old CI ran on Jenkins.", &json!({"archived": true}));
    import(&app, &[gone.clone(), review.clone(), archived.clone()]).await;
    let (gone, review, archived) = (id(&gone), id(&review), id(&archived));

    let every = listed(&app.get("/memories?repo=forge").await.json);
    assert_eq!(
        every.len(),
        3,
        "archived memories are listed only when asked for"
    );
    assert!(!every.contains(&archived));
    assert_eq!(
        listed(&app.get("/memories?repo=forge&archived=true").await.json),
        [archived.as_str()]
    );
    assert_eq!(
        listed(&app.get("/memories?repo=forge&validity=gone").await.json),
        [gone.as_str()]
    );
    assert_eq!(
        listed(&app.get("/memories?needs_review=true").await.json),
        [review.as_str()]
    );
    assert_eq!(
        listed(&app.get("/memories?confidence=provisional").await.json),
        [review.as_str()]
    );
    app.get("/memories?validity=stale")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("validity"));

    let confirmed = app
        .post(&format!("/memories/{review}/confirm"), &json!({}))
        .await;
    assert_eq!(confirmed.status, StatusCode::OK, "{}", confirmed.text);
    assert_eq!(confirmed.json["confidence"], "confirmed");
    assert_eq!(
        confirmed.json["needs_review"], true,
        "confirming is not reviewing"
    );
    assert_eq!(confirmed.json["version"], 1, "no new version");
    assert!(confirmed.json["used_at"].is_string(), "{}", confirmed.text);
    let kept = app
        .post(
            &format!("/memories/{review}/review"),
            &json!({"action": "keep"}),
        )
        .await
        .json;
    assert_eq!(kept["needs_review"], false);
    assert!(kept.get("review_reason").is_none(), "{kept}");
    app.post(
        &format!("/memories/{review}/review"),
        &json!({"action": "shelve"}),
    )
    .await
    .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("action"));
    let restored = app
        .post(&format!("/memories/{archived}/restore"), &json!({}))
        .await
        .json;
    assert_eq!(restored["archived"], false);
    let forgotten = app
        .post(
            &format!("/memories/{gone}/review"),
            &json!({"action": "forget"}),
        )
        .await;
    assert_eq!(
        forgotten.status,
        StatusCode::NO_CONTENT,
        "{}",
        forgotten.text
    );
    app.post(&format!("/memories/{gone}/confirm"), &json!({}))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);

    if let Backend::Files = backend {
        let file = app.data_dir.join("repos/forge/.lifecycle.json");
        let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let mut kept_ids: Vec<&String> = kept.as_object().unwrap().keys().collect();
        kept_ids.sort();
        let mut used = vec![&review, &archived];
        used.sort();
        assert_eq!(kept_ids, used, "only what differs is kept: {kept}");
        for id in used {
            let mut lifecycle = kept[id].clone();
            assert!(lifecycle["used_at"].is_string(), "{kept}");
            lifecycle.as_object_mut().unwrap().remove("used_at");
            assert_eq!(
                lifecycle,
                json!({"validity": "unverified", "confidence": "confirmed",
                       "needs_review": false, "archived": false}),
                "settled, and used when it was: {kept}"
            );
        }
        assert!(!app.files().iter().any(|file| file.contains(&gone)));
    }
    let ground = app.into_ground();
    let app = backend.builder().on(ground).spawn().await;
    let read = app.get(&format!("/memories/{review}")).await.json;
    assert_eq!(
        read["confidence"], "confirmed",
        "kept across a restart: {read}"
    );
    assert_eq!(read["needs_review"], false);
    assert_eq!(read["version"], 1);
}

async fn retrieval_never_injects_what_is_gone_or_let_go_and_notes_what_changed(backend: Backend) {
    let app = backend.spawn_app().await;
    let sentence = "The payment service retries failed charges three times.";
    let lines = [
        exported(sentence, &json!({"validity": "gone"})),
        exported(sentence, &json!({"archived": true})),
        exported(sentence, &json!({"validity": "changed"})),
        exported(sentence, &json!({"confidence": "provisional"})),
        exported(sentence, &json!({"validity": "current"})),
        exported(
            sentence,
            &json!({"validity": "current", "needs_review": true,
                    "review_reason": "memory 0196 it relates to was superseded"}),
        ),
    ];
    import(&app, &lines).await;
    let [gone, archived, changed, provisional, current, review] = lines.map(|line| id(&line));
    app.wait_indexed().await;

    let result = app
        .retrieve(json!({"turn_id": "t1", "repo": "forge", "top_k": 10,
            "query": "how often are failed charges retried?"}))
        .await;
    let found = ids(&result);
    assert!(
        !found.contains(&gone) && !found.contains(&archived),
        "{result:#}"
    );
    assert_eq!(
        found[..2],
        [current.as_str(), provisional.as_str()],
        "{result:#}"
    );
    let mut lowest = found[2..].to_vec();
    lowest.sort();
    let mut expected = [changed.as_str(), review.as_str()];
    expected.sort();
    assert_eq!(lowest, expected, "{result:#}");
    let by_id = |wanted: &str| {
        result["memories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|memory| memory["id"] == wanted)
            .unwrap()
            .clone()
    };
    assert!(by_id(&current)["scores"].get("standing").is_none());
    assert_eq!(by_id(&provisional)["scores"]["standing"], 0.9);
    assert_eq!(by_id(&changed)["scores"]["standing"], 0.8);
    assert_eq!(by_id(&review)["scores"]["standing"], 0.7);
    let injection = result["injection"].as_str().unwrap();
    assert_eq!(
        injection
            .matches("*(note: the code it describes changed since it was written)*")
            .count(),
        1,
        "{injection}"
    );
    assert_eq!(
        injection
            .matches("memory 0196 it relates to was superseded")
            .count(),
        1,
        "{injection}"
    );

    let listed = app
        .retrieve(json!({"turn_id": "t2", "repo": "forge", "top_k": 10}))
        .await;
    let found = ids(&listed);
    assert_eq!(found.len(), 4, "without a query too: {listed:#}");
    assert!(!found.contains(&gone) && !found.contains(&archived));
}

/// A memory reached along an edge is lowered by its standing as one found
/// by the search is, and one whose code is gone is never reached.
async fn a_hop_is_lowered_by_its_standing_and_never_reaches_what_is_gone(backend: Backend) {
    let app = backend.spawn_app().await;
    let changed = exported(
        "Invoices are archived as PDF files for seven years.",
        &json!({"validity": "changed"}),
    );
    let gone = exported(
        "Receipts are rendered by the legacy templating engine.",
        &json!({"validity": "gone"}),
    );
    let found = exported(
        "The payment service retries failed charges three times.",
        &json!({"related": [{"id": changed["id"], "relationship": "related"},
                            {"id": gone["id"], "relationship": "related"}]}),
    );
    import(&app, &[changed.clone(), gone.clone(), found.clone()]).await;
    app.wait_indexed().await;
    let result = app
        .retrieve(
            json!({"turn_id": "t1", "repo": "forge", "top_k": 1, "hop_depth": 1,
            "query": "how often are failed charges retried?"}),
        )
        .await;
    let memories = result["memories"].as_array().unwrap();
    assert_eq!(ids(&result), [id(&found), id(&changed)], "{result:#}");
    let (seed, hop) = (&memories[0], &memories[1]);
    assert_eq!(hop["reason"]["kind"], "hop", "{result:#}");
    assert_eq!(hop["scores"]["standing"], 0.8, "{result:#}");
    let expected = seed["relevance"].as_f64().unwrap() * 0.8 * 0.8;
    assert!(
        (hop["relevance"].as_f64().unwrap() - expected).abs() < 1e-9,
        "the hop's decay, then its standing: {result:#}"
    );
}

/// An agent confirms a provisional memory and settles two under review
/// through MCP, as a person does through REST.
#[tokio::test]
async fn an_agent_confirms_keeps_and_forgets_through_mcp() {
    use crate::mcp::{ROOT, app_post, connect, ok, service};
    let app = service().await;
    let lines = [
        exported(
            "Releases are tagged from main.",
            &json!({"confidence": "provisional"}),
        ),
        exported(
            "Tags are signed.",
            &json!({"needs_review": true, "review_reason": "what it extends was superseded"}),
        ),
        exported("Tags are made by hand.", &json!({"needs_review": true})),
    ];
    let (status, imported) =
        app_post(&app, "/memories/import", ROOT, &json!({"memories": lines})).await;
    assert_eq!(status, StatusCode::OK, "{imported}");
    let [provisional, kept, forgotten] = lines.map(|line| id(&line));
    let client = connect(&app.base_url, ROOT).await;

    let confirmed = ok(&client, "confirm_memory", json!({"id": provisional})).await;
    assert_eq!(confirmed["confidence"], "confirmed", "{confirmed}");
    let review = ok(
        &client,
        "review_memory",
        json!({"id": kept, "action": "keep"}),
    )
    .await;
    assert_eq!(review["memory"]["needs_review"], false, "{review}");
    let review = ok(
        &client,
        "review_memory",
        json!({"id": forgotten, "action": "forget"}),
    )
    .await;
    assert!(review.get("memory").is_none(), "{review}");
    let listed = ok(&client, "list_memories", json!({"needs_review": true})).await;
    assert_eq!(listed["memories"], json!([]), "{listed}");
    let listed = ok(&client, "list_memories", json!({"repo": "forge"})).await;
    assert_eq!(listed["memories"].as_array().unwrap().len(), 2, "{listed}");
    client.cancel().await.unwrap();
    app.stop().await;
}

over_both_backends!(
    a_hop_is_lowered_by_its_standing_and_never_reaches_what_is_gone,
    a_lifecycle_is_listed_changed_by_hand_and_kept_without_a_new_version,
    retrieval_never_injects_what_is_gone_or_let_go_and_notes_what_changed,
);
