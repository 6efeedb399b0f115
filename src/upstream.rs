//! Calls to OpenAI-compatible HTTP endpoints (`/embeddings`,
//! `/chat/completions`): one JSON POST with an optional bearer key and a
//! hard timeout, and the one error type for what can go wrong.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The most of an error body kept for the message.
const MAX_ERROR_BODY: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{endpoint} did not answer within {timeout:?}")]
    Timeout {
        endpoint: &'static str,
        timeout: Duration,
    },
    #[error("calling {endpoint}")]
    Transport {
        endpoint: &'static str,
        source: reqwest::Error,
    },
    #[error("{endpoint} answered {status}: {body}")]
    Status {
        endpoint: &'static str,
        status: u16,
        body: String,
    },
    #[error("the reply of {endpoint} is unusable: {reason}")]
    Malformed {
        endpoint: &'static str,
        reason: String,
    },
}

impl Error {
    /// Whether trying again later may succeed: timeouts, transport
    /// failures, 429 and 5xx. A 4xx or a reply of the wrong shape will not
    /// improve by itself.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Transport { .. } => true,
            Self::Status { status, .. } => *status == 429 || *status >= 500,
            Self::Malformed { .. } => false,
        }
    }
}

/// One OpenAI-compatible endpoint: where it is and how to authenticate.
#[derive(Clone, Debug)]
pub struct Endpoint {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    /// Names the endpoint in errors, e.g. "the embeddings endpoint".
    name: &'static str,
}

impl Endpoint {
    /// `path` (e.g. `embeddings`) under `base_url`.
    pub fn new(base_url: &str, path: &str, api_key: Option<String>, name: &'static str) -> Self {
        Self {
            client: reqwest::Client::new(),
            url: format!("{}/{path}", base_url.trim_end_matches('/')),
            api_key,
            name,
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// A reply shaped wrongly for what was asked.
    pub fn malformed(&self, reason: impl Into<String>) -> Error {
        Error::Malformed {
            endpoint: self.name,
            reason: reason.into(),
        }
    }

    /// POSTs `body` and parses a 2xx reply as `R`, all within `timeout`.
    pub async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        body: &B,
        timeout: Duration,
    ) -> Result<R, Error> {
        tokio::time::timeout(timeout, self.call(body))
            .await
            .map_err(|_| Error::Timeout {
                endpoint: self.name,
                timeout,
            })?
    }

    async fn call<B: Serialize, R: DeserializeOwned>(&self, body: &B) -> Result<R, Error> {
        let transport = |source| Error::Transport {
            endpoint: self.name,
            source,
        };
        let mut request = self.client.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            let mut body = response.text().await.unwrap_or_default();
            if let Some((cut, _)) = body.char_indices().nth(MAX_ERROR_BODY) {
                body.truncate(cut);
            }
            return Err(Error::Status {
                endpoint: self.name,
                status: status.as_u16(),
                body,
            });
        }
        let bytes = response.bytes().await.map_err(transport)?;
        serde_json::from_slice(&bytes).map_err(|err| self.malformed(err.to_string()))
    }
}
