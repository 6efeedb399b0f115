//! Embedders: a closed set of two. `Local` runs all-MiniLM-L6-v2 in
//! process (the default: nothing to configure, no network); `OpenAi` calls an
//! OpenAI-compatible `/embeddings` endpoint.
//!
//! Both return one vector per text, in order, of [`Embedder::dimensions`]
//! floats; the local model is CPU-bound and runs on a blocking thread so it
//! never stalls the runtime, a query's call and the backlog's on threads
//! of their own ([`Priority`]). A model directory is loaded once per process
//! and shared, however many embedders are built from it.
//!
//! A vector with a zero norm or a non-finite value is refused for either: it
//! would match nothing, and once indexed and cached it would stay
//! unfindable after the embedder recovers, so the call fails instead (and
//! is retried). The last failure is kept for `/stats`.
//!
//! The remote model's vector length may be left unconfigured: it is then
//! learned from the first reply and kept in the embedding cache's header,
//! whose file is named by a model key without a length, so a restart knows
//! the length before any call.

pub mod cache;
/// The local model: all-MiniLM-L6-v2 in process, the crate `engram-encoder`.
pub use engram_encoder as local;
pub mod openai;
pub mod shared_cache;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use local::{LocalEmbedder, Priority};
pub use openai::OpenAiEmbedder;

