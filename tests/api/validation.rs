//! Every validation rule: a problem response naming the field, and nothing
//! written.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, memory, spawn_app};

over_both_backends!(
    create_memory_rejects_each_bad_field,
    links_must_point_into_the_requests_namespaces,
    too_many_related_edges_are_refused,
    superseding_an_old_version_is_a_conflict,
    bodies_must_be_json_and_within_the_limit,
    ids_in_paths_are_checked_before_use,
    anything_after_the_json_body_is_refused_on_every_route,
    a_field_of_the_wrong_type_is_named_even_for_enums,
);

/// Posts `body` to /memories and asserts a problem naming `field`, with the
/// store unchanged.
async fn assert_rejected(
    app: &TestApp,
    backend: &Backend,
    body: Value,
    status: StatusCode,
    field: &str,
) {
    let before = backend.stored(&app.data_dir).await;
    let response = app.post("/memories", &body).await;
    response.assert_problem(status, Some(field));
    assert_eq!(
        backend.stored(&app.data_dir).await,
        before,
        "a rejected request changed the store"
    );
}

async fn create_memory_rejects_each_bad_field(backend: Backend) {
    let app = backend.spawn_app().await;
    let good = || memory("repo", "forge", "patterns", "A fact.");
    let with = |key: &str, value: Value| {
        let mut body = good();
        body[key] = value;
        body
    };
    let cases = [
        (with("surprise", json!(1)), "surprise"),
        (with("repo", json!("../etc")), "repo"),
        (with("repo", json!("")), "repo"),
        (with("user", json!("a/b")), "user"),
        (with("repo", json!("x".repeat(129))), "repo"),
        (with("scope", json!("team")), "scope"),
        (with("category", json!("vibes")), "category"),
        (with("content", json!("   \n")), "content"),
        (with("content", json!("é".repeat(8001))), "content"),
        (with("content", json!(42)), "content"),
        (with("importance", json!(1.5)), "importance"),
        (with("importance", json!(-0.1)), "importance"),
        (with("session_id", json!("has space")), "session_id"),
        (with("supersedes", json!("not-a-uuid")), "supersedes"),
        (
            with("supersedes", json!(uuid::Uuid::now_v7().to_string())),
            "supersedes",
        ),
        (
            with(
                "related",
                json!([{"id": "nope", "relationship": "refines"}]),
            ),
            "related[0].id",
        ),
        (
            with(
                "related",
                json!([{"id": uuid::Uuid::now_v7().to_string(), "relationship": "refines"}]),
            ),
            "related[0].id",
        ),
        (
            with(
                "related",
                json!([{"id": uuid::Uuid::now_v7().to_string(), "relationship": "hates"}]),
            ),
            "related[0].relationship",
        ),
        (
            with(
                "related",
                json!([{"id": uuid::Uuid::now_v7().to_string(), "relationship": "refines", "x": 1}]),
            ),
            "related[0].x",
        ),
        (
            json!({"scope": "repo", "content": "No category."}),
            "category",
        ),
    ];
    for (body, field) in cases {
        assert_rejected(
            &app,
            &backend,
            body,
            StatusCode::UNPROCESSABLE_ENTITY,
            field,
        )
        .await;
    }
}

