//! Suggestions: the HyDE hypotheses for a conversation window, without
//! the search, for a client that chooses its own queries. A retrieval
//! model that is missing, slow or failing is reported as [`Degraded`],
//! never as an error.

use crate::causes::error_chain;
use crate::window::Line;

use super::{Degraded, Retriever, hyde};

impl Retriever {
    /// Up to `count` suggested queries for `window` (the HyDE hypotheses,
    /// without the search).
    pub async fn suggestions(
        &self,
        window: &[Line],
        count: usize,
    ) -> Result<Vec<String>, Degraded> {
        let Some(llm) = &self.inner.llm else {
            return Err(Degraded::LlmNotConfigured);
        };
        hyde::hypotheses(llm, window, count, self.inner.budget)
            .await
            .map_err(|failure| {
                tracing::warn!(error = %error_chain(&failure), "suggestions failed");
                Degraded::of_hyde(&failure)
            })
    }
}
