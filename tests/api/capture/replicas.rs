//! Capture's queue shared by replicas over one PostgreSQL database, each a
//! real `engram` process with the scripted upstream as its classifier:
//! triggers accepted on both are each classified once, a replica killed
//! (`kill -9`) while it holds a claim has its trigger finished by the
//! other once the lease passes, with its memory written once, one
//! stopped gracefully gives its claim back for the other to take at once,
//! and a trigger whose accepting replica is killed right after its `202`
//! is processed by another.

use serde_json::{Value, json};

use crate::capture::replica_limits::long_lease_replica;
use crate::helpers::{get_json, post_json, wait_until, wait_until_async};
use crate::pg_cluster::{self, TestDatabase};
use crate::replicas::Replica;
use crate::upstream::{Behaviour, Chat, Setup, Upstream, Vectors};

/// How long a claim lasts without renewal in these tests: short, so a
/// dead replica's trigger is taken over quickly.
const LEASE_MS: u64 = 1500;

/// A replica over `database`, classifying through `upstream`.
async fn replica(database: &TestDatabase, upstream: &Upstream) -> Replica {
    replica_with(database, upstream, "").await
}

/// [`replica`], with `capture` added to its `capture` settings (a
/// flow mapping's entries, each after a comma).
pub async fn replica_with(database: &TestDatabase, upstream: &Upstream, capture: &str) -> Replica {
    let yaml = format!(
        "store: {{postgres: {{catch_up_ms: 100}}}}\n\
         embedding: {{provider: openai, base_url: '{url}', dimensions: {dimensions}}}\n\
         llm: {{base_url: '{url}'}}\n\
         capture: {{lease_ms: {LEASE_MS}, retry_base_ms: 10{capture}}}\n",
        url = upstream.base_url,
        dimensions = Vectors::SMALL.dimensions,
    );
    Replica::start_with(database, &yaml).await
}

/// Sends `replica` a compaction (never dropped) whose one user line is
/// made of `marker` (words of its own, so that no two markers' memories
/// are near-duplicates), and returns the trigger's id once it is accepted.
pub async fn compaction(replica: &Replica, repo: &str, session: &str, marker: &str) -> String {
    let line = format!("{marker} {marker}q {marker}r {marker}s {marker}t");
    let body = json!({"session_id": session, "repo": repo, "user": "ana", "messages": [
        {"role": "user", "content": line},
        {"role": "assistant", "content": "Noted."},
    ]});
    let answer = post_json(replica.url(), "/compactions", &body).await;
    assert_eq!(answer["status"], "queued", "{answer}");
    answer["trigger_id"].as_str().unwrap().to_owned()
}

/// A fake upstream whose classifier proposes one memory per trigger, made
/// of its last user line.
pub async fn classifier() -> Upstream {
    Upstream::start_with(Setup {
        chat: Chat::FromPrompt,
        ..Setup::TESTS
    })
    .await
}

/// Classifier calls whose conversation holds `marker` (not counting the
/// pair's memories the prompt shows after it).
pub fn calls_about(upstream: &Upstream, marker: &str) -> usize {
    upstream
        .chat_requests()
        .iter()
        .filter_map(|messages| messages[1]["content"].as_str().map(str::to_owned))
        .filter(|prompt| {
            let conversation = prompt
                .split_once("\nEXISTING MEMORIES:")
                .map_or(prompt.as_str(), |(conversation, _)| conversation);
            conversation.contains(marker)
        })
        .count()
}

/// Rows of `engram_memories` whose content holds `marker`.
async fn memories_about(database: &TestDatabase, marker: &str) -> i64 {
    let client = pg_cluster::connect(&database.url).await;
    client
        .query_one(
            "SELECT count(*) FROM engram_memories WHERE content LIKE '%' || $1 || '%'",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0)
}

/// Triggers left in the shared queue, failed ones included.
pub async fn triggers_left(database: &TestDatabase) -> i64 {
    let client = pg_cluster::connect(&database.url).await;
    client
        .query_one("SELECT count(*) FROM engram_triggers", &[])
        .await
        .unwrap()
        .get(0)
}

