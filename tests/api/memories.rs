//! `/memories`: writing, chains, edges, listing, paging and forgetting.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::memory;

async fn create_memory_writes_a_manual_version_one_file(backend: Backend) {
    let app = backend.spawn_app().await;
    let mut body = memory(
        "user",
        "ana",
        "coding-preferences",
        "  Prefers `errors.As` in Go.\n",
    );
    body["importance"] = json!(0.7);
    body["session_id"] = json!("s-42");

    let created = app.create(body).await;

    assert_eq!(created["version"], 1);
    assert_eq!(created["trigger"], "manual");
    assert_eq!(created["user"], "ana");
    assert_eq!(created["content"], "Prefers `errors.As` in Go.");
    assert_eq!(created["importance"], 0.7);
    let id = created["id"].as_str().unwrap();
    assert_eq!(uuid::Uuid::parse_str(id).unwrap().get_version_num(), 7);
    assert!(backend.holds(&app.data_dir, "users/ana", id).await);
    if let Backend::Files = backend {
        let text =
            std::fs::read_to_string(app.data_dir.join(format!("users/ana/{id}.md"))).unwrap();
        assert!(
            text.starts_with(&format!("---\nid: {id}\nversion: 1\nscope: user\n")),
            "{text}"
        );
        assert!(
            text.contains("session_id: s-42\ntrigger: manual\n---\nPrefers `errors.As` in Go.\n"),
            "{text}"
        );
    }
    let read = app.get(&format!("/memories/{id}")).await.json;
    assert_eq!(read["session_id"], "s-42");
    assert_eq!(read["importance"], 0.7);
}

async fn omitted_owners_use_the_configured_defaults(backend: Backend) {
    let app = backend
        .builder()
        .config(|config| {
            config.defaults.repo = "forge".parse().unwrap();
        })
        .spawn()
        .await;
    let created = app
        .create(json!({"scope": "repo", "category": "patterns", "content": "Use the builder."}))
        .await;
    assert_eq!(created["repo"], "forge");
    let created = app
        .create(json!({"scope": "user", "category": "user-facts", "content": "Lives in Lisbon."}))
        .await;
    assert_eq!(created["user"], "default");
}

async fn superseding_builds_a_chain_visible_from_every_version(backend: Backend) {
    let app = backend.spawn_app().await;
    let v1 = app
        .create(memory("repo", "forge", "project-conventions", "Tabs."))
        .await;
    let mut body = memory("repo", "forge", "project-conventions", "Four spaces.");
    body["supersedes"] = v1["id"].clone();
    let v2 = app.create(body).await;
    let mut body = memory("repo", "forge", "project-conventions", "Two spaces.");
    body["supersedes"] = v2["id"].clone();
    let v3 = app.create(body).await;

    assert_eq!(v2["version"], 2);
    assert_eq!(v3["version"], 3);
    assert_eq!(v3["supersedes"], v2["id"]);
    let expected: Vec<&Value> = vec![&v1["id"], &v2["id"], &v3["id"]];
    for version in [&v1, &v2, &v3] {
        let detail = app
            .get(&format!("/memories/{}", version["id"].as_str().unwrap()))
            .await;
        assert_eq!(detail.status, StatusCode::OK);
        let chain: Vec<&Value> = detail.json["chain"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["id"])
            .collect();
        assert_eq!(chain, expected);
    }
}

