//! Capture end to end against a scripted classifier: the seed's scenario,
//! coalescing, dropping, crash safety, version chains, robust replies,
//! secrets, per-pair ordering, retries and validation. The tests that
//! speak only HTTP run over both backends (files, and PostgreSQL with its
//! shared queue); the crash tests kill a files-mode process.
//! Around it, a module each: the anchors capture writes (`anchoring`),
//! lean capture (`lean`), the queue's bounds
//! (`limits`, and with two replicas `replica_limits`), the queue shared by
//! replicas (`replicas`) and `/triggers` (`triggers`).

mod anchoring;
mod lean;
mod limits;
pub mod replica_limits;
pub mod replicas;
mod triggers;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{
    Ground, TestApp, contents, get_json, settled, wait_ready, wait_until, wait_until_async,
};
use crate::upstream::{Behaviour, Upstream};

/// An app capturing through its upstream, quick to retry and patient
/// with the classifier (the capture tests' own), configured by `adjust`.
pub(crate) async fn app_on(adjust: impl FnOnce(&mut engram::config::Config)) -> TestApp {
    app_over(&Backend::Files, adjust).await
}

/// [`app_on`], over `backend`.
pub(crate) async fn app_over(
    backend: &Backend,
    adjust: impl FnOnce(&mut engram::config::Config),
) -> TestApp {
    backend
        .builder()
        .llm()
        .embedder()
        .config(|config| config.capture.retry_base_ms = 10)
        .config(adjust)
        .spawn()
        .await
}

pub(crate) fn turn(session: &str, repo: &str, text: &str) -> Value {
    json!({"session_id": session, "repo": repo, "user": "ana", "messages": [
        {"role": "user", "content": text},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "1", "content": "TOOL OUTPUT"},
        {"role": "assistant", "content": "Noted."},
    ]})
}

/// The contents of the current memories of `repo` and of the user `ana`.
async fn memories(app: &TestApp, repo: &str) -> Vec<String> {
    let listed = app
        .get(&format!("/memories?repo={repo}&user=ana"))
        .await
        .json;
    contents(&listed).into_iter().map(str::to_owned).collect()
}

over_both_backends!(
    a_turn_becomes_memories_that_retrieval_finds,
    newer_turns_of_a_session_coalesce_and_a_full_queue_drops_turns_not_compactions,
    a_pair_that_fills_its_capacity_drops_its_own_turns_not_another_pairs,
    a_chain_of_three_versions_and_hallucinations_cleared,
    fenced_garbage_and_secret_replies,
    pairs_run_in_parallel_and_each_pair_in_order,
    a_failing_classifier_is_retried_then_set_aside_without_blocking_others,
    triggers_are_checked_and_need_a_classifier,
    metrics_show_each_classifier_call_and_the_capture_counters,
);

