//! API keys: when `ENGRAM_API_KEY` is set, every route but `/healthz`,
//! `/readyz`, `/docs` and `/openapi.json` needs `Authorization: Bearer <key>`.
//!
//! Only the key's SHA-256 digest is kept, and presented keys are compared
//! digest to digest in constant time, so neither timing nor a memory dump
//! of the comparison reveals the key.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The accepted keys, as digests. Empty: the API is open.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Arc<Vec<[u8; 32]>>,
}

impl ApiKeys {
    pub fn new<'a>(keys: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            digests: Arc::new(keys.into_iter().map(digest).collect()),
        }
    }

    pub fn is_open(&self) -> bool {
        self.digests.is_empty()
    }

    fn accepts(&self, presented: &str) -> bool {
        let presented = digest(presented);
        // Every key is compared, so the time taken does not say which matched.
        self.digests.iter().fold(false, |found, key| {
            found | bool::from(key.ct_eq(&presented))
        })
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Middleware: refuses requests without an accepted bearer key.
pub async fn require_key(State(keys): State<ApiKeys>, request: Request, next: Next) -> Response {
    if keys.is_open() {
        return next.run(request).await;
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match bearer {
        Some(key) if keys.accepts(key.trim()) => next.run(request).await,
        Some(_) => ApiError::Unauthorized {
            detail: "the API key is not valid".to_owned(),
        }
        .into_response(),
        None => ApiError::Unauthorized {
            detail: "an API key is required: send `Authorization: Bearer <key>`".to_owned(),
        }
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_keys_are_accepted() {
        let keys = ApiKeys::new(["s3cret", "other"]);
        assert!(keys.accepts("s3cret"));
        assert!(keys.accepts("other"));
        assert!(!keys.accepts("s3cre"));
        assert!(!keys.accepts(""));
        assert!(ApiKeys::default().is_open());
    }
}