use crate::blocking;
use crate::causes::error_chain;
use crate::config::{self, EmbeddingProvider};
use crate::store::postgres::Database;
use crate::usage::Meter;
use cache::EmbeddingCache;
use shared_cache::VectorCache;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the local embedder failed")]
    Local(#[from] local::Error),
    #[error("the embeddings endpoint failed")]
    OpenAi(#[from] openai::Error),
    #[error("the embedder returned a vector that is {0}")]
    Degenerate(&'static str),
}

/// An embedder and what it last went through; clones share both.
#[derive(Clone)]
pub struct Embedder {
    backend: Backend,
    last_error: Arc<Mutex<LastError>>,
}

/// When the last call failed, and why.
type LastError = Option<(DateTime<Utc>, String)>;

#[derive(Clone)]
enum Backend {
    Local(Arc<LocalEmbedder>),
    OpenAi(OpenAiEmbedder),
}

/// How the embedder is doing, for `/stats`.
#[derive(Clone, Debug)]
pub struct Health {
    pub model: String,
    /// `None` until learned from the first reply (when not configured).
    pub dimensions: Option<usize>,
    pub dimension_mismatches: u64,
    /// The last failed call since start.
    pub last_error: LastError,
}

impl Embedder {
    /// The embedder the configuration asks for. Loading the local model
    /// reads and verifies about 90 MB: call it from a blocking thread.
    pub fn from_config(config: &config::Embedding) -> Result<Self, Error> {
        let backend = match config.provider {
            EmbeddingProvider::Local => Backend::Local(load_shared(config.model_dir.as_deref())?),
            EmbeddingProvider::Openai => Backend::OpenAi(OpenAiEmbedder::new(openai::Settings {
                base_url: config.base_url.clone(),
                model: config.model.clone(),
                api_key: config.api_key.as_ref().map(|key| key.expose().to_owned()),
                timeout: Duration::from_millis(config.timeout_ms),
                dimensions: config.dimensions,
                max_reply_bytes: config.max_reply_bytes,
            })),
        };
        Ok(Self {
            backend,
            last_error: Arc::default(),
        })
    }

    /// This embedder, the remote one's calls counted by `meter` (the local
    /// model costs nothing and is not metered).
    pub fn metered(self, meter: Meter) -> Self {
        let backend = match self.backend {
            Backend::OpenAi(embedder) => Backend::OpenAi(embedder.metered(meter)),
            local @ Backend::Local(_) => local,
        };
        Self { backend, ..self }
    }

    /// Names the vector space: vectors from embedders with different model
    /// keys are never compared or cached together. A configured length is
    /// part of it; a learned one is kept in the cache file's header.
    pub fn model_key(&self) -> String {
        match &self.backend {
            Backend::Local(_) => format!("local/all-MiniLM-L6-v2/{}", local::DIMENSIONS),
            Backend::OpenAi(embedder) if embedder.dimensions_configured() => format!(
                "openai/{}/{}",
                embedder.model(),
                embedder.dimensions().unwrap_or_default()
            ),
            Backend::OpenAi(embedder) => format!("openai/{}", embedder.model()),
        }
    }

    /// The length of every vector this embedder returns; `None` until the
    /// first reply when it is learned.
    pub fn dimensions(&self) -> Option<usize> {
        match &self.backend {
            Backend::Local(_) => Some(local::DIMENSIONS),
            Backend::OpenAi(embedder) => embedder.dimensions(),
        }
    }

    /// Opens this model's embedding cache under `cache_dir`. When the
    /// length is still to be learned, the cache's header supplies the one
    /// learned on an earlier run.
    pub fn open_cache(&self, cache_dir: &Path) -> VectorCache {
        let (file, stored) = EmbeddingCache::open(cache_dir, &self.model_key(), self.dimensions());
        if let Some(dimensions) = file.dimensions() {
            self.adopt_dimensions(dimensions);
        }
        VectorCache::Local {
            file,
            stored,
            used: HashSet::new(),
        }
    }

    /// The embedding cache replicas share in `database`. When the length
    /// is still to be learned, a vector another replica stored supplies it.
    pub async fn open_shared_cache(&self, database: Database) -> VectorCache {
        let model = self.model_key();
        if self.dimensions().is_none() {
            match database.cached_dimensions(&model).await {
                Ok(Some(dimensions)) => self.adopt_dimensions(dimensions),
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(error = %error_chain(&err), "the shared embedding cache cannot be read; the vector length is learned from the first reply");
                }
            }
        }
        VectorCache::Shared { database, model }
    }

    fn adopt_dimensions(&self, dimensions: usize) {
        if let Backend::OpenAi(embedder) = &self.backend {
            embedder.adopt_dimensions(dimensions);
        }
    }

    pub fn health(&self) -> Health {
        Health {
            model: self.model_key(),
            dimensions: self.dimensions(),
            dimension_mismatches: match &self.backend {
                Backend::Local(_) => 0,
                Backend::OpenAi(embedder) => embedder.dimension_mismatches(),
            },
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    /// One vector per text, in order, each finite and not all zeros, for a
    /// reader who waits for them (a query).
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, Error> {
        self.embed_as(texts, Priority::Query).await
    }

    /// As [`Embedder::embed`], on the threads `priority` names.
    pub async fn embed_as(
        &self,
        texts: Vec<String>,
        priority: Priority,
    ) -> Result<Vec<Vec<f32>>, Error> {
        let result = self
            .embed_unchecked(texts, priority)
            .await
            .and_then(
                |vectors| match vectors.iter().find_map(|vector| degenerate(vector)) {
                    Some(what) => Err(Error::Degenerate(what)),
                    None => Ok(vectors),
                },
            );
        if let Err(err) = &result {
            // Poisoned only by a panic while storing a string.
            *self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((Utc::now(), error_chain(err)));
        }
        result
    }

    async fn embed_unchecked(
        &self,
        texts: Vec<String>,
        priority: Priority,
    ) -> Result<Vec<Vec<f32>>, Error> {
        Ok(match &self.backend {
            Backend::Local(embedder) => {
                let embedder = embedder.clone();
                blocking::run(move || {
                    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                    embedder.embed_as(&texts, priority)
                })
                .await?
            }
            Backend::OpenAi(embedder) => embedder.embed(&texts).await?,
        })
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

/// The model loaded from `dir` (the bundled copy when `None`), loading it
/// on first use. Tests and restarts in one process share one copy of the
/// weights.
fn load_shared(dir: Option<&Path>) -> Result<Arc<LocalEmbedder>, local::Error> {
    static LOADED: Mutex<Option<HashMap<Option<PathBuf>, Arc<LocalEmbedder>>>> = Mutex::new(None);
    // Held while loading, so two callers never load the same model twice.
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    let loaded = loaded.get_or_insert_with(HashMap::new);
    let key = dir.map(Path::to_owned);
    if let Some(embedder) = loaded.get(&key) {
        return Ok(embedder.clone());
    }
    let source = dir.map_or(local::Source::Bundled, local::Source::Dir);
    let embedder = Arc::new(LocalEmbedder::load(source)?);
    loaded.insert(key, embedder.clone());
    Ok(embedder)
}
