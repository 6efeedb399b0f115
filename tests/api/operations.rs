//! Running it: `/metrics` in Prometheus text, load shedding, slow clients,
//! CORS, and the refusal to serve a public address without a key.
//! Nothing here depends on the storage backend (the database's own
//! state is in `replicas::ops`).

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{Ground, TestApp, finishes, memory, spawn_app, wait_until, wait_until_async};
use crate::upstream::Behaviour;

/// The value of the sample `name` (with its labels, as written).
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|value| value.parse().ok())
}

#[tokio::test]
async fn metrics_are_prometheus_text_and_their_counters_move() {
    let app = spawn_app().await;
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(
        metrics
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        metrics.content_type
    );
    for line in metrics.text.lines() {
        let well_formed = line == "# EOF"
            || line.starts_with("# HELP ")
            || line.starts_with("# TYPE ")
            || line.starts_with("# UNIT ")
            || (line.starts_with("engram_")
                && line
                    .split_whitespace()
                    .nth(1)
                    .is_some_and(|v| v.parse::<f64>().is_ok()));
        assert!(well_formed, "not exposition text: {line:?}");
    }
    let before = sample(&metrics.text, "engram_retrieval_requests_total").unwrap();

    app.create(memory(
        "repo",
        "forge",
        "patterns",
        "Metrics are scraped every 15 seconds.",
    ))
    .await;
    app.wait_indexed().await;
    app.retrieve(json!({"turn_id": "m", "repo": "forge", "query": "scrape interval"}))
        .await;
    let metrics = app.get("/metrics").await.text;
    assert_eq!(
        sample(&metrics, "engram_retrieval_requests_total"),
        Some(before + 1.0)
    );
    assert_eq!(
        sample(&metrics, r#"engram_memories{namespace="repo/forge"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&metrics, r#"engram_index_memories{namespace="repo/forge"}"#),
        Some(1.0)
    );
    assert!(
        sample(
            &metrics,
            r#"engram_http_requests_total{route="/memories",method="POST",status="201"}"#
        ) == Some(1.0),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"engram_retrieval_stage_duration_seconds_count{stage="embed"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("engram_capture_queue_depth 0"));
}

#[tokio::test]
async fn beyond_the_concurrency_limit_requests_are_shed_and_slow_bodies_cut_off() {
    let app = TestApp::builder()
        .config(|config| {
            config.limits.max_concurrent_requests = 1;
            config.limits.body_timeout_ms = 400;
        })
        .serve()
        .await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    // A client that sends half a body and stalls holds the only slot.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(format!(
        "POST /memories HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{{\"scope\":"
    ).as_bytes()).await.unwrap();
    wait_until("the slow request to be in flight", || {
        app.traffic.requests_in_flight() == 1
    })
    .await;

    let client = reqwest::Client::new();
    let shed = client
        .get(format!("{}/memories", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(shed.status(), 503);
    assert_eq!(shed.headers()[header::RETRY_AFTER], "1");
    let problem: serde_json::Value = shed.json().await.unwrap();
    assert_eq!(problem["type"], "urn:engram:problem:overloaded");
    let health = client
        .get(format!("{}/healthz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "health always answers");

    let mut answer = String::new();
    slow.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "the stalled body is cut off: {answer}"
    );
    assert!(answer.contains("urn:engram:problem:body-timeout"));
    let after = client
        .get(format!("{}/memories", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 200, "the slot is free again");
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let app = TestApp::builder()
        .config(|config| config.limits.body_timeout_ms = 300)
        .serve()
        .await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /memories HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    // Ending at all is the check: the server closed the connection.
    let _ = finishes(
        "the server to close the connection",
        slow.read_to_end(&mut rest),
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn cors_answers_only_configured_origins() {
    let open_to_ui = TestApp::builder()
        .config(|config| config.cors.allowed_origins = vec!["https://ui.example.com".into()])
        .spawn()
        .await;
    let closed = spawn_app().await;
    let allowed_origin = async |router: &axum::Router, origin: &str| {
        let preflight = Request::builder()
            .method("OPTIONS")
            .uri("/memories")
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "GET")
            .body(Body::empty())
            .unwrap();
        let response = tower::ServiceExt::oneshot(router.clone(), preflight)
            .await
            .unwrap();
        response
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    assert_eq!(
        allowed_origin(&open_to_ui.router, "https://ui.example.com")
            .await
            .as_deref(),
        Some("https://ui.example.com")
    );
    assert_eq!(
        allowed_origin(&open_to_ui.router, "https://evil.example.com").await,
        None
    );
    assert_eq!(
        allowed_origin(&closed.router, "https://ui.example.com").await,
        None,
        "CORS is off by default"
    );
}

#[test]
fn serving_a_public_address_without_a_key_is_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .env_remove("ENGRAM_CONFIG")
        .env_remove("ENGRAM_API_KEY")
        .env("ENGRAM_LISTEN", "0.0.0.0:0")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("listen") && stderr.contains("ENGRAM_API_KEY"),
        "{stderr}"
    );
}

/// Sends a request whose body dribbles in one byte at a time, never
/// finishing, and returns the server's answer.
async fn dribble_a_body(base_url: &str) -> String {
    let addr = base_url.trim_start_matches("http://").to_owned();
    let stream = TcpStream::connect(&addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(format!(
        "POST /memories HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n"
    ).as_bytes()).await.unwrap();
    let dribbler = tokio::spawn(async move {
        // Each byte well within any per-read timeout, the whole never done.
        while writer.write_all(b" ").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let mut answer = String::new();
    finishes(
        "the server to answer a dribbled body",
        reader.read_to_string(&mut answer),
    )
    .await
    .unwrap();
    dribbler.abort();
    answer
}

#[tokio::test]
async fn a_body_dribbled_byte_by_byte_is_cut_off_with_408() {
    let mut ground = Ground::new().await;
    // The body limit comes first, and also when both limits are equal.
    for (body_ms, request_ms) in [(300, 3000), (400, 400)] {
        let app = TestApp::builder()
            .on(ground)
            .config(|config| {
                config.limits.body_timeout_ms = body_ms;
                config.limits.request_timeout_ms = request_ms;
            })
            .serve()
            .await;
        let answer = dribble_a_body(&app.base_url).await;
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "body {body_ms} ms, request {request_ms} ms: {answer}"
        );
        assert!(
            answer.contains("urn:engram:problem:body-timeout"),
            "{answer}"
        );
        ground = app.stop().await;
    }
}

/// The real binary's log, so that no other test's thread shares the
/// logger: probes before the index is built, then after.
#[tokio::test]
async fn not_being_ready_yet_is_not_logged_as_an_error_and_readiness_once_at_info() {
    let ground = Ground::new().await;
    let (upstream, data_dir) = (&ground.upstream, ground.path());
    let folder = data_dir.join("data/repos/forge");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d.md"),
        "---\nid: 0193f0c2-6a55-7b1e-9c2d-5f1e2a3b4c5d\nversion: 1\nscope: repo\ncategory: patterns\n\
         created_at: 2026-11-22T10:00:00Z\nupdated_at: 2026-11-22T10:00:00Z\ntrigger: manual\n---\nBuilds are reproducible.\n",
    )
    .unwrap();
    // The start-up build waits on the embedder until it answers again.
    upstream.set(Behaviour::Delay(Duration::from_secs(30)));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log_path = data_dir.join("engram.log");
    let mut engram = std::process::Command::new(env!("CARGO_BIN_EXE_engram"))
        .env_remove("ENGRAM_CONFIG")
        .env_remove("RUST_LOG")
        .env("ENGRAM_LISTEN", format!("127.0.0.1:{port}"))
        .env("ENGRAM_DATA_DIR", data_dir.join("data"))
        .env("ENGRAM_EMBEDDING__PROVIDER", "openai")
        .env("ENGRAM_EMBEDDING__BASE_URL", &upstream.base_url)
        .env("ENGRAM_LOG__FILTER", "debug")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    let status = async || {
        client
            .get(&readyz)
            .send()
            .await
            .map_or(None, |response| Some(response.status()))
    };
    wait_until_async("the service to answer", async || status().await.is_some()).await;
    for _ in 0..3 {
        assert_eq!(status().await, Some(StatusCode::SERVICE_UNAVAILABLE));
    }
    upstream.set(Behaviour::Answer);
    wait_until_async("the index to be ready", async || {
        status().await == Some(StatusCode::OK)
    })
    .await;
    assert_eq!(status().await, Some(StatusCode::OK));
    engram.kill().unwrap();
    engram.wait().unwrap();

    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let not_ready: Vec<_> = lines
        .iter()
        .filter(|line| line.contains("/readyz") && line.contains("503"))
        .collect();
    assert!(!not_ready.is_empty(), "{lines:#?}");
    assert!(
        not_ready.iter().all(|line| !line.contains("ERROR")),
        "{not_ready:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.contains("DEBUG") && line.contains("not ready yet")),
        "{lines:#?}"
    );
    let became_ready: Vec<_> = lines
        .iter()
        .filter(|line| line.contains("engram is ready"))
        .collect();
    assert_eq!(became_ready.len(), 1, "{lines:#?}");
    assert!(became_ready[0].contains("INFO"), "{became_ready:?}");
}