async fn links_must_point_into_the_requests_namespaces(backend: Backend) {
    let app = backend.spawn_app().await;
    let elsewhere = app
        .create(memory("repo", "anvil", "patterns", "Anvil fact."))
        .await;
    let user_fact = app
        .create(memory("user", "ana", "user-facts", "Ana fact."))
        .await;

    let mut body = memory("repo", "forge", "patterns", "Forge fact.");
    body["supersedes"] = elsewhere["id"].clone();
    assert_rejected(
        &app,
        &backend,
        body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "supersedes",
    )
    .await;

    let mut body = memory("repo", "forge", "patterns", "Forge fact.");
    body["user"] = json!("ana");
    body["supersedes"] = user_fact["id"].clone();
    assert_rejected(
        &app,
        &backend,
        body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "supersedes",
    )
    .await;

    let mut body = memory("repo", "forge", "patterns", "Forge fact.");
    body["related"] = json!([{"id": elsewhere["id"], "relationship": "related"}]);
    assert_rejected(
        &app,
        &backend,
        body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "related[0].id",
    )
    .await;

    let mut body = memory("repo", "forge", "patterns", "Forge fact.");
    body["user"] = json!("ana");
    body["related"] = json!([
        {"id": user_fact["id"], "relationship": "related"},
        {"id": user_fact["id"], "relationship": "refines"},
    ]);
    assert_rejected(
        &app,
        &backend,
        body.clone(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "related[1].id",
    )
    .await;
    body["related"] = json!([{"id": user_fact["id"], "relationship": "related"}]);
    app.create(body).await;
}

async fn too_many_related_edges_are_refused(backend: Backend) {
    let app = backend.spawn_app().await;
    let target = app
        .create(memory("repo", "forge", "patterns", "Target."))
        .await;
    let edges: Vec<Value> = (0..65)
        .map(|_| json!({"id": target["id"], "relationship": "related"}))
        .collect();
    let mut body = memory("repo", "forge", "patterns", "Source.");
    body["related"] = Value::Array(edges);
    assert_rejected(
        &app,
        &backend,
        body,
        StatusCode::UNPROCESSABLE_ENTITY,
        "related",
    )
    .await;
}

async fn superseding_an_old_version_is_a_conflict(backend: Backend) {
    let app = backend.spawn_app().await;
    let v1 = app.create(memory("repo", "forge", "patterns", "V1.")).await;
    let mut body = memory("repo", "forge", "patterns", "V2.");
    body["supersedes"] = v1["id"].clone();
    app.create(body.clone()).await;
    assert_rejected(&app, &backend, body, StatusCode::CONFLICT, "supersedes").await;
}

async fn bodies_must_be_json_and_within_the_limit(backend: Backend) {
    let app = backend
        .builder()
        .config(|config| config.limits.max_body_bytes = 2048)
        .spawn()
        .await;
    let post = |content_type: Option<&str>, body: String| {
        let mut request = Request::builder().method(Method::POST).uri("/memories");
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        request.body(Body::from(body)).unwrap()
    };
    let good = memory("repo", "forge", "patterns", "A fact.").to_string();

    app.send(post(None, good.clone()))
        .await
        .assert_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, None);
    app.send(post(Some("text/plain"), good.clone()))
        .await
        .assert_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, None);
    app.send(post(Some("application/json"), "{\"scope\":".to_owned()))
        .await
        .assert_problem(StatusCode::BAD_REQUEST, None);
    app.send(post(Some("application/json"), "[]".to_owned()))
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("body"));
    let big = memory("repo", "forge", "patterns", &"x".repeat(3000)).to_string();
    app.send(post(Some("application/json"), big))
        .await
        .assert_problem(StatusCode::PAYLOAD_TOO_LARGE, None);
    assert!(backend.stored(&app.data_dir).await.is_empty());
    let created = app
        .send(post(Some("application/json; charset=utf-8"), good))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
}

#[tokio::test]
async fn listing_rejects_each_bad_parameter() {
    let app = spawn_app().await;
    let cases = [
        ("/memories?limit=0", "limit"),
        ("/memories?limit=1001", "limit"),
        ("/memories?limit=ten", "limit"),
        ("/memories?limit=-1", "limit"),
        ("/memories?repo=..%2Fetc", "repo"),
        ("/memories?user=", "user"),
        ("/memories?scope=team", "scope"),
        ("/memories?category=vibes", "category"),
        ("/memories?cursor=garbage", "cursor"),
        ("/memories?cursor=1_not-a-uuid", "cursor"),
        ("/memories?surprise=1", "surprise"),
    ];
    for (uri, field) in cases {
        app.get(uri)
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
    }
    let long_text = format!("/memories?text={}", "a".repeat(1001));
    app.get(&long_text)
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("text"));
    assert_eq!(app.get("/memories?limit=1000").await.status, StatusCode::OK);
}

