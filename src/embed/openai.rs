//! The OpenAI-compatible embedder: `POST {base_url}/embeddings` with every
//! text of a call in one request, a bearer key, and a hard timeout.
//!
//! Replies are checked, not trusted: one vector per text (matched by its
//! `index`), all of the expected dimension, all finite.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::upstream::Endpoint;

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
    /// The length every vector must have.
    pub dimensions: usize,
    /// The largest reply read, in bytes.
    pub max_reply_bytes: usize,
}

#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    endpoint: Endpoint,
    settings: Settings,
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
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
        }
    }

    pub fn model(&self) -> &str {
        &self.settings.model
    }

    pub fn dimensions(&self) -> usize {
        self.settings.dimensions
    }

    /// One vector per text, in order, in one request.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let request = EmbeddingsRequest {
            model: &self.settings.model,
            input: texts,
        };
        let reply = self.endpoint.post(&request, self.settings.timeout).await?;
        self.order_and_check(reply, texts.len())
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
            if item.embedding.len() != self.settings.dimensions {
                return Err(self.endpoint.malformed(format!(
                    "a vector of {} dimensions; the index holds {}",
                    item.embedding.len(),
                    self.settings.dimensions
                )));
            }
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
            dimensions,
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
}
