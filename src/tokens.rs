//! Token counts as OpenAI's `o200k_base` encoding counts them (tiktoken-rs,
//! whose ranks ship inside the crate, so nothing is downloaded): the
//! injection's budget, the classifier's context window, and the estimate
//! for a server that reports no `usage`. Other models' tokenizers differ
//! by a few percent.

/// The tokens of `text`.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}
