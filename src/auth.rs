//! Who may call, and what each caller may see: API keys and OAuth access
//! tokens.
//!
//! Keys come from `auth.keys` (as SHA-256 digests, never keys) and from
//! `ENGRAM_API_KEY` (one key with access to everything). Presented keys are
//! hashed and compared digest to digest in constant time, against every
//! configured key, so timing says nothing about which matched. A key may be
//! limited to some repos and users: the [`Caller`] it becomes sees only
//! those namespaces, everywhere.
//!
//! With `auth.oauth`, Engram is also an OAuth 2.1 resource server: a
//! bearer that is no key is checked as an access token of the configured
//! authorization server ([`token`], with its keys from [`issuer`]), and a
//! request without a valid one is answered `401` with a
//! `WWW-Authenticate` challenge naming the protected resource metadata
//! (RFC 9728), where a client finds the authorization server. With neither
//! keys nor OAuth configured, the API is open and every caller sees
//! everything.
//!
//! Routes that need a key or token: everything but `/healthz`, `/readyz`,
//! `/docs`, `/openapi.json`, the protected resource metadata and the
//! memory browser's pages at `/ui` (which hold no data); `/metrics` needs
//! access to everything.

mod issuer;
mod token;

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{self, ApiKey, Config, Defaults};
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
struct ApiKeys {
    keys: Arc<Vec<([u8; 32], Arc<Grant>)>>,
}

