//! Configuration: built-in defaults, then the YAML file (`--config` or
//! `ENGRAM_CONFIG`), then `ENGRAM_SECTION__KEY` environment variables.
//!
//! The three layers are merged as YAML trees and deserialized once with
//! `deny_unknown_fields`, so an unknown key or a bad value anywhere is a
//! startup error that names the key. `validate` then checks ranges.
//! `ENGRAM_CONFIG`, `ENGRAM_API_KEY`, `ENGRAM_MODEL_DIR` and `ENGRAM_URL` (the
//! clients' server address) are not keys and never enter the tree;
//! `ENGRAM_MODEL_DIR` sets `embedding.model_dir`. Secrets (the
//! embeddings key) are read from the variable the configuration names, kept
//! out of the tree and never printed.

mod http;

pub use http::{Http, parse_host};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

use crate::memory::{RepoId, UserId};

/// The prefix of environment variables that override keys.
const ENV_PREFIX: &str = "ENGRAM_";
/// Variables with the prefix that are not configuration keys.
const NOT_KEYS: &[&str] = &[
    "ENGRAM_CONFIG",
    "ENGRAM_API_KEY",
    "ENGRAM_MODEL_DIR",
    "ENGRAM_URL",
];

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
    pub retrieval: Retrieval,
    pub capture: CaptureConfig,
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
            retrieval: Retrieval::default(),
            capture: CaptureConfig::default(),
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

/// Which embedder turns text into vectors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Embedding {
    pub provider: EmbeddingProvider,
    /// `local`: a directory holding `config.json`, `tokenizer.json` and
    /// `model.safetensors` instead of the copy bundled at build time.
    /// `ENGRAM_MODEL_DIR` wins over it.
    pub model_dir: Option<PathBuf>,
    /// `openai`: the API root; `/embeddings` is appended.
    pub base_url: String,
    /// `openai`: the environment variable holding the bearer key (none sent
    /// when it is unset, for local servers that need none).
    pub api_key_env: String,
    /// `openai`: the model name sent with each request.
    pub model: String,
    /// `openai`: the length of the vectors the model returns, checked on
    /// every reply; unset, it is learned from the first reply (and kept in
    /// the embedding cache's header).
    pub dimensions: Option<usize>,
    /// `openai`: how long one embeddings request may take, in ms.
    pub timeout_ms: u64,
    /// `openai`: the largest embeddings reply read, in bytes; a larger one
    /// is a failed call.
    pub max_reply_bytes: usize,
    /// The key read from `api_key_env` at start-up.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

impl Default for Embedding {
    fn default() -> Self {
        Self {
            provider: EmbeddingProvider::Local,
            model_dir: None,
            base_url: "https://api.openai.com/v1".to_owned(),
            api_key_env: "OPENAI_API_KEY".to_owned(),
            model: "text-embedding-3-small".to_owned(),
            dimensions: None,
            timeout_ms: 2000,
            max_reply_bytes: DEFAULT_EMBEDDING_REPLY_BYTES,
            api_key: None,
        }
    }
}

/// The default cap on an embeddings reply: the indexer sends up to 128
/// texts a call, and a reply of 128 vectors of 3,072 floats (the largest
/// common model) written the longest way JSON allows (about 24 bytes a
/// float: `-1.2345678901234567e-05,`) is 9.4 MB; 16 MiB leaves headroom.
const DEFAULT_EMBEDDING_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// The default cap on a chat reply: hypotheses, expansions and classified
/// memories are a few KB.
const DEFAULT_LLM_REPLY_BYTES: usize = 2 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingProvider {
    /// all-MiniLM-L6-v2 in process: no network, no key.
    Local,
    /// An OpenAI-compatible `/embeddings` endpoint.
    Openai,
}

/// An OpenAI-compatible chat-completions endpoint and its models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Llm {
    /// The API root; `/chat/completions` is appended.
    pub base_url: String,
    /// The environment variable holding the bearer key (none sent when unset).
    pub api_key_env: String,
    /// A fast model for HyDE hypotheses, suggestions and query expansion.
    pub retrieval_model: String,
    pub classifier_model: String,
    /// How long one retrieval-model call may take, in ms.
    pub retrieval_timeout_ms: u64,
    pub classifier_timeout_ms: u64,
    /// The largest chat reply read, in bytes; a larger one is a failed call.
    pub max_reply_bytes: usize,
    /// The key read from `api_key_env` at start-up.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

