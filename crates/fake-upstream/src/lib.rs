//! A fake OpenAI-compatible upstream on 127.0.0.1 (port 0), shared by the
//! bench and the tests (a dev-only crate): the only fake either uses.
//!
//! `/embeddings` gives each text a bag-of-words vector (each word hashed
//! into one bucket, see [`Vectors`]), so texts that share words are near
//! each other, like real embeddings, and every answer is deterministic.
//! `/chat/completions` answers with the reply a test scripted, or (for the
//! bench) one built from the prompt: three hypotheses made of the
//! conversation's last line for HyDE, one memory for the classifier (or,
//! with [`Chat::Facts`], one per fact sentence it is asked to classify).
//! A test can make it refuse a `response_format` as a server without
//! structured output does.
//! A test can also make either endpoint fail, stall or ramble
//! ([`Behaviour`]), hold back the embeddings of some texts alone
//! ([`Upstream::stall_embeddings_of`]), and read what it was asked. [`start_oversized`] is an
//! upstream gone wrong: every reply hundreds of megabytes long.
//!
//! Every reply carries an OpenAI-style `usage` ([`usage_of`]: a token per
//! four characters received and answered, so a test can work the figures
//! out), unless a test turns it off ([`Upstream::send_usage`]) to see what
//! a client does with a server that reports none; the chat endpoint's are
//! also added up ([`Upstream::usage`]).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

mod oversized;
mod replies;

pub use oversized::{read_some, start_oversized};
pub use replies::usage_of;
use replies::{counted, facts_reply, reply_from_prompt};

/// The vectors the fake gives.
#[derive(Clone, Copy, Debug)]
pub struct Vectors {
    pub dimensions: usize,
    /// Added to the first component, so that a text of unknown words is
    /// not the zero vector.
    pub bias: f32,
}

impl Vectors {
    /// Short vectors for the tests: quick, and exact for hand-checked cases.
    pub const SMALL: Self = Self {
        dimensions: 64,
        bias: 0.0,
    };
    /// MiniLM's length, so the bench scans what production scans.
    pub const MINILM: Self = Self {
        dimensions: 384,
        bias: 0.1,
    };

    /// The vector the fake gives `text`.
    pub fn of(self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimensions];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
        {
            let mut hasher = DefaultHasher::new();
            word.to_lowercase().hash(&mut hasher);
            let bucket = hasher.finish() % self.dimensions as u64;
            vector[usize::try_from(bucket).expect("a bucket is below the length")] += 1.0;
        }
        vector[0] += self.bias;
        vector
    }
}

/// How `/chat/completions` makes its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chat {
    /// The text set by [`Upstream::set_chat`] (empty until then).
    Scripted,
    /// Built from the prompt: hypotheses for HyDE, a memory for the
    /// classifier.
    FromPrompt,
    /// As `FromPrompt` for HyDE; the classifier gets one memory per fact
    /// sentence of a user message it is asked to classify (see
    /// [`facts_reply`]), so that the same facts make the same memories
    /// whatever the prompt's shape.
    Facts,
}

/// Which `response_format` a fake refuses.
#[derive(Clone, Debug)]
enum Refused {
    /// The field itself, whatever its type.
    Field,
    /// These types of it.
    Types(Vec<String>),
}

/// What the chat endpoint has been asked and has answered, in `usage`
/// terms: a token per four characters (rounded up) of each message's
/// content received and of each reply sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What a fake upstream is.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub vectors: Vectors,
    pub chat: Chat,
    /// Whether it keeps every request for the test to read (the bench's
    /// long runs would only grow its memory).
    pub record: bool,
}

impl Setup {
    pub const TESTS: Self = Self {
        vectors: Vectors::SMALL,
        chat: Chat::Scripted,
        record: true,
    };
    pub const BENCH: Self = Self {
        vectors: Vectors::MINILM,
        chat: Chat::FromPrompt,
        record: false,
    };
}

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