impl ApiKeys {
    /// The configured keys, plus `ENGRAM_API_KEY` with access to everything.
    fn from_config(auth: &config::Auth, env_key: Option<&ApiKey>) -> Self {
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

    fn is_open(&self) -> bool {
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

/// Who is asking: what their key or token grants (everything when the API
/// is open), and the user a token names, if any.
#[derive(Clone, Debug)]
pub struct Caller {
    grant: Arc<Grant>,
    /// The user a request that names none stands for, in place of the
    /// configured default (`auth.oauth.user_claim`).
    user: Option<UserId>,
}

impl Caller {
    fn new(grant: Arc<Grant>, user: Option<UserId>) -> Self {
        Self { grant, user }
    }

    pub fn everything() -> Self {
        Self::new(Arc::new(Grant::everything()), None)
    }

    pub fn sees_everything(&self) -> bool {
        self.grant.repos == Owners::All && self.grant.users == Owners::All
    }

    pub fn can_see(&self, namespace: &Namespace) -> bool {
        match namespace {
            Namespace::Repo(repo) => self.grant.repos.contains(repo.as_str()),
            Namespace::User(user) => self.grant.users.contains(user.as_str()),
        }
    }

    /// Whether the caller may act for this (repo, user) pair: both of its
    /// namespaces must be granted.
    pub fn can_use(&self, pair: &NamespacePair) -> bool {
        self.grant.repos.contains(pair.repo.as_str())
            && self.grant.users.contains(pair.user.as_str())
    }

    /// The pair a request names, an omitted repo standing for the
    /// configured default and an omitted user for the caller's own (the
    /// configured default when it has none).
    pub fn pair(
        &self,
        repo: Option<RepoId>,
        user: Option<UserId>,
        defaults: &Defaults,
    ) -> NamespacePair {
        NamespacePair {
            repo: repo.unwrap_or_else(|| defaults.repo.clone()),
            user: user.unwrap_or_else(|| self.default_user(defaults).clone()),
        }
    }

    fn default_user<'a>(&'a self, defaults: &'a Defaults) -> &'a UserId {
        self.user.as_ref().unwrap_or(&defaults.user)
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
        let default_user = self.default_user(defaults);
        let repo = held(&self.grant.repos, repo, &defaults.repo, "repo")?;
        let user = held(&self.grant.users, user, default_user, "user")?;
        Reach::new(repo, user).ok_or_else(|| ApiError::Forbidden {
            detail: format!(
                "this API key holds neither repo/{} nor user/{}: name a repo or user it holds",
                defaults.repo, default_user
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

/// Everything that admits a caller: the keys, and the OAuth tokens when
/// configured. Neither: the API is open.
#[derive(Clone, Default)]
pub struct Access {
    keys: ApiKeys,
    oauth: Option<Arc<OAuth>>,
}

/// The OAuth side of [`Access`].
struct OAuth {
    tokens: token::Tokens,
    /// The `WWW-Authenticate` challenge of a request with no credentials.
    challenge: HeaderValue,
    /// Where the protected resource metadata is, for the challenges.
    metadata_url: String,
}

impl Access {
    pub fn from_config(config: &Config) -> Self {
        Self {
            keys: ApiKeys::from_config(&config.auth, config.api_key.as_ref()),
            oauth: config.auth.oauth.as_ref().map(|oauth| {
                let metadata_url = metadata_url(&oauth.audience);
                let mut challenge = format!("Bearer resource_metadata=\"{metadata_url}\"");
                if !oauth.scopes.is_empty() {
                    challenge.push_str(&format!(", scope=\"{}\"", oauth.scopes.join(" ")));
                }
                Arc::new(OAuth {
                    tokens: token::Tokens::new(oauth),
                    challenge: HeaderValue::from_str(&challenge)
                        .expect("validated URLs and scopes make a header value"),
                    metadata_url,
                })
            }),
        }
    }

    fn is_open(&self) -> bool {
        self.keys.is_open() && self.oauth.is_none()
    }

    /// The caller `bearer` stands for: a key's, else a token's.
    async fn caller(&self, bearer: &str) -> Result<Caller, Response> {
        if let Some(grant) = self.keys.grant_of(bearer) {
            return Ok(Caller::new(grant, None));
        }
        let Some(oauth) = &self.oauth else {
            return Err(ApiError::Unauthorized {
                detail: "the API key is not valid".to_owned(),
            }
            .into_response());
        };
        oauth.tokens.caller(bearer).await.map_err(|refusal| match refusal {
            token::Refusal::Invalid(why) => {
                tracing::info!(reason = %why, "a bearer token was refused");
                let challenge = format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{}\"",
                    why.replace(['"', '\\'], "'"),
                    oauth.metadata_url
                );
                let mut response = ApiError::Unauthorized { detail: why }.into_response();
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
                }
                response
            }
            token::Refusal::KeysUnavailable(why) => {
                ApiError::IssuerUnavailable { detail: why }.into_response()
            }
        })
    }

    /// The `401` of a request with no credentials.
    fn missing(&self) -> Response {
        let detail = match self.oauth {
            Some(_) => {
                "an API key or an OAuth access token is required: send `Authorization: Bearer <key or token>`"
            }
            None => "an API key is required: send `Authorization: Bearer <key>`",
        };
        let mut response = ApiError::Unauthorized {
            detail: detail.to_owned(),
        }
        .into_response();
        let challenge = self
            .oauth
            .as_ref()
            .map_or(HeaderValue::from_static("Bearer"), |oauth| {
                oauth.challenge.clone()
            });
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
        response
    }
}

/// Where the protected resource metadata of `audience` is (RFC 9728,
/// section 3.1): the well-known path inserted between its origin and its
/// path. `routes::protected_resource` serves it there, and at the bare
/// well-known path.
pub fn metadata_url(audience: &str) -> String {
    let (origin, _) = origin_and_path(audience);
    format!("{origin}{}", metadata_path(audience))
}

/// The path part of [`metadata_url`].
pub fn metadata_path(audience: &str) -> String {
    let (_, path) = origin_and_path(audience);
    format!("{WELL_KNOWN}{path}")
}

/// The protected resource metadata's well-known path (RFC 9728).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// `url` cut before its path (`https://host:port`, `/the/path`), a
/// trailing `/` dropped: where the OAuth metadata documents insert their
/// well-known paths.
fn origin_and_path(url: &str) -> (&str, &str) {
    let url = url.trim_end_matches('/');
    let host_at = url.find("://").map_or(0, |at| at + 3);
    match url[host_at..].find('/') {
        Some(path_at) => url.split_at(host_at + path_at),
        None => (url, ""),
    }
}

/// Middleware: refuses requests without an accepted key or token, and
/// tells the handlers who is calling.
pub async fn require_credentials(
    State(access): State<Access>,
    mut request: Request,
    next: Next,
) -> Response {
    if access.is_open() {
        request.extensions_mut().insert(Caller::everything());
        return next.run(request).await;
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(bearer) = bearer else {
        return access.missing();
    };
    match access.caller(bearer).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refused) => refused,
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
            oauth: None,
            allow_unauthenticated: false,
        };
        let keys = ApiKeys::from_config(&auth, Some(&ApiKey::new("root")));
        assert!(keys.grant_of("root").unwrap().repos == Owners::All);
        let limited = Caller::new(keys.grant_of("limited").unwrap(), None);
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
        let caller = Caller::new(
            Arc::new(Grant {
                repos: Owners::from_list(&["forge".into()]),
                users: Owners::from_list(&["ana".into()]),
            }),
            None,
        );
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
