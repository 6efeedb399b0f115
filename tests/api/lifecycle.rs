//! A real port: restarting on the same data directory, and stopping
//! gracefully with a request in flight.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{RunningApp, test_config};

#[tokio::test]
async fn a_restart_on_the_same_data_directory_finds_everything_written() {
    let temp = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let app = RunningApp::start(test_config(temp.path(), |_| {})).await;
    let mut written = Vec::new();
    let mut previous: Option<Value> = None;
    for n in 0..5 {
        let mut body = json!({"scope": "repo", "repo": "forge", "category": "patterns", "content": format!("Version {n}.")});
        if let Some(previous) = &previous {
            body["supersedes"] = previous["id"].clone();
        }
        let created: Value = client
            .post(format!("{}/memories", app.base_url))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
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
    app.stop().await;

    let app = RunningApp::start(test_config(temp.path(), |_| {})).await;
    let listed: Value = client
        .get(format!("{}/memories?repo=forge", app.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    written.reverse();
    assert_eq!(listed["memories"], Value::Array(written));
    app.stop().await;
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish() {
    let temp = tempfile::tempdir().unwrap();
    let app = RunningApp::start(test_config(temp.path(), |_| {})).await;
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
    tokio::time::sleep(Duration::from_millis(100)).await;

    let stopped = app.begin_stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !stopped.is_finished(),
        "the server must wait for the request in flight"
    );
    stream.write_all(second_half.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();

    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    tokio::time::timeout(Duration::from_secs(5), stopped)
        .await
        .unwrap()
        .unwrap();
    let files: Vec<_> = std::fs::read_dir(temp.path().join("repos/forge"))
        .unwrap()
        .collect();
    assert_eq!(files.len(), 1);
}
