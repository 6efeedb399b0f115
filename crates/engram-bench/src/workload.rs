//! What every workload shares: how a run fails, which embedder the
//! service under test runs with, and how the quality workloads weigh its
//! retrieval.

use clap::ValueEnum;
use engram::config::Config;

/// A workload's result: its error is reported and the bench exits non-zero.
pub type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Which embedder the service under test uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EmbedderChoice {
    /// The fake upstream that answers at once.
    Fake,
    /// The embedded all-MiniLM-L6-v2.
    Local,
}

/// The retrieval weights the quality workloads (LoCoMo, LongMemEval, the
/// semantic set) run the service with; the service's defaults unless set.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct Weighing {
    /// `retrieval.lexical_weight` (0: vector search only).
    #[arg(long, default_value_t = engram::config::Retrieval::default().lexical_weight)]
    pub lexical_weight: f64,
    /// `retrieval.conversation_weight` (0: each memory judged alone).
    #[arg(long, default_value_t = engram::config::Retrieval::default().conversation_weight)]
    pub conversation_weight: f64,
    /// `retrieval.passage_weight` (0: whole texts only).
    #[arg(long, default_value_t = engram::config::Retrieval::default().passage_weight)]
    pub passage_weight: f64,
    /// `retrieval.feedback_weight` (0: one search, no feedback).
    #[arg(long, default_value_t = engram::config::Retrieval::default().feedback_weight)]
    pub feedback_weight: f64,
    /// `retrieval.min_similarity` (0: every cosine counts as found).
    #[arg(long, default_value_t = engram::config::Retrieval::default().min_similarity)]
    pub min_similarity: f64,
}

impl Weighing {
    pub fn apply(self, config: &mut Config) {
        config.retrieval.lexical_weight = self.lexical_weight;
        config.retrieval.conversation_weight = self.conversation_weight;
        config.retrieval.passage_weight = self.passage_weight;
        config.retrieval.feedback_weight = self.feedback_weight;
        config.retrieval.min_similarity = self.min_similarity;
    }

    /// The weights as a report label: `lexical_weight 0.8,
    /// conversation_weight 0.3, passage_weight 0.8, feedback_weight 0.2,
    /// min_similarity 0.1`.
    pub fn label(self) -> String {
        format!(
            "lexical_weight {}, conversation_weight {}, passage_weight {}, feedback_weight {}, min_similarity {}",
            self.lexical_weight,
            self.conversation_weight,
            self.passage_weight,
            self.feedback_weight,
            self.min_similarity
        )
    }
}
