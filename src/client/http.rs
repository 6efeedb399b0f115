//! How the agent-side commands call a running Engram: one HTTP client
//! policy that keeps the key safe, and one reading of the API's answers
//! and problem documents; URLs shown without their userinfo.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use reqwest::Url;
use serde_json::Value;

use crate::config::is_loopback_url;

/// Where Engram listens unless `--url` or `ENGRAM_URL` says otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// A running Engram's API, as one command calls it.
pub struct Api {
    http: reqwest::Client,
    /// The API root, without a trailing `/`.
    base_url: String,
    key: Option<String>,
}

/// Why a call to Engram gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{url:?} is not an http(s) URL")]
    Url { url: String },
    #[error("building the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("calling {url}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered {status}: {detail}")]
    Status {
        url: String,
        status: u16,
        detail: String,
        /// The problem document's `type`, when the answer is one.
        problem: Option<String>,
        /// The answer's `Retry-After`, in seconds, when it has one.
        retry_after_s: Option<u64>,
    },
    #[error("{url} answered 2xx with a body that is not JSON")]
    Answer {
        url: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Where a command finds Engram: `--url` (or `ENGRAM_URL`); the key comes
/// only from `ENGRAM_API_KEY`.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Engram's base URL.
    #[arg(long, env = "ENGRAM_URL", hide_env_values = true, default_value = DEFAULT_URL)]
    pub url: String,
}

impl ServerArgs {
    /// The API these arguments and the environment name.
    pub fn api(&self) -> Result<Api, Error> {
        let key = std::env::var("ENGRAM_API_KEY")
            .ok()
            .filter(|key| !key.is_empty());
        Api::new(&self.url, key)
    }
}

impl Api {
    /// The API at `base_url`, called with `key` as a bearer token when
    /// there is one.
    pub fn new(base_url: &str, key: Option<String>) -> Result<Self, Error> {
        let base_url = base_url.trim_end_matches('/');
        let bad = || Error::Url {
            url: redact_userinfo(base_url).into_owned(),
        };
        let parsed = Url::parse(base_url).map_err(|_| bad())?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(bad());
        }
        Ok(Self {
            http: http_client(&parsed).map_err(Error::Client)?,
            base_url: base_url.to_owned(),
            key,
        })
    }

    /// The URL of `path` (absolute, as `/mcp`) under the API root.
    pub fn url(&self, path: &str) -> Result<Url, Error> {
        let joined = format!("{}{path}", self.base_url);
        Url::parse(&joined).map_err(|_| Error::Url {
            url: redact_userinfo(&joined).into_owned(),
        })
    }

    /// The HTTP client its calls go through, for a caller that speaks
    /// another protocol to the same service (the MCP bridge).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Posts `body` to `path` and returns the JSON answer of a 2xx;
    /// anything else is an error naming the status and the problem's
    /// detail.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, Error> {
        let url = format!("{}{path}", self.base_url);
        let request = self.http.post(&url).json(body);
        self.send(url, request).await
    }

    /// Gets `path` (with its query) and returns the JSON answer of a 2xx,
    /// as [`Self::post`] does.
    pub async fn get(&self, path: &str) -> Result<Value, Error> {
        let url = format!("{}{path}", self.base_url);
        let request = self.http.get(&url);
        self.send(url, request).await
    }

    /// Every memory of a `GET /memories` listing (`listing` is its path
    /// and query), page after page, read as `T`.
    pub async fn every_page<T: serde::de::DeserializeOwned>(
        &self,
        listing: &str,
    ) -> Result<Vec<T>, Error> {
        let mut memories = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(cursor) => format!("{listing}&cursor={cursor}"),
                None => listing.to_owned(),
            };
            let mut page = self.get(&path).await?;
            let listed: Vec<T> =
                serde_json::from_value(page["memories"].take()).map_err(|source| {
                    Error::Answer {
                        url: redact_userinfo(&format!("{}{path}", self.base_url)).into_owned(),
                        source,
                    }
                })?;
            memories.extend(listed);
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(memories),
            }
        }
    }

    async fn send(
        &self,
        url: String,
        mut request: reqwest::RequestBuilder,
    ) -> Result<Value, Error> {
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        // An error names the URL without its userinfo: `ENGRAM_URL` may
        // carry a password, and errors are printed and logged.
        let url = redact_userinfo(&url).into_owned();
        let failed = |source: reqwest::Error| Error::Request {
            url: url.clone(),
            source: source.without_url(),
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let retry_after_s = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok()?.parse().ok());
        let bytes = response.bytes().await.map_err(failed)?;
        if !status.is_success() {
            let problem = serde_json::from_slice::<Value>(&bytes).unwrap_or_default();
            let detail = problem["detail"].as_str().map_or_else(
                || String::from_utf8_lossy(&bytes).chars().take(200).collect(),
                str::to_owned,
            );
            return Err(Error::Status {
                url,
                status: status.as_u16(),
                detail,
                problem: problem["type"].as_str().map(str::to_owned),
                retry_after_s,
            });
        }
        serde_json::from_slice(&bytes).map_err(|source| Error::Answer { url, source })
    }
}

/// The HTTP client for the service: never through a proxy for a loopback
/// URL (the key must not leave the machine for a local service); for any
/// other, the proxy variables apply, `NO_PROXY` included. Redirects are not
/// followed, so the key goes nowhere but `endpoint`.
pub fn http_client(endpoint: &Url) -> Result<reqwest::Client, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none());
    if is_loopback_url(endpoint) {
        builder = builder.no_proxy();
    }
    builder.build()
}

/// `text` with the userinfo of every URL in it replaced by `***`
/// (`http://ana:s3cret@host/` becomes `http://***@host/`).
pub fn redact_userinfo(text: &str) -> Cow<'_, str> {
    static USERINFO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@").expect("the pattern compiles")
    });
    USERINFO.replace_all(text, "${1}***@")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_that_is_not_http_is_refused_without_its_userinfo() {
        let err = Api::new("ftp://ana:s3cret@host", None)
            .err()
            .expect("ftp is refused")
            .to_string();
        assert!(!err.contains("s3cret"), "{err}");
        assert!(Api::new("not a url", None).is_err());
        let api = Api::new("http://127.0.0.1:8080/", None).unwrap();
        assert_eq!(
            api.url("/mcp").unwrap().as_str(),
            "http://127.0.0.1:8080/mcp"
        );
    }
}
