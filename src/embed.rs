//! Embedders: a closed set of two. `Local` runs all-MiniLM-L6-v2 in
//! process (the default: nothing to configure, no network); `OpenAi` calls an
//! OpenAI-compatible `/embeddings` endpoint.
//!
//! Both return one vector per text, in order, of [`Embedder::dimensions`]
//! floats; the local model is CPU-bound and runs on a blocking thread so it
//! never stalls the runtime. A vector with a zero norm or a non-finite
//! value is refused for either: it would match nothing, and
//! once indexed and cached it would stay unfindable after the embedder
//! recovers, so the call fails instead (and is retried). A model directory is loaded once per process
//! and shared, however many embedders are built from it.

pub mod cache;
pub mod local;
pub mod openai;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

pub use local::LocalEmbedder;
pub use openai::OpenAiEmbedder;

use crate::config::{self, EmbeddingProvider};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the local embedder failed")]
    Local(#[from] local::Error),
    #[error("the embeddings endpoint failed")]
    OpenAi(#[from] openai::Error),
    #[error("the local embedder's task failed")]
    Task(#[from] tokio::task::JoinError),
    #[error("the embedder returned a vector that is {0}")]
    Degenerate(&'static str),
}

#[derive(Clone)]
pub enum Embedder {
    Local(Arc<LocalEmbedder>),
    OpenAi(OpenAiEmbedder),
}

impl Embedder {
    /// The embedder the configuration asks for. Loading the local model
    /// reads and verifies about 90 MB: call it from a blocking thread.
    pub fn from_config(config: &config::Embedding) -> Result<Self, Error> {
        match config.provider {
            EmbeddingProvider::Local => {
                let dir = match &config.model_dir {
                    Some(dir) => dir.clone(),
                    None => {
                        PathBuf::from(local::BUNDLED_MODEL_DIR.ok_or(local::Error::NotBundled)?)
                    }
                };
                Ok(Self::Local(load_shared(&dir)?))
            }
            EmbeddingProvider::Openai => Ok(Self::OpenAi(OpenAiEmbedder::new(openai::Settings {
                base_url: config.base_url.clone(),
                model: config.model.clone(),
                api_key: config.api_key.as_ref().map(|key| key.expose().to_owned()),
                timeout: Duration::from_millis(config.timeout_ms),
                dimensions: config.dimensions,
                max_reply_bytes: config.max_reply_bytes,
            }))),
        }
    }

    /// Names the vector space: vectors from embedders with different model
    /// keys are never compared or cached together.
    pub fn model_key(&self) -> String {
        match self {
            Self::Local(_) => format!("local/all-MiniLM-L6-v2/{}", local::DIMENSIONS),
            Self::OpenAi(embedder) => {
                format!("openai/{}/{}", embedder.model(), embedder.dimensions())
            }
        }
    }

    /// The length of every vector this embedder returns.
    pub fn dimensions(&self) -> usize {
        match self {
            Self::Local(_) => local::DIMENSIONS,
            Self::OpenAi(embedder) => embedder.dimensions(),
        }
    }

    /// One vector per text, in order, each finite and not all zeros.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, Error> {
        let vectors = match self {
            Self::Local(embedder) => {
                let embedder = embedder.clone();
                tokio::task::spawn_blocking(move || {
                    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                    embedder.embed(&texts)
                })
                .await??
            }
            Self::OpenAi(embedder) => embedder.embed(&texts).await?,
        };
        match vectors.iter().find_map(|vector| degenerate(vector)) {
            Some(what) => Err(Error::Degenerate(what)),
            None => Ok(vectors),
        }
    }
}

/// What makes `vector` unusable for cosine similarity, if anything: a
/// non-finite value, or a norm the index cannot normalise by (zero, or
/// past `f32` when squared), the same arithmetic as the index's.
pub fn degenerate(vector: &[f32]) -> Option<&'static str> {
    let squared_norm: f32 = vector.iter().map(|value| value * value).sum();
    if !vector.iter().all(|value| value.is_finite()) {
        Some("not finite")
    } else if squared_norm == 0.0 {
        Some("all zeros (norm 0)")
    } else if !squared_norm.is_finite() {
        Some("too large to normalise")
    } else {
        None
    }
}

/// The model loaded from `dir`, loading it on first use. Tests and
/// restarts in one process share one copy of the weights.
fn load_shared(dir: &Path) -> Result<Arc<LocalEmbedder>, local::Error> {
    static LOADED: Mutex<Option<HashMap<PathBuf, Arc<LocalEmbedder>>>> = Mutex::new(None);
    // Held while loading, so two callers never load the same model twice.
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    let loaded = loaded.get_or_insert_with(HashMap::new);
    if let Some(embedder) = loaded.get(dir) {
        return Ok(embedder.clone());
    }
    let embedder = Arc::new(LocalEmbedder::load(dir)?);
    loaded.insert(dir.to_owned(), embedder.clone());
    Ok(embedder)
}
