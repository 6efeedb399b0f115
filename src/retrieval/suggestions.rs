//! Suggestions: the HyDE hypotheses for a conversation window, without
//! the search, for a client that chooses its own queries. A retrieval
//! model that is missing, slow or failing, or past its daily token
//! budget, is reported as [`Degraded`], never as an error.

use crate::causes::error_chain;
use crate::usage::{CallKind, Owner};
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
        if !llm.meter().allows_retrieval() {
            return Err(Degraded::DailyTokenBudgetExhausted);
        }
        // A suggestion names no namespace pair.
        let call = (CallKind::Suggestions, Owner::default());
        hyde::hypotheses(llm, call, window, count, self.inner.budget)
            .await
            .map_err(|failure| {
                tracing::warn!(error = %error_chain(&failure), "suggestions failed");
                Degraded::of_hyde(&failure)
            })
    }
}
