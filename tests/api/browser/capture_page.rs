//! The capture page of the memory browser: retrying a failed trigger,
//! retrieval latency as percentiles, capture left to the agent when there
//! is no `llm`, and the database and the replica's lag in postgres mode.

use reqwest::Method;
use serde_json::json;

use super::{classifier_says, end, session};
use crate::helpers::memory;
use crate::upstream::Behaviour;

#[tokio::test]
async fn a_failed_trigger_is_retried_from_the_capture_page() {
    let (browser, served) = session!(|config| config.capture.max_attempts = 1);
    served.app.upstream.set_chat(Behaviour::Fail(503), "");
    let turn = json!({"session_id": "s1", "repo": "forge", "user": "ana",
        "messages": [{"role": "user", "content": "We deploy with Helm."}]});
    let (status, _) = served.call(Method::POST, "/turns", Some(&turn), None).await;
    assert_eq!(status, 202);
    browser.open(&served.ui("#/capture")).await;
    browser
        .wait_for(
            "the failed trigger",
            "if (document.querySelector('#failed button.retry')) return true; location.hash = '#/capture?t=' + Date.now(); return false",
        )
        .await;
    let error = browser.texts("#failed .error-text").await;
    assert!(error[0].contains("503"), "{error:?}");

    classifier_says(
        &served.app.upstream,
        r#"[{"content": "Deploys go through Helm.", "scope": "repo", "category": "patterns"}]"#,
    );
    browser.click("#failed button.retry").await;
    browser
        .wait_for(
            "the retried pass",
            "if (document.querySelector('#recent .result-processed') && !document.querySelector('#failed button.retry')) return true; if (!document.querySelector('main[aria-busy]')) location.hash = '#/capture?t=' + Date.now(); return false",
        )
        .await;
    let written = browser.texts("#recent tr:first-child .written a").await;
    assert_eq!(written.len(), 1, "what the pass wrote links to the memory");
    browser.click("#recent tr:first-child .written a").await;
    browser
        .wait_for(
            "the written memory",
            "return document.querySelector('main:not([aria-busy]) .content') !== null",
        )
        .await;
    assert_eq!(
        browser.texts(".content").await,
        ["Deploys go through Helm."]
    );
    end(browser, served).await;
}

#[tokio::test]
async fn the_capture_page_reads_retrieval_latency_as_percentiles() {
    let (browser, served) = session!();
    served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys use Helm charts.",
        ))
        .await;
    let (status, _) = served
        .call(
            Method::POST,
            "/retrieve",
            Some(&json!({"turn_id": "t-1", "repo": "forge", "query": "how do we deploy?"})),
            None,
        )
        .await;
    assert_eq!(status, 200);
    browser.open(&served.ui("#/capture")).await;
    let terms = browser.texts("#stats dt").await;
    for percentile in ["latency p50 ms", "latency p95 ms", "latency p99 ms"] {
        assert!(terms.iter().any(|term| term == percentile), "{terms:?}");
    }
    assert!(
        !terms.iter().any(|term| term.contains("le ms")),
        "raw buckets: {terms:?}"
    );
    let figures = browser.texts("#stats dd").await;
    assert!(
        figures.iter().any(|figure| figure.starts_with("≤ ")),
        "{figures:?}"
    );
    let groups = browser.texts("#stats h3").await;
    assert!(
        !groups.iter().any(|group| group == "Database"),
        "files mode: {groups:?}"
    );
    end(browser, served).await;
}

#[tokio::test]
async fn the_capture_page_shows_the_database_and_the_replicas_lag_in_postgres_mode() {
    let Some(database) = crate::pg_cluster::database().await else {
        return;
    };
    let (browser, served) = session!(|config| {
        config.store.backend = engram::config::Backend::Postgres;
        config.store.postgres.url = Some(engram::config::DatabaseUrl::new(&database.url));
    });
    served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys use Helm charts.",
        ))
        .await;
    browser.open(&served.ui("#/capture")).await;
    browser
        .wait_for(
            "the database's figures",
            "const at = [...document.querySelectorAll('#stats dt')].findIndex((dt) => dt.textContent === 'log head'); if (at >= 0 && document.querySelectorAll('#stats dd')[at].textContent === '1') return true; if (!document.querySelector('main[aria-busy]')) location.hash = '#/capture?t=' + Date.now(); return false",
        )
        .await;
    let groups = browser.texts("#stats h3").await;
    assert!(groups.iter().any(|group| group == "Database"), "{groups:?}");
    let terms = browser.texts("#stats dt").await;
    let figures = browser.texts("#stats dd").await;
    let figure = |term: &str| {
        let at = terms
            .iter()
            .position(|t| t == term)
            .unwrap_or_else(|| panic!("{term} in {terms:?}"));
        figures[at].clone()
    };
    assert_eq!(figure("connected"), "yes");
    assert_eq!(figure("caught up"), "yes");
    assert_eq!(figure("lag changes"), "0");
    assert_eq!(figure("log head"), "1");
    end(browser, served).await;
}

#[tokio::test]
async fn the_capture_page_says_capture_is_agent_driven_without_an_llm() {
    let (browser, served) = session!(|config| config.llm = None);
    let write = json!({"scope": "repo", "repo": "forge", "user": "ana",
        "category": "project-conventions", "content": "Deploys go through Helm."});
    let (status, _) = served
        .call(Method::POST, "/memories", Some(&write), None)
        .await;
    assert_eq!(status, 201);
    browser.open(&served.ui("#/capture")).await;
    let said = browser.texts("#capture-mode").await;
    assert_eq!(said.len(), 1, "{said:?}");
    for part in ["Agent-driven capture.", "remember tool", "not classified"] {
        assert!(said[0].contains(part), "{part:?} missing from {said:?}");
    }
    // What the agent wrote is what there is to see; no classifier budget.
    let writes = browser.texts("#agent-writes td a").await;
    assert_eq!(writes, ["Deploys go through Helm."]);
    let page = browser.texts("main").await.join("\n");
    assert!(!page.contains("Capture budget"), "{page}");
    assert!(!page.contains("Recent passes"), "{page}");
    end(browser, served).await;
}
