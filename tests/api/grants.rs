//! Keys limited to some repos and users: every path keeps other namespaces
//! out of sight (404 for their ids, 403 for their pairs); `/metrics` and
//! `/stats` follow the documented rules.
//! Hand-edited links into another namespace are in `links`. What a key
//! sees of stored memories runs over both backends; keys themselves
//! (wrong, missing) cannot depend on the backend.

mod links;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use engram::config::{ApiKey, KeyGrant};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, TestResponse, id, memory};

over_both_backends!(
    a_limited_key_cannot_fetch_or_delete_another_namespaces_memory,
    a_limited_key_lists_only_its_namespaces,
    a_limited_key_finds_no_similar_memories_elsewhere,
    a_limited_key_cannot_retrieve_or_hop_into_another_namespace,
    a_limited_key_cannot_write_or_capture_into_another_namespace,
    stats_metrics_and_edges_follow_the_grant,
    another_namespaces_ids_never_show_and_read_like_unknown_ids,
    a_key_for_a_user_writes_its_user_memories_without_naming_a_repo,
    a_retrieval_leaves_out_an_omitted_owner_the_key_does_not_hold,
);

pub const ROOT: &str = "root-key";
pub const LIMITED: &str = "forge-ana-key";

/// A full key, [`ROOT`], and [`LIMITED`], a key limited to repo `forge`
/// and user `ana`.
pub fn root_and_limited_keys(config: &mut engram::config::Config) {
    config.api_key = Some(ApiKey::new(ROOT));
    config.auth.keys = vec![grant(LIMITED, &["forge"], &["ana"])];
}

struct Fixture {
    app: TestApp,
    /// In repo/forge: visible to the limited key.
    mine: Value,
    /// In repo/secret: not visible to it.
    theirs: Value,
}

async fn fixture(backend: &Backend) -> Fixture {
    let app = backend
        .builder()
        .embedder()
        .llm()
        .config(root_and_limited_keys)
        .spawn()
        .await;
    let create = async |body: Value| {
        let response = send(&app, Method::POST, "/memories", Some(body), ROOT).await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        response.json
    };
    let theirs = create(memory(
        "repo",
        "secret",
        "patterns",
        "Deploys use the blue pipeline.",
    ))
    .await;
    let mut linked = memory(
        "repo",
        "forge",
        "patterns",
        "Deploys use the blue pipeline too.",
    );
    linked["user"] = json!("ana");
    let mine = create(linked).await;
    // An edge from their namespace into mine: it must not show from my side.
    let mut edge = memory(
        "repo",
        "secret",
        "patterns",
        "The blue pipeline needs approval.",
    );
    edge["related"] = json!([{"id": theirs["id"], "relationship": "refines"}]);
    create(edge).await;
    app.wait_indexed_with(ROOT).await;
    Fixture { app, mine, theirs }
}

pub async fn send(
    app: &TestApp,
    method: Method,
    uri: &str,
    body: Option<Value>,
    key: &str,
) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {key}"));
    let request = match body {
        Some(body) => request
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None => request.body(Body::empty()),
    };
    app.send(request.unwrap()).await
}

fn ids_of(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(id).collect()
}

async fn a_limited_key_cannot_fetch_or_delete_another_namespaces_memory(backend: Backend) {
    let f = fixture(&backend).await;
    for method in [Method::GET, Method::DELETE] {
        send(
            &f.app,
            method,
            &format!("/memories/{}", id(&f.theirs)),
            None,
            LIMITED,
        )
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    }
    let own = send(
        &f.app,
        Method::GET,
        &format!("/memories/{}", id(&f.mine)),
        None,
        LIMITED,
    )
    .await;
    assert_eq!(own.status, StatusCode::OK);
    assert!(
        send(
            &f.app,
            Method::GET,
            &format!("/memories/{}", id(&f.theirs)),
            None,
            ROOT
        )
        .await
        .status
            == StatusCode::OK
    );
}

