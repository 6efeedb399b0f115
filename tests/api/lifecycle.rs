//! A real port: restarting on the same data directory, and stopping
//! gracefully with a request in flight. The restart runs over both
//! backends; connection handling cannot depend on them.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, finishes, get_json, post_json, wait_until};

over_both_backends!(a_restart_on_the_same_data_directory_finds_everything_written,);

async fn a_restart_on_the_same_data_directory_finds_everything_written(backend: Backend) {
    let client = reqwest::Client::new();
    let app = backend.builder().serve().await;
    let mut written = Vec::new();
    let mut previous: Option<Value> = None;
    for n in 0..5 {
        let mut body = json!({"scope": "repo", "repo": "forge", "category": "patterns", "content": format!("Version {n}.")});
        if let Some(previous) = &previous {
            body["supersedes"] = previous["id"].clone();
        }
        let created = post_json(&app.base_url, "/memories", &body).await;
        written.push(created.clone());
        previous = Some(created);
    }
    let deleted = written.remove(0);
    let response = client
        .delete(format!(
            "{}/memories/{}",
            app.base_url,
            deleted["id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let ground = app.stop().await;

    let app = backend.builder().on(ground).serve().await;
    let listed = get_json(&app.base_url, "/memories?repo=forge&all_versions=true").await;
    written.reverse();
    // The listing adds each memory's use count: none retrieved these.
    for memory in &mut written {
        memory["access_count"] = json!(0);
    }
    assert_eq!(listed["memories"], Value::Array(written));
    app.stop().await;
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish() {
    let app = TestApp::builder().serve().await;
    let body = json!({"scope": "repo", "repo": "forge", "category": "patterns", "content": "Written during shutdown."}).to_string();
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /memories HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let (first_half, second_half) = body.split_at(body.len() / 2);
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(first_half.as_bytes()).await.unwrap();
    let traffic = app.traffic.clone();
    wait_until("the request to be in flight", || {
        traffic.requests_in_flight() == 1
    })
    .await;

    let stopped = app.begin_stop();
    wait_until("the server to stop accepting", || traffic.draining()).await;
    assert!(
        !stopped.is_finished(),
        "the server must wait for the request in flight"
    );
    stream.write_all(second_half.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();

    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    let ground = finishes("the server to stop", stopped).await.unwrap();
    let files: Vec<_> = std::fs::read_dir(ground.data_dir.join("repos/forge"))
        .unwrap()
        .collect();
    assert_eq!(files.len(), 1);
}

/// Reads until the server closes the connection; what it sent meanwhile.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut sent = Vec::new();
    finishes(
        "the server to close the connection",
        stream.read_to_end(&mut sent),
    )
    .await
    .unwrap();
    String::from_utf8_lossy(&sent).into_owned()
}

#[tokio::test]
async fn connections_that_send_nothing_are_closed_after_the_header_timeout() {
    let app = TestApp::builder()
        .config(|config| config.limits.body_timeout_ms = 300)
        .serve()
        .await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut silent = Vec::new();
    for _ in 0..50 {
        silent.push(TcpStream::connect(&addr).await.unwrap());
    }
    // One that asks once, keeps the connection alive, then goes quiet.
    let mut kept_alive = TcpStream::connect(&addr).await.unwrap();
    kept_alive
        .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    for stream in &mut silent {
        assert_eq!(until_closed(stream).await, "", "closed without a word");
    }
    let answered = until_closed(&mut kept_alive).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    app.stop().await;
}

#[tokio::test]
async fn at_the_connection_cap_the_longest_idle_makes_room_and_health_answers() {
    let app = TestApp::builder()
        .config(|config| {
            config.limits.max_connections = 4;
            config.limits.body_timeout_ms = 60_000;
        })
        .serve()
        .await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut idle = Vec::new();
    for opened in 1..=4 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
        // Accepted in order, so the first is the longest idle.
        wait_until("the connection to be accepted", || {
            app.traffic.open_connections() == opened
        })
        .await;
    }
    let health = reqwest::get(format!("{}/healthz", app.base_url))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(until_closed(&mut idle[0]).await, "");
    app.stop().await;
}

#[tokio::test]
async fn with_every_connection_busy_a_newcomer_is_refused_at_once() {
    let app = TestApp::builder()
        .config(|config| {
            config.limits.max_connections = 2;
            config.limits.body_timeout_ms = 60_000;
            config.limits.request_timeout_ms = 60_000;
        })
        .serve()
        .await;
    let addr = app.base_url.trim_start_matches("http://").to_owned();
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        // Headers and half a body: a request in flight.
        stream.write_all(format!(
            "POST /memories HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"scope\":"
        ).as_bytes()).await.unwrap();
        busy.push(stream);
    }
    wait_until("both requests to be in flight", || {
        app.traffic.requests_in_flight() == 2
    })
    .await;
    let mut newcomer = TcpStream::connect(&addr).await.unwrap();
    let refused = until_closed(&mut newcomer).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.contains("urn:engram:problem:overloaded"),
        "{refused}"
    );
    drop(busy);
    app.stop().await;
}
