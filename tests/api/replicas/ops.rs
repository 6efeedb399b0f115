//! Operating replicas over PostgreSQL, each a real `engram` process:
//! `/readyz` says when a replica is behind the change log or cut off from
//! the database, a write the database cannot take is a `503` that changes
//! nothing while retrievals go on, no accepted write is lost across a
//! database restart, a key limited to one namespace sees the same on
//! every replica, `/stats` and `/metrics` show the replica's lag (only in
//! postgres mode), and a text one replica embedded is not embedded again
//! by another.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::binary::binary;
use crate::helpers::{
    TestApp, UNHURRIED_MS, call, contents, get_json, ids, wait_ready, wait_until_async,
};
use crate::pg_cluster;
use crate::replicas::Replica;
use crate::upstream::{Upstream, Vectors};

/// Opening a connection gives up quickly, so a write while the database is
/// down is refused without waiting out the default.
const QUICK_TO_GIVE_UP: &str = "store: { postgres: { connect_timeout_ms: 300 } }";

/// The writes each load task makes at most: the load is bounded even if
/// the test's own steps never end it.
const MAX_LOAD_WRITES: usize = 2_000;

/// `/readyz`'s status and its body.
pub async fn readiness(replica: &Replica) -> (u16, Value) {
    let response = reqwest::get(format!("{}/readyz", replica.url()))
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

pub fn memory(repo: &str, content: &str) -> Value {
    json!({"scope": "repo", "repo": repo, "category": "patterns", "content": content})
}

/// What the load on one replica saw.
#[derive(Default)]
struct Load {
    /// Ids of the writes answered `201`.
    accepted: Mutex<Vec<String>>,
    /// Writes answered `503`.
    refused: AtomicUsize,
    stop: AtomicBool,
}

/// Writes and retrieves on `replica` until told to stop: every write is a
/// `201` or a `503` problem with `Retry-After`, every retrieval a `200`.
async fn load(base: String, name: &'static str, seen: Arc<Load>) {
    for n in 0..MAX_LOAD_WRITES {
        if seen.stop.load(Ordering::Acquire) {
            return;
        }
        let content = format!("Load note {n} written on replica {name}.");
        let (status, headers, body) = call(
            &base,
            Method::POST,
            "/memories",
            None,
            Some(&memory("forge", &content)),
        )
        .await;
        match status {
            201 => seen
                .accepted
                .lock()
                .unwrap()
                .push(body["id"].as_str().unwrap().to_owned()),
            503 => {
                assert_eq!(
                    body["type"], "urn:engram:problem:database-unavailable",
                    "{body}"
                );
                assert!(headers.contains_key("retry-after"), "{headers:?}");
                assert_eq!(headers["content-type"], "application/problem+json");
                seen.refused.fetch_add(1, Ordering::AcqRel);
            }
            other => panic!("a write on {name} answered {other}: {body}"),
        }
        let (status, _, body) = call(
            &base,
            Method::POST,
            "/retrieve",
            None,
            Some(&json!({"turn_id": format!("t-{name}-{n}"), "repo": "forge", "query": "load notes"})),
        )
        .await;
        assert_eq!(status, 200, "a retrieval on {name} failed: {body}");
    }
}

#[tokio::test]
async fn the_database_restarted_under_load_refuses_writes_meanwhile_and_loses_none_accepted() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let a = Replica::start_with(&database, QUICK_TO_GIVE_UP).await;
    let b = Replica::start_with(&database, QUICK_TO_GIVE_UP).await;
    let seen = [Arc::new(Load::default()), Arc::new(Load::default())];
    let tasks = [
        tokio::spawn(load(a.url().to_owned(), "A", seen[0].clone())),
        tokio::spawn(load(b.url().to_owned(), "B", seen[1].clone())),
    ];
    let accepted = |load: &Load| load.accepted.lock().unwrap().len();
    wait_until_async("both replicas take writes", async || {
        seen.iter().all(|load| accepted(load) >= 2)
    })
    .await;

    cluster.stop();

    for replica in [&a, &b] {
        wait_until_async("/readyz says the database is unreachable", async || {
            readiness(replica).await.0 == 503
        })
        .await;
        let (_, problem) = readiness(replica).await;
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("database cannot be reached"),
            "{problem}"
        );
    }
    wait_until_async("both replicas refuse writes", async || {
        seen.iter()
            .all(|load| load.refused.load(Ordering::Acquire) >= 1)
    })
    .await;
    let (status, headers, problem) = call(
        a.url(),
        Method::POST,
        "/memories",
        None,
        Some(&memory("forge", "Written while the database was down.")),
    )
    .await;
    assert_eq!(status, 503, "{problem}");
    assert!(headers.contains_key("retry-after"));
    for replica in [&a, &b] {
        let answer = replica
            .retrieve(&json!({"turn_id": "t-outage", "repo": "forge", "query": "load notes", "use_cache": false}))
            .await;
        assert!(!ids(&answer).is_empty(), "{answer}");
    }
    let accepted_while_down: Vec<usize> = seen.iter().map(|load| accepted(load)).collect();

    cluster.start().await;

    for replica in [&a, &b] {
        wait_ready(replica.url()).await;
    }
    wait_until_async("both replicas take writes again", async || {
        seen.iter()
            .zip(&accepted_while_down)
            .all(|(load, before)| accepted(load) > *before)
    })
    .await;
    for load in &seen {
        load.stop.store(true, Ordering::Release);
    }
    for task in tasks {
        task.await.unwrap();
    }
    let every_accepted: Vec<String> = seen
        .iter()
        .flat_map(|load| load.accepted.lock().unwrap().clone())
        .collect();
    for replica in [&a, &b] {
        for id in &every_accepted {
            replica.await_presence(id, true).await;
        }
        let listed = get_json(replica.url(), "/memories?repo=forge&scope=repo&limit=1000").await;
        assert!(
            !contents(&listed).contains(&"Written while the database was down."),
            "a refused write changed nothing"
        );
    }
}

