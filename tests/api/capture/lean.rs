//! Lean capture: each message reaches the classifier once (later turns of
//! a session send their new messages with a little context, a repeat
//! sends nothing), the prompt fits `llm.context_tokens` (a long window
//! goes in passes), and the classifier asks for JSON where the server
//! takes it, falling back where it refuses, as an Ollama `/v1` would.
//! The ledger's tests run over both backends (files, and PostgreSQL's
//! `engram_classified` table).

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::capture::{app_on, app_over};
use crate::helpers::{TestApp, settled};
use crate::upstream::{Behaviour, Upstream};

/// A window of (user, assistant) exchanges, with a tool call in each.
fn window(session: &str, exchanges: &[(&str, &str)]) -> Value {
    let mut messages = Vec::new();
    for (n, (question, answer)) in exchanges.iter().enumerate() {
        messages.push(json!({"role": "user", "content": question}));
        messages.push(json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": n.to_string(), "type": "function"}]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": n.to_string(), "content": "TOOL OUTPUT"}));
        messages.push(json!({"role": "assistant", "content": answer}));
    }
    json!({"session_id": session, "repo": "forge", "user": "ana", "messages": messages})
}

/// The user prompt of every chat request so far.
fn prompts(upstream: &Upstream) -> Vec<String> {
    upstream
        .chat_requests()
        .iter()
        .map(|messages| messages[1]["content"].as_str().unwrap().to_owned())
        .collect()
}

/// What a prompt asks to classify: what follows its NEW MESSAGES heading,
/// up to the existing memories.
fn new_part(prompt: &str) -> &str {
    let (_, new) = prompt
        .split_once("NEW MESSAGES")
        .expect("a NEW MESSAGES section");
    new.split_once("EXISTING MEMORIES")
        .map_or(new, |(new, _)| new)
}

const ONE_MEMORY: &str = r#"{"memories": [{"content": "forge formats Go with gofumpt.", "scope": "repo", "category": "project-conventions"}]}"#;

over_both_backends!(
    a_later_turn_sends_only_its_new_messages_and_a_repeat_sends_nothing,
    a_window_past_the_context_window_is_classified_in_passes_that_fit,
);

async fn a_later_turn_sends_only_its_new_messages_and_a_repeat_sends_nothing(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, ONE_MEMORY);
    let first = [("We format Go with gofumpt.", "Noted, gofumpt it is.")];
    app.accept("/turns", &window("s1", &first)).await;
    settled(&app, 1).await;

    let second = [first[0], ("Tabs in the Makefile, please.", "Tabs it is.")];
    app.accept("/turns", &window("s1", &second)).await;
    settled(&app, 2).await;
    let sent = prompts(upstream);
    assert_eq!(sent.len(), 2);
    let new = new_part(&sent[1]);
    assert!(new.contains("user: Tabs in the Makefile"), "{}", sent[1]);
    assert!(
        !new.contains("gofumpt"),
        "a classified message is not sent as new: {}",
        sent[1]
    );
    assert!(
        sent[1].contains("EARLIER MESSAGES"),
        "context comes with it: {}",
        sent[1]
    );
    assert!(!sent[1].contains("TOOL OUTPUT"));
    assert!(
        sent[1].contains("forge formats Go with gofumpt."),
        "the memory the first pass wrote is shown: {}",
        sent[1]
    );

    app.accept("/turns", &window("s1", &second)).await;
    app.accept("/compactions", &window("s1", &second)).await;
    let stats = settled(&app, 4).await;
    assert_eq!(prompts(upstream).len(), 2, "nothing new: no model call");
    assert_eq!(stats["capture"]["written"], 1);
    assert_eq!(
        stats["capture"]["skipped_duplicate"], 1,
        "the second pass's copy"
    );

    app.accept("/turns", &window("s2", &second)).await;
    settled(&app, 5).await;
    let sent = prompts(upstream);
    assert_eq!(sent.len(), 3, "another session is classified on its own");
    assert!(new_part(&sent[2]).contains("gofumpt"));
}