fn marker(n: usize) -> String {
    format!("tag{n:03}x")
}

#[tokio::test]
async fn two_replicas_classify_each_trigger_once() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = classifier().await;
    // Slow enough that both replicas look at the queue while claims are
    // in flight.
    upstream.set_chat(Behaviour::Delay(std::time::Duration::from_millis(150)), "");
    let a = replica(&database, &upstream).await;
    let b = replica(&database, &upstream).await;

    const TRIGGERS: usize = 24;
    for n in 0..TRIGGERS {
        let accepting = if n % 2 == 0 { &a } else { &b };
        let repo = format!("repo{}", n % 4);
        compaction(accepting, &repo, &format!("s{n}"), &marker(n)).await;
    }
    wait_until_async("every trigger is processed", async || {
        triggers_left(&database).await == 0
    })
    .await;

    for n in 0..TRIGGERS {
        let marker = marker(n);
        assert_eq!(
            calls_about(&upstream, &marker),
            1,
            "{marker} was classified once"
        );
        assert_eq!(
            memories_about(&database, &marker).await,
            1,
            "{marker}'s memory was written once"
        );
    }
}

#[tokio::test]
async fn a_replica_killed_holding_a_claim_has_its_trigger_finished_by_another_once() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = classifier().await;
    // A's classifier call is held: A holds the claim while it waits.
    upstream.set_chat(Behaviour::Delay(std::time::Duration::from_secs(600)), "");
    let a = replica(&database, &upstream).await;
    let marker = marker(1);
    compaction(&a, "forge", "s1", &marker).await;
    wait_until("A's classifier call is in flight", || {
        calls_about(&upstream, &marker) == 1
    })
    .await;
    let b = replica(&database, &upstream).await;

    upstream.set_chat(Behaviour::Answer, "");
    drop(a); // kill -9, in the middle of the pass

    wait_until_async("B finishes the trigger", async || {
        triggers_left(&database).await == 0
    })
    .await;
    assert_eq!(calls_about(&upstream, &marker), 2, "A's call, then B's");
    assert_eq!(memories_about(&database, &marker).await, 1);
    let listed = get_json(b.url(), "/memories?repo=forge&user=ana&scope=repo").await;
    let contents: Vec<&Value> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| &memory["content"])
        .collect();
    assert_eq!(contents.len(), 1, "{listed:#}");
}

#[tokio::test]
async fn a_replica_stopped_gracefully_gives_its_claim_back_for_another_to_finish_once() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = classifier().await;
    // A's classifier call is held past its drain, so its pass cannot
    // finish; and the lease lasts ten minutes, so only a claim given back
    // lets B take the trigger within the test.
    upstream.set_chat(Behaviour::Delay(std::time::Duration::from_secs(600)), "");
    let mut a = long_lease_replica(&database, &upstream, ", drain_ms: 200", "").await;
    let marker = marker(6);
    compaction(&a, "forge", "s1", &marker).await;
    wait_until("A's classifier call is in flight", || {
        calls_about(&upstream, &marker) == 1
    })
    .await;
    let b = long_lease_replica(&database, &upstream, ", drain_ms: 200", "").await;

    upstream.set_chat(Behaviour::Answer, "");
    a.stop().await; // SIGTERM, in the middle of the pass

    wait_until_async("B finishes the trigger", async || {
        triggers_left(&database).await == 0
    })
    .await;
    assert_eq!(calls_about(&upstream, &marker), 2, "A's call, then B's");
    assert_eq!(memories_about(&database, &marker).await, 1);
    let recent = get_json(b.url(), "/triggers").await["recent"].clone();
    assert_eq!(recent.as_array().map(Vec::len), Some(1), "{recent:#}");
    assert_eq!(
        (&recent[0]["result"], &recent[0]["attempts"]),
        (&json!("processed"), &json!(0)),
        "A's abandoned pass counts as no failed attempt: {recent:#}"
    );
}

