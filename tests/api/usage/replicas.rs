//! One daily token budget for all replicas over one PostgreSQL database,
//! each a real `engram` process with the scripted upstream as its
//! classifier: the day's model usage is the sum of every replica's calls,
//! shown alike on each, and capture's triggers wait on every replica once
//! that sum has spent the budget; calls made while the database is down
//! join that sum once it is back.

use serde_json::{Value, json};

use super::assert_all_held;
use crate::capture::replicas::{calls_about, classifier, compaction, replica_with, triggers_left};
use crate::helpers::{get_json, is_ready, post_json, wait_until_async};
use crate::operations::sample;
use crate::pg_cluster::{self, TestDatabase};
use crate::replicas::Replica;
use crate::upstream::Upstream;

/// A replica over `database` whose daily capture budget is `budget` tokens.
async fn replica(database: &TestDatabase, upstream: &Upstream, budget: u64) -> Replica {
    replica_with(
        database,
        upstream,
        &format!(", daily_token_budget: {budget}"),
    )
    .await
}

/// The tokens of every chat call the fake upstream has answered, all
/// replicas' (the classifier's, where only capture calls).
fn chat_tokens(upstream: &Upstream) -> u64 {
    let usage = upstream.usage();
    usage.prompt_tokens + usage.completion_tokens
}

/// The capture budget as `replica`'s `/stats` shows it.
async fn capture_budget(replica: &Replica) -> Value {
    get_json(replica.url(), "/stats").await["models"]["budgets"]["capture"].clone()
}

