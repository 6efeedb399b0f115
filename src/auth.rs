//! API keys and what each may see.
//!
//! Keys come from `auth.keys` (as SHA-256 digests, never keys) and from
//! `ENGRAM_API_KEY` (one key with access to everything). Presented keys are
//! hashed and compared digest to digest in constant time, against every
//! configured key, so timing says nothing about which matched. A key may be
//! limited to some repos and users: the [`Caller`] it becomes sees only
//! those namespaces, everywhere. With no key configured, the API is open
//! and every caller sees everything.
//!
//! Routes that need a key: everything but `/healthz`, `/readyz`, `/docs`,
//! `/openapi.json` and the memory browser's pages at `/ui` (which hold no
//! data); `/metrics` needs a key with access to everything.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{self, ApiKey, Defaults};
use crate::error::ApiError;
use crate::memory::{Namespace, RepoId, UserId};
use crate::store::{NamespacePair, Reach};

/// Which owners (repos or users) a key reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owners {
    All,
    Only(HashSet<String>),
}

impl Owners {
    /// `["*"]` (or any list holding `*`) is everything.
    pub fn from_list(list: &[String]) -> Self {
        if list.iter().any(|entry| entry == "*") {
            Self::All
        } else {
            Self::Only(list.iter().cloned().collect())
        }
    }

    fn contains(&self, owner: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(owners) => owners.contains(owner),
        }
    }
}

/// What a key may see: the namespaces of these repos and users.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub repos: Owners,
    pub users: Owners,
}

impl Grant {
    pub fn everything() -> Self {
        Self {
            repos: Owners::All,
            users: Owners::All,
        }
    }
}

/// The accepted keys, as digests with their grants. Empty: the API is open.
#[derive(Clone, Default)]
pub struct ApiKeys {
    keys: Arc<Vec<([u8; 32], Arc<Grant>)>>,
}

impl ApiKeys {
    /// The configured keys, plus `ENGRAM_API_KEY` with access to everything.
    pub fn from_config(auth: &config::Auth, env_key: Option<&ApiKey>) -> Self {
        let configured = auth.keys.iter().filter_map(|key| {
            let digest = key.digest()?;
            let grant = Grant {
                repos: Owners::from_list(&key.repos),
                users: Owners::from_list(&key.users),
            };
            Some((digest, Arc::new(grant)))
        });
        let from_env = env_key.map(|key| (digest(key.expose()), Arc::new(Grant::everything())));
        Self {
            keys: Arc::new(configured.chain(from_env).collect()),
        }
    }

    pub fn is_open(&self) -> bool {
        self.keys.is_empty()
    }

