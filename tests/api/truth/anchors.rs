//! `anchors` and `commit`: written, shown, kept in the file and the row,
//! carried to a new version, brought through an export and an import,
//! and refused field by field when they do not hold.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{id, memory};

const HASH: &str = "sha256:9F2C5E0B1D7A4C3E8F6B2A1D0C9E8F7A6B5C4D3E2F1A0B9C8D7E6F5A4B3C2D1E";

fn anchored(content: &str) -> Value {
    let mut body = memory("repo", "forge", "architectural-decisions", content);
    body["anchors"] = json!([
        {"path": "src/db/pool.rs", "symbol": "connect_pool", "hash": HASH},
        {"path": "Cargo.toml"},
    ]);
    body["commit"] = json!("3F9C2B7E8A1D");
    body
}

async fn anchors_are_stored_shown_and_carried_to_a_new_version(backend: Backend) {
    let app = backend.spawn_app().await;
    let created = app
        .create(anchored("The pool opens its connections lazily."))
        .await;
    let first = id(&created);
    let expected = json!([
        {"path": "src/db/pool.rs", "symbol": "connect_pool", "hash": HASH.to_lowercase()},
        {"path": "Cargo.toml"},
    ]);
    assert_eq!(
        created["anchors"], expected,
        "hashes are kept in lower case"
    );
    assert_eq!(created["commit"], "3f9c2b7e8a1d");
    let read = app.get(&format!("/memories/{first}")).await.json;
    assert_eq!(read["anchors"], expected, "{read}");
    if let Backend::Files = backend {
        let text =
            std::fs::read_to_string(app.data_dir.join(format!("repos/forge/{first}.md"))).unwrap();
        assert!(
            text.contains(
                "trigger: manual\nanchors:\n- path: src/db/pool.rs\n  symbol: connect_pool\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("- path: Cargo.toml\ncommit: 3f9c2b7e8a1d\n---\n"),
            "{text}"
        );
    }

    let mut next = memory(
        "repo",
        "forge",
        "architectural-decisions",
        "The pool opens eagerly now.",
    );
    next["supersedes"] = json!(first);
    let second = app.create(next).await;
    assert_eq!(
        second["anchors"], expected,
        "left out, they are carried over"
    );
    assert_eq!(second["commit"], "3f9c2b7e8a1d");

    let mut last = memory(
        "repo",
        "forge",
        "architectural-decisions",
        "There is no pool any more.",
    );
    last["supersedes"] = second["id"].clone();
    last["anchors"] = json!([]);
    let third = app.create(last).await;
    assert!(third.get("anchors").is_none(), "`[]` drops them: {third}");

    // A listing by anchors, as `engram check` asks for them.
    let plain = app
        .create(memory("repo", "forge", "patterns", "Logs are JSON lines."))
        .await;
    let anchored_now = app
        .create(anchored("Migrations live in src/db/migrations."))
        .await;
    let listed = |answer: Value| crate::helpers::ids(&answer);
    assert_eq!(
        listed(app.get("/memories?repo=forge&anchored=true").await.json),
        [id(&anchored_now)],
        "only current memories with anchors"
    );
    assert_eq!(
        listed(app.get("/memories?repo=forge&anchored=false").await.json),
        [id(&plain), id(&third)]
    );
    app.get("/memories?repo=forge&anchored=maybe")
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("anchored"));

    // An export's line brings them into another store as they were.
    let exported = created.clone();
    let other = backend.another().await.spawn_app().await;
    let imported = other
        .post("/memories/import", &json!({"memories": [exported]}))
        .await;
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.text);
    let read = other.get(&format!("/memories/{first}")).await.json;
    assert_eq!(read["anchors"], expected);
    assert_eq!(read["commit"], "3f9c2b7e8a1d");
}

async fn anchors_that_do_not_hold_are_refused_by_field(backend: Backend) {
    let app = backend.spawn_app().await;
    let refused = |anchors: Value| {
        let mut body = memory("repo", "forge", "patterns", "A fact about a file.");
        body["anchors"] = anchors;
        body
    };
    for (anchors, field) in [
        (json!([{"path": "../outside.rs"}]), "anchors[0].path"),
        (json!([{"path": "/etc/passwd"}]), "anchors[0].path"),
        (
            json!([{"path": "a.rs"}, {"path": "src\\b.rs"}]),
            "anchors[1].path",
        ),
        (
            json!([{"path": "a.rs", "hash": "md5:abc"}]),
            "anchors[0].hash",
        ),
        (
            json!([{"path": "a.rs", "symbol": " x"}]),
            "anchors[0].symbol",
        ),
        (json!([{"path": "a.rs", "line": 3}]), "anchors[0].line"),
        (json!([{"path": "a.rs"}, {"path": "a.rs"}]), "anchors[1]"),
        (
            json!(
                (0..33)
                    .map(|n| json!({"path": format!("f{n}.rs")}))
                    .collect::<Vec<_>>()
            ),
            "anchors",
        ),
        (
            json!([{"path": "a.rs", "symbol": "AKIAIOSFODNN7EXAMPLE"}]),
            "anchors[0].symbol",
        ),
    ] {
        app.post("/memories", &refused(anchors))
            .await
            .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
    }
    let mut body = memory("repo", "forge", "patterns", "A fact about a commit.");
    body["commit"] = json!("main");
    app.post("/memories", &body)
        .await
        .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("commit"));
    let listed = app.get("/memories?repo=forge").await.json;
    assert_eq!(listed["memories"], json!([]), "nothing was written");
}

over_both_backends!(
    anchors_are_stored_shown_and_carried_to_a_new_version,
    anchors_that_do_not_hold_are_refused_by_field,
);
