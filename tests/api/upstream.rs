//! A scripted OpenAI-compatible upstream on 127.0.0.1 (port 0): the only
//! fake in the tests. Each test sets how it answers and reads what it was
//! asked.
//!
//! `/embeddings` answers with a bag-of-words vector per text (each word
//! hashed into one of [`DIMENSIONS`] buckets), so texts sharing words are
//! similar and the results are deterministic. `/chat/completions` answers
//! with the reply the test scripted.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The length of the vectors the fake returns.
pub const DIMENSIONS: usize = 64;

/// How the fake answers the next requests.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    Answer,
    /// Answer with this status and an error body.
    Fail(u16),
    /// Answer, but only after this long.
    Delay(Duration),
    /// Answer well, padded (with a field clients ignore) past this many bytes.
    Oversized(usize),
    /// Embeddings: answer with vectors of all zeros.
    Zeros,
}

#[derive(Default)]
struct Script {
    behaviour: Option<Behaviour>,
    /// The `input` of every embeddings request, in order.
    embedding_requests: Vec<Vec<String>>,
    chat_behaviour: Option<Behaviour>,
    chat_reply: String,
    /// The messages of every chat request, in order.
    chat_requests: Vec<Value>,
    /// When each chat request arrived and was answered, with its prompt.
    chat_spans: Vec<(std::time::Instant, std::time::Instant, String)>,
}

#[derive(Clone)]
pub struct Upstream {
    pub base_url: String,
    script: Arc<Mutex<Script>>,
}

impl Upstream {
    pub async fn start() -> Self {
        let script = Arc::new(Mutex::new(Script::default()));
        let router = Router::new()
            .route("/v1/embeddings", post(embeddings))
            .route("/v1/chat/completions", post(chat))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Self { base_url, script }
    }

    pub fn set(&self, behaviour: Behaviour) {
        self.script.lock().unwrap().behaviour = Some(behaviour);
    }

    /// How `/chat/completions` answers, and with what text.
    pub fn set_chat(&self, behaviour: Behaviour, reply: &str) {
        let mut script = self.script.lock().unwrap();
        script.chat_behaviour = Some(behaviour);
        script.chat_reply = reply.to_owned();
    }

    /// The `messages` of every chat request so far.
    pub fn chat_requests(&self) -> Vec<Value> {
        self.script.lock().unwrap().chat_requests.clone()
    }

    /// (start, end, prompt) of every answered chat request.
    pub fn chat_spans(&self) -> Vec<(std::time::Instant, std::time::Instant, String)> {
        self.script.lock().unwrap().chat_spans.clone()
    }

    /// How many embeddings requests arrived.
    pub fn embedding_calls(&self) -> usize {
        self.script.lock().unwrap().embedding_requests.len()
    }

    /// Every text sent for embedding, in order.
    pub fn embedded_texts(&self) -> Vec<String> {
        let script = self.script.lock().unwrap();
        script
            .embedding_requests
            .iter()
            .flatten()
            .cloned()
            .collect()
    }
}

/// The vector the fake gives `text`.
pub fn bag_of_words(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let mut hasher = DefaultHasher::new();
        word.to_lowercase().hash(&mut hasher);
        vector[(hasher.finish() % DIMENSIONS as u64) as usize] += 1.0;
    }
    vector
}

async fn chat(State(script): State<Arc<Mutex<Script>>>, Json(body): Json<Value>) -> Response {
    let started = std::time::Instant::now();
    let (behaviour, reply) = {
        let mut script = script.lock().unwrap();
        script.chat_requests.push(body["messages"].clone());
        (
            script.chat_behaviour.unwrap_or(Behaviour::Answer),
            script.chat_reply.clone(),
        )
    };
    if let Some(failure) = misbehave(behaviour).await {
        return failure;
    }
    let prompt = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    script
        .lock()
        .unwrap()
        .chat_spans
        .push((started, std::time::Instant::now(), prompt));
    let reply = json!({"object": "chat.completion", "model": body["model"], "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}
    ]});
    Json(padded(reply, behaviour)).into_response()
}

/// `reply`, with a `pad` field past the size an `Oversized` behaviour asks.
fn padded(mut reply: Value, behaviour: Behaviour) -> Value {
    if let Behaviour::Oversized(bytes) = behaviour {
        reply["pad"] = Value::String("x".repeat(bytes));
    }
    reply
}

/// Sleeps or fails as scripted; `Some` is the failure to answer with.
async fn misbehave(behaviour: Behaviour) -> Option<Response> {
    match behaviour {
        Behaviour::Fail(status) => Some(
            (
                StatusCode::from_u16(status).unwrap(),
                Json(json!({"error": {"message": "scripted failure"}})),
            )
                .into_response(),
        ),
        Behaviour::Delay(delay) => {
            tokio::time::sleep(delay).await;
            None
        }
        Behaviour::Answer | Behaviour::Oversized(_) | Behaviour::Zeros => None,
    }
}

async fn embeddings(State(script): State<Arc<Mutex<Script>>>, Json(body): Json<Value>) -> Response {
    let input: Vec<String> = body["input"]
        .as_array()
        .map(|texts| {
            texts
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let behaviour = {
        let mut script = script.lock().unwrap();
        script.embedding_requests.push(input.clone());
        script.behaviour.unwrap_or(Behaviour::Answer)
    };
    if let Some(failure) = misbehave(behaviour).await {
        return failure;
    }
    let data: Vec<Value> = input
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let vector = match behaviour {
                Behaviour::Zeros => vec![0.0; DIMENSIONS],
                _ => bag_of_words(text),
            };
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let reply = json!({"object": "list", "data": data, "model": body["model"]});
    Json(padded(reply, behaviour)).into_response()
}