impl Default for Llm {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".to_owned(),
            api_key_env: "OPENAI_API_KEY".to_owned(),
            retrieval_model: "gpt-4o-mini".to_owned(),
            classifier_model: "gpt-4o-mini".to_owned(),
            retrieval_timeout_ms: 2000,
            classifier_timeout_ms: 30_000,
            max_reply_bytes: DEFAULT_LLM_REPLY_BYTES,
            api_key: None,
        }
    }
}

/// Defaults for `POST /retrieve`; a request may override each.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retrieval {
    /// How many memories a retrieval returns at most (before hops).
    pub top_k: usize,
    /// How many `related` edges to follow from each result, 0–3.
    pub hop_depth: usize,
    /// How many hypothetical memories HyDE asks for, 1–10.
    pub hypothesis_count: usize,
    /// The most tokens the injection text may take.
    pub token_budget: usize,
    /// The least relevance (0..1) a returned memory has.
    pub min_relevance: f64,
    /// The whole retrieval's time budget, in ms; past it the answer is
    /// `degraded`.
    pub budget_ms: u64,
    /// The words' (BM25) largest share of the match score against meaning,
    /// 0..1, taken where the vector search cannot tell the closest
    /// memories apart (an eighth of it where the best stands clear); 0
    /// searches by vector only.
    pub lexical_weight: f64,
    /// How long a turn's result stays cached, in seconds.
    pub cache_ttl_s: u64,
    /// The most turns cached at once.
    pub cache_capacity: usize,
    /// The most bytes the cached answers may hold (estimated from their
    /// text); the least recently used go first.
    pub cache_max_bytes: usize,
    pub weights: Weights,
}

impl Default for Retrieval {
    fn default() -> Self {
        Self {
            top_k: 5,
            hop_depth: 1,
            hypothesis_count: 3,
            lexical_weight: 0.8,
            cache_ttl_s: 300,
            cache_capacity: 10_000,
            cache_max_bytes: 32 * 1024 * 1024,
            token_budget: 1000,
            min_relevance: 0.0,
            budget_ms: 2000,
            weights: Weights::default(),
        }
    }
}

/// How much each factor counts in a memory's relevance; each 0..1, not all
/// zero. They are normalised by their sum.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    pub similarity: f64,
    pub recency: f64,
    pub importance: f64,
    pub access: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            similarity: 0.6,
            recency: 0.2,
            importance: 0.15,
            access: 0.05,
        }
    }
}

impl Weights {
    /// The first weight outside 0..1, or that all are zero.
    pub fn check(&self) -> Result<(), SettingError> {
        let named = [
            ("weights.similarity", self.similarity),
            ("weights.recency", self.recency),
            ("weights.importance", self.importance),
            ("weights.access", self.access),
        ];
        for (field, weight) in named {
            within(field, weight, 0.0..=1.0)?;
        }
        if named.iter().all(|(_, weight)| *weight == 0.0) {
            return Err(SettingError::AllWeightsZero);
        }
        Ok(())
    }
}

/// What a request may override of the configured [`Retrieval`]; `None`
/// keeps the configured value.
#[derive(Clone, Debug, Default)]
pub struct RetrievalOverrides {
    pub top_k: Option<usize>,
    pub hop_depth: Option<usize>,
    pub hypothesis_count: Option<usize>,
    pub token_budget: Option<usize>,
    pub min_relevance: Option<f64>,
    pub similarity: Option<f64>,
    pub recency: Option<f64>,
    pub importance: Option<f64>,
    pub access: Option<f64>,
}

/// A retrieval setting outside its limits. `field` is its name within
/// `retrieval` (`top_k`, `weights.recency`): the configuration reports it
/// as `retrieval.top_k`, a request as `top_k`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("must be between {low} and {high}, got {got}")]
    OutOfRange {
        field: &'static str,
        low: String,
        high: String,
        got: String,
    },
    #[error("the weights must not all be zero")]
    AllWeightsZero,
}

