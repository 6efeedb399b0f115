//! `GET /memories/{id}/graph`: a memory's neighbourhood over related edges
//! and versions, bounded by hops and size, within the caller's grant.

use axum::http::{Method, StatusCode};
use engram::config::ApiKey;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::grants::{grant, send};
use crate::helpers::{TestApp, id, memory, spawn_app};

over_both_backends!(
    the_graph_walks_edges_both_ways_and_versions_within_its_depth,
    a_limited_key_walks_only_through_what_it_can_see,
);

fn node_ids(graph: &Value) -> Vec<&str> {
    graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["id"].as_str().unwrap())
        .collect()
}

/// a ← refines ← b (v1, superseded by b2), and c related to a.
async fn fixture(app: &TestApp) -> (String, String, String, String) {
    let a = id(&app
        .create(memory("repo", "forge", "patterns", "A: deploy with Helm."))
        .await);
    let mut b = memory(
        "repo",
        "forge",
        "patterns",
        "B: Helm charts live in deploy/.",
    );
    b["related"] = json!([{"id": a, "relationship": "refines"}]);
    let b = id(&app.create(b).await);
    let mut b2 = memory(
        "repo",
        "forge",
        "patterns",
        "B2: Helm charts live in charts/.",
    );
    b2["supersedes"] = json!(b);
    // Left out, b's edge would be carried over to b2: none, said so.
    b2["related"] = json!([]);
    let b2 = id(&app.create(b2).await);
    let mut c = memory("repo", "forge", "patterns", "C: staging mirrors prod.");
    c["related"] = json!([{"id": a, "relationship": "related"}]);
    let c = id(&app.create(c).await);
    (a, b, b2, c)
}

async fn the_graph_walks_edges_both_ways_and_versions_within_its_depth(backend: Backend) {
    let app = backend.spawn_app().await;
    let (a, b, b2, c) = fixture(&app).await;
    let one = app.get(&format!("/memories/{a}/graph?depth=1")).await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.text);
    let mut nodes = node_ids(&one.json);
    assert_eq!(nodes.remove(0), a, "the memory first");
    nodes.sort_unstable();
    let mut expected = [b.as_str(), c.as_str()];
    expected.sort_unstable();
    assert_eq!(nodes, expected, "b2 is two hops away");
    assert_eq!(one.json["truncated"], false);
    let root = &one.json["nodes"][0];
    assert_eq!(
        (&root["hops"], &root["label"], &root["current"]),
        (&json!(0), &json!("A: deploy with Helm."), &json!(true))
    );

    let two = app.get(&format!("/memories/{a}/graph")).await.json;
    assert_eq!(node_ids(&two).len(), 4);
    let edges = two["edges"].as_array().unwrap();
    assert!(
        edges.contains(&json!({"from": b, "to": a, "kind": "related", "relationship": "refines"}))
    );
    assert!(
        edges.contains(&json!({"from": c, "to": a, "kind": "related", "relationship": "related"}))
    );
    assert!(edges.contains(&json!({"from": b2, "to": b, "kind": "supersedes"})));
    assert_eq!(edges.len(), 3);
    let old = two["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == b.as_str())
        .unwrap();
    assert_eq!(old["current"], false);

    let capped = app.get(&format!("/memories/{a}/graph?limit=2")).await.json;
    assert_eq!(node_ids(&capped).len(), 2);
    assert_eq!(capped["truncated"], true);
    assert_eq!(
        capped["edges"].as_array().unwrap().len(),
        1,
        "only edges between its nodes"
    );
}

#[tokio::test]
async fn graph_requests_are_checked() {
    let app = spawn_app().await;
    let a = id(&app.create(memory("repo", "forge", "patterns", "A.")).await);
    for (query, field) in [
        ("depth=0", "depth"),
        ("depth=5", "depth"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("hops=1", "hops"),
    ] {
        app.get(&format!("/memories/{a}/graph?{query}"))
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
    }
    app.get("/memories/nope/graph")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("id"));
    app.get("/memories/0193f0c2-0000-7000-8000-000000000001/graph")
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
}

async fn a_limited_key_walks_only_through_what_it_can_see(backend: Backend) {
    const ROOT: &str = "root-key";
    const LIMITED: &str = "forge-key";
    let app = backend
        .builder()
        .config(|config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![grant(LIMITED, &["forge"], &["bob"])];
        })
        .spawn()
        .await;
    let create = async |body: Value| {
        let response = send(&app, Method::POST, "/memories", Some(body), ROOT).await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        id(&response.json)
    };
    let shared = create(memory(
        "repo",
        "forge",
        "patterns",
        "Forge deploys with Helm.",
    ))
    .await;
    let mut private = memory("user", "ana", "user-facts", "Ana reviews Helm changes.");
    private["repo"] = json!("forge");
    private["related"] = json!([{"id": shared, "relationship": "depends-on"}]);
    let private = create(private).await;

    let root = send(
        &app,
        Method::GET,
        &format!("/memories/{shared}/graph"),
        None,
        ROOT,
    )
    .await;
    assert_eq!(node_ids(&root.json), [shared.as_str(), private.as_str()]);
    let limited = send(
        &app,
        Method::GET,
        &format!("/memories/{shared}/graph"),
        None,
        LIMITED,
    )
    .await;
    assert_eq!(node_ids(&limited.json), [shared.as_str()]);
    assert_eq!(limited.json["edges"], json!([]));
    send(
        &app,
        Method::GET,
        &format!("/memories/{private}/graph"),
        None,
        LIMITED,
    )
    .await
    .assert_problem(StatusCode::NOT_FOUND, None);
}
