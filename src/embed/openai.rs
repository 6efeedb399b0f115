//! The OpenAI-compatible embedder: `POST {base_url}/embeddings` with every
//! text of a call in one request, a bearer key, and a hard timeout.
//!
//! Replies are checked, not trusted: one vector per text (matched by its
//! `index`), all of the expected dimension, all finite.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the embeddings endpoint did not answer within {0:?}")]
    Timeout(Duration),
    #[error("calling the embeddings endpoint")]
    Transport(#[source] reqwest::Error),
    #[error("the embeddings endpoint answered {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the embeddings endpoint's reply is unusable: {0}")]
    Malformed(String),
}

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
}

#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    url: String,
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

/// The most of an error body kept for the message.
const MAX_ERROR_BODY: usize = 512;

impl OpenAiEmbedder {
    pub fn new(settings: Settings) -> Self {
        Self {
            client: reqwest::Client::new(),
            url: format!("{}/embeddings", settings.base_url.trim_end_matches('/')),
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
        let timeout = self.settings.timeout;
        tokio::time::timeout(timeout, self.call(texts))
            .await
            .map_err(|_| Error::Timeout(timeout))?
    }

    async fn call(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let mut request = self.client.post(&self.url).json(&EmbeddingsRequest {
            model: &self.settings.model,
            input: texts,
        });
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(Error::Transport)?;
        let status = response.status();
        if !status.is_success() {
            let mut body = response.text().await.unwrap_or_default();
            if let Some((cut, _)) = body.char_indices().nth(MAX_ERROR_BODY) {
                body.truncate(cut);
            }
            return Err(Error::Status {
                status: status.as_u16(),
                body,
            });
        }
        let bytes = response.bytes().await.map_err(Error::Transport)?;
        let reply: EmbeddingsResponse = serde_json::from_slice(&bytes)
            .map_err(|err| Error::Malformed(format!("not an embeddings response: {err}")))?;
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
                Error::Malformed(format!("index {} for {expected} texts", item.index))
            })?;
            if item.embedding.len() != self.settings.dimensions {
                return Err(Error::Malformed(format!(
                    "a vector of {} dimensions; the index holds {}",
                    item.embedding.len(),
                    self.settings.dimensions
                )));
            }
            if !item.embedding.iter().all(|x| x.is_finite()) {
                return Err(Error::Malformed(
                    "a vector with a non-finite value".to_owned(),
                ));
            }
            if slot.replace(item.embedding).is_some() {
                return Err(Error::Malformed(format!("index {} twice", item.index)));
            }
        }
        vectors
            .into_iter()
            .enumerate()
            .map(|(index, vector)| {
                vector.ok_or_else(|| Error::Malformed(format!("no vector for text {index}")))
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
            assert!(matches!(err, Error::Malformed(_)), "{reply} gave {err}");
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
            matches!(err, Error::Status { status: 429, ref body } if body.contains("slow down")),
            "{err}"
        );

        let (url, _) = upstream(
            (StatusCode::OK, json!({"data": []})),
            Duration::from_secs(5),
        )
        .await;
        let err = embedder(url, 2).embed(&texts(&["a"])).await.unwrap_err();
        assert!(matches!(err, Error::Timeout(_)), "{err}");
    }
}