impl SettingError {
    /// The setting at fault, relative to `retrieval`.
    pub fn field(&self) -> &'static str {
        match self {
            Self::OutOfRange { field, .. } => field,
            Self::AllWeightsZero => "weights.similarity",
        }
    }
}

/// `value` if it lies in `range`, else the error naming `field`.
fn within<T: PartialOrd + Copy + std::fmt::Display>(
    field: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<(), SettingError> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(SettingError::OutOfRange {
            field,
            low: range.start().to_string(),
            high: range.end().to_string(),
            got: value.to_string(),
        })
    }
}

impl Retrieval {
    /// These settings with a request's `overrides` applied, checked.
    pub fn with(&self, overrides: &RetrievalOverrides) -> Result<Self, SettingError> {
        let weights = self.weights;
        let settings = Self {
            top_k: overrides.top_k.unwrap_or(self.top_k),
            hop_depth: overrides.hop_depth.unwrap_or(self.hop_depth),
            hypothesis_count: overrides.hypothesis_count.unwrap_or(self.hypothesis_count),
            token_budget: overrides.token_budget.unwrap_or(self.token_budget),
            min_relevance: overrides.min_relevance.unwrap_or(self.min_relevance),
            weights: Weights {
                similarity: overrides.similarity.unwrap_or(weights.similarity),
                recency: overrides.recency.unwrap_or(weights.recency),
                importance: overrides.importance.unwrap_or(weights.importance),
                access: overrides.access.unwrap_or(weights.access),
            },
            ..self.clone()
        };
        settings.check()?;
        Ok(settings)
    }

    /// The first setting outside its limits, in the order of the fields.
    pub fn check(&self) -> Result<(), SettingError> {
        within("top_k", self.top_k, bounds::TOP_K)?;
        within("hop_depth", self.hop_depth, bounds::HOP_DEPTH)?;
        within(
            "hypothesis_count",
            self.hypothesis_count,
            bounds::HYPOTHESIS_COUNT,
        )?;
        within("lexical_weight", self.lexical_weight, 0.0..=1.0)?;
        within("cache_ttl_s", self.cache_ttl_s, 1..=86_400)?;
        within("cache_capacity", self.cache_capacity, 1..=1_000_000)?;
        within(
            "cache_max_bytes",
            self.cache_max_bytes,
            64 * 1024..=64 * 1024 * 1024 * 1024,
        )?;
        within("token_budget", self.token_budget, bounds::TOKEN_BUDGET)?;
        within("min_relevance", self.min_relevance, 0.0..=1.0)?;
        within("budget_ms", self.budget_ms, bounds::BUDGET_MS)?;
        self.weights.check()
    }
}

/// How capture runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Turn triggers waiting beyond this many are dropped (compactions
    /// never are).
    pub queue_capacity: usize,
    /// Classifier calls in flight at once, across all namespace pairs.
    pub max_concurrent: usize,
    /// Cosine similarity at or above which a new memory is a duplicate of
    /// an existing one in its namespace, 0..1.
    pub duplicate_threshold: f64,
    /// Tries of one trigger before it moves to `queue/failed/`.
    pub max_attempts: u32,
    /// The first retry's delay, in ms; it doubles with each attempt.
    pub retry_base_ms: u64,
    /// Bytes of queued trigger files one session may hold; a compaction
    /// past it is refused with 429.
    pub session_queue_bytes: u64,
    /// Bytes of queued trigger files in all; a compaction past it is
    /// refused with 429.
    pub queue_bytes: u64,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 8,
            max_concurrent: 2,
            duplicate_threshold: 0.92,
            max_attempts: 4,
            retry_base_ms: 1000,
            session_queue_bytes: 4 * 1024 * 1024,
            queue_bytes: 64 * 1024 * 1024,
        }
    }
}

/// How the store follows the data directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Whether changes made to the files while Engram runs (by hand,
    /// `git pull`, a sync tool) are taken in live; off, only at start.
    pub watch: bool,
    /// How long events must be quiet before they are taken in, in ms.
    pub debounce_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            watch: true,
            debounce_ms: 150,
        }
    }
}

