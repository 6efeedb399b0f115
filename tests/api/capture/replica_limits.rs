//! The shared capture queue's bounds with two replicas accepting at once,
//! each a real `engram` process over one PostgreSQL database: the
//! capacity and the total byte budget hold within the documented
//! overshoot (one trigger per other accept in flight), a session's byte
//! budget holds exactly, and each replica's `/stats` and `/metrics` show
//! the whole queue's depth.

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::capture::replicas::{calls_about, classifier, compaction};
use crate::helpers::{get_json, wait_until, wait_until_async};
use crate::pg_cluster::{self, TestDatabase};
use crate::replicas::Replica;
use crate::upstream::{Behaviour, Upstream, Vectors};

/// Connections each replica's pool holds: an accept holds one for its
/// transaction, so no more accepts than this are in flight on a replica.
const POOL: usize = 2;
/// Accepts in flight at once on both replicas, at most: an accept may be
/// let past a bound by each of the others.
const IN_FLIGHT: usize = 2 * POOL;

/// A replica whose claims and classifier calls last up to ten minutes (no
/// test waits for either to end by itself), classifying through
/// `upstream`, with `capture` added to its
/// capture settings and `limits` as its limits.
pub async fn long_lease_replica(
    database: &TestDatabase,
    upstream: &Upstream,
    capture: &str,
    limits: &str,
) -> Replica {
    let yaml = format!(
        "store: {{postgres: {{catch_up_ms: 100, pool_size: {POOL}}}}}\n\
         embedding: {{provider: openai, base_url: '{url}', dimensions: {dimensions}}}\n\
         llm: {{base_url: '{url}', classifier_timeout_ms: 600000}}\n\
         capture: {{lease_ms: 600000{capture}}}\n\
         limits: {{{limits}}}\n",
        url = upstream.base_url,
        dimensions = Vectors::SMALL.dimensions,
    );
    Replica::start_with(database, &yaml).await
}

/// A classifier whose every call is held for ten minutes, so the queue is
/// not worked down.
async fn held_classifier() -> Upstream {
    let upstream = classifier().await;
    upstream.set_chat(Behaviour::Delay(std::time::Duration::from_secs(600)), "");
    upstream
}

/// Posts `bodies` to `path`, half on each replica, all at once; the
/// answers' statuses and bodies.
async fn post_all_at_once(
    replicas: [&Replica; 2],
    path: &str,
    bodies: Vec<Value>,
) -> Vec<(u16, Value)> {
    let client = reqwest::Client::new();
    let mut posts = JoinSet::new();
    for (n, body) in bodies.into_iter().enumerate() {
        let url = format!("{}{path}", replicas[n % 2].url());
        let client = client.clone();
        posts.spawn(async move {
            let response = client.post(url).json(&body).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        });
    }
    posts.join_all().await
}

/// A window of one user line of about `bytes` bytes.
fn window(session: &str, bytes: usize) -> Value {
    let line = "word ".repeat(bytes / 5);
    json!({"session_id": session, "repo": "forge", "user": "ana", "messages": [
        {"role": "user", "content": line},
    ]})
}

/// The live triggers' count, those not leased among them, and their bytes.
async fn live_triggers(database: &TestDatabase) -> (i64, i64, i64) {
    let client = pg_cluster::connect(&database.url).await;
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE lease_until IS NULL), \
                    coalesce(sum(bytes), 0)::bigint \
             FROM engram_triggers WHERE failed_at IS NULL",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn count_of(answers: &[(u16, Value)], wanted: impl Fn(u16, &Value) -> bool) -> usize {
    answers
        .iter()
        .filter(|(status, body)| wanted(*status, body))
        .count()
}

#[tokio::test]
async fn turns_accepted_on_two_replicas_at_once_keep_to_the_capacity() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = held_classifier().await;
    const CAPACITY: usize = 4;
    let capture = format!(", queue_capacity: {CAPACITY}");
    let a = long_lease_replica(&database, &upstream, &capture, "").await;
    let b = long_lease_replica(&database, &upstream, &capture, "").await;

    // One pair, so at most one of its turns is claimed (in flight, not
    // counted against the capacity); each in a session of its own, so none
    // coalesces.
    const TURNS: usize = 40;
    let bodies = (0..TURNS).map(|n| window(&format!("s{n}"), 100)).collect();
    let answers = post_all_at_once([&a, &b], "/turns", bodies).await;

    let status = |wanted: &'static str| {
        move |code: u16, body: &Value| code == 202 && body["status"] == wanted
    };
    let queued = count_of(&answers, status("queued"));
    let dropped = count_of(&answers, status("dropped"));
    assert_eq!(queued + dropped, TURNS, "{answers:?}");
    let (live, not_leased, _) = live_triggers(&database).await;
    assert_eq!(
        usize::try_from(live).unwrap(),
        queued,
        "every turn answered queued is stored, and no dropped one is"
    );
    assert!(
        queued >= CAPACITY,
        "the queue filled up to its capacity: {queued} queued"
    );
    assert!(
        usize::try_from(not_leased).unwrap() < CAPACITY + IN_FLIGHT,
        "{not_leased} turns wait, past the capacity of {CAPACITY} by more than the {} other accepts that may be in flight",
        IN_FLIGHT - 1
    );
}

