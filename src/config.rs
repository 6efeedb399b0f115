//! Configuration: built-in defaults, then the YAML file (`--config` or
//! `ENGRAM_CONFIG`), then `ENGRAM_SECTION__KEY` environment variables.
//!
//! The three layers are merged as YAML trees and deserialized once with
//! `deny_unknown_fields`, so an unknown key or a bad value anywhere is a
//! startup error that names the key. `validate` then checks ranges.
//! `ENGRAM_CONFIG`, `ENGRAM_API_KEY`, `ENGRAM_MODEL_DIR` and `ENGRAM_URL` (the
//! clients' server address) are not keys and never enter the tree;
//! `ENGRAM_MODEL_DIR` sets `embedding.model_dir`. Secrets (the
//! embeddings key, the database's connection string) are read from the
//! variable the configuration names, kept out of the tree and never printed.

mod access;
mod background;
mod consolidation;
mod http;
mod index;
mod inject;
mod load;
mod postgres;
mod retrieval;
pub mod signals;
#[cfg(test)]
mod tests;
mod upstream;
mod validate;

pub use access::{Auth, Cors, KeyGrant, Mcp, OAuth};
pub use background::{CaptureConfig, RetentionConfig, StoreConfig};
pub use consolidation::Consolidation;
pub use http::{Http, is_loopback_url, parse_host};
pub use index::{DEFAULT_APPROXIMATE_ABOVE, IndexConfig, Residency};
pub use inject::Inject;
pub use postgres::{Backend, DatabaseUrl, PostgresConfig};
pub use retrieval::{Retrieval, RetrievalOverrides, SettingError, Tuning};
pub use signals::{MatchSettings, Weights, WeightsRequest};
pub use upstream::{Embedding, EmbeddingProvider, Llm, Price};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::memory::{RepoId, UserId};

/// A configuration that cannot be used, with the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the configuration file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the configuration file {path} is not valid YAML: {source}")]
    ParseFile {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("environment variable {var}: {reason}")]
    Env { var: String, reason: String },
    #[error("configuration key `{key}`: {reason}")]
    Key { key: String, reason: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The address to serve on.
    pub listen: SocketAddr,
    /// Where the memory files live.
    pub data_dir: PathBuf,
    /// The owners used when a request names no repo or user.
    pub defaults: Defaults,
    pub embedding: Embedding,
    /// The chat model for HyDE (and, later, capture); absent: no LLM, and
    /// retrieval searches for the latest user message.
    pub llm: Option<Llm>,
    /// What each model costs, by the model's name as configured (chat or
    /// embeddings): turns metered tokens into money in `/stats`,
    /// `/metrics` and `/triggers`. A model left out is metered in tokens
    /// only.
    pub prices: BTreeMap<String, Price>,
    pub retrieval: Retrieval,
    pub index: IndexConfig,
    /// What retrievals for an agent session inject, and how much.
    pub inject: Inject,
    pub capture: CaptureConfig,
    pub retention: RetentionConfig,
    pub consolidation: Consolidation,
    pub store: StoreConfig,
    pub auth: Auth,
    pub http: Http,
    pub cors: Cors,
    pub mcp: Mcp,
    pub limits: Limits,
    pub log: Log,
    /// `ENGRAM_API_KEY`: one key with access to everything. Only ever from
    /// the environment, and never printed.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

/// A secret key; its `Debug` form is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            defaults: Defaults::default(),
            embedding: Embedding::default(),
            llm: None,
            prices: BTreeMap::new(),
            retrieval: Retrieval::default(),
            index: IndexConfig::default(),
            inject: Inject::default(),
            capture: CaptureConfig::default(),
            retention: RetentionConfig::default(),
            consolidation: Consolidation::default(),
            store: StoreConfig::default(),
            auth: Auth::default(),
            http: Http::default(),
            cors: Cors::default(),
            mcp: Mcp::default(),
            limits: Limits::default(),
            log: Log::default(),
            api_key: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    pub repo: RepoId,
    pub user: UserId,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            repo: "default".parse().expect("`default` is a valid repo id"),
            user: "default".parse().expect("`default` is a valid user id"),
        }
    }
}

/// Bounds of retrieval parameters, shared by the configuration and requests.
pub mod bounds {
    use std::ops::RangeInclusive;

    pub const TOP_K: RangeInclusive<usize> = 1..=1000;
    pub const HOP_DEPTH: RangeInclusive<usize> = 0..=3;
    pub const HYPOTHESIS_COUNT: RangeInclusive<usize> = 1..=10;
    pub const TOKEN_BUDGET: RangeInclusive<usize> = 1..=128_000;
    pub const BUDGET_MS: RangeInclusive<u64> = 50..=60_000;
    pub const EMBEDDING_DIMENSIONS: RangeInclusive<usize> = 1..=8192;
    pub const UPSTREAM_TIMEOUT_MS: RangeInclusive<u64> = 50..=600_000;
    pub const UPSTREAM_REPLY_BYTES: RangeInclusive<usize> = 1024..=1024 * 1024 * 1024;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// How long one request may take before it is answered 503, in ms.
    pub request_timeout_ms: u64,
    /// Requests handled at once; more are refused at once with 503 and
    /// `Retry-After` rather than queued.
    pub max_concurrent_requests: usize,
    /// How long a client may take to send its body, in ms (slow clients
    /// are cut off with 408); also how long a connection may go without
    /// sending a request before it is closed.
    pub body_timeout_ms: u64,
    /// Below this much free disk space, queue and memory writes are
    /// refused with 507; 0 turns the check off.
    pub min_free_disk_bytes: u64,
    /// Connections open at once (lowered at start-up to what the open-file
    /// limit allows); at the cap the longest-idle one makes room.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            request_timeout_ms: 10_000,
            max_concurrent_requests: 512,
            body_timeout_ms: 10_000,
            min_free_disk_bytes: 256 * 1024 * 1024,
            max_connections: 512,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// A tracing filter such as `info` or `engram=debug,tower_http=info`;
    /// `RUST_LOG`, when set, wins.
    pub filter: String,
    pub format: LogFormat,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            filter: "info".to_owned(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}