async fn a_turn_becomes_memories_that_retrieval_finds(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    let upstream = &app.upstream;
    upstream.set_chat(
        Behaviour::Answer,
        "Sure, here they are:\n```json\n[\n  {\"content\": \"Ana prefers tabs over spaces in Go files.\", \"scope\": \"user\", \"category\": \"coding-preferences\"},\n  {\"content\": \"The forge repo formats Go with gofumpt.\", \"scope\": \"repo\", \"category\": \"project-conventions\", \"importance\": 0.8},\n]\n```",
    );
    let answer = app
        .accept(
            "/turns",
            &turn("s1", "forge", "Always use tabs; and we run gofumpt here."),
        )
        .await;
    assert_eq!(answer["status"], "queued");
    let stats = settled(&app, 1).await;
    assert_eq!(stats["capture"]["written"], 2, "{stats:#}");
    assert_eq!(memories(&app, "forge").await.len(), 2);

    let prompt = upstream.chat_requests()[0][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(prompt.contains("Always use tabs"), "{prompt}");
    assert!(
        !prompt.contains("TOOL OUTPUT"),
        "tool results never reach the classifier"
    );

    let listed = app.get("/memories?repo=forge&user=ana").await.json;
    let first = &listed["memories"].as_array().unwrap()[0];
    assert_eq!(first["session_id"], "s1");
    assert_eq!(first["trigger"], "turn");

    let result = app
        .retrieve(
            json!({"turn_id": "r", "repo": "forge", "user": "ana", "query": "gofumpt formats Go"}),
        )
        .await;
    assert_eq!(
        result["memories"][0]["content"], "The forge repo formats Go with gofumpt.",
        "retrieval sees capture's memories at once: {result:#}"
    );
}

/// An app whose queue holds two triggers a pair, with the pair of session
/// `busy` (forge) classifying its first trigger, slowly, so that what is
/// sent next waits behind it.
async fn busy_pair_of_capacity_two(backend: &Backend) -> TestApp {
    let app = app_over(backend, |config| {
        config.capture.queue_capacity = 2;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Delay(Duration::from_millis(800)), "[]");
    app.accept("/turns", &turn("busy", "forge", "first")).await;
    wait_until("the first trigger to reach the classifier", || {
        !upstream.chat_requests().is_empty()
    })
    .await;
    app
}

async fn newer_turns_of_a_session_coalesce_and_a_full_queue_drops_turns_not_compactions(
    backend: Backend,
) {
    // The first trigger of the pair goes in flight; the rest wait behind it.
    let app = busy_pair_of_capacity_two(&backend).await;
    let upstream = &app.upstream;
    assert_eq!(
        app.accept("/turns", &turn("s1", "forge", "one")).await["status"],
        "queued"
    );
    assert_eq!(
        app.accept("/turns", &turn("s1", "forge", "one two")).await["status"],
        "coalesced"
    );
    assert_eq!(
        app.accept("/turns", &turn("s2", "forge", "other")).await["status"],
        "queued"
    );
    assert_eq!(
        app.accept("/turns", &turn("s3", "forge", "full")).await["status"],
        "dropped"
    );
    assert_eq!(
        app.accept("/compactions", &turn("s3", "forge", "arc"))
            .await["status"],
        "queued"
    );

    let stats = settled(&app, 4).await;
    let capture = &stats["capture"];
    assert_eq!(
        (
            capture["accepted"].as_u64(),
            capture["coalesced"].as_u64(),
            capture["dropped"].as_u64()
        ),
        (Some(5), Some(1), Some(1))
    );
    assert_eq!(capture["processed"], 4);
    let prompts: Vec<String> = upstream
        .chat_spans()
        .into_iter()
        .map(|(_, _, prompt)| prompt)
        .collect();
    assert!(
        prompts.iter().any(|p| p.contains("one two")),
        "the newer window was classified: {prompts:#?}"
    );
    assert!(
        !prompts.iter().any(|p| p.contains("user: one\n")),
        "the replaced one was not"
    );
    assert!(prompts.iter().any(|p| p.contains("compaction trigger")));
}

async fn a_pair_that_fills_its_capacity_drops_its_own_turns_not_another_pairs(backend: Backend) {
    let app = busy_pair_of_capacity_two(&backend).await;
    for session in ["s1", "s2"] {
        assert_eq!(
            app.accept("/turns", &turn(session, "forge", "waits")).await["status"],
            "queued"
        );
    }
    assert_eq!(
        app.accept("/turns", &turn("s3", "forge", "full")).await["status"],
        "dropped",
        "forge's turns fill its capacity"
    );
    for session in ["w1", "w2"] {
        assert_eq!(
            app.accept("/turns", &turn(session, "web", "another pair"))
                .await["status"],
            "queued",
            "web has a capacity of its own"
        );
    }

    let stats = settled(&app, 5).await;
    assert_eq!(stats["capture"]["dropped"], 1, "{stats:#}");
    let metrics = app.get("/metrics").await.text;
    assert!(
        metrics.contains("engram_capture_triggers_total{outcome=\"dropped\"} 1"),
        "{metrics}"
    );
}

/// The `engram` binary over `dir` on a free loopback port, with its base URL.
fn engram_process(
    upstream: &Upstream,
    dir: &std::path::Path,
    queue_capacity: usize,
) -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .env_remove("ENGRAM_CONFIG")
        .env("ENGRAM_LISTEN", format!("127.0.0.1:{port}"))
        .env("ENGRAM_DATA_DIR", dir)
        .env("ENGRAM_EMBEDDING__PROVIDER", "openai")
        .env("ENGRAM_EMBEDDING__BASE_URL", &upstream.base_url)
        .env(
            "ENGRAM_EMBEDDING__DIMENSIONS",
            crate::upstream::Vectors::SMALL.dimensions.to_string(),
        )
        .env("ENGRAM_LLM__BASE_URL", &upstream.base_url)
        .env("ENGRAM_CAPTURE__QUEUE_CAPACITY", queue_capacity.to_string())
        .env("ENGRAM_LOG__FILTER", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (child, format!("http://127.0.0.1:{port}"))
}

#[tokio::test]
async fn a_kill_between_accept_and_processing_loses_nothing_and_repeats_nothing() {
    let ground = Ground::new().await;
    let (upstream, dir) = (&ground.upstream, ground.path());
    let engram = |upstream: &Upstream| engram_process(upstream, dir, 8);
    let client = reqwest::Client::new();
    upstream.set_chat(Behaviour::Delay(Duration::from_secs(60)), "[]");
    let (mut first, base) = engram(upstream);
    wait_ready(&base).await;
    let response = client
        .post(format!("{base}/turns"))
        .json(&turn("s1", "forge", "We deploy with Helm."))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    wait_until("the classifier call to start", || {
        !upstream.chat_requests().is_empty()
    })
    .await;
    first.kill().unwrap(); // SIGKILL: no shutdown of any kind
    first.wait().unwrap();
    assert_eq!(
        std::fs::read_dir(dir.join("queue"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().is_file())
            .count(),
        1
    );

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "The team deploys with Helm.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    for _ in 0..2 {
        let (mut again, base) = engram(upstream);
        wait_ready(&base).await;
        wait_until_async("the queue to drain", async || {
            get_json(&base, "/stats").await["capture"]["queue_depth"] == 0
        })
        .await;
        again.kill().unwrap();
        again.wait().unwrap();
    }
    let memory_files = std::fs::read_dir(dir.join("repos/forge"))
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".md")
        })
        .count();
    assert_eq!(memory_files, 1, "written exactly once");
}

