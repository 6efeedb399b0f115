//! The authorization server's signing keys: found through its metadata
//! (OpenID discovery, else RFC 8414), fetched once, held, and fetched
//! again when a token names a key Engram does not hold (a rotation) or
//! the held set is older than [`MAX_AGE`].
//!
//! Fetches are one at a time, and a key id that is still unknown after a
//! fetch waits out `auth.oauth.keys_cooldown_s` before the next one, so
//! made-up key ids cannot turn Engram into a flood on the issuer. When the
//! issuer cannot be reached, the keys already held keep serving.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use jsonwebtoken::jwk::Jwk;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Mutex;

use super::origin_and_path;
use crate::upstream::read_capped;

/// How long a fetched key set is trusted before it is fetched again.
const MAX_AGE: Duration = Duration::from_secs(10 * 60);
/// How long one metadata or key-set request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest metadata document or key set read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Why no key could be had for a token.
#[derive(Debug)]
pub enum KeyError {
    /// The issuer publishes no key with the token's id (or the token names
    /// none and the issuer has several).
    Unknown(String),
    /// No key set was ever fetched: the issuer could not be reached or
    /// answered wrongly.
    Unavailable(String),
}

/// The issuer's published keys.
pub struct IssuerKeys {
    issuer: String,
    http: reqwest::Client,
    cooldown: Duration,
    held: ArcSwapOption<Held>,
    fetching: Mutex<Fetching>,
}

struct Held {
    keys: Vec<Jwk>,
    fetched_at: Instant,
}

/// What fetches remember between them.
#[derive(Default)]
struct Fetching {
    jwks_uri: Option<String>,
    last_attempt: Option<Instant>,
    last_error: Option<String>,
}

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct KeySet {
    keys: Vec<Value>,
}

impl IssuerKeys {
    pub fn new(issuer: &str, cooldown: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client with a timeout and no redirects builds");
        Self {
            issuer: issuer.to_owned(),
            http,
            cooldown,
            held: ArcSwapOption::empty(),
            fetching: Mutex::new(Fetching::default()),
        }
    }

    /// The key a token names by `kid` (or the only key, when it names none).
    pub async fn key(&self, kid: Option<&str>) -> Result<Jwk, KeyError> {
        if let Some(key) = self.held_key(kid, true) {
            return Ok(key);
        }
        let mut fetching = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(key) = self.held_key(kid, true) {
            return Ok(key);
        }
        let cooling = fetching
            .last_attempt
            .is_some_and(|at| at.elapsed() < self.cooldown);
        if !cooling {
            fetching.last_attempt = Some(Instant::now());
            match self.fetch(&mut fetching).await {
                Ok(keys) => {
                    fetching.last_error = None;
                    self.held.store(Some(Arc::new(Held {
                        keys,
                        fetched_at: Instant::now(),
                    })));
                }
                Err(why) => {
                    tracing::warn!(issuer = %self.issuer, error = %why, "the OAuth issuer's keys could not be fetched");
                    fetching.jwks_uri = None;
                    fetching.last_error = Some(why);
                }
            }
        }
        if self.held.load().is_none() {
            let why = fetching.last_error.clone().unwrap_or_default();
            return Err(KeyError::Unavailable(format!(
                "the keys of the authorization server {} could not be fetched: {why}",
                self.issuer
            )));
        }
        self.held_key(kid, false).ok_or_else(|| {
            KeyError::Unknown(match kid {
                // Quoted and escaped: the id is the token's, whoever sent it.
                Some(kid) => format!("the authorization server publishes no key {kid:?}"),
                None => "the token names no key (`kid`) and the authorization server has several"
                    .to_owned(),
            })
        })
    }

    /// The held key for `kid`; when `fresh_only`, none from a set past
    /// [`MAX_AGE`].
    fn held_key(&self, kid: Option<&str>, fresh_only: bool) -> Option<Jwk> {
        let held = self.held.load_full()?;
        if fresh_only && held.fetched_at.elapsed() >= MAX_AGE {
            return None;
        }
        match kid {
            Some(kid) => held
                .keys
                .iter()
                .find(|key| key.common.key_id.as_deref() == Some(kid))
                .cloned(),
            None => match held.keys.as_slice() {
                [only] => Some(only.clone()),
                _ => None,
            },
        }
    }

    /// The issuer's key set, through its metadata when its address is not
    /// known yet. Keys of a type the token library does not read are left
    /// out rather than failing the set.
    async fn fetch(&self, fetching: &mut Fetching) -> Result<Vec<Jwk>, String> {
        let jwks_uri = match &fetching.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                fetching.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set: KeySet = self.get(&jwks_uri).await?;
        Ok(set
            .keys
            .into_iter()
            .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
            .collect())
    }

    /// The `jwks_uri` of the issuer's metadata: OpenID discovery first,
    /// then the RFC 8414 location. The metadata must name the configured
    /// issuer exactly (RFC 8414, section 3.3).
    async fn discover(&self) -> Result<String, String> {
        let mut failures = Vec::new();
        for url in metadata_urls(&self.issuer) {
            match self.get::<Metadata>(&url).await {
                Ok(metadata) if metadata.issuer == self.issuer => return Ok(metadata.jwks_uri),
                Ok(metadata) => failures.push(format!(
                    "{url} names the issuer {}, not {}",
                    metadata.issuer, self.issuer
                )),
                Err(why) => failures.push(why),
            }
        }
        Err(failures.join("; "))
    }

    async fn get<T: DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let mut response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|err| format!("{url}: {err}"))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        let body = read_capped(&mut response, MAX_DOCUMENT_BYTES + 1)
            .await
            .map_err(|err| format!("{url}: {err}"))?;
        if body.len() > MAX_DOCUMENT_BYTES {
            return Err(format!(
                "{url} answered more than {MAX_DOCUMENT_BYTES} bytes"
            ));
        }
        serde_json::from_slice(&body).map_err(|err| format!("{url} answered wrongly: {err}"))
    }
}

/// Where an issuer's metadata may be: `/.well-known/openid-configuration`
/// appended to it (OpenID Connect Discovery), and
/// `/.well-known/oauth-authorization-server` inserted before its path
/// (RFC 8414).
fn metadata_urls(issuer: &str) -> [String; 2] {
    let (origin, path) = origin_and_path(issuer);
    [
        format!("{origin}{path}/.well-known/openid-configuration"),
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_both_specifications_put_it() {
        assert_eq!(
            metadata_urls("https://id.example.com"),
            [
                "https://id.example.com/.well-known/openid-configuration",
                "https://id.example.com/.well-known/oauth-authorization-server",
            ]
        );
        assert_eq!(
            metadata_urls("https://id.example.com/realms/team/"),
            [
                "https://id.example.com/realms/team/.well-known/openid-configuration",
                "https://id.example.com/.well-known/oauth-authorization-server/realms/team",
            ]
        );
    }
}
