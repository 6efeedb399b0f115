//! `auth`, `cors` and `mcp`: which keys may call and see what, and which
//! browser origins may call at all.

use serde::{Deserialize, Serialize};

/// API keys. The file holds SHA-256 digests of keys, never keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Auth {
    pub keys: Vec<KeyGrant>,
    /// Serve on a non-loopback address with no key at all (not advised).
    pub allow_unauthenticated: bool,
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