impl StoreConfig {
    pub fn debounce(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.debounce_ms)
    }
}

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

fn everything() -> Vec<String> {
    vec!["*".to_owned()]
}

/// Cross-origin requests: refused unless origins are listed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cors {
    /// Origins (e.g. `https://app.example.com`) whose browsers may call the API.
    pub allowed_origins: Vec<String>,
}

/// The MCP endpoint at `/mcp`. Its `Host` values are `http.allowed_hosts`,
/// as for every route; browsers are refused unless their origin is listed
/// here, whatever the method.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mcp {
    /// Browser origins (`https://app.example.com`, `http://localhost:*`)
    /// that may call `/mcp`. None by default: a request that carries an
    /// `Origin` (only browsers send one) is refused.
    pub allowed_origins: Vec<String>,
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

impl Config {
    /// Defaults, then the file at `path` (if any), then the environment.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Error> {
        let mut tree =
            serde_yaml::to_value(Config::default()).expect("the default configuration serializes");
        if let Some(path) = path {
            let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
                path: path.to_owned(),
                source,
            })?;
            let file: Value = serde_yaml::from_str(&text).map_err(|source| Error::ParseFile {
                path: path.to_owned(),
                source,
            })?;
            // An empty file is YAML null: nothing to override.
            if !file.is_null() {
                merge(&mut tree, file);
            }
        }
        let env: Vec<(String, String)> = env.into_iter().collect();
        let mut overrides: Vec<_> = env
            .iter()
            .filter(|(var, _)| var.starts_with(ENV_PREFIX) && !NOT_KEYS.contains(&var.as_str()))
            .collect();
        overrides.sort();
        for (var, value) in overrides {
            apply_env(&mut tree, var, value)?;
        }
        let mut config: Config =
            serde_path_to_error::deserialize(tree).map_err(|err| Error::Key {
                key: err.path().to_string(),
                reason: err.inner().to_string(),
            })?;
        let lookup = |name: &str| {
            env.iter()
                .find(|(var, value)| var == name && !value.is_empty())
                .map(|(_, value)| value.as_str())
        };
        config.api_key = lookup("ENGRAM_API_KEY").map(ApiKey::new);
        if let Some(dir) = lookup("ENGRAM_MODEL_DIR") {
            config.embedding.model_dir = Some(PathBuf::from(dir));
        }
        config.embedding.api_key = lookup(&config.embedding.api_key_env).map(ApiKey::new);
        if let Some(llm) = &mut config.llm {
            llm.api_key = lookup(&llm.api_key_env).map(ApiKey::new);
        }
        config.validate()?;
        Ok(config)
    }

    /// Range checks that types alone cannot express.
    pub fn validate(&self) -> Result<(), Error> {
        let key_error = |key: &str, reason: &str| {
            Err(Error::Key {
                key: key.to_owned(),
                reason: reason.to_owned(),
            })
        };
        if !(1024..=64 * 1024 * 1024).contains(&self.limits.max_body_bytes) {
            return key_error("limits.max_body_bytes", "must be between 1024 and 67108864");
        }
        if !(100..=600_000).contains(&self.limits.request_timeout_ms) {
            return key_error(
                "limits.request_timeout_ms",
                "must be between 100 and 600000",
            );
        }
        let embedding = &self.embedding;
        if embedding
            .dimensions
            .is_some_and(|dimensions| !bounds::EMBEDDING_DIMENSIONS.contains(&dimensions))
        {
            return key_error("embedding.dimensions", "must be between 1 and 8192");
        }
        if !bounds::UPSTREAM_REPLY_BYTES.contains(&embedding.max_reply_bytes) {
            return key_error(
                "embedding.max_reply_bytes",
                "must be between 1024 and 1073741824",
            );
        }
        if !bounds::UPSTREAM_TIMEOUT_MS.contains(&embedding.timeout_ms) {
            return key_error("embedding.timeout_ms", "must be between 50 and 600000");
        }
        if embedding.provider == EmbeddingProvider::Openai {
            if !(embedding.base_url.starts_with("http://")
                || embedding.base_url.starts_with("https://"))
            {
                return key_error("embedding.base_url", "must be an http:// or https:// URL");
            }
            if embedding.model.trim().is_empty() {
                return key_error("embedding.model", "must not be empty");
            }
        }
        if let Some(llm) = &self.llm {
            if !(llm.base_url.starts_with("http://") || llm.base_url.starts_with("https://")) {
                return key_error("llm.base_url", "must be an http:// or https:// URL");
            }
            if llm.retrieval_model.trim().is_empty() {
                return key_error("llm.retrieval_model", "must not be empty");
            }
            if llm.classifier_model.trim().is_empty() {
                return key_error("llm.classifier_model", "must not be empty");
            }
            if !bounds::UPSTREAM_TIMEOUT_MS.contains(&llm.retrieval_timeout_ms) {
                return key_error("llm.retrieval_timeout_ms", "must be between 50 and 600000");
            }
            if !bounds::UPSTREAM_TIMEOUT_MS.contains(&llm.classifier_timeout_ms) {
                return key_error("llm.classifier_timeout_ms", "must be between 50 and 600000");
            }
            if !bounds::UPSTREAM_REPLY_BYTES.contains(&llm.max_reply_bytes) {
                return key_error("llm.max_reply_bytes", "must be between 1024 and 1073741824");
            }
        }
        if let Err(err) = self.retrieval.check() {
            return key_error(&format!("retrieval.{}", err.field()), &err.to_string());
        }
        let capture = &self.capture;
        if !(1..=100_000).contains(&capture.queue_capacity) {
            return key_error("capture.queue_capacity", "must be between 1 and 100000");
        }
        if !(1..=64).contains(&capture.max_concurrent) {
            return key_error("capture.max_concurrent", "must be between 1 and 64");
        }
        if !(0.5..=1.0).contains(&capture.duplicate_threshold) {
            return key_error("capture.duplicate_threshold", "must be between 0.5 and 1");
        }
        if !(1..=20).contains(&capture.max_attempts) {
            return key_error("capture.max_attempts", "must be between 1 and 20");
        }
        if !(10..=600_000).contains(&capture.retry_base_ms) {
            return key_error("capture.retry_base_ms", "must be between 10 and 600000");
        }
        if !(10..=10_000).contains(&self.store.debounce_ms) {
            return key_error("store.debounce_ms", "must be between 10 and 10000");
        }
        if capture.session_queue_bytes < self.limits.max_body_bytes as u64 {
            return key_error(
                "capture.session_queue_bytes",
                "must be at least limits.max_body_bytes",
            );
        }
        if capture.queue_bytes < capture.session_queue_bytes {
            return key_error(
                "capture.queue_bytes",
                "must be at least capture.session_queue_bytes",
            );
        }
        for (at, key) in self.auth.keys.iter().enumerate() {
            if key.digest().is_none() {
                return key_error(
                    &format!("auth.keys[{at}].sha256"),
                    "must be 64 hex digits (the SHA-256 of the key, never the key)",
                );
            }
            for (field, owners) in [("repos", &key.repos), ("users", &key.users)] {
                if owners.is_empty() {
                    return key_error(&format!("auth.keys[{at}].{field}"), "must list ids or `*`");
                }
                if let Some(bad) = owners
                    .iter()
                    .position(|owner| owner != "*" && owner.parse::<RepoId>().is_err())
                {
                    return key_error(
                        &format!("auth.keys[{at}].{field}[{bad}]"),
                        "is neither `*` nor a valid id",
                    );
                }
            }
        }
        if let Some(at) = self.http.invalid_host() {
            return key_error(
                &format!("http.allowed_hosts[{at}]"),
                "must be a host name or address with an optional port, such as \
                 engram.internal or engram:8080",
            );
        }
        for (at, origin) in self.cors.allowed_origins.iter().enumerate() {
            if axum::http::HeaderValue::from_str(origin).is_err()
                || !(origin.starts_with("http://") || origin.starts_with("https://"))
            {
                return key_error(
                    &format!("cors.allowed_origins[{at}]"),
                    "must be an origin such as https://app.example.com",
                );
            }
        }
        for (at, origin) in self.mcp.allowed_origins.iter().enumerate() {
            if !(origin == "null"
                || origin.starts_with("http://")
                || origin.starts_with("https://"))
            {
                return key_error(
                    &format!("mcp.allowed_origins[{at}]"),
                    "must be an origin such as https://app.example.com or http://localhost:*",
                );
            }
        }
        let keyless = self.auth.keys.is_empty() && self.api_key.is_none();
        if keyless && !self.listen.ip().is_loopback() && !self.auth.allow_unauthenticated {
            return key_error(
                "listen",
                "is not a loopback address and no API key is configured: set ENGRAM_API_KEY \
                 or auth.keys, or (not advised) auth.allow_unauthenticated: true",
            );
        }
        if !(1..=100_000).contains(&self.limits.max_concurrent_requests) {
            return key_error(
                "limits.max_concurrent_requests",
                "must be between 1 and 100000",
            );
        }
        if !(100..=600_000).contains(&self.limits.body_timeout_ms) {
            return key_error("limits.body_timeout_ms", "must be between 100 and 600000");
        }
        if !(1..=1_000_000).contains(&self.limits.max_connections) {
            return key_error("limits.max_connections", "must be between 1 and 1000000");
        }
        if self.data_dir.as_os_str().is_empty() {
            return key_error("data_dir", "must not be empty");
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.filter).is_err() {
            return key_error("log.filter", "is not a valid tracing filter");
        }
        Ok(())
    }
}