struct Script {
    setup: Setup,
    behaviour: Option<Behaviour>,
    /// The `input` of every embeddings request, in order.
    embedding_requests: Vec<Vec<String>>,
    /// Embeddings requests with a text containing this are not answered
    /// while it is set.
    stalled: Option<String>,
    chat_behaviour: Option<Behaviour>,
    chat_reply: String,
    /// Which chat requests carrying a `response_format` are refused (400).
    refused_formats: Option<Refused>,
    /// The `response_format` of every chat request (null when absent).
    chat_formats: Vec<Value>,
    /// Every answered chat request's usage, added up.
    usage: Usage,
    /// The messages of every chat request, in order.
    chat_requests: Vec<Value>,
    /// When each chat request arrived and was answered, with its prompt.
    chat_spans: Vec<(Instant, Instant, String)>,
    /// Whether replies carry `usage`.
    sends_usage: bool,
}

/// A running fake; cheap to clone.
#[derive(Clone)]
pub struct Upstream {
    /// The API root to configure as `base_url`.
    pub base_url: String,
    script: Arc<Mutex<Script>>,
}

impl Upstream {
    /// The tests' fake: [`Setup::TESTS`].
    pub async fn start() -> Self {
        Self::start_with(Setup::TESTS).await
    }

    pub async fn start_with(setup: Setup) -> Self {
        let script = Arc::new(Mutex::new(Script {
            setup,
            behaviour: None,
            embedding_requests: Vec::new(),
            stalled: None,
            chat_behaviour: None,
            chat_reply: String::new(),
            refused_formats: None,
            chat_formats: Vec::new(),
            usage: Usage::default(),
            chat_requests: Vec::new(),
            chat_spans: Vec::new(),
            sends_usage: true,
        }));
        let router = Router::new()
            .route("/v1/embeddings", post(embeddings))
            .route("/v1/chat/completions", post(chat))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake upstream");
        let base_url = format!(
            "http://{}/v1",
            listener.local_addr().expect("local address")
        );
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { base_url, script }
    }

    pub fn set(&self, behaviour: Behaviour) {
        self.script().behaviour = Some(behaviour);
    }

    /// Holds back every embeddings request with a text containing
    /// `fragment` (the client's timeout ends its wait) until
    /// [`Self::release_embeddings`]; other requests are answered as usual.
    pub fn stall_embeddings_of(&self, fragment: &str) {
        self.script().stalled = Some(fragment.to_owned());
    }

    /// Answers held-back embeddings requests, and all later ones.
    pub fn release_embeddings(&self) {
        self.script().stalled = None;
    }

    /// How `/chat/completions` answers, and with what text.
    pub fn set_chat(&self, behaviour: Behaviour, reply: &str) {
        let mut script = self.script();
        script.chat_behaviour = Some(behaviour);
        script.chat_reply = reply.to_owned();
    }

    /// Whether replies carry an OpenAI-style `usage` (they do unless
    /// turned off).
    pub fn send_usage(&self, on: bool) {
        self.script().sends_usage = on;
    }

    /// Refuses every chat request carrying a `response_format`, as a
    /// server that does not know the field does (400, "unrecognized
    /// request argument").
    pub fn refuse_response_format(&self) {
        self.script().refused_formats = Some(Refused::Field);
    }

    /// Refuses chat requests whose `response_format` is of one of `types`
    /// (`json_schema`, `json_object`), as a server that knows the field
    /// but not that type does (400 naming the type).
    pub fn refuse_response_format_types(&self, types: &[&str]) {
        self.script().refused_formats = Some(Refused::Types(
            types.iter().map(|kind| (*kind).to_owned()).collect(),
        ));
    }

    /// The `response_format` of every chat request so far (null when absent).
    pub fn response_formats(&self) -> Vec<Value> {
        self.script().chat_formats.clone()
    }

    /// The usage of every answered chat request so far, added up.
    pub fn usage(&self) -> Usage {
        self.script().usage
    }

    /// The `messages` of every chat request so far.
    pub fn chat_requests(&self) -> Vec<Value> {
        self.script().chat_requests.clone()
    }

    /// (start, end, prompt) of every answered chat request.
    pub fn chat_spans(&self) -> Vec<(Instant, Instant, String)> {
        self.script().chat_spans.clone()
    }

    /// How many embeddings requests arrived.
    pub fn embedding_calls(&self) -> usize {
        self.script().embedding_requests.len()
    }

