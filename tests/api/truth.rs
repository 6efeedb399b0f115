//! Memory that stays true: anchors to the code, checks against a working
//! tree, and the lifecycle (validity, confidence, review, archive).

mod anchors;
pub mod check;
mod confidence;
mod consolidate;
mod lifecycle;
mod links;
mod retention;
mod session_check;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::TestApp;

/// An export's line of a memory in `forge`, written a day ago (well
/// inside every retention limit), with `fields` set on it (its
/// lifecycle, other times).
fn exported(content: &str, fields: &Value) -> Value {
    let written = days_ago(1);
    let mut line = json!({
        "id": uuid::Uuid::now_v7().to_string(), "version": 1, "scope": "repo", "repo": "forge",
        "category": "project-conventions", "created_at": written, "updated_at": written,
        "related": [], "trigger": "turn", "content": content,
    });
    for (key, value) in fields.as_object().unwrap() {
        line[key] = value.clone();
    }
    line
}

/// Brings `lines` in through `POST /memories/import`.
async fn import(app: &TestApp, lines: &[Value]) {
    let response = app
        .post("/memories/import", &json!({"memories": lines}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
}

/// The moment `days` days ago, as RFC 3339.
fn days_ago(days: i64) -> String {
    (chrono::Utc::now() - chrono::TimeDelta::days(days)).to_rfc3339()
}
