//! What the API tests share: the apps they run (`app`: `TestApp::builder`),
//! how they wait (`wait`: bounded by one `PATIENCE`), how they skip where
//! a tool is missing (`skip`), and typed requests and request bodies.

mod app;
mod skip;
mod wait;

use std::path::Path;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::upstream::Behaviour;

pub use app::{Builder, Ground, RunningApp, TestApp, UNHURRIED_MS, spawn_app};
pub use skip::{npm_installed, or_skip, skip};
pub use wait::{PATIENCE, deadline, finishes, wait_for, wait_until, wait_until_async};

pub struct TestResponse {
    pub status: StatusCode,
    pub content_type: String,
    pub json: Value,
    pub text: String,
}

impl TestApp {
    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        TestResponse {
            status,
            content_type,
            json,
            text,
        }
    }

    pub async fn request(&self, method: Method, uri: &str, body: Option<&Value>) -> TestResponse {
        let builder = Request::builder().method(method).uri(uri);
        let request = match body {
            Some(body) => builder
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string())),
            None => builder.body(Body::empty()),
        };
        self.send(request.unwrap()).await
    }

    pub async fn get(&self, uri: &str) -> TestResponse {
        self.request(Method::GET, uri, None).await
    }

    pub async fn post(&self, uri: &str, body: &Value) -> TestResponse {
        self.request(Method::POST, uri, Some(body)).await
    }

    pub async fn delete(&self, uri: &str) -> TestResponse {
        self.request(Method::DELETE, uri, None).await
    }

    /// Writes a memory and returns it, failing the test unless it is created.
    pub async fn create(&self, body: Value) -> Value {
        let response = self.post("/memories", &body).await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        response.json
    }

    /// POSTs a trigger (`/turns`, `/compactions`) and returns the answer,
    /// failing the test unless it is accepted.
    pub async fn accept(&self, path: &str, body: &Value) -> Value {
        let response = self.post(path, body).await;
        assert_eq!(response.status, StatusCode::ACCEPTED, "{}", response.text);
        response.json
    }

    /// Waits until every write and delete so far is in the vector index.
    pub async fn wait_indexed(&self) -> Value {
        self.wait_indexed_as(None).await
    }

    /// [`Self::wait_indexed`] with an API key.
    pub async fn wait_indexed_with(&self, key: &str) -> Value {
        self.wait_indexed_as(Some(key)).await
    }

    async fn wait_indexed_as(&self, key: Option<&str>) -> Value {
        wait_for("the index to catch up", async || {
            let mut request = Request::builder().uri("/stats");
            if let Some(key) = key {
                request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
            }
            let stats = self.send(request.body(Body::empty()).unwrap()).await.json;
            if caught_up(&stats) {
                Ok(stats)
            } else {
                Err(stats)
            }
        })
        .await
    }

    /// `POST /retrieve` with this body, expecting 200.
    pub async fn retrieve(&self, body: Value) -> Value {
        let response = self.post("/retrieve", &body).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        response.json
    }

    /// Every file under the data directory but the derived ones in
    /// `.cache/`, relative, sorted.
    pub fn files(&self) -> Vec<String> {
        files_under(&self.data_dir)
    }
}

/// Every file under `data_dir` but the derived ones in `.cache/`,
/// relative, sorted.
pub fn files_under(data_dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    collect_files(data_dir, data_dir, &mut files);
    files.retain(|file| !file.starts_with(".cache/"));
    files.sort();
    files
}

/// Waits until `done` triggers were processed or failed.
pub async fn settled(app: &TestApp, done: u64) -> Value {
    wait_for("capture to settle", async || {
        let stats = app.get("/stats").await.json;
        let capture = &stats["capture"];
        let finished = capture["processed"].as_u64().unwrap() + capture["failed"].as_u64().unwrap();
        if finished >= done && capture["queue_depth"] == 0 {
            Ok(stats)
        } else {
            Err(stats)
        }
    })
    .await
}

/// Whether `stats` (a `/stats` answer) says every write and delete so
/// far is in the vector index.
fn caught_up(stats: &Value) -> bool {
    stats["index"]["ready"] == true && stats["index"]["pending"] == 0
}

impl RunningApp {
    /// Waits until every write and delete so far is in the vector index.
    pub async fn wait_indexed(&self) {
        self.wait_indexed_as(None).await;
    }

    /// [`Self::wait_indexed`] with an API key.
    pub async fn wait_indexed_with(&self, key: &str) {
        self.wait_indexed_as(Some(key)).await;
    }

    async fn wait_indexed_as(&self, key: Option<&str>) {
        let client = reqwest::Client::new();
        let stats = format!("{}/stats", self.base_url);
        wait_until_async("the index to take every write", async || {
            let mut request = client.get(&stats);
            if let Some(key) = key {
                request = request.bearer_auth(key);
            }
            caught_up(&request.send().await.unwrap().json().await.unwrap())
        })
        .await;
    }
}

