//! The capture mode: what writes memories. With an `llm` configured, the
//! classifier reads every turn and compaction the hooks hand in; without
//! one, the agent's own model decides, through the `remember` tool and
//! `remember:` prompts, and turns and compactions are not classified.
//! `/stats`, `/triggers` and the capture page say which.

use serde::Serialize;
use utoipa::ToSchema;

/// What writes memories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMode {
    /// An `llm` is configured: the classifier writes memories from every
    /// turn and compaction, and the agent may write its own.
    Classifier,
    /// No `llm`: the agent writes memories (the MCP `remember` tool,
    /// `remember:` prompts, `POST /memories`); turns and compactions are
    /// refused with `409` and never classified.
    Agent,
}

impl CaptureMode {
    /// The mode of a service that has a classifier model or not.
    pub fn with_classifier(classifier: bool) -> Self {
        if classifier {
            Self::Classifier
        } else {
            Self::Agent
        }
    }

    /// One sentence on what captures in this mode and what does not.
    pub fn summary(self) -> &'static str {
        match self {
            Self::Classifier => {
                "The classifier model reads every turn and compaction the agent's hooks \
                 hand in and writes the durable facts it finds; the agent can also write \
                 memories itself (the remember tool, remember: prompts, POST /memories)."
            }
            Self::Agent => {
                "No classifier model is configured (llm), so the agent writes memories \
                 itself: the remember tool, remember: prompts and POST /memories capture; \
                 turns and compactions are not classified (POST /turns and /compactions \
                 answer 409)."
            }
        }
    }
}
