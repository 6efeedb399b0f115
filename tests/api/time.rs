//! Time: when a memory's fact was said or became true (`observed_at`),
//! written by hand and by capture, kept in the file and the row; and
//! retrieval as of a moment (`as_of`) and the time a question names
//! (`words`).

mod as_of;
mod observed;
mod words;

use serde_json::Value;

use crate::helpers::{TestApp, memory};

/// A memory of `forge` saying `content`, observed at `observed_at`.
fn observed(content: &str, observed_at: &str) -> Value {
    let mut body = memory("repo", "forge", "architectural-decisions", content);
    body["observed_at"] = observed_at.into();
    body
}

/// Writes `body` as a new version of `previous`.
async fn supersede(app: &TestApp, previous: &Value, mut body: Value) -> Value {
    body["supersedes"] = previous["id"].clone();
    app.create(body).await
}