#[tokio::test]
async fn a_kill_during_concurrent_accepts_keeps_every_acknowledged_trigger() {
    let ground = Ground::new().await;
    let (upstream, dir) = (&ground.upstream, ground.path());
    // Nothing is classified, so everything accepted stays queued.
    upstream.set_chat(Behaviour::Delay(Duration::from_secs(60)), "[]");
    let (mut first, base) = engram_process(upstream, dir, 1_000);
    wait_ready(&base).await;
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut clients = tokio::task::JoinSet::new();
    for client_no in 0..32 {
        let (base, acknowledged) = (base.clone(), acknowledged.clone());
        clients.spawn(async move {
            let client = reqwest::Client::new();
            for serial in 0.. {
                let body = turn(
                    &format!("c{client_no}-{serial}"),
                    "forge",
                    "We deploy with Helm.",
                );
                // Until the kill: a request cut short was never acknowledged.
                let Ok(response) = client
                    .post(format!("{base}/turns"))
                    .json(&body)
                    .send()
                    .await
                else {
                    return;
                };
                let Ok(answer) = response.json::<Value>().await else {
                    return;
                };
                assert_eq!(answer["status"], "queued", "{answer}");
                acknowledged
                    .lock()
                    .unwrap()
                    .push(answer["trigger_id"].as_str().unwrap().to_owned());
            }
        });
    }
    wait_until("a hundred accepts", || {
        acknowledged.lock().unwrap().len() >= 100
    })
    .await;
    first.kill().unwrap(); // SIGKILL while accepts are being written and synced
    first.wait().unwrap();
    while clients.join_next().await.is_some() {}
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() < 200, "more than one listing holds");

    let (mut again, base) = engram_process(upstream, dir, 1_000);
    wait_ready(&base).await;
    let listed = get_json(&base, "/triggers?limit=200").await;
    let queued: std::collections::HashSet<&str> = listed["queued"]
        .as_array()
        .unwrap()
        .iter()
        .map(|queued| queued["id"].as_str().unwrap())
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !queued.contains(id.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged, then lost to the kill: {lost:?}"
    );
    again.kill().unwrap();
    again.wait().unwrap();
}