    /// How many texts each embeddings request carried, in order.
    pub fn embedding_request_sizes(&self) -> Vec<usize> {
        self.script()
            .embedding_requests
            .iter()
            .map(Vec::len)
            .collect()
    }

    /// Every text sent for embedding, in order.
    pub fn embedded_texts(&self) -> Vec<String> {
        self.script()
            .embedding_requests
            .iter()
            .flatten()
            .cloned()
            .collect()
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().expect("the fake's script lock")
    }
}

async fn chat(State(script): State<Arc<Mutex<Script>>>, Json(body): Json<Value>) -> Response {
    let started = Instant::now();
    let (behaviour, scripted, setup, sends_usage) = {
        let mut script = script.lock().expect("the fake's script lock");
        if script.setup.record {
            script.chat_requests.push(body["messages"].clone());
            script.chat_formats.push(body["response_format"].clone());
        }
        let format = body["response_format"]["type"].as_str();
        let refusal = match (&script.refused_formats, format) {
            (Some(Refused::Field), Some(_)) => {
                Some("Unrecognized request argument supplied: response_format".to_owned())
            }
            (Some(Refused::Types(types)), Some(format)) if types.iter().any(|t| t == format) => {
                Some(format!("response_format of type {format} is not supported"))
            }
            _ => None,
        };
        if let Some(message) = refusal {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"message": message, "type": "invalid_request_error", "param": "response_format"}})),
            )
                .into_response();
        }
        (
            script.chat_behaviour.unwrap_or(Behaviour::Answer),
            script.chat_reply.clone(),
            script.setup,
            script.sends_usage,
        )
    };
    if let Some(failure) = misbehave(behaviour).await {
        return failure;
    }
    let prompt = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let reply = match setup.chat {
        Chat::Scripted => scripted,
        Chat::FromPrompt | Chat::Facts => {
            let system = body["messages"][0]["content"].as_str().unwrap_or_default();
            if setup.chat == Chat::Facts && system.contains("memory classifier") {
                facts_reply(&prompt)
            } else {
                reply_from_prompt(system, &prompt)
            }
        }
    };
    let received: Vec<&str> = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|message| message["content"].as_str())
        .collect();
    let usage = counted(&received, &reply);
    {
        let mut script = script.lock().expect("the fake's script lock");
        script.usage.calls += usage.calls;
        script.usage.prompt_tokens += usage.prompt_tokens;
        script.usage.completion_tokens += usage.completion_tokens;
    }
    if setup.record {
        script
            .lock()
            .expect("the fake's script lock")
            .chat_spans
            .push((started, Instant::now(), prompt));
    }
    let usage = sends_usage.then(|| usage_of(&received, &reply));
    let mut reply = json!({"object": "chat.completion", "model": body["model"], "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}
    ]});
    if let Some(usage) = usage {
        reply["usage"] = usage;
    }
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
                StatusCode::from_u16(status).expect("a scripted status is valid"),
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
    let (behaviour, vectors, sends_usage) = {
        let mut script = script.lock().expect("the fake's script lock");
        if script.setup.record {
            script.embedding_requests.push(input.clone());
        }
        (
            script.behaviour.unwrap_or(Behaviour::Answer),
            script.setup.vectors,
            script.sends_usage,
        )
    };
    if let Some(failure) = misbehave(behaviour).await {
        return failure;
    }
    while stalls(&script, &input) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let data: Vec<Value> = input
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let vector = match behaviour {
                Behaviour::Zeros => vec![0.0; vectors.dimensions],
                _ => vectors.of(text),
            };
            json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let mut reply = json!({"object": "list", "data": data, "model": body["model"]});
    if sends_usage {
        let texts: Vec<&str> = input.iter().map(String::as_str).collect();
        reply["usage"] = usage_of(&texts, "");
    }
    Json(padded(reply, behaviour)).into_response()
}

/// Whether the script holds back a request for these texts.
fn stalls(script: &Mutex<Script>, input: &[String]) -> bool {
    let script = script.lock().expect("the fake's script lock");
    script
        .stalled
        .as_deref()
        .is_some_and(|fragment| input.iter().any(|text| text.contains(fragment)))
}
