//! Consolidation with a model (the scripted fake): a group of
//! near-duplicates becomes one new version in the model's words that
//! supersedes its members, and is taken back by an undo; a contradiction
//! is settled for the newer fact when the model is sure, else flagged;
//! every call is metered against the capture budget, past which the pass
//! keeps the best-supported member; a version that looks like a secret is
//! never written.

use axum::http::StatusCode;
use engram_fake_upstream::Behaviour;
use serde_json::{Value, json};

use super::{consolidate, duplicates, import, line, line_lengths, listed, sorted};
use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id};

over_both_backends!(
    a_group_becomes_one_new_version_in_the_models_words_and_an_undo_takes_it_back,
    a_contradiction_is_settled_for_the_newer_fact_when_the_model_is_sure_else_flagged,
    past_the_capture_budget_the_best_supported_member_is_kept,
    a_version_that_looks_like_a_secret_is_never_written,
);

const MERGED: &str = "This repo installs its packages with pnpm; npm is not used.";

async fn app_with_model(backend: &Backend, budget: u64) -> TestApp {
    backend
        .builder()
        .llm()
        .config(move |config| config.capture.daily_token_budget = budget)
        .spawn()
        .await
}

/// Today's `consolidation` row of `/stats`, if any.
async fn metered(app: &TestApp) -> Option<Value> {
    let stats = app.get("/stats").await.json;
    stats["models"]["today"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["kind"] == "consolidation")
        .cloned()
}

async fn a_group_becomes_one_new_version_in_the_models_words_and_an_undo_takes_it_back(
    backend: Backend,
) {
    let app = app_with_model(&backend, 0).await;
    app.upstream
        .set_chat(Behaviour::Answer, &json!({"content": MERGED}).to_string());
    let [newest, busy, kept, other] = duplicates();
    import(
        &app,
        &[newest.clone(), busy.clone(), kept.clone(), other.clone()],
    )
    .await;
    let members =
        [&newest, &busy, &kept].map(|memory| memory["content"].as_str().unwrap().to_owned());
    let (newest, busy, kept, other) = (id(&newest), id(&busy), id(&kept), id(&other));

    let answer = consolidate(&app).await;
    let pass = &answer["passes"][0];
    assert_eq!(pass["model"], "gpt-4o-mini", "{answer}");
    let change = &pass["changes"][0];
    assert_eq!(change["action"], "rewritten", "{answer}");
    let written = change["kept"].as_str().unwrap().to_owned();
    assert_eq!(
        sorted(serde_json::from_value(change["superseded"].clone()).unwrap()),
        sorted(vec![newest.clone(), busy.clone(), kept.clone()])
    );

    let version = app.get(&format!("/memories/{written}")).await.json;
    assert_eq!(
        version["content"], MERGED,
        "in the model's words: {version}"
    );
    assert_eq!(
        version["supersedes"],
        kept.as_str(),
        "a new version of the one kept"
    );
    assert_eq!(version["version"], 2);
    assert_eq!(version["confidence"], "provisional", "a model wrote it");
    assert_eq!(listed(&app).await, sorted(vec![written.clone(), other]));
    for member in [&newest, &busy] {
        let read = app.get(&format!("/memories/{member}")).await.json;
        assert_eq!(read["superseded_by"], written.as_str(), "{read}");
    }

    let asked = app.upstream.chat_requests();
    assert_eq!(asked.len(), 1, "one call for the group");
    let prompt = asked[0][1]["content"].as_str().unwrap();
    for content in &members {
        assert!(prompt.contains(content.as_str()), "{prompt}");
    }
    let row = metered(&app).await.expect("the call is metered");
    assert_eq!(row["calls"], 1, "{row}");
    assert!(row["prompt_tokens"].as_u64().unwrap() > 0, "{row}");

    let pass_id = pass["id"].as_str().unwrap();
    let undone = app
        .post(&format!("/consolidations/{pass_id}/undo"), &json!({}))
        .await;
    assert_eq!(undone.status, StatusCode::OK, "{}", undone.text);
    assert_eq!(undone.json["taken_back"], json!([written]));
    app.get(&format!("/memories/{written}"))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);
    assert_eq!(listed(&app).await.len(), 4, "every member current again");
    let again = consolidate(&app).await;
    assert_eq!(again["passes"], json!([]), "an undo stands: {again}");
}

