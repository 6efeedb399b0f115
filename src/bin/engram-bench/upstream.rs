//! An OpenAI-compatible upstream that answers at once, so the bench
//! measures Engram and not a network or a model.
//!
//! `/embeddings` gives each text a hashed bag-of-words vector: cheap, and
//! texts that share words are near each other, like real embeddings.
//! `/chat/completions` answers HyDE prompts with three hypotheses made of
//! the conversation's last line, and classifier prompts with one memory.

use std::hash::{DefaultHasher, Hash, Hasher};

use axum::Json;
use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};

/// The length of the vectors the fake returns: MiniLM's.
pub const DIMENSIONS: usize = 384;

/// Serves on a free loopback port; returns the API root.
pub async fn start() -> String {
    let router = Router::new()
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/chat/completions", post(chat));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the fake upstream");
    let url = format!(
        "http://{}/v1",
        listener.local_addr().expect("local address")
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

async fn embeddings(Json(body): Json<Value>) -> Json<Value> {
    let data: Vec<Value> = body["input"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let vector = hashed_words(text.as_str().unwrap_or_default());
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    Json(json!({"object": "list", "data": data, "model": body["model"]}))
}

async fn chat(Json(body): Json<Value>) -> Json<Value> {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let prompt = body["messages"][1]["content"].as_str().unwrap_or_default();
    let last_line = prompt
        .lines()
        .rev()
        .find(|line| line.starts_with("user: "))
        .unwrap_or("user: nothing")
        .trim_start_matches("user: ");
    // The classifier gets a JSON array with one memory; HyDE gets a list.
    let reply = if system.contains("memory classifier") {
        json!([{"content": format!("The team agreed: {last_line}"), "scope": "repo",
            "category": "project-conventions"}])
        .to_string()
    } else {
        format!("1. {last_line}\n2. The team decided: {last_line}\n3. The user prefers {last_line}")
    };
    Json(json!({"object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]}))
}

fn hashed_words(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0f32; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut hasher = DefaultHasher::new();
        word.to_lowercase().hash(&mut hasher);
        let bucket = usize::try_from(hasher.finish() % DIMENSIONS as u64).expect("below 384");
        vector[bucket] += 1.0;
    }
    // A constant component keeps a text of unknown words off the zero vector.
    vector[0] += 0.1;
    vector
}
