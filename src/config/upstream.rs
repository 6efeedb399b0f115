//! `embedding`, `llm` and `prices`: the embedder and the OpenAI-compatible
//! chat endpoint, their models, timeouts and reply caps, and what the
//! models cost.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ApiKey;

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
    /// The classifier model's context window, in tokens: its prompt and
    /// the room for its reply fit in it.
    pub context_tokens: usize,
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
            // Past any pass of an ordinary turn, within every hosted model
            // and the 16k local setups; small local models set 8192 or 4096.
            context_tokens: 16_384,
            api_key: None,
        }
    }
}

/// What one model costs, per million tokens, in whatever currency the
/// operator reads (`/stats` shows the sums in it).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt (input) tokens.
    pub input_per_million: f64,
    /// Per million completion (output) tokens; embeddings have none.
    #[serde(default)]
    pub output_per_million: f64,
}
