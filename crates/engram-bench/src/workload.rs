//! What every workload shares: how a run fails, and which embedder the
//! service under test runs with.

use clap::ValueEnum;

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