async fn a_chain_of_three_versions_and_hallucinations_cleared(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    let upstream = &app.upstream;
    let mut previous: Option<String> = None;
    for (round, content) in [
        "Releases happen on Mondays.",
        "Releases happen on Tuesdays.",
        "Releases happen on Tuesdays after the stand-up.",
    ]
    .iter()
    .enumerate()
    {
        let supersedes = previous
            .as_ref()
            .map_or(String::new(), |id| format!(r#", "supersedes": "{id}""#));
        upstream.set_chat(
            Behaviour::Answer,
            &format!(r#"[{{"content": "{content}", "scope": "repo", "category": "project-conventions"{supersedes}}}]"#),
        );
        app.accept("/turns", &turn(&format!("s{round}"), "forge", content))
            .await;
        settled(&app, round as u64 + 1).await;
        let listed = app.get("/memories?repo=forge").await.json;
        previous = Some(listed["memories"][0]["id"].as_str().unwrap().to_owned());
    }
    let head = app
        .get(&format!("/memories/{}", previous.unwrap()))
        .await
        .json;
    assert_eq!(head["version"], 3);
    assert_eq!(head["chain"].as_array().unwrap().len(), 3);
    let stats = app.get("/stats").await.json;
    assert_eq!(stats["capture"]["superseded"], 2);

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Hotfixes skip the release train.", "scope": "repo", "category": "project-conventions",
             "supersedes": "0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d", "related": [{"id": "not-an-id", "relationship": "refines"}]},
            {"content": "Something odd.", "scope": "galaxy", "category": "patterns"},
            {"content": "Also odd.", "scope": "repo", "category": "vibes"}]"#,
    );
    app.accept("/turns", &turn("s9", "forge", "Hotfixes skip the train."))
        .await;
    let stats = settled(&app, 4).await;
    assert_eq!(stats["capture"]["refused_invalid"], 2);
    let listed = app.get("/memories?repo=forge&text=Hotfixes").await.json;
    let hotfix = &listed["memories"][0];
    assert_eq!(hotfix["version"], 1, "a hallucinated supersedes is cleared");
    assert_eq!(hotfix["related"], json!([]));
}