async fn ids_in_paths_are_checked_before_use(backend: Backend) {
    let app = backend.spawn_app().await;
    app.create(memory("repo", "forge", "patterns", "A fact."))
        .await;
    let before = backend.stored(&app.data_dir).await;
    for id in [
        "nope",
        "..%2F..%2Fetc%2Fpasswd",
        "%2E%2E",
        "0193F0C26A557B1E9C2D5F1E2A3B4C5D",
    ] {
        for method in [Method::GET, Method::DELETE] {
            let response = app.request(method, &format!("/memories/{id}"), None).await;
            response.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("id"));
        }
    }
    let unknown = uuid::Uuid::now_v7();
    app.get(&format!("/memories/{unknown}"))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    app.delete(&format!("/memories/{unknown}"))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    assert_eq!(backend.stored(&app.data_dir).await, before);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let app = spawn_app().await;
    app.get("/nothing/here")
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    app.request(Method::PUT, "/memories", None)
        .await
        .assert_problem(StatusCode::METHOD_NOT_ALLOWED, None);
    app.request(Method::POST, "/stats", None)
        .await
        .assert_problem(StatusCode::METHOD_NOT_ALLOWED, None);
}

async fn anything_after_the_json_body_is_refused_on_every_route(backend: Backend) {
    let app = backend
        .builder()
        .config(|config| {
            // Capture routes answer 409 without a model: give them one (never
            // called, the body is refused first).
            config.llm = Some(engram::config::Llm {
                base_url: "http://127.0.0.1:9/v1".to_owned(),
                ..engram::config::Llm::default()
            });
        })
        .spawn()
        .await;
    let window = json!({"session_id": "s", "messages": [{"role": "user", "content": "Hi."}]});
    let routes = [
        ("/memories", memory("repo", "forge", "patterns", "A fact.")),
        ("/retrieve", json!({"turn_id": "t", "query": "a fact"})),
        (
            "/suggestions",
            json!({"messages": [{"role": "user", "content": "Hi."}]}),
        ),
        ("/turns", window.clone()),
        ("/compactions", window),
    ];
    for (uri, body) in routes {
        for trailer in [" garbage", " {}", "]", "\n1"] {
            let request = Request::builder()
                .method(Method::POST)
                .uri(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(format!("{body}{trailer}")))
                .unwrap();
            let response = app.send(request).await;
            response.assert_problem(StatusCode::BAD_REQUEST, None);
            assert_eq!(
                response.json["type"], "urn:engram:problem:malformed-json",
                "{uri} with {trailer:?}"
            );
        }
    }
    let stored = backend.stored(&app.data_dir).await;
    assert!(stored.is_empty(), "{stored:?}");
}

async fn a_field_of_the_wrong_type_is_named_even_for_enums(backend: Backend) {
    let app = backend.spawn_app().await;
    let good = || memory("repo", "forge", "patterns", "A fact.");
    for (key, value) in [
        ("scope", json!(1)),
        ("scope", json!(["repo"])),
        ("category", json!(true)),
        (
            "related",
            json!([{"id": uuid::Uuid::now_v7().to_string(), "relationship": 3}]),
        ),
    ] {
        let mut body = good();
        body[key] = value;
        let field = if key == "related" {
            "related[0].relationship"
        } else {
            key
        };
        assert_rejected(
            &app,
            &backend,
            body,
            StatusCode::UNPROCESSABLE_ENTITY,
            field,
        )
        .await;
    }
    let response = app
        .post(
            "/retrieve",
            &json!({"turn_id": "t", "query": "q", "filters": {"scope": 1}}),
        )
        .await;
    response.assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("filters.scope"));

    // Broken JSON stays a syntax error, whatever field it breaks in.
    let request = Request::builder()
        .method(Method::POST)
        .uri("/memories")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(r#"{"scope": 1"#))
        .unwrap();
    app.send(request)
        .await
        .assert_problem(StatusCode::BAD_REQUEST, None);
}
