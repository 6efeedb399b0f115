//! Calls to OpenAI-compatible HTTP endpoints (`/embeddings`,
//! `/chat/completions`): one JSON POST with an optional bearer key, a hard
//! timeout and a cap on the reply's size, and the one error type for what
//! can go wrong.
//!
//! A reply is read as a stream and dropped as soon as it passes the cap
//! (a `Content-Length` over it is refused before reading), so a runaway or
//! hostile upstream costs at most the cap in memory, never its whole body.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The most of an error body kept for the message, in characters.
const MAX_ERROR_BODY: usize = 512;
/// The most of an error body read, in bytes (UTF-8 takes up to 4 a character).
const MAX_ERROR_BODY_BYTES: usize = 4 * MAX_ERROR_BODY;

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
    #[error("the reply of {endpoint} is larger than the {limit}-byte cap")]
    TooLarge {
        endpoint: &'static str,
        limit: usize,
    },
}

impl Error {
    /// Whether trying again later may succeed: timeouts, transport
    /// failures, 429 and 5xx. A 4xx, a reply of the wrong shape or one
    /// past the size cap will not improve by itself.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Transport { .. } => true,
            Self::Status { status, .. } => *status == 429 || *status >= 500,
            Self::Malformed { .. } | Self::TooLarge { .. } => false,
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
    /// The largest successful reply read, in bytes.
    max_reply_bytes: usize,
}

impl Endpoint {
    /// `path` (e.g. `embeddings`) under `base_url`.
    pub fn new(
        base_url: &str,
        path: &str,
        api_key: Option<String>,
        name: &'static str,
        max_reply_bytes: usize,
    ) -> Self {
        Self {
            client: reqwest::Client::new(),
            url: format!("{}/{path}", base_url.trim_end_matches('/')),
            api_key,
            name,
            max_reply_bytes,
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
        let mut response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            // Only the start of an error body is kept; a read error just
            // leaves it empty.
            let head = read_capped(&mut response, MAX_ERROR_BODY_BYTES)
                .await
                .unwrap_or_default();
            let mut body = String::from_utf8_lossy(&head).into_owned();
            if let Some((cut, _)) = body.char_indices().nth(MAX_ERROR_BODY) {
                body.truncate(cut);
            }
            return Err(Error::Status {
                endpoint: self.name,
                status: status.as_u16(),
                body,
            });
        }
        let too_large = || Error::TooLarge {
            endpoint: self.name,
            limit: self.max_reply_bytes,
        };
        if response
            .content_length()
            .is_some_and(|length| length > self.max_reply_bytes as u64)
        {
            return Err(too_large());
        }
        let bytes = read_capped(&mut response, self.max_reply_bytes + 1)
            .await
            .map_err(transport)?;
        if bytes.len() > self.max_reply_bytes {
            return Err(too_large());
        }
        serde_json::from_slice(&bytes).map_err(|err| self.malformed(err.to_string()))
    }
}

/// The body, read chunk by chunk until it ends or holds at least `limit`
/// bytes (then the rest is never read, and the connection is dropped).
pub(crate) async fn read_capped(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await? {
            Some(chunk) => body.extend_from_slice(&chunk),
            None => break,
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    const CAP: usize = 1024;

    /// A raw HTTP/1.1 server on 127.0.0.1:0 that answers every request
    /// with `response`, byte for byte: chunked bodies and lying
    /// `Content-Length`s are out of axum's reach.
    async fn serve_raw(response: Vec<u8>) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let response = response.clone();
                tokio::spawn(async move {
                    read_request(&mut socket).await;
                    // The client hangs up once it has read enough.
                    let _ = socket.write_all(&response).await;
                });
            }
        });
        Endpoint::new(
            &format!("http://{addr}/v1"),
            "x",
            None,
            "the test endpoint",
            CAP,
        )
    }

    /// Reads one request: its head, then as many bytes as it declares.
    async fn read_request(socket: &mut TcpStream) {
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = socket.read(&mut buffer).await.unwrap();
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&seen).to_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map_or(0, |value| value.trim().parse().unwrap());
                if seen.len() >= end + 4 + length {
                    return;
                }
            }
        }
    }

    /// A 200 whose body comes in chunks, with no `Content-Length`.
    fn chunked(status: &str, chunks: &[&[u8]]) -> Vec<u8> {
        let mut response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        .into_bytes();
        for chunk in chunks {
            response.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            response.extend_from_slice(chunk);
            response.extend_from_slice(b"\r\n");
        }
        response.extend_from_slice(b"0\r\n\r\n");
        response
    }

    async fn post(endpoint: &Endpoint) -> Result<Value, Error> {
        endpoint
            .post(&json!({"ping": true}), Duration::from_secs(10))
            .await
    }

    #[tokio::test]
    async fn a_reply_within_the_cap_is_read_whole() {
        let endpoint = serve_raw(chunked("200 OK", &[b"{\"ok\":", b" true}"])).await;
        assert_eq!(post(&endpoint).await.unwrap(), json!({"ok": true}));
    }

    #[tokio::test]
    async fn a_streamed_reply_past_the_cap_fails_without_being_read_whole() {
        let piece = vec![b' '; 512];
        let mut chunks: Vec<&[u8]> = vec![b"{\"ok\": true"];
        // 8 MiB of padding the client must never hold.
        chunks.extend(std::iter::repeat_n(piece.as_slice(), 16 * 1024));
        chunks.push(b"}");
        let endpoint = serve_raw(chunked("200 OK", &chunks)).await;
        let err = post(&endpoint).await.unwrap_err();
        assert!(matches!(err, Error::TooLarge { limit: CAP, .. }), "{err}");
        assert!(!err.is_transient());
    }

    #[tokio::test]
    async fn a_declared_length_past_the_cap_is_refused_before_reading() {
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{{\"ok\": true",
            300 * 1024 * 1024
        );
        let endpoint = serve_raw(response.into_bytes()).await;
        let err = post(&endpoint).await.unwrap_err();
        assert!(matches!(err, Error::TooLarge { limit: CAP, .. }), "{err}");
    }

    #[tokio::test]
    async fn an_error_body_is_cut_short() {
        let piece = vec![b'e'; 512];
        let chunks = vec![piece.as_slice(); 64];
        let endpoint = serve_raw(chunked("503 Service Unavailable", &chunks)).await;
        let err = post(&endpoint).await.unwrap_err();
        assert!(
            matches!(&err, Error::Status { status: 503, body, .. } if body.len() == MAX_ERROR_BODY),
            "{err}"
        );
    }

    /// The documented upstreams (OpenAI's, every hosted provider's) are
    /// `https`: the client must speak TLS to them, not refuse the scheme.
    #[tokio::test]
    async fn an_https_upstream_is_spoken_to_in_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let first_byte = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            socket.read_u8().await.unwrap()
        });
        let endpoint = Endpoint::new(
            &format!("https://{addr}/v1"),
            "x",
            None,
            "the test endpoint",
            CAP,
        );
        // No certificate follows, so the call fails; what matters is how it began.
        assert!(post(&endpoint).await.is_err());
        const TLS_HANDSHAKE_RECORD: u8 = 0x16;
        let first = tokio::time::timeout(Duration::from_secs(10), first_byte)
            .await
            .expect("the client never connected")
            .unwrap();
        assert_eq!(first, TLS_HANDSHAKE_RECORD);
    }
}