/// A new version worded almost as the memory it replaces is a change of
/// fact, not a copy: the near-duplicate guard looks past the memory it
/// supersedes.
#[tokio::test]
async fn a_new_version_worded_like_the_one_it_replaces_is_written() {
    let app = app_on(|_| {}).await;
    let upstream = &app.upstream;
    let first = "The release branch of forge is cut every Monday morning by the engineer on call for the platform team once the nightly build passes.";
    upstream.set_chat(
        Behaviour::Answer,
        &format!(
            r#"[{{"content": "{first}", "scope": "repo", "category": "project-conventions"}}]"#
        ),
    );
    app.accept("/turns", &turn("s1", "forge", first)).await;
    settled(&app, 1).await;
    let old = app.get("/memories?repo=forge").await.json["memories"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let second = "The release branch of forge is cut every Tuesday morning by the engineer on call for the platform team once the nightly build passes.";
    upstream.set_chat(
        Behaviour::Answer,
        &format!(
            r#"[{{"content": "{second}", "scope": "repo", "category": "project-conventions", "supersedes": "{old}"}}]"#
        ),
    );
    app.accept("/turns", &turn("s2", "forge", second)).await;
    let stats = settled(&app, 2).await;
    assert_eq!(stats["capture"]["skipped_duplicate"], 0, "{stats:#}");
    assert_eq!(stats["capture"]["superseded"], 1, "{stats:#}");
    let listed = app.get("/memories?repo=forge").await.json;
    assert_eq!(listed["memories"][0]["content"], second, "{listed:#}");
    assert_eq!(listed["memories"][0]["version"], 2, "{listed:#}");
}

/// A memory worded almost as a current one but saying another thing (a
/// convention that changed, captured as a memory of its own) is written;
/// a copy of the current one, in the same reply, is not.
#[tokio::test]
async fn a_memory_worded_like_a_current_one_that_disagrees_is_written() {
    let app = app_on(|_| {}).await;
    let upstream = &app.upstream;
    let memory = |approvals: &str| {
        format!(
            "Every pull request to the forge repository needs {approvals} from the platform team before it may be merged into the main branch."
        )
    };
    let (one, two) = (memory("one approval"), memory("two approvals"));
    upstream.set_chat(
        Behaviour::Answer,
        &format!(r#"[{{"content": "{one}", "scope": "repo", "category": "project-conventions"}}]"#),
    );
    app.accept("/turns", &turn("s1", "forge", &one)).await;
    settled(&app, 1).await;

    upstream.set_chat(
        Behaviour::Answer,
        &format!(
            r#"[{{"content": "{one}", "scope": "repo", "category": "project-conventions"}},
                {{"content": "{two}", "scope": "repo", "category": "project-conventions"}}]"#
        ),
    );
    app.accept("/turns", &turn("s2", "forge", &two)).await;
    let stats = settled(&app, 2).await;
    assert_eq!(stats["capture"]["skipped_duplicate"], 1, "{stats:#}");
    assert_eq!(stats["capture"]["written"], 2, "{stats:#}");
    let listed = app.get("/memories?repo=forge").await.json;
    let contents: Vec<&str> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, [two.as_str(), one.as_str()], "{listed:#}");
}

