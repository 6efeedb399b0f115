//! A database that stops answering, each a real `engram` process over a
//! cluster of the test's own: a write it does not answer is a `503` that
//! changes nothing, even once the database answers again, and `/readyz`
//! says so meanwhile; a write the request timeout cuts short is never
//! committed after its `503`; a commit the database does not confirm is
//! never answered `503`.

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{call, get_json, wait_ready, wait_until_async};
use crate::pg_cluster::{self, TestDatabase};
use crate::replicas::Replica;
use crate::replicas::ops::{memory, readiness};

/// The database is given up on quickly, well before the request timeout.
const GIVE_UP_QUICKLY: &str = "limits: { request_timeout_ms: 5000 }\n\
     store: { postgres: { connect_timeout_ms: 500, statement_timeout_ms: 1500 } }";

/// The request timeout strikes well before the database is given up on,
/// whether the write waits on a pooled connection or on a new one.
const TIME_OUT_FIRST: &str = "limits: { request_timeout_ms: 1000 }\n\
     store: { postgres: { connect_timeout_ms: 20000, statement_timeout_ms: 20000 } }";

/// Writes `content` on `replica`: its status and problem (or memory).
async fn write(replica: &Replica, content: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    call(
        replica.url(),
        Method::POST,
        "/memories",
        None,
        Some(&memory("forge", content)),
    )
    .await
}

/// How many memories of `database` say `content`, once no transaction but
/// this one is open there: whatever was to commit has.
async fn committed(database: &TestDatabase, content: &str) -> i64 {
    let client = pg_cluster::connect(&database.url).await;
    wait_until_async("every other transaction has ended", async || {
        let open: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND pid <> pg_backend_pid() AND xact_start IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        open == 0
    })
    .await;
    client
        .query_one(
            "SELECT count(*) FROM engram_memories WHERE content = $1",
            &[&content],
        )
        .await
        .unwrap()
        .get(0)
}

/// Writes on `replica` until one is taken: the database answers again.
async fn write_once_answering(replica: &Replica, content: &str) -> String {
    wait_ready(replica.url()).await;
    let (status, _, created) = write(replica, content).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    replica.await_presence(&id, true).await;
    id
}

#[tokio::test]
async fn a_write_the_hung_database_does_not_answer_is_a_503_that_changes_nothing() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let a = Replica::start_with(&database, GIVE_UP_QUICKLY).await;
    a.write("forge", "Written before the database hung.").await;

    let hung = pg_cluster::hang(&database.url).await;

    let refused = "Written while the database hung.";
    let (status, headers, problem) = write(&a, refused).await;
    assert_eq!(status, 503, "{problem}");
    assert_eq!(
        problem["type"], "urn:engram:problem:database-unavailable",
        "{problem}"
    );
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    wait_until_async("/readyz notices the database does not answer", async || {
        readiness(&a).await.0 == 503
    })
    .await;
    let (_, not_ready) = readiness(&a).await;
    assert!(
        not_ready["detail"]
            .as_str()
            .unwrap()
            .contains("database cannot be reached"),
        "{not_ready}"
    );
    let listed = get_json(a.url(), "/memories?repo=forge&scope=repo").await;
    assert_eq!(listed["memories"].as_array().unwrap().len(), 1, "{listed}");

    drop(hung);

    write_once_answering(&a, "Written once the database answered again.").await;
    assert_eq!(
        committed(&database, refused).await,
        0,
        "a 503 changed nothing"
    );
    let listed = get_json(a.url(), "/memories?repo=forge&scope=repo").await;
    assert_eq!(listed["memories"].as_array().unwrap().len(), 2, "{listed}");
}

#[tokio::test]
async fn a_write_the_request_timeout_answered_is_not_committed_when_the_database_answers_again() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let a = Replica::start_with(&database, TIME_OUT_FIRST).await;
    a.write("forge", "Written before the database hung.").await;

    let hung = pg_cluster::hang(&database.url).await;
    let timed_out = "Written while the request timed out.";
    let (status, _, problem) = write(&a, timed_out).await;
    assert_eq!(status, 503, "{problem}");
    assert_eq!(problem["type"], "urn:engram:problem:timeout", "{problem}");
    // The write is still waiting for the database, well within its own
    // limit, when the database answers again.
    drop(hung);

    write_once_answering(&a, "Written once the database answered again.").await;
    assert_eq!(
        committed(&database, timed_out).await,
        0,
        "a 503 changed nothing"
    );
}

#[tokio::test]
async fn a_commit_the_database_does_not_confirm_is_never_answered_503() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let a = Replica::start_with(&database, GIVE_UP_QUICKLY).await;
    a.write("forge", "Written before commits stalled.").await;
    // A synchronous standby that never connects: a commit is made, then
    // waits for the standby's confirmation before it is answered.
    let admin = pg_cluster::connect(&cluster.url("postgres")).await;
    // A reload reaches the server's processes a moment after it is asked
    // for: once a session of its own reads the new value, every other has
    // been told, and reads it before its next statement.
    let standby = async |setting: &str, value: &str| {
        admin.batch_execute(setting).await.unwrap();
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .unwrap();
        wait_until_async("the reload", async || {
            let row = admin
                .query_one("SHOW synchronous_standby_names", &[])
                .await
                .unwrap();
            row.get::<_, String>(0) == value
        })
        .await;
    };
    standby(
        "ALTER SYSTEM SET synchronous_standby_names = 'nobody'",
        "nobody",
    )
    .await;

    let unconfirmed = "Written while commits were not confirmed.";
    let (status, headers, problem) = write(&a, unconfirmed).await;
    assert_eq!(status, 504, "{problem}");
    assert_eq!(
        problem["type"], "urn:engram:problem:commit-unconfirmed",
        "{problem}"
    );
    assert!(!headers.contains_key("retry-after"), "{headers:?}");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("may have been made"), "{detail}");

    standby("ALTER SYSTEM RESET synchronous_standby_names", "").await;

    // It was committed after all: a 503 would have said it was not.
    assert_eq!(committed(&database, unconfirmed).await, 1);
    let id = detail
        .split_whitespace()
        .find_map(|word| {
            let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-');
            uuid::Uuid::parse_str(word).ok()
        })
        .expect("the detail names the memory");
    a.await_presence(&id.to_string(), true).await;
}