async fn a_contradiction_is_settled_for_the_newer_fact_when_the_model_is_sure_else_flagged(
    backend: Backend,
) {
    let app = app_with_model(&backend, 0).await;
    let [older, newer] = line_lengths();
    import(&app, &[older.clone(), newer.clone()]).await;
    let (older, newer) = (id(&older), id(&newer));

    app.upstream.set_chat(
        Behaviour::Answer,
        &json!({"contradict": true, "sure": false, "why": "either may be meant"}).to_string(),
    );
    let unsure = consolidate(&app).await;
    let change = &unsure["passes"][0]["changes"][0];
    assert_eq!(change["action"], "flagged", "{unsure}");
    assert!(
        change["reason"].as_str().unwrap().contains("not sure"),
        "{change}"
    );
    let pass_id = unsure["passes"][0]["id"].as_str().unwrap();
    let undone = app
        .post(&format!("/consolidations/{pass_id}/undo"), &json!({}))
        .await;
    assert_eq!(undone.status, StatusCode::OK, "{}", undone.text);

    // Flagged once, the pair is not asked about again; another pair is.
    let older_too = line("Staging is deployed every night at 2 a.m.", 20, &json!({}));
    let newer_too = line("Staging is deployed every night at 4 a.m.", 2, &json!({}));
    import(&app, &[older_too.clone(), newer_too.clone()]).await;
    let (older_too, newer_too) = (id(&older_too), id(&newer_too));
    app.upstream.set_chat(
        Behaviour::Answer,
        &json!({"contradict": true, "sure": true, "why": "the deploy moved"}).to_string(),
    );
    let sure = consolidate(&app).await;
    let settled: Vec<&Value> = sure["passes"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|change| change["action"] == "settled")
        .collect();
    assert!(!settled.is_empty(), "{sure}");
    for change in &settled {
        let kept = change["kept"].as_str().unwrap();
        assert!(
            kept == newer_too || kept == newer,
            "the newer is kept: {change}"
        );
    }
    let read = app.get(&format!("/memories/{older_too}")).await.json;
    assert_eq!(read["superseded_by"], newer_too.as_str(), "{read}");
    let read = app.get(&format!("/memories/{older}")).await.json;
    assert!(
        read.get("superseded_by").is_none(),
        "a pair flagged once is left be: {read}"
    );
}

async fn past_the_capture_budget_the_best_supported_member_is_kept(backend: Backend) {
    let app = app_with_model(&backend, 1).await;
    app.upstream.set_chat(
        Behaviour::Answer,
        &json!({"contradict": true, "sure": true, "why": "replaced"}).to_string(),
    );
    let [older, newer] = line_lengths();
    import(&app, &[older, newer]).await;
    consolidate(&app).await;
    assert_eq!(app.upstream.chat_requests().len(), 1);
    assert!(
        metered(&app).await.is_some(),
        "the call that spends it is counted"
    );

    let [newest, busy, kept, _] = duplicates();
    import(&app, &[newest, busy, kept.clone()]).await;
    let answer = consolidate(&app).await;
    let change = &answer["passes"][0]["changes"][0];
    assert_eq!(change["action"], "merged", "{answer}");
    assert_eq!(change["kept"], id(&kept).as_str());
    assert!(
        change["reason"]
            .as_str()
            .unwrap()
            .contains("budget is spent"),
        "{change}"
    );
    assert_eq!(
        app.upstream.chat_requests().len(),
        1,
        "no call past the budget"
    );
}

async fn a_version_that_looks_like_a_secret_is_never_written(backend: Backend) {
    let app = app_with_model(&backend, 0).await;
    let secret = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5";
    app.upstream.set_chat(
        Behaviour::Answer,
        &json!({"content": format!("Install packages with pnpm using the token {secret}.")})
            .to_string(),
    );
    let [newest, busy, kept, _] = duplicates();
    import(&app, &[newest, busy, kept.clone()]).await;
    let answer = consolidate(&app).await;
    let change = &answer["passes"][0]["changes"][0];
    assert_eq!(change["action"], "merged", "{answer}");
    assert_eq!(change["kept"], id(&kept).as_str());
    assert!(!answer.to_string().contains(secret), "{answer}");
    assert!(backend.holding(&app.data_dir, secret).await.is_empty());
}