async fn fenced_garbage_and_secret_replies(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    let upstream = &app.upstream;

    upstream.set_chat(Behaviour::Answer, "I could not find anything, sorry! {{{");
    app.accept("/turns", &turn("s1", "forge", "Hello.")).await;
    let stats = settled(&app, 1).await;
    assert_eq!(stats["capture"]["parse_failures"], 1);
    assert!(memories(&app, "forge").await.is_empty());

    let key = "sk-proj-Zq3xR9vL2mK8nB5wT1yH7cJ4fD6gS0aP";
    upstream.set_chat(
        Behaviour::Answer,
        &format!(r#"```
[{{"content": "The OpenAI key is {key}.", "scope": "repo", "category": "project-conventions"}},
 {{"content": "The staging database is Postgres 16.", "scope": "repo", "category": "project-conventions"}}]
```"#),
    );
    app.accept(
        "/turns",
        &turn(
            "s2",
            "forge",
            &format!("Use {key} for staging; the DB is Postgres 16."),
        ),
    )
    .await;
    let stats = settled(&app, 2).await;
    assert_eq!(stats["capture"]["refused_secret"], 1);
    assert_eq!(stats["capture"]["written"], 1);
    let written = memories(&app, "forge").await;
    assert_eq!(written.len(), 1);
    assert!(!written[0].contains(key), "{written:?} holds the secret");
}

async fn pairs_run_in_parallel_and_each_pair_in_order(backend: Backend) {
    let app = app_over(&backend, |config| {
        config.capture.max_concurrent = 2;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Delay(Duration::from_millis(300)), "[]");
    app.accept("/compactions", &turn("a1", "alpha", "alpha one"))
        .await;
    app.accept("/compactions", &turn("a2", "alpha", "alpha two"))
        .await;
    app.accept("/compactions", &turn("b1", "beta", "beta one"))
        .await;
    settled(&app, 3).await;
    let spans = upstream.chat_spans();
    let span = |needle: &str| {
        spans
            .iter()
            .find(|(_, _, prompt)| prompt.contains(needle))
            .unwrap()
    };
    let (a1, a2, b1) = (span("alpha one"), span("alpha two"), span("beta one"));
    assert!(
        a1.1 <= a2.0 || a2.1 <= a1.0,
        "one pair never has two classifications at once"
    );
    assert!(
        b1.0 < a1.1.max(a2.1) && a1.0.min(a2.0) < b1.1,
        "another pair runs alongside"
    );
}

async fn a_failing_classifier_is_retried_then_set_aside_without_blocking_others(backend: Backend) {
    let app = app_over(&backend, |config| {
        config.capture.max_attempts = 2;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Fail(503), "");
    app.accept("/turns", &turn("s1", "forge", "This one fails."))
        .await;
    let stats = settled(&app, 1).await;
    assert_eq!(
        (
            stats["capture"]["retried"].as_u64(),
            stats["capture"]["failed"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let failed = app.get("/triggers").await.json["failed"].clone();
    assert_eq!(failed.as_array().map(Vec::len), Some(1), "{failed}");
    let kept = &failed[0];
    assert!(
        kept["last_error"].as_str().unwrap().contains("503"),
        "the error is kept with the trigger: {kept}"
    );
    assert_eq!(kept["attempts"], 2, "both tries are counted: {kept}");

    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "Benchmarks run nightly.", "scope": "repo", "category": "patterns"}]"#,
    );
    app.accept("/turns", &turn("s2", "other", "Benchmarks run nightly."))
        .await;
    let stats = settled(&app, 2).await;
    assert_eq!(stats["capture"]["written"], 1);
}

async fn triggers_are_checked_and_need_a_classifier(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    let _upstream = &app.upstream;
    let cases = [
        (
            json!({"messages": [{"role": "user", "content": "x"}]}),
            "session_id",
        ),
        (
            json!({"session_id": "../x", "messages": [{"role": "user", "content": "x"}]}),
            "session_id",
        ),
        (json!({"session_id": "s", "messages": []}), "messages"),
        (
            json!({"session_id": "s", "messages": [{"role": "tool", "content": "x"}]}),
            "messages",
        ),
        (
            json!({"session_id": "s", "turn_id": "", "messages": [{"role": "user", "content": "x"}]}),
            "turn_id",
        ),
        (
            json!({"session_id": "s", "repo": "a/b", "messages": [{"role": "user", "content": "x"}]}),
            "repo",
        ),
        (
            json!({"session_id": "s", "extra": 1, "messages": [{"role": "user", "content": "x"}]}),
            "extra",
        ),
    ];
    for (body, field) in cases {
        for path in ["/turns", "/compactions"] {
            app.post(path, &body)
                .await
                .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some(field));
        }
    }
    let stats = app.get("/stats").await.json;
    assert_eq!(
        (
            stats["capture"]["accepted"].as_u64(),
            stats["capture"]["queue_depth"].as_u64()
        ),
        (Some(0), Some(0)),
        "nothing was queued: {stats:#}"
    );

    let without_llm = backend.spawn_app().await;
    without_llm
        .post("/turns", &turn("s", "forge", "x"))
        .await
        .assert_problem(StatusCode::CONFLICT, None);
}

async fn metrics_show_each_classifier_call_and_the_capture_counters(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    let upstream = &app.upstream;
    upstream.set_chat(
        Behaviour::Answer,
        r#"[{"content": "The forge repo deploys on Fridays.", "scope": "repo", "category": "project-conventions"}]"#,
    );
    app.accept("/turns", &turn("s1", "forge", "We deploy on Fridays."))
        .await;
    settled(&app, 1).await;

    let metrics = app.get("/metrics").await.text;
    let sample = |name: &str| {
        metrics
            .lines()
            .find(|line| line.split_whitespace().next() == Some(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    assert_eq!(
        sample("engram_capture_classifier_duration_seconds_count").as_deref(),
        Some("1"),
        "{metrics}"
    );
    assert_eq!(
        sample(r#"engram_capture_triggers_total{outcome="processed"}"#).as_deref(),
        Some("1")
    );
    assert_eq!(
        sample(r#"engram_capture_memories_total{outcome="written"}"#).as_deref(),
        Some("1")
    );
    assert_eq!(sample("engram_capture_queue_bytes").as_deref(), Some("0"));
    assert_eq!(
        sample(r#"engram_capture_triggers_total{outcome="refused_over_budget"}"#).as_deref(),
        Some("0")
    );
}