#[tokio::test]
async fn a_trigger_accepted_by_a_replica_killed_after_its_202_is_processed_by_another() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = classifier().await;
    upstream.set_chat(Behaviour::Delay(std::time::Duration::from_secs(600)), "");
    let a = replica(&database, &upstream).await;
    let marker = marker(2);
    compaction(&a, "forge", "s1", &marker).await;
    // Killed at once, its data directory gone: the trigger lives in the
    // database alone.
    drop(a);
    upstream.set_chat(Behaviour::Answer, "");

    let _b = replica(&database, &upstream).await;
    wait_until_async("B processes the trigger", async || {
        triggers_left(&database).await == 0
    })
    .await;
    assert_eq!(memories_about(&database, &marker).await, 1);
}

#[tokio::test]
async fn a_pass_run_again_after_its_replica_was_killed_writes_its_memories_once() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    // A's classifier and B's answer differently, so B's near-duplicate
    // check cannot be what keeps the pass from writing twice.
    let first = Upstream::start().await;
    first.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Release notes list every tag003x change.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    // A's embeddings are slow: once its memory is committed, A waits for
    // the memory's vector before it records the pass, and is killed then.
    first.set(Behaviour::Delay(std::time::Duration::from_secs(1)));
    let second = Upstream::start().await;
    second.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Deploys wait for the nightly benchmarks.", "scope": "repo", "category": "project-conventions"}]"#,
    );

    let a = replica(&database, &first).await;
    compaction(&a, "forge", "s1", &marker(3)).await;
    wait_until_async("A commits its memory", async || {
        memories_about(&database, &marker(3)).await == 1
    })
    .await;
    drop(a); // kill -9, before the pass is recorded and the trigger done

    let _b = replica(&database, &second).await;
    wait_until_async("B finishes the trigger", async || {
        triggers_left(&database).await == 0
    })
    .await;
    assert_eq!(
        calls_about(&second, "tag003x"),
        1,
        "B ran the pass again, as nothing recorded it"
    );
    let client = pg_cluster::connect(&database.url).await;
    let contents: Vec<String> = client
        .query("SELECT content FROM engram_memories", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        contents,
        ["Release notes list every tag003x change."],
        "the pass's memory, written once"
    );
}

#[tokio::test]
async fn a_trigger_row_locked_elsewhere_holds_no_replica_back_from_other_pairs() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = classifier().await;
    upstream.set_chat(Behaviour::Delay(std::time::Duration::from_secs(600)), "");
    let a = replica(&database, &upstream).await;
    let held = compaction(&a, "forge", "s1", &marker(4)).await;
    wait_until("A claims the trigger", || {
        calls_about(&upstream, &marker(4)) == 1
    })
    .await;
    drop(a); // its lease lapses; the row is claimable again
    upstream.set_chat(Behaviour::Answer, "");

    // Another transaction holds the row, as a replica's claim does while
    // it commits: workers must pass it by, not wait for it.
    let mut holder = pg_cluster::connect(&database.url).await;
    let lock = holder.transaction().await.unwrap();
    let id: uuid::Uuid = held.parse().unwrap();
    lock.query_one(
        "SELECT 1 FROM engram_triggers WHERE id = $1 FOR UPDATE",
        &[&id],
    )
    .await
    .unwrap();

    wait_until_async("A's lease lapses", async || {
        let client = pg_cluster::connect(&database.url).await;
        let row = client
            .query_one(
                "SELECT lease_until < now() FROM engram_triggers WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
        row.get(0)
    })
    .await;

    let b = replica(&database, &upstream).await;
    compaction(&b, "billing", "s2", &marker(5)).await;
    wait_until_async("B processes the other pair's trigger", async || {
        memories_about(&database, &marker(5)).await == 1
    })
    .await;
    assert_eq!(memories_about(&database, &marker(4)).await, 0);

    lock.rollback().await.unwrap();
    wait_until_async("B takes the released trigger", async || {
        triggers_left(&database).await == 0
    })
    .await;
    assert_eq!(memories_about(&database, &marker(4)).await, 1);
}