/// Writes a memory of `content` while the app's embedder (its upstream)
/// fails as `fault`: the
/// write lands and stays pending in the index; then the embedder recovers
/// and the memory is indexed after at least one failed batch. Returns the
/// written memory.
pub async fn write_through_embedder_fault(app: &TestApp, fault: Behaviour, content: &str) -> Value {
    let upstream = &app.upstream;
    upstream.set(fault);
    let written = app
        .create(memory("repo", "forge", "patterns", content))
        .await;
    wait_until("the indexer to try the new memory", || {
        upstream.embedded_texts().iter().any(|text| text == content)
    })
    .await;
    let stats = app.get("/stats").await.json;
    assert_eq!(
        stats["store"]["memories"], 1,
        "the write landed while the embedder is down"
    );
    assert_eq!(
        stats["index"]["pending"], 1,
        "not indexed while failing: {stats:#}"
    );

    upstream.set(Behaviour::Answer);
    let stats = app.wait_indexed().await;
    assert_eq!(stats["index"]["memories"], 1);
    assert!(
        stats["index"]["failed_batches"].as_u64().unwrap() >= 1,
        "{stats:#}"
    );
    written
}

/// GET `{base}{path}` over a real socket; the answer as JSON.
pub async fn get_json(base: &str, path: &str) -> Value {
    let response = reqwest::get(format!("{base}{path}")).await.unwrap();
    response.json().await.unwrap()
}

/// POST `body` to `{base}{path}` over a real socket; the answer as JSON.
pub async fn post_json(base: &str, path: &str, body: &Value) -> Value {
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    response.json().await.unwrap()
}

/// One request to `{base}{path}` over a real socket, with `key` as bearer
/// (if any): its status, headers and JSON body (null if it has none).
pub async fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{base}{path}"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// A loopback URL where nothing listens (the port was free a moment ago).
pub fn closed_url() -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", closed.local_addr().unwrap())
}

/// Whether `{base}/readyz` answers 200 over a real socket.
pub async fn is_ready(base: &str) -> bool {
    reqwest::get(format!("{base}/readyz"))
        .await
        .is_ok_and(|response| response.status() == 200)
}

/// Waits until `{base}/readyz` answers 200 over a real socket.
pub async fn wait_ready(base: &str) {
    wait_until_async(&format!("{base} to be ready"), async || {
        is_ready(base).await
    })
    .await;
}

fn collect_files(root: &Path, dir: &Path, files: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_files(root, &path, files);
        } else {
            files.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

/// A memory's id, from its JSON.
pub fn id(memory: &Value) -> String {
    memory["id"].as_str().unwrap().to_owned()
}

/// The ids of a retrieval's or a listing's memories, in order.
pub fn ids(result: &Value) -> Vec<String> {
    memories_of(result).map(id).collect()
}

/// The contents of a retrieval's or a listing's memories, in order.
pub fn contents(result: &Value) -> Vec<&str> {
    memories_of(result)
        .map(|memory| memory["content"].as_str().unwrap())
        .collect()
}

fn memories_of(result: &Value) -> impl Iterator<Item = &Value> {
    result["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("no memories in {result}"))
        .iter()
}

/// A valid memory request body, to be adjusted per test.
pub fn memory(scope: &str, owner: &str, category: &str, content: &str) -> Value {
    let owner_field = if scope == "repo" { "repo" } else { "user" };
    json!({ "scope": scope, owner_field: owner, "category": category, "content": content })
}

/// The decision the retrieval tests look for: forge keeps everything in
/// PostgreSQL 16.
pub fn postgres_decision() -> Value {
    memory(
        "repo",
        "forge",
        "architectural-decisions",
        "We store everything in PostgreSQL 16.",
    )
}

/// Writes [`postgres_decision`], a convention of forge's and a preference
/// of ana's, and waits for their vectors; answers the decision.
pub async fn seed_forge_and_ana(app: &TestApp) -> Value {
    let decision = app.create(postgres_decision()).await;
    app.create(memory(
        "repo",
        "forge",
        "project-conventions",
        "Commit messages use the imperative mood.",
    ))
    .await;
    app.create(memory(
        "user",
        "ana",
        "coding-preferences",
        "Ana likes tabs over spaces.",
    ))
    .await;
    app.wait_indexed().await;
    decision
}

impl TestResponse {
    /// Asserts a problem response with this status and field.
    pub fn assert_problem(&self, status: StatusCode, field: Option<&str>) {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(
            self.content_type, "application/problem+json",
            "{}",
            self.text
        );
        assert!(
            self.json["type"]
                .as_str()
                .unwrap()
                .starts_with("urn:engram:problem:"),
            "{}",
            self.text
        );
        assert_eq!(self.json["status"], status.as_u16());
        assert!(!self.json["detail"].as_str().unwrap().is_empty());
        assert_eq!(self.json["field"].as_str(), field, "{}", self.text);
    }
}
