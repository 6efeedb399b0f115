//! Embedders: a closed set of two. `Local` runs all-MiniLM-L6-v2 in
//! process (the default: nothing to configure, no network); `OpenAi` calls an
//! OpenAI-compatible `/embeddings` endpoint.
//!
//! Both return one unit-length vector per text, in order; the local model is
//! CPU-bound and runs on a blocking thread so it never stalls the runtime.

pub mod local;
pub mod openai;

use std::sync::Arc;

pub use local::LocalEmbedder;
pub use openai::OpenAiEmbedder;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the local embedder failed")]
    Local(#[from] local::Error),
    #[error("the embeddings endpoint failed")]
    OpenAi(#[from] openai::Error),
    #[error("the local embedder's task failed")]
    Task(#[from] tokio::task::JoinError),
}

#[derive(Clone)]
pub enum Embedder {
    Local(Arc<LocalEmbedder>),
    OpenAi(OpenAiEmbedder),
}

impl Embedder {
    /// Names the vector space: vectors from embedders with different model
    /// keys are never compared or cached together.
    pub fn model_key(&self) -> String {
        match self {
            Self::Local(_) => format!("local/all-MiniLM-L6-v2/{}", local::DIMENSIONS),
            Self::OpenAi(embedder) => format!("openai/{}", embedder.model()),
        }
    }

    /// One vector per text, in order.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, Error> {
        match self {
            Self::Local(embedder) => {
                let embedder = embedder.clone();
                let vectors = tokio::task::spawn_blocking(move || {
                    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                    embedder.embed(&texts)
                })
                .await??;
                Ok(vectors)
            }
            Self::OpenAi(embedder) => Ok(embedder.embed(&texts).await?),
        }
    }
}
