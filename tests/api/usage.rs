//! Model usage end to end: every call's tokens (the reply's `usage`, or the
//! tokenizer's count) by kind, model and pair, priced; shown in `/stats`,
//! `/metrics` and `/triggers`; kept across a restart; and the daily token
//! budgets, which hold capture's triggers in the queue and turn retrieval
//! to the plain query. A day written by hand in `usage.json` is files
//! mode's; the rest runs over both backends.
//! One budget for all replicas is in `replicas`.

mod replicas;

use axum::http::StatusCode;
use engram::config::{Config, Price};
use engram::tokens::count as count_tokens;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{Builder, Ground, TestApp, settled, wait_ready, wait_until_async};
use crate::upstream::{Behaviour, usage_of};

over_both_backends!(
    the_replies_usage_is_counted_by_kind_model_and_pair_priced_and_shown,
    past_the_capture_budget_triggers_wait_and_go_once_it_is_raised,
    past_the_capture_budget_no_sessions_turn_is_dropped,
    a_large_compaction_stops_after_the_call_that_crosses_the_budget,
    a_pair_past_its_own_budget_waits_while_other_pairs_go,
    past_the_retrieval_budget_retrieve_searches_the_plain_query,
    the_days_totals_survive_a_restart_on_the_same_data_directory,
);

const PRICE_IN: f64 = 0.15;
const PRICE_OUT: f64 = 0.6;

async fn app_on(backend: &Backend, adjust: impl FnOnce(&mut Config)) -> TestApp {
    metered(backend).config(adjust).spawn().await
}

/// These tests' app over `backend`, priced, before it is adjusted and
/// spawned.
fn metered(backend: &Backend) -> Builder<'_> {
    backend.builder().embedder().llm().config(|config| {
        config.capture.retry_base_ms = 10;
        config.prices.insert(
            "gpt-4o-mini".to_owned(),
            Price {
                input_per_million: PRICE_IN,
                output_per_million: PRICE_OUT,
            },
        );
    })
}

fn turn(session: &str, text: &str) -> Value {
    json!({"session_id": session, "repo": "forge", "user": "ana", "messages": [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "Noted."},
    ]})
}

fn window(turn_id: &str, text: &str) -> Value {
    json!({"turn_id": turn_id, "repo": "forge", "user": "ana",
        "messages": [{"role": "user", "content": text}]})
}

/// The texts of one recorded chat request's messages, in order.
fn contents(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap().to_owned())
        .collect()
}

/// What the fake reported for one chat request answered with `reply`.
fn reported(messages: &Value, reply: &str) -> (u64, u64) {
    let texts = contents(messages);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let usage = usage_of(&texts, reply);
    (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    )
}

/// Today's row of `kind` in `/stats`.
fn row<'a>(stats: &'a Value, kind: &str) -> &'a Value {
    stats["models"]["today"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} row: {stats:#}"))
}

/// Asserts that every queued trigger of a `/triggers` answer is held
/// (`waiting`), none failed nor under way.
fn assert_all_held(triggers: &Value) {
    let queued = &triggers["queued"];
    assert!(
        queued
            .as_array()
            .unwrap()
            .iter()
            .all(|trigger| trigger["state"] == "waiting"),
        "{queued:#}"
    );
}

fn cost(prompt: u64, completion: u64) -> f64 {
    (prompt as f64 * PRICE_IN + completion as f64 * PRICE_OUT) / 1e6
}