/// Merges `overlay` into `base`: mappings key by key, anything else replaced.
fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Mapping(base), Value::Mapping(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Sets the key `ENGRAM_A__B_C` names (`a.b_c`) to `value`, read as YAML so
/// numbers, booleans and lists keep their types.
fn apply_env(tree: &mut Value, var: &str, value: &str) -> Result<(), Error> {
    let env_error = |reason: String| Error::Env {
        var: var.to_owned(),
        reason,
    };
    let path: Vec<String> = var[ENV_PREFIX.len()..]
        .split("__")
        .map(str::to_lowercase)
        .collect();
    if path.iter().any(String::is_empty) {
        return Err(env_error(
            "is not of the form ENGRAM_SECTION__KEY".to_owned(),
        ));
    }
    let parsed: Value = serde_yaml::from_str(value)
        .map_err(|err| env_error(format!("the value is not valid YAML: {err}")))?;
    // An empty variable means an empty string, not YAML null.
    let parsed = if parsed.is_null() && value.trim().is_empty() {
        Value::String(String::new())
    } else {
        parsed
    };
    let mut node = tree;
    for section in path {
        if !node.is_mapping() {
            *node = Value::Mapping(Mapping::new());
        }
        node = node
            .as_mapping_mut()
            .expect("just made a mapping")
            .entry(Value::String(section))
            .or_insert(Value::Null);
    }
    *node = parsed;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_digests_are_decoded_strictly() {
        let grant = |sha256: &str| KeyGrant {
            sha256: sha256.to_owned(),
            repos: everything(),
            users: everything(),
        };
        let hex = "ab".repeat(32);
        assert_eq!(grant(&hex).digest(), Some([0xab; 32]));
        assert_eq!(grant(&hex.to_uppercase()).digest(), Some([0xab; 32]));
        assert!(grant("abc").digest().is_none());
        assert!(grant(&"zz".repeat(32)).digest().is_none());
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn load_yaml(yaml: &str, vars: &[(&str, &str)]) -> Result<Config, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engram.yaml");
        std::fs::write(&path, yaml).unwrap();
        Config::load(Some(&path), env(vars))
    }

    #[test]
    fn defaults_run_with_nothing_configured() {
        let config = Config::load(None, env(&[("HOME", "/root")])).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(config.data_dir, PathBuf::from("./data"));
    }

    #[test]
    fn file_then_environment_override_defaults() {
        let config = load_yaml(
            "data_dir: /srv/engram\nlimits: { max_body_bytes: 2048 }\n",
            &[
                ("ENGRAM_LIMITS__MAX_BODY_BYTES", "4096"),
                ("ENGRAM_DEFAULTS__REPO", "forge"),
                ("ENGRAM_CONFIG", "ignored.yaml"),
                ("ENGRAM_API_KEY", "not-a-key"),
                ("ENGRAM_MODEL_DIR", "/opt/model"),
                ("ENGRAM_URL", "http://127.0.0.1:9999"),
            ],
        )
        .unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/srv/engram"));
        assert_eq!(config.limits.max_body_bytes, 4096);
        assert_eq!(config.limits.request_timeout_ms, 10_000);
        assert_eq!(config.defaults.repo.as_str(), "forge");
        assert_eq!(config.api_key, Some(ApiKey::new("not-a-key")));
        assert_eq!(
            config.embedding.model_dir,
            Some(PathBuf::from("/opt/model"))
        );
        assert_eq!(format!("{:?}", config.api_key), "Some(ApiKey(<redacted>))");
    }

    #[test]
    fn the_embeddings_key_comes_from_the_named_variable_and_stays_hidden() {
        let config = load_yaml(
            "embedding: { provider: openai, api_key_env: MY_EMBED_KEY }\n",
            &[("MY_EMBED_KEY", "sk-test"), ("OPENAI_API_KEY", "other")],
        )
        .unwrap();
        assert_eq!(config.embedding.api_key, Some(ApiKey::new("sk-test")));
        let printed = serde_yaml::to_string(&config).unwrap();
        assert!(!printed.contains("sk-test"), "{printed}");
    }

    #[test]
    fn the_llm_section_is_absent_by_default_and_set_key_by_key() {
        assert_eq!(Config::default().llm, None);
        let config = Config::load(
            None,
            env(&[
                ("ENGRAM_LLM__BASE_URL", "http://127.0.0.1:9/v1"),
                ("OPENAI_API_KEY", "sk-llm"),
            ]),
        )
        .unwrap();
        let llm = config.llm.unwrap();
        assert_eq!(llm.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(llm.retrieval_model, "gpt-4o-mini");
        assert_eq!(llm.api_key, Some(ApiKey::new("sk-llm")));
        let err =
            Config::load(None, env(&[("ENGRAM_LLM__RETRIEVAL_TIMEOUT_MS", "1")])).unwrap_err();
        assert!(
            err.to_string().contains("llm.retrieval_timeout_ms"),
            "{err}"
        );
    }

    #[test]
    fn a_public_address_needs_a_key_unless_explicitly_allowed() {
        let err = Config::load(None, env(&[("ENGRAM_LISTEN", "0.0.0.0:8080")])).unwrap_err();
        assert!(err.to_string().contains("listen"), "{err}");
        assert!(err.to_string().contains("ENGRAM_API_KEY"), "{err}");
        for extra in [
            ("ENGRAM_API_KEY", "k"),
            ("ENGRAM_AUTH__ALLOW_UNAUTHENTICATED", "true"),
        ] {
            Config::load(None, env(&[("ENGRAM_LISTEN", "0.0.0.0:8080"), extra])).unwrap();
        }
        let digest = "0".repeat(64);
        load_yaml(
            &format!("listen: 0.0.0.0:8080\nauth: {{ keys: [{{ sha256: '{digest}', repos: [forge] }}] }}\n"),
            &[],
        )
        .unwrap();
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = load_yaml("limits: { max_body_byte: 10 }\n", &[]).unwrap_err();
        assert!(err.to_string().contains("limits"), "{err}");
        assert!(err.to_string().contains("max_body_byte"), "{err}");

        let err = Config::load(None, env(&[("ENGRAM_RETRIEVAL__TOPK", "3")])).unwrap_err();
        assert!(err.to_string().contains("retrieval"), "{err}");
    }

    #[test]
    fn a_request_overrides_the_configured_retrieval_within_the_same_limits() {
        let configured = Retrieval::default();
        let settings = configured
            .with(&RetrievalOverrides {
                top_k: Some(7),
                recency: Some(0.0),
                ..RetrievalOverrides::default()
            })
            .unwrap();
        assert_eq!(settings.top_k, 7);
        assert_eq!(settings.weights.recency, 0.0);
        assert_eq!(settings.hop_depth, configured.hop_depth);
        assert_eq!(settings.weights.similarity, configured.weights.similarity);

        let too_deep = configured.with(&RetrievalOverrides {
            hop_depth: Some(4),
            ..RetrievalOverrides::default()
        });
        let err = too_deep.unwrap_err();
        assert_eq!(err.field(), "hop_depth");
        assert_eq!(err.to_string(), "must be between 0 and 3, got 4");
        let no_weights = configured.with(&RetrievalOverrides {
            similarity: Some(0.0),
            recency: Some(0.0),
            importance: Some(0.0),
            access: Some(0.0),
            ..RetrievalOverrides::default()
        });
        assert_eq!(no_weights.unwrap_err(), SettingError::AllWeightsZero);

        let config = Config {
            retrieval: Retrieval {
                hop_depth: 4,
                ..Retrieval::default()
            },
            ..Config::default()
        };
        let Err(Error::Key { key, reason }) = config.validate() else {
            panic!("an out-of-range hop_depth is refused");
        };
        assert_eq!(key, "retrieval.hop_depth");
        assert_eq!(reason, "must be between 0 and 3, got 4");
    }

    #[test]
    fn bad_values_are_named() {
        let cases = [
            ("listen: nowhere\n", "listen"),
            ("defaults: { repo: '../etc' }\n", "defaults.repo"),
            ("limits: { max_body_bytes: 10 }\n", "limits.max_body_bytes"),
            ("limits: { max_body_bytes: -1 }\n", "limits.max_body_bytes"),
            ("limits: { max_connections: 0 }\n", "limits.max_connections"),
            ("log: { format: xml }\n", "log.format"),
            ("[1, 2]\n", "."),
            ("embedding: { provider: onnx }\n", "embedding.provider"),
            ("embedding: { dimensions: 0 }\n", "embedding.dimensions"),
            (
                "embedding: { max_reply_bytes: 10 }\n",
                "embedding.max_reply_bytes",
            ),
            ("llm: { max_reply_bytes: 10 }\n", "llm.max_reply_bytes"),
            (
                "embedding: { provider: openai, base_url: ftp://x }\n",
                "embedding.base_url",
            ),
            ("retrieval: { top_k: 0 }\n", "retrieval.top_k"),
            ("retrieval: { hop_depth: 4 }\n", "retrieval.hop_depth"),
            (
                "retrieval: { cache_max_bytes: 1000 }\n",
                "retrieval.cache_max_bytes",
            ),
            (
                "retrieval: { hypothesis_count: 0 }\n",
                "retrieval.hypothesis_count",
            ),
            ("llm: { base_url: nowhere }\n", "llm.base_url"),
            ("capture: { max_concurrent: 0 }\n", "capture.max_concurrent"),
            (
                "capture: { session_queue_bytes: 1024 }\n",
                "capture.session_queue_bytes",
            ),
            ("capture: { queue_bytes: 1048576 }\n", "capture.queue_bytes"),
            (
                "auth: { keys: [{ sha256: plain-key }] }\n",
                "auth.keys[0].sha256",
            ),
            (
                "auth: { keys: [{ sha256: '0000000000000000000000000000000000000000000000000000000000000000', users: ['../x'] }] }\n",
                "auth.keys[0].users[0]",
            ),
            (
                "cors: { allowed_origins: ['*'] }\n",
                "cors.allowed_origins[0]",
            ),
            (
                "http: { allowed_hosts: [engram, 'http://evil.example'] }\n",
                "http.allowed_hosts[1]",
            ),
            (
                "capture: { duplicate_threshold: 1.5 }\n",
                "capture.duplicate_threshold",
            ),
            (
                "retrieval: { weights: { recency: 1.5 } }\n",
                "retrieval.weights.recency",
            ),
            (
                "retrieval: { weights: { similarity: 0, recency: 0, importance: 0, access: 0 } }\n",
                "retrieval.weights.similarity",
            ),
        ];
        for (yaml, key) in cases {
            let err = load_yaml(yaml, &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{yaml:?} gave {err}");
        }
        let err = Config::load(None, env(&[("ENGRAM_LISTEN", "nowhere")])).unwrap_err();
        assert!(err.to_string().contains("listen"), "{err}");
    }
}