async fn a_window_past_the_context_window_is_classified_in_passes_that_fit(backend: Backend) {
    let context_tokens = 4096;
    let app = app_over(&backend, |config| {
        config.llm.as_mut().unwrap().context_tokens = context_tokens;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(Behaviour::Answer, r#"{"memories": []}"#);
    let paragraphs: Vec<String> = (0..6)
        .map(|n| {
            format!(
                "Question {n}: {}",
                "the build and the tests and the release ".repeat(100)
            )
        })
        .collect();
    let exchanges: Vec<(&str, &str)> = paragraphs
        .iter()
        .map(|text| (text.as_str(), "Done."))
        .collect();
    app.accept("/turns", &window("long", &exchanges)).await;
    settled(&app, 1).await;
    let requests = upstream.chat_requests();
    assert!(requests.len() > 1, "one pass could not hold it");
    for n in 0..6 {
        let asked = requests
            .iter()
            .filter(|messages| {
                new_part(messages[1]["content"].as_str().unwrap())
                    .contains(&format!("Question {n}:"))
            })
            .count();
        assert_eq!(asked, 1, "question {n} is classified exactly once");
    }
    for messages in &requests {
        let tokens: usize = [&messages[0], &messages[1]]
            .iter()
            .map(|message| engram::tokens::count(message["content"].as_str().unwrap()))
            .sum();
        assert!(
            tokens + 1024 <= context_tokens,
            "{tokens} prompt tokens and the reply's room pass {context_tokens}"
        );
    }
}

/// An app whose classifier answers [`ONE_MEMORY`] from a server that
/// `refuses` what it refuses, once it has classified a first turn and
/// written its memory.
async fn one_turn_classified_by(refuses: impl FnOnce(&Upstream)) -> TestApp {
    let app = app_on(|_| {}).await;
    app.upstream.set_chat(Behaviour::Answer, ONE_MEMORY);
    refuses(&app.upstream);
    app.accept(
        "/turns",
        &window("s1", &[("We format Go with gofumpt.", "Noted.")]),
    )
    .await;
    let stats = settled(&app, 1).await;
    assert_eq!(stats["capture"]["written"], 1, "{stats:#}");
    app
}

#[tokio::test]
async fn a_server_refusing_response_format_still_classifies_and_is_asked_once() {
    let app = one_turn_classified_by(Upstream::refuse_response_format).await;
    let upstream = &app.upstream;
    app.accept("/turns", &window("s2", &[("Tabs in Makefiles.", "Noted.")]))
        .await;
    settled(&app, 2).await;
    let formats = upstream.response_formats();
    let kinds: Vec<&str> = formats
        .iter()
        .map(|format| format["type"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(
        kinds,
        ["json_schema", "none", "none"],
        "one refused call, then none"
    );
}

#[tokio::test]
async fn a_server_refusing_only_the_schema_gets_json_mode() {
    let app =
        one_turn_classified_by(|upstream| upstream.refuse_response_format_types(&["json_schema"]))
            .await;
    let upstream = &app.upstream;
    let kinds: Vec<Value> = upstream
        .response_formats()
        .iter()
        .map(|format| format["type"].clone())
        .collect();
    assert_eq!(kinds, [json!("json_schema"), json!("json_object")]);
}

/// As `docs/capture.md` configures Ollama: its `/v1`, a 7-8B model, an
/// 8k context. Ollama (0.5 and later) takes `response_format` with a JSON
/// schema and answers with `usage`; the reply has the shape of a small
/// model's under that schema (the object alone, names spelled its way).
#[tokio::test]
async fn an_ollama_shaped_server_with_a_small_model_reply_is_classified() {
    let app = app_on(|config| {
        let llm = config.llm.as_mut().unwrap();
        llm.classifier_model = "qwen2.5:7b-instruct".to_owned();
        llm.retrieval_model = "qwen2.5:7b-instruct".to_owned();
        llm.context_tokens = 8192;
        llm.classifier_timeout_ms = 120_000;
    })
    .await;
    let upstream = &app.upstream;
    upstream.set_chat(
        Behaviour::Answer,
        include_str!("../../fixtures/classifier-replies/ollama-schema-constrained.txt"),
    );
    app.accept(
        "/turns",
        &window(
            "s1",
            &[(
                "We deploy forge with Helm, and I want commits in the imperative mood.",
                "Noted both.",
            )],
        ),
    )
    .await;
    let stats = settled(&app, 1).await;
    assert_eq!(stats["capture"]["written"], 2, "{stats:#}");
    assert_eq!(stats["capture"]["parse_failures"], 0);
    let request = &upstream.response_formats()[0];
    assert_eq!(request["type"], "json_schema");
    assert_eq!(
        request["json_schema"]["schema"]["required"],
        json!(["memories"])
    );
    let listed = app.get("/memories?repo=forge&user=ana").await.json;
    let mut categories: Vec<&str> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["category"].as_str().unwrap())
        .collect();
    categories.sort_unstable();
    assert_eq!(categories, ["coding-preferences", "project-conventions"]);
}