async fn the_replies_usage_is_counted_by_kind_model_and_pair_priced_and_shown(backend: Backend) {
    let app = app_on(&backend, |_| {}).await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/turns", &turn("s1", "We always use tabs in Go files."))
        .await;
    settled(&app, 1).await;
    let hypotheses = "Ana prefers tabs.\nThe forge repo formats with gofumpt.";
    upstream.set_chat(Behaviour::Answer, hypotheses);
    let result = app.retrieve(window("t1", "how do we indent?")).await;
    assert_eq!(result["mode"], "hyde", "{result:#}");

    let requests = upstream.chat_requests();
    let classifier = reported(&requests[0], "[]");
    let hyde = reported(&requests[1], hypotheses);
    let stats = app.get("/stats").await.json;
    let row_of = |kind| {
        let row = row(&stats, kind);
        (
            row["prompt_tokens"].as_u64().unwrap(),
            row["completion_tokens"].as_u64().unwrap(),
        )
    };
    assert_eq!(row_of("classifier"), classifier, "{stats:#}");
    assert_eq!(row_of("hyde"), hyde, "{stats:#}");
    assert_eq!(row(&stats, "classifier")["model"], "gpt-4o-mini");
    assert_eq!(row(&stats, "classifier")["estimated_calls"], 0);
    let priced = row(&stats, "classifier")["cost"].as_f64().unwrap();
    assert!((priced - cost(classifier.0, classifier.1)).abs() < 1e-12);

    let embedded: u64 = upstream
        .embedded_texts()
        .iter()
        .map(|text| {
            usage_of(&[text.as_str()], "")["prompt_tokens"]
                .as_u64()
                .unwrap()
        })
        .sum();
    let embeddings = row(&stats, "embeddings");
    assert_eq!(embeddings["model"], "fake-embedding");
    assert_eq!(embeddings["prompt_tokens"], embedded, "{stats:#}");
    assert_eq!(embeddings["cost"], Value::Null, "no price, no cost");

    let pair = stats["models"]["pairs_today"]
        .as_array()
        .unwrap()
        .iter()
        .find(|pair| pair["repo"] == "forge" && pair["user"] == "ana")
        .unwrap_or_else(|| panic!("no forge/ana: {stats:#}"));
    assert_eq!(
        pair["prompt_tokens"].as_u64().unwrap(),
        classifier.0 + hyde.0,
        "the pair's calls: its classifier and HyDE, not the embeddings"
    );
    let capture = &stats["models"]["budgets"]["capture"];
    assert_eq!(capture["used"], classifier.0 + classifier.1);
    assert_eq!(capture["exhausted"], false);

    let pass = &app.get("/triggers").await.json["recent"][0];
    assert_eq!(pass["usage"]["prompt_tokens"], classifier.0, "{pass:#}");
    assert_eq!(pass["usage"]["completion_tokens"], classifier.1);
    assert!((pass["usage"]["cost"].as_f64().unwrap() - priced).abs() < 1e-12);

    let metrics = app.get("/metrics").await.text;
    for line in [
        format!(
            "engram_model_tokens_total{{kind=\"classifier\",model=\"gpt-4o-mini\",direction=\"prompt\"}} {}",
            classifier.0
        ),
        format!(
            "engram_model_tokens_total{{kind=\"hyde\",model=\"gpt-4o-mini\",direction=\"completion\"}} {}",
            hyde.1
        ),
        "engram_model_calls_total{kind=\"embeddings\",model=\"fake-embedding\"} 1".to_owned(),
        "engram_model_budget_exhausted{budget=\"capture\"} 0".to_owned(),
    ] {
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    assert!(
        metrics.contains("engram_model_cost_total{kind=\"classifier\",model=\"gpt-4o-mini\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn without_usage_in_the_reply_the_tokenizer_counts() {
    let app = app_on(&Backend::Files, |_| {}).await;
    let upstream = &app.upstream;
    upstream.send_usage(false);
    let hypotheses = "Ana prefers tabs.";
    upstream.set_chat(Behaviour::Answer, hypotheses);
    app.retrieve(window("t1", "how do we indent?")).await;

    let texts = contents(&upstream.chat_requests()[0]);
    let stats = app.get("/stats").await.json;
    let hyde = row(&stats, "hyde");
    assert_eq!(
        hyde["prompt_tokens"],
        count_tokens(&texts[0]) + count_tokens(&texts[1]),
        "{stats:#}"
    );
    assert_eq!(hyde["completion_tokens"], count_tokens(hypotheses));
    assert_eq!(hyde["estimated_calls"], 1);
    let query = upstream.embedded_texts().concat();
    assert_eq!(
        row(&stats, "embeddings")["prompt_tokens"],
        count_tokens(&query),
        "{stats:#}"
    );
}

async fn past_the_capture_budget_triggers_wait_and_go_once_it_is_raised(backend: Backend) {
    let tight = |config: &mut Config| config.capture.daily_token_budget = 1;
    let app = app_on(&backend, tight).await;
    let upstream = app.upstream.clone();
    upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/turns", &turn("s1", "first")).await;
    let stats = settled(&app, 1).await;
    assert_eq!(
        stats["models"]["budgets"]["capture"]["exhausted"], true,
        "the call that crossed the budget finished: {stats:#}"
    );

    assert_eq!(
        app.accept("/turns", &turn("s2", "second")).await["status"],
        "queued"
    );
    assert_eq!(
        app.accept("/compactions", &turn("s3", "an arc")).await["status"],
        "queued",
        "a compaction past the budget is still accepted"
    );
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["queue_depth"], 2, "{stats:#}");
    assert_eq!(stats["capture"]["dropped"], 0);
    assert_all_held(&app.get("/triggers").await.json);
    assert_eq!(upstream.chat_requests().len(), 1, "no call past the budget");

    // The same data directory with a budget that has room: the day's
    // first call is still counted, and the held triggers are processed.
    let raised = metered(&backend)
        .on(app.into_ground())
        .config(|config| config.capture.daily_token_budget = 1_000_000)
        .spawn()
        .await;
    let stats = settled(&raised, 2).await;
    assert_eq!(row(&stats, "classifier")["calls"], 3, "{stats:#}");
    assert_eq!(upstream.chat_requests().len(), 3);
}

async fn past_the_capture_budget_no_sessions_turn_is_dropped(backend: Backend) {
    let app = app_on(&backend, |config| {
        config.capture.daily_token_budget = 1;
        config.capture.queue_capacity = 2;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/turns", &turn("s1", "first")).await;
    settled(&app, 1).await;

    // Held by the budget, every session's turn waits, of this pair and of
    // another: more of them than the capacity that drops.
    for n in 0..6 {
        let mut held = turn(&format!("held-{n}"), "waits for the budget");
        if n % 2 == 1 {
            held["repo"] = json!("web");
        }
        assert_eq!(
            app.accept("/turns", &held).await["status"],
            "queued",
            "turn {n}"
        );
    }
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["dropped"], 0, "{stats:#}");
    assert_eq!(stats["capture"]["queue_depth"], 6);
    assert_eq!(upstream.chat_requests().len(), 1, "no call past the budget");
}

/// A compaction of `messages` user messages of about `tokens` tokens each,
/// every one its own words.
fn long_compaction(messages: usize, tokens: usize) -> Value {
    let lines: Vec<Value> = (0..messages)
        .map(|n| {
            let words: Vec<String> = (0..tokens).map(|w| format!("m{n}w{w}")).collect();
            json!({"role": "user", "content": format!("Message {n}: {}", words.join(" "))})
        })
        .collect();
    json!({"session_id": "long", "repo": "forge", "user": "ana", "messages": lines})
}

async fn a_large_compaction_stops_after_the_call_that_crosses_the_budget(backend: Backend) {
    const BUDGET: u64 = 6_000;
    let small_passes = |config: &mut Config| {
        config.llm.as_mut().unwrap().context_tokens = 4096;
        config.capture.context_tokens = 0;
    };
    let app = app_on(&backend, |config| {
        small_passes(config);
        config.capture.daily_token_budget = BUDGET;
    })
    .await;
    let upstream = app.upstream.clone();
    upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/compactions", &long_compaction(40, 300)).await;
    wait_until_async("the budget to hold the compaction", async || {
        app.get("/triggers").await.json["recent"][0]["result"] == "held"
    })
    .await;

    let calls: Vec<u64> = upstream
        .chat_requests()
        .iter()
        .map(|messages| {
            let (prompt, completion) = reported(messages, "[]");
            prompt + completion
        })
        .collect();
    let (last, before) = calls.split_last().unwrap();
    assert!(
        before.iter().sum::<u64>() < BUDGET && before.iter().sum::<u64>() + last >= BUDGET,
        "every call but the last was made under the budget, and the last crossed it: {calls:?}"
    );
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["processed"], 0, "{stats:#}");
    assert_eq!(stats["capture"]["queue_depth"], 1);
    let queued = &app.get("/triggers").await.json["queued"][0];
    assert_eq!(queued["state"], "waiting", "{queued:#}");
    assert_eq!(queued["attempts"], 0, "a held trigger did not fail");

    // Raised, the rest is classified, and what was classified before is
    // not sent again.
    let held_calls = calls.len();
    let raised = metered(&backend)
        .on(app.into_ground())
        .config(small_passes)
        .config(|config| config.capture.daily_token_budget = 1_000_000)
        .spawn()
        .await;
    settled(&raised, 1).await;
    let prompts: Vec<String> = upstream
        .chat_requests()
        .iter()
        .map(|messages| contents(messages)[1].clone())
        .collect();
    assert!(prompts.len() > held_calls, "{} calls", prompts.len());
    for n in 0..40 {
        let message = format!("Message {n}: ");
        let sent = prompts
            .iter()
            .filter(|prompt| prompt.contains(&message))
            .count();
        assert_eq!(sent, 1, "message {n} was sent {sent} times");
    }
}

async fn a_pair_past_its_own_budget_waits_while_other_pairs_go(backend: Backend) {
    let app = app_on(&backend, |config| {
        config.capture.pair_daily_token_budget = 1;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/turns", &turn("s1", "first")).await;
    let stats = settled(&app, 1).await;
    assert_eq!(
        stats["models"]["budgets"]["exhausted_pairs"],
        json!([{"repo": "forge", "user": "ana"}]),
        "{stats:#}"
    );

    // The held trigger is older than the other pair's: were it not held,
    // the worker would take it first.
    app.accept("/turns", &turn("s2", "held")).await;
    let mut other = turn("s3", "goes");
    other["repo"] = json!("web");
    app.accept("/turns", &other).await;
    wait_until_async("the other pair's trigger to be processed", async || {
        app.get("/stats").await.json["capture"]["processed"] == 2
    })
    .await;
    let queued = app.get("/triggers").await.json["queued"].clone();
    assert_eq!(queued.as_array().unwrap().len(), 1, "{queued:#}");
    assert_eq!(queued[0]["repo"], "forge");
    assert_eq!(queued[0]["state"], "waiting");
    assert_eq!(upstream.chat_requests().len(), 2);
}

#[tokio::test]
async fn a_spent_day_on_disk_holds_capture_and_the_next_day_renews_it() {
    let spent_on = |day: chrono::NaiveDate| {
        json!({"day": day, "calls": [{"kind": "classifier", "model": "gpt-4o-mini",
            "repo": "forge", "user": "ana", "calls": 1, "prompt_tokens": 5000,
            "completion_tokens": 0, "estimated_calls": 0}]})
    };
    let budget = |config: &mut Config| config.capture.daily_token_budget = 1000;
    let today = chrono::Utc::now().date_naive();

    let held = Ground::new().await;
    std::fs::write(held.path().join("usage.json"), spent_on(today).to_string()).unwrap();
    let app = metered(&Backend::Files)
        .on(held)
        .config(budget)
        .spawn()
        .await;
    app.upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/turns", &turn("s1", "held")).await;
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["models"]["budgets"]["capture"]["used"], 5000);
    assert_eq!(stats["models"]["budgets"]["capture"]["exhausted"], true);
    assert_eq!(stats["capture"]["queue_depth"], 1);
    let renews_at = stats["models"]["renews_at"].as_str().unwrap();
    assert!(
        renews_at.starts_with(&today.succ_opt().unwrap().to_string()),
        "{renews_at}"
    );

    // Yesterday's totals do not count today.
    let renewed = Ground::new().await;
    std::fs::write(
        renewed.path().join("usage.json"),
        spent_on(today.pred_opt().unwrap()).to_string(),
    )
    .unwrap();
    let app = metered(&Backend::Files)
        .on(renewed)
        .config(budget)
        .spawn()
        .await;
    app.upstream.set_chat(Behaviour::Answer, "[]");
    app.accept("/turns", &turn("s1", "goes")).await;
    let stats = settled(&app, 1).await;
    assert_eq!(stats["models"]["budgets"]["capture"]["exhausted"], false);
    assert_eq!(row(&stats, "classifier")["calls"], 1, "{stats:#}");
}

async fn past_the_retrieval_budget_retrieve_searches_the_plain_query(backend: Backend) {
    let app = app_on(&backend, |config| {
        config.retrieval.daily_token_budget = 1;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, "Ana prefers tabs.");
    let first = app.retrieve(window("t1", "how do we indent?")).await;
    assert_eq!(first["mode"], "hyde", "{first:#}");
    assert_eq!(first["degraded"], Value::Null);

    let second = app.retrieve(window("t2", "which formatter?")).await;
    assert_eq!(
        second["degraded"], "daily_token_budget_exhausted",
        "{second:#}"
    );
    assert_eq!(second["mode"], "query");
    assert_eq!(second["query"], "which formatter?");

    let expanded = app
        .retrieve(json!({"turn_id": "t3", "repo": "forge", "user": "ana",
            "query": "tabs", "expand_query": true}))
        .await;
    assert_eq!(expanded["degraded"], "daily_token_budget_exhausted");
    assert_eq!(expanded["expanded_query"], Value::Null);

    let suggestions = app
        .post(
            "/suggestions",
            &json!({"messages": [{"role": "user", "content": "which formatter?"}]}),
        )
        .await;
    assert_eq!(suggestions.status, StatusCode::OK);
    assert_eq!(suggestions.json["degraded"], "daily_token_budget_exhausted");
    assert_eq!(suggestions.json["suggestions"], json!(["which formatter?"]));
    assert_eq!(upstream.chat_requests().len(), 1, "one call, then none");

    let stats = app.get("/stats").await.json;
    assert_eq!(stats["models"]["budgets"]["retrieval"]["exhausted"], true);
    assert_eq!(
        stats["retrieval"]["degraded"]["daily_token_budget_exhausted"], 2,
        "{stats:#}"
    );
}

async fn the_days_totals_survive_a_restart_on_the_same_data_directory(backend: Backend) {
    let app = backend.builder().embedder().llm().serve().await;
    app.upstream
        .set_chat(Behaviour::Answer, "Ana prefers tabs.");
    let base = app.base_url.clone();
    wait_ready(&base).await;
    let result = crate::helpers::post_json(&base, "/retrieve", &window("t1", "indent?")).await;
    assert_eq!(result["mode"], "hyde", "{result:#}");
    let before = crate::helpers::get_json(&base, "/stats").await["models"].clone();
    let ground = app.stop().await;

    let app = backend.builder().on(ground).embedder().llm().serve().await;
    let after = crate::helpers::get_json(&app.base_url, "/stats").await["models"].clone();
    assert_eq!(after["today"], before["today"], "{after:#}");
    assert_eq!(
        after["budgets"]["retrieval"]["used"],
        before["budgets"]["retrieval"]["used"]
    );
    assert_eq!(
        after["since_start"],
        json!([]),
        "since start is this process"
    );
    app.stop().await;
}