    /// The grant of the key `presented`, if it is one.
    fn grant_of(&self, presented: &str) -> Option<Arc<Grant>> {
        let presented = digest(presented);
        // Every key is compared, so the time taken does not say which matched.
        let mut found = None;
        for (key, grant) in self.keys.iter() {
            if bool::from(key.ct_eq(&presented)) {
                found = Some(grant.clone());
            }
        }
        found
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Who is asking: what their key grants (everything when the API is open).
#[derive(Clone, Debug)]
pub struct Caller(Arc<Grant>);

impl Caller {
    pub fn everything() -> Self {
        Self(Arc::new(Grant::everything()))
    }

    pub fn sees_everything(&self) -> bool {
        self.0.repos == Owners::All && self.0.users == Owners::All
    }

    pub fn can_see(&self, namespace: &Namespace) -> bool {
        match namespace {
            Namespace::Repo(repo) => self.0.repos.contains(repo.as_str()),
            Namespace::User(user) => self.0.users.contains(user.as_str()),
        }
    }

    /// Whether the caller may act for this (repo, user) pair: both of its
    /// namespaces must be granted.
    pub fn can_use(&self, pair: &NamespacePair) -> bool {
        self.0.repos.contains(pair.repo.as_str()) && self.0.users.contains(pair.user.as_str())
    }

    /// A 403 unless the caller may act for `pair`.
    pub fn check_pair(&self, pair: &NamespacePair) -> Result<(), ApiError> {
        if self.can_use(pair) {
            Ok(())
        } else {
            Err(ApiError::Forbidden {
                detail: format!(
                    "this API key may not use repo/{} and user/{}",
                    pair.repo, pair.user
                ),
            })
        }
    }
}

impl Caller {
    /// The namespaces a read or write for (`repo`, `user`) reaches. An
    /// owner the request names must be held, or it is a 403; an owner it
    /// leaves out is the configured default when held, and left out of the
    /// reach when not (a key for `ana` alone may still write ana's user
    /// memories without naming a repo). A 403 when nothing is left.
    pub fn reach(
        &self,
        repo: Option<RepoId>,
        user: Option<UserId>,
        defaults: &Defaults,
    ) -> Result<Reach, ApiError> {
        let repo = held(&self.0.repos, repo, &defaults.repo, "repo")?;
        let user = held(&self.0.users, user, &defaults.user, "user")?;
        Reach::new(repo, user).ok_or_else(|| ApiError::Forbidden {
            detail: format!(
                "this API key holds neither repo/{} nor user/{}: name a repo or user it holds",
                defaults.repo, defaults.user
            ),
        })
    }
}

/// The owner a request names (which must be held) or, when it names none,
/// the default if held.
fn held<T: AsRef<str> + Clone + std::fmt::Display>(
    owners: &Owners,
    named: Option<T>,
    default: &T,
    kind: &str,
) -> Result<Option<T>, ApiError> {
    match named {
        Some(owner) if owners.contains(owner.as_ref()) => Ok(Some(owner)),
        Some(owner) => Err(ApiError::Forbidden {
            detail: format!("this API key may not use {kind}/{owner}"),
        }),
        None => Ok(owners.contains(default.as_ref()).then(|| default.clone())),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Ok(parts
            .extensions
            .get::<Self>()
            .cloned()
            .unwrap_or_else(Self::everything))
    }
}

/// Middleware: refuses requests without an accepted bearer key, and tells
/// the handlers who is calling.
pub async fn require_key(
    State(keys): State<ApiKeys>,
    mut request: Request,
    next: Next,
) -> Response {
    if keys.is_open() {
        request.extensions_mut().insert(Caller::everything());
        return next.run(request).await;
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match bearer.map(|key| keys.grant_of(key.trim())) {
        Some(Some(grant)) => {
            request.extensions_mut().insert(Caller(grant));
            next.run(request).await
        }
        Some(None) => ApiError::Unauthorized {
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
    use crate::config::{Auth, KeyGrant};

    fn hex(key: &str) -> String {
        digest(key).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn keys_match_by_digest_with_their_grants() {
        let auth = Auth {
            keys: vec![KeyGrant {
                sha256: hex("limited"),
                repos: vec!["forge".into()],
                users: vec!["ana".into(), "bob".into()],
            }],
            allow_unauthenticated: false,
        };
        let keys = ApiKeys::from_config(&auth, Some(&ApiKey::new("root")));
        assert!(keys.grant_of("root").unwrap().repos == Owners::All);
        let limited = Caller(keys.grant_of("limited").unwrap());
        assert!(!limited.sees_everything());
        assert!(limited.can_see(&Namespace::Repo("forge".parse().unwrap())));
        assert!(!limited.can_see(&Namespace::Repo("other".parse().unwrap())));
        assert!(limited.can_see(&Namespace::User("bob".parse().unwrap())));
        assert!(keys.grant_of("limite").is_none());
        assert!(keys.grant_of("").is_none());
        assert!(ApiKeys::default().is_open());
    }

    #[test]
    fn a_reach_leaves_out_omitted_owners_the_key_does_not_hold() {
        let caller = Caller(Arc::new(Grant {
            repos: Owners::from_list(&["forge".into()]),
            users: Owners::from_list(&["ana".into()]),
        }));
        let defaults = Defaults::default();
        let reach = |repo: Option<&str>, user: Option<&str>| {
            caller.reach(
                repo.map(|r| r.parse().unwrap()),
                user.map(|u| u.parse().unwrap()),
                &defaults,
            )
        };
        let user_only = reach(None, Some("ana")).unwrap();
        assert_eq!(
            user_only.namespaces(),
            [Namespace::User("ana".parse().unwrap())]
        );
        let both = reach(Some("forge"), Some("ana")).unwrap();
        assert_eq!(both.namespaces().len(), 2);
        assert!(
            reach(Some("secret"), Some("ana")).is_err(),
            "named, not held"
        );
        assert!(reach(None, None).is_err(), "nothing left");
        let everything = Caller::everything().reach(None, None, &defaults).unwrap();
        assert_eq!(everything.namespaces().len(), 2);
    }
}
