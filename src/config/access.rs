//! `auth`, `cors` and `mcp`: which keys and tokens may call and see what,
//! and which browser origins may call at all.

use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::is_loopback_url;

/// API keys and OAuth access tokens. The file holds SHA-256 digests of
/// keys, never keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Auth {
    pub keys: Vec<KeyGrant>,
    /// Access tokens from an existing authorization server, beside the keys.
    pub oauth: Option<OAuth>,
    /// Serve on a non-loopback address with no key at all (not advised).
    pub allow_unauthenticated: bool,
}

/// Engram as an OAuth 2.1 resource server (the MCP authorization
/// specification): it accepts the JWT access tokens an existing
/// authorization server issues for it, and names that server to clients.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuth {
    /// The authorization server, exactly as its tokens' `iss` names it
    /// (`https://id.example.com/realms/team`). Its keys are found through
    /// its OpenID or RFC 8414 metadata.
    pub issuer: String,
    /// Engram's own resource URL, as clients reach it
    /// (`https://engram.example.com/mcp`): a token's `aud` must name it.
    pub audience: String,
    /// The scopes the protected resource metadata advertises, which
    /// clients ask for.
    #[serde(default = "advertised_scopes")]
    pub scopes: Vec<String>,
    /// The claim that holds a token's grants, `{repos: [...], users:
    /// [...]}` as an API key's; a token without it is granted by its
    /// scopes (`repo:<id>`, `user:<id>`, `*` for all).
    #[serde(default = "grants_claim")]
    pub grants_claim: String,
    /// A claim (`sub`, `preferred_username`, `email`...) whose value is the
    /// caller's user: granted, and the user a request stands for when it
    /// names none. Unset: the configured default user.
    #[serde(default)]
    pub user_claim: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(default = "leeway_s")]
    pub leeway_s: u64,
    /// The least time between two fetches of the issuer's keys when a
    /// token names a key Engram does not hold, in seconds: a flood of
    /// made-up key ids costs the issuer one fetch per interval.
    #[serde(default = "keys_cooldown_s")]
    pub keys_cooldown_s: u64,
}

impl OAuth {
    /// The first key under `auth.oauth` that is wrong, and why.
    pub fn invalid(&self) -> Option<(String, &'static str)> {
        let problem = |key: &str, reason| Some((key.to_owned(), reason));
        match Url::parse(&self.issuer) {
            Ok(url)
                if url.scheme() == "https" || (url.scheme() == "http" && is_loopback_url(&url)) =>
            {
                if url.query().is_some() || url.fragment().is_some() {
                    return problem("issuer", "must have no query or fragment");
                }
            }
            _ => {
                return problem(
                    "issuer",
                    "must be an https:// URL (http:// only on loopback), as the tokens' `iss` names it",
                );
            }
        }
        match Url::parse(&self.audience) {
            Ok(url) if matches!(url.scheme(), "https" | "http") && url.fragment().is_none() => {}
            _ => {
                return problem(
                    "audience",
                    "must be Engram's own http(s) URL as clients reach it, without a fragment",
                );
            }
        }
        if let Some(at) = self.scopes.iter().position(|scope| {
            scope.is_empty() || scope.contains(char::is_whitespace) || scope.contains('"')
        }) {
            return Some((
                format!("scopes[{at}]"),
                "must be a word without spaces or quotes",
            ));
        }
        if self.grants_claim.is_empty() {
            return problem("grants_claim", "must name a claim");
        }
        if self.user_claim.as_deref() == Some("") {
            return problem("user_claim", "must name a claim, or be left out");
        }
        if self.leeway_s > 600 {
            return problem("leeway_s", "must be between 0 and 600");
        }
        if self.keys_cooldown_s > 3600 {
            return problem("keys_cooldown_s", "must be between 0 and 3600");
        }
        None
    }
}

fn advertised_scopes() -> Vec<String> {
    vec!["repo:*".to_owned(), "user:*".to_owned()]
}

fn grants_claim() -> String {
    "engram".to_owned()
}

fn leeway_s() -> u64 {
    60
}

fn keys_cooldown_s() -> u64 {
    30
}

/// One key: its digest and the repos and users it may see (`*`: all).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyGrant {
    /// The hex SHA-256 of the key (`printf %s "$KEY" | sha256sum`).
    pub sha256: String,
    #[serde(default = "everything")]
    pub repos: Vec<String>,
    #[serde(default = "everything")]
    pub users: Vec<String>,
}

impl KeyGrant {
    /// The key's SHA-256 as bytes, when `sha256` is 64 hex digits.
    pub fn digest(&self) -> Option<[u8; 32]> {
        let hex = self.sha256.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(text, 16).ok()?;
        }
        Some(bytes)
    }
}

pub(super) fn everything() -> Vec<String> {
    vec!["*".to_owned()]
}

/// Cross-origin requests: refused unless origins are listed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cors {
    /// Origins (e.g. `https://app.example.com`) whose browsers may call the API.
    pub allowed_origins: Vec<String>,
}

/// The MCP endpoint at `/mcp`. Its `Host` values are `http.allowed_hosts`
/// and its origins those of every route (`routes::site_guard`): a browser
/// page is refused unless it is Engram's own or its origin is listed here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mcp {
    /// Browser origins (`https://app.example.com`, `http://localhost:*`)
    /// that may call `/mcp`. None by default: a request that carries an
    /// `Origin` (only browsers send one) other than Engram's own (on a
    /// loopback `listen` address, any loopback name at its port) is
    /// refused.
    pub allowed_origins: Vec<String>,
}