/// The classifier's tokens the database's day holds.
async fn shared_classifier_tokens(database: &TestDatabase) -> i64 {
    let client = pg_cluster::connect(&database.url).await;
    client
        .query_one(
            "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0)::bigint \
             FROM engram_usage WHERE kind = 'classifier'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn replicas_stop_classifying_once_their_shared_day_spends_the_capture_budget() {
    let Some(database) = pg_cluster::database().await else {
        return;
    };
    let upstream = classifier().await;

    // One pass on a replica with room, to learn what a pass takes; each
    // trigger is of a pair of its own, so no pass's prompt shows another's
    // memory and the passes take alike.
    let first = replica(&database, &upstream, 1_000_000_000).await;
    compaction(&first, "forge", "s1", "tag001x").await;
    wait_until_async("the first pass is done", async || {
        triggers_left(&database).await == 0
    })
    .await;
    let pass = wait_for_tokens(&database, 1).await;
    assert_eq!(pass, chat_tokens(&upstream));
    drop(first);

    // Room for one more pass, not two.
    let budget = pass * 3 / 2;
    let a = replica(&database, &upstream, budget).await;
    let b = replica(&database, &upstream, budget).await;
    for replica in [&a, &b] {
        let capture = capture_budget(replica).await;
        assert_eq!(capture["used"], pass, "the day read at start: {capture:#}");
        assert_eq!(capture["exhausted"], false, "{capture:#}");
    }

    compaction(&b, "billing", "s2", "tag002x").await;
    wait_until_async("the second pass is done", async || {
        triggers_left(&database).await == 0
    })
    .await;
    let spent = chat_tokens(&upstream);
    assert!(
        spent >= budget,
        "two passes spend the budget: {spent} < {budget}"
    );
    assert_eq!(wait_for_tokens(&database, 2).await, spent);
    for replica in [&a, &b] {
        wait_until_async("the replica shows the shared day", async || {
            let capture = capture_budget(replica).await;
            capture["used"] == spent && capture["exhausted"] == true
        })
        .await;
    }

    compaction(&a, "docs", "s3", "tag003x").await;
    compaction(&b, "ops", "s4", "tag004x").await;
    assert_eq!(triggers_left(&database).await, 2, "both held in the queue");
    for replica in [&a, &b] {
        assert_all_held(&get_json(replica.url(), "/triggers").await);
    }
    assert_eq!(calls_about(&upstream, "tag003x"), 0);
    assert_eq!(calls_about(&upstream, "tag004x"), 0);
    assert_eq!(upstream.chat_requests().len(), 2, "no call past the budget");
}

/// Waits until the database's day holds `passes` classifier calls, and
/// returns their tokens.
async fn wait_for_tokens(database: &TestDatabase, passes: i64) -> u64 {
    wait_until_async("the passes are added to the shared day", async || {
        let client = pg_cluster::connect(&database.url).await;
        let calls: i64 = client
            .query_one(
                "SELECT coalesce(sum(calls), 0)::bigint FROM engram_usage WHERE kind = 'classifier'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        calls == passes
    })
    .await;
    u64::try_from(shared_classifier_tokens(database).await).unwrap()
}

/// A replica goes on calling models while the database is down (a
/// retrieval's HyDE needs none): those calls are kept, and added to the
/// shared day once the database is back, so no call escapes a budget.
#[tokio::test]
async fn calls_made_while_the_database_is_down_join_the_shared_day_once_it_is_back() {
    let Some(cluster) = pg_cluster::private_cluster().await else {
        return;
    };
    let database = cluster.database().await;
    let upstream = classifier().await;
    let replica = replica(&database, &upstream, 1_000_000_000).await;
    replica
        .write("forge", "Deploys go through the blue pipeline.")
        .await;
    hyde_retrieval(&replica, "t-up", &upstream).await;
    wait_until_async("the call is added to the shared day", async || {
        shared_chat_usage(&database).await == (1, chat_tokens(&upstream))
    })
    .await;

    cluster.stop();
    wait_until_async("/readyz says the database is unreachable", async || {
        !is_ready(replica.url()).await
    })
    .await;
    for turn in ["t-down-1", "t-down-2", "t-down-3"] {
        hyde_retrieval(&replica, turn, &upstream).await;
    }
    // Saves begun after those calls failed, so the calls were kept
    // through a failure (of the two, the second began after this read).
    let failed = save_failures(&replica).await;
    wait_until_async("two saves fail while the database is down", async || {
        save_failures(&replica).await >= failed + 2.0
    })
    .await;
    cluster.start().await;

    wait_until_async("the calls made meanwhile join the shared day", async || {
        shared_chat_usage(&database).await == (4, chat_tokens(&upstream))
    })
    .await;
    let retrieval =
        get_json(replica.url(), "/stats").await["models"]["budgets"]["retrieval"].clone();
    assert_eq!(retrieval["used"], chat_tokens(&upstream), "{retrieval:#}");
}

/// How many of `replica`'s saves of the day's usage have failed.
async fn save_failures(replica: &Replica) -> f64 {
    sample(&replica.metrics().await, "engram_usage_save_failures_total")
        .expect("the metric is served")
}

/// A retrieval of a window on `replica`, which asks the model for HyDE
/// hypotheses: one chat call more on `upstream`.
async fn hyde_retrieval(replica: &Replica, turn: &str, upstream: &Upstream) {
    let before = upstream.chat_requests().len();
    let window = json!([{"role": "user", "content": "How do we deploy this service?"}]);
    let answer = post_json(
        replica.url(),
        "/retrieve",
        &json!({"turn_id": turn, "repo": "forge", "messages": window}),
    )
    .await;
    assert_eq!(answer["degraded"], Value::Null, "{answer:#}");
    assert_eq!(upstream.chat_requests().len(), before + 1, "{answer:#}");
}

/// The chat calls (every kind but embeddings) and their tokens in the
/// database's day.
async fn shared_chat_usage(database: &TestDatabase) -> (i64, u64) {
    let client = pg_cluster::connect(&database.url).await;
    let row = client
        .query_one(
            "SELECT coalesce(sum(calls), 0)::bigint, \
             coalesce(sum(prompt_tokens + completion_tokens), 0)::bigint \
             FROM engram_usage WHERE kind <> 'embeddings'",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), u64::try_from(row.get::<_, i64>(1)).unwrap())
}
