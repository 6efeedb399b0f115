//! The OpenAI-compatible embedder: `POST {base_url}/embeddings` with every
//! text of a call in one request, a bearer key, and a hard timeout.
//!
//! Replies are checked, not trusted: one vector per text (matched by its
//! `index`), all of the expected dimension, all finite.
//!
//! The expected dimension is `embedding.dimensions` when configured, else
//! learned once from the first reply (or adopted from the embedding
//! cache's header) and shared by every clone. A reply of another length is
//! refused and counted; the first time each wrong length is seen, one
//! `warn` line names the key and both lengths.
//!
//! Texts go through the secret guard's [`secrets::redact`] first: a query
//! or a hand-edited memory holding a key reaches the provider as
//! `[secret: KIND]`. Vectors are cached under the text as given.
//!
//! Every call is counted by the [`Meter`] as an `embeddings` call of no
//! namespace pair (an indexing batch spans many): the reply's `usage`, or
//! the tokenizer's count of the texts sent.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::bounds;
use crate::secrets;
use crate::tokens;
use crate::upstream::Endpoint;
use crate::usage::{self, CallKind, Meter, Owner, Tokens};

pub use crate::upstream::Error;

/// How to reach an OpenAI-compatible embeddings endpoint.
#[derive(Clone, Debug)]
pub struct Settings {
    /// e.g. `https://api.openai.com/v1`; `/embeddings` is appended.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    pub timeout: Duration,
    /// The length every vector must have; `None`: learn it.
    pub dimensions: Option<usize>,
    /// The largest reply read, in bytes.
    pub max_reply_bytes: usize,
}

#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    endpoint: Endpoint,
    settings: Settings,
    space: Arc<VectorSpace>,
    meter: Meter,
}

/// What is known of the model's vector length, shared by every clone.
#[derive(Debug, Default)]
struct VectorSpace {
    /// Learned from the first reply or the cache, when not configured.
    learned: OnceLock<usize>,
    /// Replies refused for vectors of another length.
    mismatches: AtomicU64,
    /// The last wrong length warned about, so a steady mismatch logs once.
    warned_length: AtomicUsize,
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [Cow<'a, str>],
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
    /// Read leniently: a server's odd `usage` is no reason to lose its vectors.
    #[serde(default)]
    usage: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    pub fn new(settings: Settings) -> Self {
        Self {
            endpoint: Endpoint::new(
                &settings.base_url,
                "embeddings",
                settings.api_key.clone(),
                "the embeddings endpoint",
                settings.max_reply_bytes,
            ),
            settings,
            space: Arc::default(),
            meter: Meter::default(),
        }
    }

    /// This embedder, its calls counted by `meter`.
    pub fn metered(self, meter: Meter) -> Self {
        Self { meter, ..self }
    }

    pub fn model(&self) -> &str {
        &self.settings.model
    }

    /// The configured length, else the learned one, else `None`.
    pub fn dimensions(&self) -> Option<usize> {
        self.settings
            .dimensions
            .or_else(|| self.space.learned.get().copied())
    }

    /// Whether the length comes from `embedding.dimensions`.
    pub fn dimensions_configured(&self) -> bool {
        self.settings.dimensions.is_some()
    }

    /// Takes `dimensions` (from the embedding cache) as learned, unless a
    /// length is configured or already known.
    pub fn adopt_dimensions(&self, dimensions: usize) {
        if self.settings.dimensions.is_none() {
            let _ = self.space.learned.set(dimensions);
        }
    }

    /// Replies refused since start for vectors of another length.
    pub fn dimension_mismatches(&self) -> u64 {
        self.space.mismatches.load(Ordering::Relaxed)
    }

    /// One vector per text, in order, in one request. Secrets in a text
    /// are replaced by their placeholder before it leaves.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let redacted: Vec<Cow<'_, str>> = texts.iter().map(|text| secrets::redact(text)).collect();
        let request = EmbeddingsRequest {
            model: &self.settings.model,
            input: &redacted,
        };
        let mut reply: EmbeddingsResponse =
            self.endpoint.post(&request, self.settings.timeout).await?;
        let reported = Tokens::reported(reply.usage.take().as_ref());
        self.meter.record(usage::Call {
            kind: CallKind::Embeddings,
            model: &self.settings.model,
            owner: Owner::default(),
            tokens: reported.unwrap_or_else(|| Tokens {
                prompt: redacted.iter().map(|text| tokens::count(text) as u64).sum(),
                completion: 0,
            }),
            estimated: reported.is_none(),
        });
        self.order_and_check(reply, texts.len())
    }

    /// Checks a vector's length against the expected one, learning it from
    /// this vector when none is known yet.
    fn check_length(&self, length: usize) -> Result<(), Error> {
        if !bounds::EMBEDDING_DIMENSIONS.contains(&length) {
            return Err(self
                .endpoint
                .malformed(format!("a vector of {length} dimensions")));
        }
        let expected = match self.settings.dimensions {
            Some(configured) => configured,
            None => *self.space.learned.get_or_init(|| {
                tracing::info!(embedding.model = %self.settings.model, embedding.dimensions = length, "learned the embedding length from the first reply");
                length
            }),
        };
        if length == expected {
            return Ok(());
        }
        self.space.mismatches.fetch_add(1, Ordering::Relaxed);
        if self.space.warned_length.swap(length, Ordering::Relaxed) != length {
            let fix = if self.dimensions_configured() {
                "leave embedding.dimensions unset to learn the length, or point it at the model it names"
            } else {
                "the index holds vectors of the learned length: set embedding.dimensions to the new one to rebuild it"
            };
            tracing::warn!(
                config.key = "embedding.dimensions",
                embedding.model = %self.settings.model,
                dimensions.expected = expected,
                dimensions.received = length,
                "the embedding model returns vectors of {length} dimensions, not {expected}; every embedding is refused until they agree ({fix})"
            );
        }
        Err(self.endpoint.malformed(format!(
            "a vector of {length} dimensions; embedding.dimensions is {expected}{}",
            if self.dimensions_configured() {
                ""
            } else {
                " (learned)"
            }
        )))
    }

