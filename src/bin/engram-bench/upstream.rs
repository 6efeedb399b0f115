//! An OpenAI-compatible upstream that answers at once, so the bench
//! measures Engram and not a network or a model.
//!
//! `/embeddings` gives each text a hashed bag-of-words vector: cheap, and
//! texts that share words are near each other, like real embeddings.
//! `/chat/completions` answers HyDE prompts with three hypotheses made of
//! the conversation's last line, and classifier prompts with one memory.
//! [`start_oversized`] is an upstream gone wrong: every reply hundreds of
//! megabytes long.

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

/// A text's fake embedding: its words hashed into buckets.
pub fn hashed_words(text: &str) -> Vec<f32> {
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

/// Serves on a free loopback port an upstream whose every reply, whatever
/// was asked, is a chat completion `reply_bytes` long: an upstream gone
/// wrong. The reply is streamed from one small buffer, so the fake itself
/// holds none of it and the bench measures only what Engram keeps.
pub async fn start_oversized(reply_bytes: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the oversized upstream");
    let url = format!(
        "http://{}/v1",
        listener.local_addr().expect("local address")
    );
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // A client that hangs up mid-reply is what a cap looks like.
            tokio::spawn(async move {
                let _ = answer_oversized(stream, reply_bytes).await;
            });
        }
    });
    url
}

/// Reads one request and answers it with `reply_bytes` of chat completion.
async fn answer_oversized(
    stream: tokio::net::TcpStream,
    reply_bytes: usize,
) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let body_start = loop {
        let read = read_some(&stream, &mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        request.extend_from_slice(&chunk[..read]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..body_start]).to_lowercase();
    let body_length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    let mut remaining = body_length.saturating_sub(request.len() - body_start);
    while remaining > 0 {
        let read = read_some(&stream, &mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        remaining = remaining.saturating_sub(read);
    }

    let opening = r#"{"object":"chat.completion","model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":""#;
    let closing = r#""}}]}"#;
    let filler_length = reply_bytes.saturating_sub(opening.len() + closing.len());
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{opening}",
        opening.len() + filler_length + closing.len()
    );
    write_all(&stream, head.as_bytes()).await?;
    let filler = [b'x'; 64 * 1024];
    let mut left = filler_length;
    while left > 0 {
        let part = left.min(filler.len());
        write_all(&stream, &filler[..part]).await?;
        left -= part;
    }
    write_all(&stream, closing.as_bytes()).await
}

/// Reads what has arrived (0 at end of stream).
pub async fn read_some(
    stream: &tokio::net::TcpStream,
    buffer: &mut [u8],
) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buffer) {
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            result => return result,
        }
    }
}

async fn write_all(stream: &tokio::net::TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