#[tokio::test]
async fn compactions_accepted_on_two_replicas_at_once_keep_to_the_byte_budgets() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = held_classifier().await;
    const TRIGGER: usize = 8 * 1024;
    const SESSION_BUDGET: u64 = 32 * 1024;
    const TOTAL_BUDGET: u64 = 64 * 1024;
    let capture = format!(", session_queue_bytes: {SESSION_BUDGET}, queue_bytes: {TOTAL_BUDGET}");
    let a = long_lease_replica(&database, &upstream, &capture, "max_body_bytes: 16384").await;
    let b = long_lease_replica(&database, &upstream, &capture, "max_body_bytes: 16384").await;

    // One session's compactions, half on each replica: its budget is
    // decided under its lock, exactly.
    let bodies = (0..24).map(|_| window("one-session", TRIGGER)).collect();
    let answers = post_all_at_once([&a, &b], "/compactions", bodies).await;
    let (in_session, refused) = accepted_and_refused(&answers, "capture.session_queue_bytes");
    assert!(refused > 0, "24 compactions of 8 KiB fit no 32 KiB budget");
    let (stored, _, session_bytes) = live_triggers(&database).await;
    assert_eq!(
        usize::try_from(stored).unwrap(),
        in_session,
        "every 202 is stored"
    );
    let session_bytes = u64::try_from(session_bytes).unwrap();
    assert!(
        session_bytes <= SESSION_BUDGET,
        "the session holds {session_bytes} bytes, past its budget"
    );
    let largest = largest_trigger(&database).await;
    assert!(
        session_bytes + largest > SESSION_BUDGET,
        "the session's budget was filled: {session_bytes} bytes"
    );

    // Compactions of other sessions, at once: the total budget may be
    // passed by the other accepts in flight, no more.
    let bodies = (0..24).map(|n| window(&format!("s{n}"), TRIGGER)).collect();
    let answers = post_all_at_once([&a, &b], "/compactions", bodies).await;
    let (accepted, refused) = accepted_and_refused(&answers, "capture.queue_bytes");
    assert!(refused > 0, "24 compactions of 8 KiB fit no 64 KiB budget");
    let (stored, _, total_bytes) = live_triggers(&database).await;
    assert_eq!(
        usize::try_from(stored).unwrap(),
        in_session + accepted,
        "every 202 is stored"
    );
    let total_bytes = u64::try_from(total_bytes).unwrap();
    let largest = largest_trigger(&database).await;
    assert!(
        total_bytes <= TOTAL_BUDGET + (IN_FLIGHT as u64 - 1) * largest,
        "the queue holds {total_bytes} bytes, past its budget of {TOTAL_BUDGET} by more than {} accepts of {largest} bytes",
        IN_FLIGHT - 1
    );
}

/// How many of `answers` are `202`, and how many a `429` naming the
/// budget `key`; there is no other answer.
fn accepted_and_refused(answers: &[(u16, Value)], key: &str) -> (usize, usize) {
    let accepted = count_of(answers, |code, _| code == 202);
    let refused = count_of(answers, |code, body| {
        code == 429
            && body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains(key))
    });
    assert_eq!(accepted + refused, answers.len(), "{answers:?}");
    (accepted, refused)
}

/// The largest stored trigger's bytes.
async fn largest_trigger(database: &TestDatabase) -> u64 {
    let client = pg_cluster::connect(&database.url).await;
    let largest: i64 = client
        .query_one("SELECT max(bytes) FROM engram_triggers", &[])
        .await
        .unwrap()
        .get(0);
    u64::try_from(largest).unwrap()
}

#[tokio::test]
async fn each_replica_shows_the_whole_shared_queue_in_stats_and_metrics() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = held_classifier().await;
    // One pass at a time on each replica: once both hold a claim, neither
    // worker looks at the queue again.
    let a = long_lease_replica(&database, &upstream, ", max_concurrent: 1", "").await;
    let b = long_lease_replica(&database, &upstream, ", max_concurrent: 1", "").await;
    for (n, repo) in ["forge", "billing"].into_iter().enumerate() {
        let marker = format!("held{n}x");
        compaction(&a, repo, "s1", &marker).await;
        wait_until("a replica's classifier call is in flight", || {
            calls_about(&upstream, &marker) == 1
        })
        .await;
    }
    compaction(&a, "ledger", "s1", "waits0x").await;
    assert_eq!(
        depth_on(&a).await,
        3,
        "A reads the queue after its own accept"
    );
    compaction(&b, "ledger", "s2", "waits1x").await;

    for replica in [&a, &b] {
        wait_until_async("the replica shows all four triggers", async || {
            depth_on(replica).await == 4
        })
        .await;
        let metrics = replica.metrics().await;
        assert!(
            metrics.contains("engram_capture_queue_depth 4"),
            "{metrics}"
        );
    }
}

/// `/stats`' `capture.queue_depth` on `replica`.
async fn depth_on(replica: &Replica) -> u64 {
    let stats = get_json(replica.url(), "/stats").await;
    stats["capture"]["queue_depth"].as_u64().unwrap()
}