    fn order_and_check(
        &self,
        reply: EmbeddingsResponse,
        expected: usize,
    ) -> Result<Vec<Vec<f32>>, Error> {
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; expected];
        for item in reply.data {
            let slot = vectors.get_mut(item.index).ok_or_else(|| {
                self.endpoint
                    .malformed(format!("index {} for {expected} texts", item.index))
            })?;
            self.check_length(item.embedding.len())?;
            if !item.embedding.iter().all(|x| x.is_finite()) {
                return Err(self.endpoint.malformed("a vector with a non-finite value"));
            }
            if slot.replace(item.embedding).is_some() {
                return Err(self
                    .endpoint
                    .malformed(format!("index {} twice", item.index)));
            }
        }
        vectors
            .into_iter()
            .enumerate()
            .map(|(index, vector)| {
                vector.ok_or_else(|| {
                    self.endpoint
                        .malformed(format!("no vector for text {index}"))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Json;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use serde_json::{Value, json};

    use super::*;

    /// A scripted upstream on 127.0.0.1:0 that records what it was sent.
    async fn upstream(
        reply: (StatusCode, Value),
        delay: Duration,
    ) -> (String, Arc<Mutex<Vec<(Option<String>, Value)>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorder = seen.clone();
        let app = axum::Router::new().route(
            "/v1/embeddings",
            post(move |headers: HeaderMap, Json(body): Json<Value>| {
                let reply = reply.clone();
                let recorder = recorder.clone();
                async move {
                    let auth = headers
                        .get("authorization")
                        .map(|v| v.to_str().unwrap().to_owned());
                    recorder.lock().unwrap().push((auth, body));
                    tokio::time::sleep(delay).await;
                    (reply.0, Json(reply.1))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/v1"), seen)
    }

    fn embedder(base_url: String, dimensions: usize) -> OpenAiEmbedder {
        OpenAiEmbedder::new(Settings {
            base_url,
            model: "text-embedding-3-small".to_owned(),
            api_key: Some("sk-test".to_owned()),
            timeout: Duration::from_millis(300),
            dimensions: Some(dimensions),
            max_reply_bytes: 64 * 1024,
        })
    }

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[tokio::test]
    async fn sends_one_batched_request_and_orders_by_index() {
        let reply = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        let (url, seen) = upstream((StatusCode::OK, reply), Duration::ZERO).await;

        let vectors = embedder(url, 2).embed(&texts(&["a", "b"])).await.unwrap();

        assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0.as_deref(), Some("Bearer sk-test"));
        assert_eq!(
            seen[0].1,
            json!({"model": "text-embedding-3-small", "input": ["a", "b"]})
        );
    }

    #[tokio::test]
    async fn refuses_replies_that_do_not_fit() {
        let cases = [
            json!({"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]}),
            json!({"data": [{"index": 3, "embedding": [1.0, 0.0]}]}),
            json!({"data": []}),
            json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [1.0, 0.0]}]}),
            json!({"nothing": true}),
        ];
        for reply in cases {
            let (url, _) = upstream((StatusCode::OK, reply.clone()), Duration::ZERO).await;
            let err = embedder(url, 2).embed(&texts(&["a"])).await.unwrap_err();
            assert!(matches!(err, Error::Malformed { .. }), "{reply} gave {err}");
        }
    }

    #[tokio::test]
    async fn reports_status_errors_and_timeouts() {
        let (url, _) = upstream(
            (StatusCode::TOO_MANY_REQUESTS, json!({"error": "slow down"})),
            Duration::ZERO,
        )
        .await;
        let err = embedder(url, 2).embed(&texts(&["a"])).await.unwrap_err();
        assert!(
            matches!(err, Error::Status { status: 429, ref body, .. } if body.contains("slow down")),
            "{err}"
        );

        let (url, _) = upstream(
            (StatusCode::OK, json!({"data": []})),
            Duration::from_secs(5),
        )
        .await;
        let err = embedder(url, 2).embed(&texts(&["a"])).await.unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
    }

    #[tokio::test]
    async fn an_unset_length_is_learned_from_the_first_reply_then_checked() {
        let reply = json!({"data": [{"index": 0, "embedding": [0.5, 0.5, 0.5]}]});
        let (url, _) = upstream((StatusCode::OK, reply), Duration::ZERO).await;
        let learning = OpenAiEmbedder::new(Settings {
            dimensions: None,
            ..embedder(url, 1).settings
        });
        assert_eq!(learning.dimensions(), None);
        learning.embed(&texts(&["a"])).await.unwrap();
        assert_eq!(learning.clone().dimensions(), Some(3), "clones share it");

        let reply = json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]});
        let (url, _) = upstream((StatusCode::OK, reply), Duration::ZERO).await;
        let moved = OpenAiEmbedder {
            endpoint: embedder(url, 1).endpoint,
            ..learning.clone()
        };
        for _ in 0..2 {
            let err = moved.embed(&texts(&["a"])).await.unwrap_err();
            assert!(
                err.to_string().contains("embedding.dimensions is 3"),
                "{err}"
            );
        }
        assert_eq!(learning.dimension_mismatches(), 2);
        assert_eq!(learning.dimensions(), Some(3));
    }
}
