//! Confidence through capture: what the classifier writes is
//! provisional, and the same fact captured again in another session
//! confirms it (the same session saying it twice does not).

use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::capture::app_over;
use crate::helpers::settled;
use crate::upstream::Behaviour;

const ONE_MEMORY: &str = r#"{"memories": [{"content": "forge formats Go with gofumpt.", "scope": "repo", "category": "project-conventions"}]}"#;

fn turn(session: &str, said: &str) -> Value {
    json!({"session_id": session, "repo": "forge", "user": "ana", "messages": [
        {"role": "user", "content": said},
        {"role": "assistant", "content": "Noted."},
    ]})
}

async fn a_fact_captured_again_in_another_session_is_confirmed(backend: Backend) {
    let app = app_over(&backend, |_| {}).await;
    app.upstream.set_chat(Behaviour::Answer, ONE_MEMORY);
    let confidence = async |app: &crate::helpers::TestApp| {
        let listed = app.get("/memories?repo=forge").await.json;
        assert_eq!(listed["memories"].as_array().unwrap().len(), 1, "{listed}");
        listed["memories"][0]["confidence"].clone()
    };

    app.accept("/turns", &turn("s1", "We format Go with gofumpt."))
        .await;
    settled(&app, 1).await;
    assert_eq!(confidence(&app).await, "provisional");

    app.accept("/turns", &turn("s1", "Remember: gofumpt for Go."))
        .await;
    settled(&app, 2).await;
    assert_eq!(
        confidence(&app).await,
        "provisional",
        "the same session again"
    );

    app.accept("/turns", &turn("s2", "Format Go code with gofumpt here."))
        .await;
    let stats = settled(&app, 3).await;
    assert_eq!(stats["capture"]["skipped_duplicate"], 2, "{stats}");
    assert_eq!(
        confidence(&app).await,
        "confirmed",
        "another session found it too"
    );
}

over_both_backends!(a_fact_captured_again_in_another_session_is_confirmed,);