async fn edges_are_listed_in_both_directions(backend: Backend) {
    let app = backend.spawn_app().await;
    let target = app
        .create(memory(
            "repo",
            "forge",
            "architectural-decisions",
            "We use SQLite.",
        ))
        .await;
    let mut body = memory("user", "ana", "coding-preferences", "Ana writes raw SQL.");
    body["repo"] = json!("forge");
    body["related"] = json!([{"id": target["id"], "relationship": "depends-on"}]);
    let source = app.create(body).await;

    let from_source = app
        .get(&format!("/memories/{}", source["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        from_source.json["edges"],
        json!({"outgoing": [{"id": target["id"], "relationship": "depends-on"}], "incoming": []})
    );
    let from_target = app
        .get(&format!("/memories/{}", target["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        from_target.json["edges"],
        json!({"outgoing": [], "incoming": [{"id": source["id"], "relationship": "depends-on"}]})
    );
}

async fn deleting_removes_the_file_and_edges_to_it_are_ignored(backend: Backend) {
    let app = backend.spawn_app().await;
    let target = app
        .create(memory("repo", "forge", "patterns", "Retry with backoff."))
        .await;
    let mut body = memory("repo", "forge", "patterns", "Retries are capped at five.");
    body["related"] = json!([{"id": target["id"], "relationship": "refines"}]);
    let source = app.create(body).await;
    let target_id = target["id"].as_str().unwrap();
    assert!(backend.holds(&app.data_dir, "repos/forge", target_id).await);

    let deleted = app.delete(&format!("/memories/{target_id}")).await;

    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert!(!backend.holds(&app.data_dir, "repos/forge", target_id).await);
    app.get(&format!("/memories/{target_id}"))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    app.delete(&format!("/memories/{target_id}"))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    let detail = app
        .get(&format!("/memories/{}", source["id"].as_str().unwrap()))
        .await;
    assert_eq!(detail.json["edges"]["outgoing"], json!([]));
    assert_eq!(
        detail.json["related"].as_array().unwrap().len(),
        1,
        "the file itself is unchanged"
    );
}

async fn listing_filters_and_orders_newest_first(backend: Backend) {
    let app = backend.spawn_app().await;
    let a = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Forge uses the builder pattern.",
        ))
        .await;
    let b = app
        .create(memory(
            "repo",
            "anvil",
            "patterns",
            "Anvil uses BUILDERS too.",
        ))
        .await;
    let c = app
        .create(memory(
            "user",
            "ana",
            "coding-preferences",
            "Ana likes builders.",
        ))
        .await;
    let d = app
        .create(memory(
            "user",
            "bo",
            "user-facts",
            "Bo is on call on Fridays.",
        ))
        .await;

    let ids = |response: &crate::helpers::TestResponse| -> Vec<Value> {
        response.json["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].clone())
            .collect()
    };
    let all = app.get("/memories").await;
    assert_eq!(
        ids(&all),
        vec![
            d["id"].clone(),
            c["id"].clone(),
            b["id"].clone(),
            a["id"].clone()
        ]
    );
    assert_eq!(all.json["next_cursor"], Value::Null);

    let cases = [
        ("/memories?repo=forge", vec![&a]),
        ("/memories?user=ana", vec![&c]),
        ("/memories?repo=forge&user=ana", vec![&c, &a]),
        ("/memories?scope=user", vec![&d, &c]),
        ("/memories?category=patterns", vec![&b, &a]),
        ("/memories?text=builder", vec![&c, &b, &a]),
        ("/memories?text=builder&scope=repo&repo=anvil", vec![&b]),
        ("/memories?text=nothing%20like%20this", vec![]),
    ];
    for (uri, expected) in cases {
        let expected: Vec<Value> = expected.iter().map(|m| m["id"].clone()).collect();
        assert_eq!(ids(&app.get(uri).await), expected, "{uri}");
    }
}

async fn pages_cover_every_memory_exactly_once(backend: Backend) {
    let app = backend.spawn_app().await;
    let mut written = Vec::new();
    for n in 0..7 {
        written.push(
            app.create(memory("repo", "forge", "patterns", &format!("Fact {n}.")))
                .await["id"]
                .clone(),
        );
    }
    // A memory written between pages must not shift the pages after it.
    let mut seen = Vec::new();
    let mut uri = "/memories?limit=3".to_owned();
    loop {
        let page = app.get(&uri).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        let memories = page.json["memories"].as_array().unwrap();
        assert!(memories.len() <= 3);
        seen.extend(memories.iter().map(|m| m["id"].clone()));
        if seen.len() == 3 {
            app.create(memory("repo", "forge", "patterns", "Written mid-listing."))
                .await;
        }
        match page.json["next_cursor"].as_str() {
            Some(cursor) => uri = format!("/memories?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    written.reverse();
    assert_eq!(seen, written);
}

async fn pages_cover_memories_stamped_finer_than_a_microsecond(backend: Backend) {
    // An import keeps its lines' times as written, to the nanosecond.
    let app = backend.spawn_app().await;
    let at = "2026-11-20T12:00:00.123456789Z";
    let lines: Vec<Value> = (0..3)
        .map(|n| {
            json!({"id": uuid::Uuid::now_v7().to_string(), "version": 1, "scope": "repo",
                   "repo": "forge", "category": "patterns", "created_at": at, "updated_at": at,
                   "trigger": "manual", "content": format!("Fact {n}.")})
        })
        .collect();
    let imported = app
        .post("/memories/import", &json!({"memories": lines}))
        .await;
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.text);

    let mut seen = Vec::new();
    let mut uri = "/memories?limit=1".to_owned();
    loop {
        let page = app.get(&uri).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        seen.extend(
            page.json["memories"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].clone()),
        );
        match page.json["next_cursor"].as_str() {
            Some(cursor) => uri = format!("/memories?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    let mut expected: Vec<Value> = lines.iter().map(|line| line["id"].clone()).collect();
    expected.sort_by_key(|id| std::cmp::Reverse(id.as_str().unwrap().to_owned()));
    assert_eq!(seen, expected);
}

async fn stats_count_memories_per_namespace_and_category(backend: Backend) {
    let app = backend.spawn_app().await;
    app.create(memory("repo", "forge", "patterns", "One."))
        .await;
    app.create(memory("repo", "forge", "patterns", "Two."))
        .await;
    app.create(memory("repo", "forge", "corrections", "Three."))
        .await;
    app.create(memory("user", "ana", "user-facts", "Four."))
        .await;

    let mut stats = app.get("/stats").await;

    assert_eq!(stats.status, StatusCode::OK);
    // The live sync's counters move on their own time (tests/api/sync.rs).
    let sync = stats.json["store"]
        .as_object_mut()
        .unwrap()
        .remove("sync")
        .unwrap();
    // Nothing watches the data directory in postgres mode: live sync of
    // hand edits is a files-mode feature.
    assert_eq!(sync["watching"], matches!(backend, Backend::Files));
    assert_eq!(
        stats.json["store"],
        json!({
            "memories": 4,
            "versions": 4,
            "namespaces": {
                "repo/forge": {"memories": 3, "versions": 3, "categories": {"corrections": 1, "patterns": 2}},
                "user/ana": {"memories": 1, "versions": 1, "categories": {"user-facts": 1}},
            },
            "skipped_files": 0,
            "skipped": [],
        })
    );
}

async fn health_and_readiness_answer(backend: Backend) {
    let app = backend.spawn_app().await;
    let health = app.get("/healthz").await;
    assert_eq!(
        (health.status, health.json["status"].clone()),
        (StatusCode::OK, json!("ok"))
    );
    let ready = app.get("/readyz").await;
    assert_eq!(
        (ready.status, ready.json["status"].clone()),
        (StatusCode::OK, json!("ready"))
    );
}

async fn listings_and_counts_show_current_memories_unless_all_versions_are_asked_for(
    backend: Backend,
) {
    let app = backend.spawn_app().await;
    let v1 = app
        .create(memory(
            "user",
            "ana",
            "coding-preferences",
            "Ana likes tabs.",
        ))
        .await;
    // Counted now, and counted again after each change below.
    let counts = &app.get("/stats").await.json["store"];
    assert_eq!(
        (&counts["memories"], &counts["versions"]),
        (&json!(1), &json!(1))
    );
    let mut body = memory("user", "ana", "coding-preferences", "Ana likes spaces.");
    body["supersedes"] = v1["id"].clone();
    let v2 = app.create(body).await;
    let other = app
        .create(memory("user", "ana", "user-facts", "Ana is in Lisbon."))
        .await;

    let ids = |response: &crate::helpers::TestResponse| -> Vec<Value> {
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        response.json["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].clone())
            .collect()
    };
    let current = vec![other["id"].clone(), v2["id"].clone()];
    assert_eq!(ids(&app.get("/memories").await), current);
    assert_eq!(
        ids(&app.get("/memories?user=ana&all_versions=false").await),
        current
    );
    assert_eq!(
        ids(&app.get("/memories?all_versions=true").await),
        vec![other["id"].clone(), v2["id"].clone(), v1["id"].clone()]
    );
    app.get("/memories?all_versions=maybe")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("all_versions"));

    // The browser's namespace chips show `memories` per namespace.
    let store = &app.get("/stats").await.json["store"];
    assert_eq!(store["memories"], 2, "{store:#}");
    assert_eq!(store["versions"], 3, "{store:#}");
    assert_eq!(
        store["namespaces"]["user/ana"],
        json!({"memories": 2, "versions": 3,
            "categories": {"coding-preferences": 1, "user-facts": 1}})
    );

    let deleted = app
        .delete(&format!("/memories/{}", other["id"].as_str().unwrap()))
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    let store = &app.get("/stats").await.json["store"];
    assert_eq!(
        store["namespaces"]["user/ana"],
        json!({"memories": 1, "versions": 2, "categories": {"coding-preferences": 1}})
    );
    for id in [&v2["id"], &v1["id"]] {
        app.delete(&format!("/memories/{}", id.as_str().unwrap()))
            .await;
    }
    let store = &app.get("/stats").await.json["store"];
    assert_eq!(store["memories"], 0, "{store:#}");
    assert_eq!(store["namespaces"], json!({}), "{store:#}");
}

async fn a_new_version_keeps_what_the_request_leaves_out(backend: Backend) {
    let app = backend.spawn_app().await;
    let target = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Forge deploys with helm.",
        ))
        .await;
    let mut body = memory("repo", "forge", "patterns", "Deploys run on Fridays.");
    body["importance"] = json!(0.8);
    body["session_id"] = json!("s-42");
    body["related"] = json!([{"id": target["id"], "relationship": "depends-on"}]);
    let v1 = app.create(body).await;

    let mut body = memory("repo", "forge", "patterns", "Deploys run on Thursdays.");
    body["supersedes"] = v1["id"].clone();
    let v2 = app.create(body).await;
    assert_eq!(v2["version"], 2);
    for field in ["importance", "session_id", "related"] {
        assert_eq!(v2[field], v1[field], "`{field}` is carried over: {v2:#}");
    }

    // What the request gives wins, and `[]` drops the edges.
    let mut body = memory("repo", "forge", "patterns", "Deploys run on Wednesdays.");
    body["supersedes"] = v2["id"].clone();
    body["importance"] = json!(0.3);
    body["related"] = json!([]);
    let v3 = app.create(body).await;
    assert_eq!(v3["importance"], 0.3);
    assert_eq!(v3["related"], json!([]));
    assert_eq!(v3["session_id"], "s-42");

    // A memory written from scratch takes nothing from anywhere.
    let fresh = app
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys need a ticket.",
        ))
        .await;
    assert_eq!(fresh["importance"], Value::Null, "{fresh:#}");
}

over_both_backends!(
    create_memory_writes_a_manual_version_one_file,
    omitted_owners_use_the_configured_defaults,
    superseding_builds_a_chain_visible_from_every_version,
    edges_are_listed_in_both_directions,
    deleting_removes_the_file_and_edges_to_it_are_ignored,
    listing_filters_and_orders_newest_first,
    pages_cover_every_memory_exactly_once,
    pages_cover_memories_stamped_finer_than_a_microsecond,
    stats_count_memories_per_namespace_and_category,
    health_and_readiness_answer,
    listings_and_counts_show_current_memories_unless_all_versions_are_asked_for,
    a_new_version_keeps_what_the_request_leaves_out,
);