#[tokio::test]
async fn a_late_replica_is_not_ready_until_it_has_caught_up_with_the_change_log() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let written = a.write("forge", "Written before B started.").await;
    // Holds every reader of the log back, so B cannot catch up until the
    // lock is released.
    let holder = pg_cluster::connect(&database.url).await;
    holder
        .batch_execute("BEGIN; LOCK TABLE engram_changes IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();

    let b = Replica::start_serving(&database, "{}").await;

    wait_until_async("B's start-up index build is done", async || {
        get_json(b.url(), "/stats").await["index"]["ready"] == true
    })
    .await;
    let (status, problem) = readiness(&b).await;
    assert_eq!(status, 503, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("not caught up"),
        "{problem}"
    );
    assert_eq!(
        get_json(b.url(), "/stats").await["database"]["caught_up"],
        false
    );
    assert!(healthcheck(&b, &[]).await, "B is alive");
    assert!(!healthcheck(&b, &["--ready"]).await, "but not ready");

    holder.batch_execute("ROLLBACK").await.unwrap();

    wait_ready(b.url()).await;
    assert!(healthcheck(&b, &["--ready"]).await);
    let stats = get_json(b.url(), "/stats").await;
    assert_eq!(stats["database"]["caught_up"], true, "{stats}");
    assert_eq!(b.status_of(&written).await, 200);
}

/// Whether `engram healthcheck` (with `flags`), the containers' health
/// check, passes against `replica`.
async fn healthcheck(replica: &Replica, flags: &[&str]) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(binary());
    command
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", dir.path())
        .env("ENGRAM_LISTEN", replica.url().trim_start_matches("http://"))
        .arg("healthcheck")
        .args(flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || command.status().unwrap().success())
        .await
        .unwrap()
}

const ROOT: &str = "root-key";
const LIMITED: &str = "forge-ana-key";