async fn a_limited_key_lists_only_its_namespaces(backend: Backend) {
    let f = fixture(&backend).await;
    for uri in ["/memories", "/memories?text=pipeline"] {
        let listed = send(&f.app, Method::GET, uri, None, LIMITED).await.json;
        let ids: Vec<String> = listed["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(id)
            .collect();
        assert!(!ids.contains(&id(&f.theirs)), "{uri}: {listed:#}");
    }
    let all = send(&f.app, Method::GET, "/memories", None, LIMITED)
        .await
        .json;
    assert_eq!(all["memories"].as_array().unwrap().len(), 1);
    for uri in ["/memories?repo=secret", "/memories?user=ana&repo=secret"] {
        let refused = send(&f.app, Method::GET, uri, None, LIMITED).await;
        refused.assert_problem(StatusCode::FORBIDDEN, None);
        assert!(
            refused.json["detail"]
                .as_str()
                .unwrap()
                .contains("repo/secret"),
            "{uri}: {:#}",
            refused.json
        );
    }
}

async fn a_limited_key_finds_no_similar_memories_elsewhere(backend: Backend) {
    let f = fixture(&backend).await;
    send(
        &f.app,
        Method::GET,
        &format!("/memories/{}/similar", id(&f.theirs)),
        None,
        LIMITED,
    )
    .await
    .assert_problem(StatusCode::NOT_FOUND, None);
    let similar = send(
        &f.app,
        Method::GET,
        &format!("/memories/{}/similar", id(&f.mine)),
        None,
        LIMITED,
    )
    .await;
    assert_eq!(
        similar.json["memories"],
        json!([]),
        "nothing of repo/secret: {}",
        similar.text
    );
}

async fn a_limited_key_cannot_retrieve_or_hop_into_another_namespace(backend: Backend) {
    let f = fixture(&backend).await;
    send(
        &f.app,
        Method::POST,
        "/retrieve",
        Some(json!({"turn_id": "t", "repo": "secret", "user": "ana", "query": "blue pipeline"})),
        LIMITED,
    )
    .await
    .assert_problem(StatusCode::FORBIDDEN, None);
    let result = send(&f.app, Method::POST, "/retrieve",
        Some(json!({"turn_id": "t", "repo": "forge", "user": "ana", "query": "blue pipeline", "hop_depth": 3, "top_k": 10})), LIMITED).await;
    assert_eq!(result.status, StatusCode::OK, "{}", result.text);
    let ids: Vec<String> = result.json["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect();
    assert_eq!(ids, [id(&f.mine)]);
}

async fn a_limited_key_cannot_write_or_capture_into_another_namespace(backend: Backend) {
    let f = fixture(&backend).await;
    let mut foreign = memory("repo", "secret", "patterns", "Injected.");
    foreign["user"] = json!("ana");
    send(&f.app, Method::POST, "/memories", Some(foreign), LIMITED)
        .await
        .assert_problem(StatusCode::FORBIDDEN, None);
    let window = json!({"session_id": "s", "repo": "forge", "user": "bob", "messages": [{"role": "user", "content": "x"}]});
    for path in ["/turns", "/compactions"] {
        send(&f.app, Method::POST, path, Some(window.clone()), LIMITED)
            .await
            .assert_problem(StatusCode::FORBIDDEN, None);
    }
    let own = json!({"session_id": "s", "repo": "forge", "user": "ana", "messages": [{"role": "user", "content": "x"}]});
    assert_eq!(
        send(&f.app, Method::POST, "/turns", Some(own), LIMITED)
            .await
            .status,
        StatusCode::ACCEPTED
    );
}

async fn stats_metrics_and_edges_follow_the_grant(backend: Backend) {
    let f = fixture(&backend).await;
    let stats = send(&f.app, Method::GET, "/stats", None, LIMITED)
        .await
        .json;
    let namespaces: Vec<&String> = stats["store"]["namespaces"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(namespaces, ["repo/forge"]);
    assert_eq!(stats["store"]["memories"], 1);
    assert!(stats.get("retrieval").is_none() && stats.get("capture").is_none());
    let root_stats = send(&f.app, Method::GET, "/stats", None, ROOT).await.json;
    assert_eq!(root_stats["store"]["memories"], 3);

    send(&f.app, Method::GET, "/metrics", None, LIMITED)
        .await
        .assert_problem(StatusCode::FORBIDDEN, None);
    assert_eq!(
        send(&f.app, Method::GET, "/metrics", None, ROOT)
            .await
            .status,
        StatusCode::OK
    );

    let detail = send(
        &f.app,
        Method::GET,
        &format!("/memories/{}", id(&f.theirs)),
        None,
        ROOT,
    )
    .await
    .json;
    assert_eq!(
        detail["edges"]["incoming"].as_array().unwrap().len(),
        1,
        "root sees the edge"
    );
}

#[tokio::test]
async fn wrong_and_missing_keys_are_refused_everywhere() {
    let f = fixture(&Backend::Files).await;
    for (method, uri) in [
        (Method::GET, "/memories"),
        (Method::POST, "/retrieve"),
        (Method::POST, "/turns"),
        (Method::GET, "/stats"),
        (Method::GET, "/metrics"),
    ] {
        send(&f.app, method.clone(), uri, Some(json!({})), "nope")
            .await
            .assert_problem(StatusCode::UNAUTHORIZED, None);
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap();
        f.app
            .send(request)
            .await
            .assert_problem(StatusCode::UNAUTHORIZED, None);
    }
}

/// A key limited to these repos and users.
pub fn grant(key: &str, repos: &[&str], users: &[&str]) -> KeyGrant {
    KeyGrant {
        sha256: Sha256::digest(key)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        repos: repos.iter().map(|&repo| repo.into()).collect(),
        users: users.iter().map(|&user| user.into()).collect(),
    }
}

async fn another_namespaces_ids_never_show_and_read_like_unknown_ids(backend: Backend) {
    let f = fixture(&backend).await;
    let theirs = id(&f.theirs);
    // ana's memory, written for (secret, ana), links to repo/secret.
    let mut body = memory(
        "user",
        "ana",
        "patterns",
        "Ana deploys the blue pipeline by hand.",
    );
    body["repo"] = json!("secret");
    body["related"] = json!([{"id": theirs, "relationship": "refines"}]);
    let linked = created_by_root(&f.app, body).await;
    // /similar searches one namespace: a neighbour of the linked memory.
    let mut near = memory(
        "user",
        "ana",
        "patterns",
        "Ana deploys the blue pipeline on Fridays.",
    );
    near["repo"] = json!("forge");
    let near = created_by_root(&f.app, near).await;
    f.app.wait_indexed_with(ROOT).await;
    let as_root = send(
        &f.app,
        Method::GET,
        &format!("/memories/{linked}"),
        None,
        ROOT,
    )
    .await;
    assert_eq!(
        as_root.json["related"][0]["id"], theirs,
        "root sees the edge"
    );

    let retrieve = json!({"turn_id": "t", "repo": "forge", "user": "ana", "query": "blue pipeline deploys", "top_k": 10});
    let seen = [
        send(
            &f.app,
            Method::GET,
            &format!("/memories/{linked}"),
            None,
            LIMITED,
        )
        .await,
        send(&f.app, Method::GET, "/memories?user=ana", None, LIMITED).await,
        send(
            &f.app,
            Method::GET,
            &format!("/memories/{near}/similar"),
            None,
            LIMITED,
        )
        .await,
        send(&f.app, Method::POST, "/retrieve", Some(retrieve), LIMITED).await,
    ];
    for response in &seen {
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        assert!(response.text.contains(&linked), "{}", response.text);
        assert!(!response.text.contains(&theirs), "{}", response.text);
    }

    // Superseding their memory reads exactly like superseding no memory.
    let unknown = "0193f0c2-0000-7000-8000-00000000ffff";
    let refusal = async |predecessor: &str| {
        let mut body = memory("repo", "forge", "patterns", "Deploys are green now.");
        body["user"] = json!("ana");
        body["supersedes"] = json!(predecessor);
        let refused = send(&f.app, Method::POST, "/memories", Some(body), LIMITED).await;
        refused.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("supersedes"));
        refused.json["detail"]
            .as_str()
            .unwrap()
            .replace(predecessor, "<id>")
    };
    let details = [refusal(&theirs).await, refusal(unknown).await];
    assert_eq!(details[0], details[1]);
}

/// The fixture plus memories of repo/default and user/ana, which share
/// words with repo/forge's, written with the root key.
async fn with_defaults(f: &Fixture) -> (String, String) {
    let create = |body: Value| created_by_root(&f.app, body);
    let default_repo = create(memory(
        "repo",
        "default",
        "patterns",
        "Deploys use the blue pipeline by default.",
    ))
    .await;
    let ana = create(memory(
        "user",
        "ana",
        "patterns",
        "Ana deploys the blue pipeline herself.",
    ))
    .await;
    f.app.wait_indexed_with(ROOT).await;
    (default_repo, ana)
}

async fn a_key_for_a_user_writes_its_user_memories_without_naming_a_repo(backend: Backend) {
    let f = fixture(&backend).await;
    let (default_repo, _) = with_defaults(&f).await;
    let mut own = memory("user", "ana", "user-facts", "Ana reviews on Mondays.");
    let written = send(
        &f.app,
        Method::POST,
        "/memories",
        Some(own.clone()),
        LIMITED,
    )
    .await;
    assert_eq!(written.status, StatusCode::CREATED, "{}", written.text);
    assert!(
        backend
            .holds(&f.app.data_dir, "users/ana", &id(&written.json))
            .await
    );

    // The namespace written must be held: repo/default is not.
    let mut repo_scoped = memory("repo", "forge", "patterns", "Reviews on Mondays.");
    repo_scoped.as_object_mut().unwrap().remove("repo");
    repo_scoped["user"] = json!("ana");
    send(
        &f.app,
        Method::POST,
        "/memories",
        Some(repo_scoped),
        LIMITED,
    )
    .await
    .assert_problem(StatusCode::FORBIDDEN, None);
    // A repo the request names must be held even for a user-scoped write.
    own["repo"] = json!("secret");
    send(&f.app, Method::POST, "/memories", Some(own), LIMITED)
        .await
        .assert_problem(StatusCode::FORBIDDEN, None);

    // An edge into the omitted, unheld repo reads like one to no memory.
    let unknown = "0193f0c2-0000-7000-8000-00000000ffff";
    let refusal = async |target: &str| {
        let mut body = memory("user", "ana", "user-facts", "Ana reviews on Tuesdays.");
        body["related"] = json!([{"id": target, "relationship": "refines"}]);
        let refused = send(&f.app, Method::POST, "/memories", Some(body), LIMITED).await;
        refused.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("related[0].id"));
        refused.json["detail"]
            .as_str()
            .unwrap()
            .replace(target, "<id>")
    };
    assert_eq!(refusal(&default_repo).await, refusal(unknown).await);
}

async fn a_retrieval_leaves_out_an_omitted_owner_the_key_does_not_hold(backend: Backend) {
    let f = fixture(&backend).await;
    let (default_repo, ana) = with_defaults(&f).await;
    let retrieve = |body: Value| send(&f.app, Method::POST, "/retrieve", Some(body), LIMITED);

    // The root key's answer for (default, ana) is cached first: the
    // limited key must not get it.
    let everything = send(
        &f.app,
        Method::POST,
        "/retrieve",
        Some(json!({"turn_id": "t", "user": "ana", "query": "blue pipeline deploys", "top_k": 10})),
        ROOT,
    )
    .await;
    assert!(
        everything.text.contains(&default_repo),
        "{}",
        everything.text
    );

    for (owner, only) in [
        (json!({"user": "ana"}), ana.clone()),
        (json!({"repo": "forge"}), id(&f.mine)),
    ] {
        let mut body = json!({"turn_id": "t", "query": "blue pipeline deploys", "top_k": 10});
        body.as_object_mut()
            .unwrap()
            .extend(owner.as_object().unwrap().clone());
        let found = retrieve(body).await;
        assert_eq!(found.status, StatusCode::OK, "{}", found.text);
        assert_eq!(ids_of(&found.json["memories"]), [only], "{}", found.text);
    }

    // Named owners it does not hold, or nothing held at all: 403.
    retrieve(json!({"turn_id": "t", "repo": "secret", "user": "ana", "query": "pipeline"}))
        .await
        .assert_problem(StatusCode::FORBIDDEN, None);
    retrieve(json!({"turn_id": "t", "query": "pipeline"}))
        .await
        .assert_problem(StatusCode::FORBIDDEN, None);
}

/// Writes a memory with the root key and returns its id.
async fn created_by_root(app: &TestApp, body: Value) -> String {
    let response = send(app, Method::POST, "/memories", Some(body), ROOT).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    id(&response.json)
}
