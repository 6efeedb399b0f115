//! `inject`: what a retrieval made for an agent session
//! (`POST /retrieve` with `session_id`) puts in the agent's context, and
//! how much of it: the brief at the session's start, and per prompt only
//! what is relevant enough and not yet injected in the session. The
//! defaults are measured on a scripted coding session (`engram-bench
//! injection`, `docs/benchmarks.md`). A retrieval without a session
//! (the MCP `recall` tool, plain API calls) is not affected.

use serde::{Deserialize, Serialize};

use super::bounds;

/// The `inject` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Inject {
    /// The most tokens of the brief a session starts with: the pair's
    /// most important confirmed memories. 0: no brief.
    pub session_start_tokens: usize,
    /// The most tokens injected for one prompt of a session (a request's
    /// own `token_budget` caps it further). 0: nothing after the brief.
    pub prompt_tokens: usize,
    /// The least relevance (0..1) at which a memory retrieved for a
    /// prompt of a session is injected; one below it is still returned,
    /// not injected.
    pub min_relevance: f64,
}

impl Default for Inject {
    fn default() -> Self {
        // Measured on the scripted session (`engram-bench injection`):
        // the fewest tokens that lose no prompt's needed memory. A brief
        // of 600 holds the session's most needed conventions; no prompt
        // there needed more than 135 new tokens (150 loses nothing, 120
        // does), and 300 leaves room for memories twice as long; a floor
        // of 0.45 loses needed memories that rank at 0.46.
        Self {
            session_start_tokens: 600,
            prompt_tokens: 300,
            min_relevance: 0.4,
        }
    }
}

impl Inject {
    /// The first setting outside its limits: its key and why.
    pub fn check(&self) -> Result<(), (&'static str, &'static str)> {
        let most = *bounds::TOKEN_BUDGET.end();
        if self.session_start_tokens > most {
            return Err((
                "inject.session_start_tokens",
                "must be between 0 and 128000",
            ));
        }
        if self.prompt_tokens > most {
            return Err(("inject.prompt_tokens", "must be between 0 and 128000"));
        }
        if !(0.0..=1.0).contains(&self.min_relevance) {
            return Err(("inject.min_relevance", "must be between 0 and 1"));
        }
        Ok(())
    }
}