fn digest(key: &str) -> String {
    Sha256::digest(key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn a_key_limited_to_one_namespace_sees_the_same_on_both_replicas() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let yaml = format!(
        "auth: {{ keys: [ {{ sha256: '{}' }}, {{ sha256: '{}', repos: [forge], users: [ana] }} ] }}",
        digest(ROOT),
        digest(LIMITED)
    );
    let a = Replica::start_with(&database, &yaml).await;
    let b = Replica::start_with(&database, &yaml).await;
    let create = async |replica: &Replica, repo: &str, content: &str| {
        let (status, _, body) = call(
            replica.url(),
            Method::POST,
            "/memories",
            Some(ROOT),
            Some(&memory(repo, content)),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    };
    let mine = create(&a, "forge", "Deploys use the green pipeline.").await;
    let theirs = create(&b, "secret", "Deploys use the blue pipeline.").await;
    for replica in [&a, &b] {
        for id in [&mine, &theirs] {
            wait_until_async("the memory reaches the replica", async || {
                call(
                    replica.url(),
                    Method::GET,
                    &format!("/memories/{id}"),
                    Some(ROOT),
                    None,
                )
                .await
                .0 == 200
            })
            .await;
        }
    }

    let mut seen_by_replica = Vec::new();
    for replica in [&a, &b] {
        let url = replica.url();
        let get = async |path: &str| call(url, Method::GET, path, Some(LIMITED), None).await;
        assert_eq!(get(&format!("/memories/{mine}")).await.0, 200);
        assert_eq!(get(&format!("/memories/{theirs}")).await.0, 404);
        assert_eq!(get("/memories?repo=secret&scope=repo").await.0, 403);
        let (status, _, listed) = get("/memories?repo=forge&user=ana").await;
        assert_eq!(status, 200, "{listed}");
        let (status, _, stats) = get("/stats").await;
        assert_eq!(status, 200);
        assert!(stats.get("database").is_none(), "service-wide: {stats}");
        let retrieve = async |repo: &str| {
            call(
                url,
                Method::POST,
                "/retrieve",
                Some(LIMITED),
                Some(&json!({"turn_id": "t-1", "repo": repo, "user": "ana", "query": "which pipeline do deploys use?", "use_cache": false})),
            )
            .await
        };
        assert_eq!(retrieve("secret").await.0, 403);
        let (status, _, found) = retrieve("forge").await;
        assert_eq!(status, 200, "{found}");
        let mut found = ids(&found);
        found.sort();
        seen_by_replica.push((ids(&listed), found, stats["store"]["namespaces"].clone()));
    }
    assert_eq!(seen_by_replica[0], seen_by_replica[1]);
    let (listed, found, namespaces) = &seen_by_replica[0];
    assert_eq!(listed, std::slice::from_ref(&mine));
    assert!(!found.contains(&theirs), "{found:?}");
    assert!(namespaces.get("repo/secret").is_none(), "{namespaces}");
}

#[tokio::test]
async fn the_replicas_lag_shows_in_stats_and_metrics_in_postgres_mode_only() {
    let files = TestApp::builder().spawn().await;
    let stats = files.get("/stats").await.json;
    assert!(stats.get("database").is_none(), "files mode: {stats}");
    let metrics = files.get("/metrics").await.text;
    assert!(
        !metrics.contains("engram_database_"),
        "files mode: {metrics}"
    );

    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let a = Replica::start(&database).await;
    let b = Replica::start(&database).await;
    let id = a.write("forge", "Counted in the change log.").await;
    b.await_presence(&id, true).await;

    let stats = get_json(b.url(), "/stats").await;
    let view = &stats["database"];
    assert_eq!(view["connected"], true, "{stats}");
    assert_eq!(view["caught_up"], true);
    assert_eq!(view["cursor"], 1, "{view}");
    assert_eq!(view["log_head"], 1);
    assert_eq!(view["lag_changes"], 0);
    assert_eq!(view["lag_ms"], 0);
    let metrics = b.metrics().await;
    for line in [
        "engram_database_connected 1",
        "engram_database_cursor 1",
        "engram_database_log_head 1",
        "engram_database_lag_changes 0",
        "engram_database_lag_milliseconds 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
}

#[tokio::test]
async fn a_text_one_replica_embedded_is_not_embedded_again_by_another() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = Upstream::start().await;
    let yaml = format!(
        "embedding: {{ provider: openai, base_url: '{}', model: fake-embedding, dimensions: {}, timeout_ms: {UNHURRIED_MS} }}",
        upstream.base_url,
        Vectors::SMALL.dimensions
    );
    let a = Replica::start_with(&database, &yaml).await;
    for content in [
        "Use tabs.",
        "Pin the toolchain.",
        "Deploys go out on Fridays.",
    ] {
        a.write("forge", content).await;
    }
    wait_until_async("A has embedded the three memories", async || {
        let index = &get_json(a.url(), "/stats").await["index"];
        index["embedded"] == 3 && index["pending"] == 0
    })
    .await;
    let calls = upstream.embedding_calls();
    assert!(calls >= 1);

    let b = Replica::start_with(&database, &yaml).await;

    let index = &get_json(b.url(), "/stats").await["index"];
    assert_eq!(index["memories"], 3, "{index}");
    assert_eq!(index["cache_hits"], 3, "{index}");
    assert_eq!(index["embedded"], 0, "{index}");
    assert_eq!(
        upstream.embedding_calls(),
        calls,
        "B made no embedding call"
    );
}

#[tokio::test]
async fn a_limited_key_cannot_tell_from_stats_whether_another_namespace_holds_a_text() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = Upstream::start().await;
    let yaml = format!(
        "auth: {{ keys: [ {{ sha256: '{}' }}, {{ sha256: '{}', repos: [forge], users: [ana] }} ] }}\n\
         embedding: {{ provider: openai, base_url: '{}', model: fake-embedding, dimensions: {} }}",
        digest(ROOT),
        digest(LIMITED),
        upstream.base_url,
        Vectors::SMALL.dimensions
    );
    let a = Replica::start_with(&database, &yaml).await;
    let stats = async |key: &str| {
        call(a.url(), Method::GET, "/stats", Some(key), None)
            .await
            .2
    };
    let guessed = "Deploys use the blue pipeline.";
    let (status, _, _) = call(
        a.url(),
        Method::POST,
        "/memories",
        Some(ROOT),
        Some(&memory("secret", guessed)),
    )
    .await;
    assert_eq!(status, 201);
    let indexed = async |memories: u64| {
        wait_until_async("the memories are indexed", async || {
            let index = &stats(ROOT).await["index"];
            index["memories"] == memories && index["pending"] == 0
        })
        .await;
    };
    indexed(1).await;
    // The guess, written where the limited key may write: the shared
    // embedding cache holds its vector already.
    let (status, _, _) = call(
        a.url(),
        Method::POST,
        "/memories",
        Some(LIMITED),
        Some(&memory("forge", guessed)),
    )
    .await;
    assert_eq!(status, 201);
    indexed(2).await;

    let index = &stats(ROOT).await["index"];
    assert_eq!(index["cache_hits"], 1, "{index}");
    assert_eq!(index["embedded"], 1, "{index}");
    let index = &stats(LIMITED).await["index"];
    assert_eq!(index["memories"], 1, "{index}");
    for counter in ["cache_hits", "embedded", "failed_batches"] {
        assert!(index.get(counter).is_none(), "{counter} in {index}");
    }
}
