//! Consolidation: a pass reduces near-duplicates to their best-supported
//! member (the others superseded by it, nothing deleted) and flags two
//! memories that disagree; every change is listed with its reason,
//! survives a restart and can be undone, and a person's undo stands.
//! With a model: `model`.

mod model;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::exported;
use crate::backends::{Backend, over_both_backends};
use crate::helpers::{TestApp, id, ids, wait_until_async};

over_both_backends!(
    near_duplicates_are_reduced_to_the_best_supported_member_and_nothing_is_deleted,
    two_memories_that_disagree_are_flagged_each_naming_the_other_once,
    every_change_is_listed_kept_across_a_restart_and_undone_for_good,
    a_pass_of_another_namespace_is_out_of_reach,
);

/// An export's line of a memory of repo `forge`, `minutes` old, with
/// `extra` fields (lifecycle, use count) set on it.
fn line(content: &str, minutes: i64, extra: &Value) -> Value {
    let at = (chrono::Utc::now() - chrono::TimeDelta::minutes(minutes)).to_rfc3339();
    let mut line = exported(content, extra);
    line["created_at"] = json!(at);
    line["updated_at"] = json!(at);
    line
}

/// Brings `lines` in and waits until they are indexed (a pass weighs
/// only memories with a vector).
async fn import(app: &TestApp, lines: &[Value]) {
    super::import(app, lines).await;
    app.wait_indexed().await;
}

async fn consolidate(app: &TestApp) -> Value {
    let response = app.post("/consolidate", &json!({"repo": "forge"})).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    response.json
}

async fn listed(app: &TestApp) -> Vec<String> {
    sorted(ids(&app.get("/memories?repo=forge").await.json))
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

/// Two memories on one subject that disagree: the older says 100, the
/// newer 88.
fn line_lengths() -> [Value; 2] {
    [
        line(
            "Format Python code with black at line length 100.",
            10,
            &json!({}),
        ),
        line(
            "Format Python code with black at line length 88.",
            5,
            &json!({}),
        ),
    ]
}

/// Three ways of saying one convention, and one that says another.
fn duplicates() -> [Value; 4] {
    [
        // Confirmed, used once, the newest.
        line(
            "Use pnpm, not npm, to install packages in this repo.",
            1,
            &json!({"access_count": 1}),
        ),
        // Used the most, but provisional.
        line(
            "Packages in this repo are installed with pnpm, not npm.",
            30,
            &json!({"confidence": "provisional", "access_count": 9}),
        ),
        // Confirmed and used more than the newest: the one kept.
        line(
            "This repo installs its packages with pnpm rather than npm.",
            60,
            &json!({"access_count": 5}),
        ),
        line("Database migrations live in db/migrations.", 90, &json!({})),
    ]
}

async fn near_duplicates_are_reduced_to_the_best_supported_member_and_nothing_is_deleted(
    backend: Backend,
) {
    let app = backend.spawn_app().await;
    let [newest, busy, kept, other] = duplicates();
    import(
        &app,
        &[newest.clone(), busy.clone(), kept.clone(), other.clone()],
    )
    .await;
    let (newest, busy, kept, other) = (id(&newest), id(&busy), id(&kept), id(&other));

    let answer = consolidate(&app).await;
    assert_eq!(answer["scanned"][0]["memories"], 4, "{answer}");
    let changes = &answer["passes"][0]["changes"];
    assert_eq!(changes.as_array().unwrap().len(), 1, "{answer}");
    let change = &changes[0];
    assert_eq!(change["action"], "merged");
    assert_eq!(
        change["kept"],
        kept.as_str(),
        "confirmed, then the most used"
    );
    assert_eq!(
        sorted(serde_json::from_value(change["superseded"].clone()).unwrap()),
        sorted(vec![newest.clone(), busy.clone()])
    );
    let reason = change["reason"].as_str().unwrap();
    assert!(
        reason.contains(&kept) && reason.contains("retrieved 5 times"),
        "{reason}"
    );

    assert_eq!(listed(&app).await, sorted(vec![kept.clone(), other]));
    for superseded in [&newest, &busy] {
        let read = app.get(&format!("/memories/{superseded}")).await;
        assert_eq!(read.status, StatusCode::OK, "nothing is deleted");
        assert_eq!(read.json["superseded_by"], kept.as_str(), "{}", read.text);
        assert_eq!(read.json["version"], 1, "no new version");
        let chain: Vec<String> = read.json["chain"]
            .as_array()
            .unwrap()
            .iter()
            .map(id)
            .collect();
        assert_eq!(
            chain,
            [superseded.clone(), kept.clone()],
            "the chain leads to it"
        );
        assert!(
            backend
                .holds(&app.data_dir, "repos/forge", superseded)
                .await
        );
    }
    let found = app
        .retrieve(json!({"turn_id": "t-1", "repo": "forge", "query": "which package manager does this repo use"}))
        .await;
    let found = ids(&found);
    assert!(found.contains(&kept), "{found:?}");
    assert!(
        !found.contains(&newest) && !found.contains(&busy),
        "never injected: {found:?}"
    );

    let again = consolidate(&app).await;
    assert_eq!(
        again["passes"],
        json!([]),
        "nothing left to change: {again}"
    );

    // It travels with an export and an import.
    let exported = app.get("/memories?repo=forge&all_versions=true").await.json;
    let elsewhere = backend.another().await.spawn_app().await;
    import(&elsewhere, exported["memories"].as_array().unwrap()).await;
    assert_eq!(listed(&elsewhere).await, listed(&app).await);
    let read = elsewhere.get(&format!("/memories/{busy}")).await.json;
    assert_eq!(read["superseded_by"], kept.as_str(), "{read}");
}

async fn two_memories_that_disagree_are_flagged_each_naming_the_other_once(backend: Backend) {
    let app = backend.spawn_app().await;
    let [longer, shorter] = line_lengths();
    let agreeing = line("Python imports are sorted with isort.", 1, &json!({}));
    import(&app, &[longer.clone(), shorter.clone(), agreeing.clone()]).await;
    let (longer, shorter, agreeing) = (id(&longer), id(&shorter), id(&agreeing));

    let answer = consolidate(&app).await;
    let changes = answer["passes"][0]["changes"].as_array().unwrap().clone();
    assert_eq!(changes.len(), 1, "{answer}");
    assert_eq!(changes[0]["action"], "flagged");
    assert_eq!(
        sorted(serde_json::from_value(changes[0]["flagged"].clone()).unwrap()),
        sorted(vec![longer.clone(), shorter.clone()])
    );
    for (flagged, other, other_says) in [(&longer, &shorter, "88"), (&shorter, &longer, "100")] {
        let read = app.get(&format!("/memories/{flagged}")).await.json;
        assert_eq!(read["needs_review"], true, "{read}");
        assert!(read.get("superseded_by").is_none(), "not merged: {read}");
        let reason = read["review_reason"].as_str().unwrap();
        assert!(
            reason.contains(other.as_str()) && reason.contains(other_says),
            "{reason}"
        );
    }
    let read = app.get(&format!("/memories/{agreeing}")).await.json;
    assert_eq!(read["needs_review"], false, "{read}");

    // A person keeps one; the next pass does not flag the pair again.
    let kept = app
        .post(
            &format!("/memories/{longer}/review"),
            &json!({"action": "keep"}),
        )
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.text);
    let again = consolidate(&app).await;
    assert_eq!(again["passes"], json!([]), "{again}");
    let read = app.get(&format!("/memories/{longer}")).await.json;
    assert_eq!(read["needs_review"], false, "{read}");
}

async fn every_change_is_listed_kept_across_a_restart_and_undone_for_good(backend: Backend) {
    let app = backend.spawn_app().await;
    let [newest, busy, kept, _] = duplicates();
    let [longer, shorter] = line_lengths();
    import(
        &app,
        &[
            newest.clone(),
            busy.clone(),
            kept.clone(),
            longer.clone(),
            shorter.clone(),
        ],
    )
    .await;
    let (newest, busy, kept) = (id(&newest), id(&busy), id(&kept));
    let (longer, shorter) = (id(&longer), id(&shorter));
    let pass = consolidate(&app).await["passes"][0].clone();
    let pass_id = pass["id"].as_str().unwrap().to_owned();
    assert_eq!(pass["changes"].as_array().unwrap().len(), 2, "{pass}");

    let ground = app.into_ground();
    let app = backend.builder().on(ground).spawn().await;
    let listing = app.get("/consolidations?repo=forge").await;
    assert_eq!(listing.status, StatusCode::OK, "{}", listing.text);
    assert_eq!(
        listing.json["passes"],
        json!([pass]),
        "kept whole across a restart"
    );
    if matches!(backend, Backend::Files) {
        assert!(
            app.files()
                .iter()
                .any(|file| file == &format!("consolidations/repos/forge/{pass_id}.json")),
            "{:?}",
            app.files()
        );
    }
    assert_eq!(
        listed(&app).await.len(),
        3,
        "the merge holds across a restart"
    );

    // The flag on `longer` is reviewed by a person before the undo: left.
    app.post(
        &format!("/memories/{longer}/review"),
        &json!({"action": "keep"}),
    )
    .await;
    let undone = app
        .post(&format!("/consolidations/{pass_id}/undo"), &json!({}))
        .await;
    assert_eq!(undone.status, StatusCode::OK, "{}", undone.text);
    assert_eq!(
        sorted(serde_json::from_value(undone.json["restored"].clone()).unwrap()),
        sorted(vec![newest.clone(), busy.clone(), shorter.clone()])
    );
    assert_eq!(undone.json["left"], json!([longer]));
    assert!(
        undone.json["pass"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|change| change["undone_at"].is_string()),
        "{}",
        undone.text
    );
    assert_eq!(
        listed(&app).await,
        sorted(vec![
            newest.clone(),
            busy.clone(),
            kept.clone(),
            longer.clone(),
            shorter.clone()
        ]),
        "current again"
    );
    for memory in [&newest, &busy] {
        let read = app.get(&format!("/memories/{memory}")).await.json;
        assert!(read.get("superseded_by").is_none(), "{read}");
    }
    let read = app.get(&format!("/memories/{shorter}")).await.json;
    assert_eq!(
        read["needs_review"], false,
        "its flag is taken back: {read}"
    );

    app.post(&format!("/consolidations/{pass_id}/undo"), &json!({}))
        .await
        .assert_problem(StatusCode::CONFLICT, Some("id"));
    app.post(
        &format!("/consolidations/{pass_id}/undo"),
        &json!({"changes": [7]}),
    )
    .await
    .assert_problem(StatusCode::UNPROCESSABLE_ENTITY, Some("changes"));
    let unknown = uuid::Uuid::now_v7();
    app.post(&format!("/consolidations/{unknown}/undo"), &json!({}))
        .await
        .assert_problem(StatusCode::NOT_FOUND, None);

    let again = consolidate(&app).await;
    assert_eq!(again["passes"], json!([]), "an undo stands: {again}");
}

async fn a_pass_of_another_namespace_is_out_of_reach(backend: Backend) {
    use engram::config::ApiKey;

    use crate::grants::grant;

    const ROOT: &str = "root-key";
    const LIMITED: &str = "elsewhere-key";
    let app = backend
        .builder()
        .config(|config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![grant(LIMITED, &["elsewhere"], &["ana"])];
        })
        .spawn()
        .await;
    let as_key = async |key: &str, method: axum::http::Method, uri: &str, body: Option<Value>| {
        crate::grants::send(&app, method, uri, body, key).await
    };
    let [newest, busy, kept, _] = duplicates();
    let imported = as_key(
        ROOT,
        axum::http::Method::POST,
        "/memories/import",
        Some(json!({"memories": [newest, busy, kept]})),
    )
    .await;
    assert_eq!(imported.status, StatusCode::OK, "{}", imported.text);
    app.wait_indexed_with(ROOT).await;
    let pass = as_key(
        ROOT,
        axum::http::Method::POST,
        "/consolidate",
        Some(json!({"repo": "forge", "user": "ana"})),
    )
    .await;
    assert_eq!(pass.status, StatusCode::OK, "{}", pass.text);
    let pass_id = pass.json["passes"][0]["id"].as_str().unwrap().to_owned();

    let listing = as_key(LIMITED, axum::http::Method::GET, "/consolidations", None).await;
    assert_eq!(listing.json["passes"], json!([]), "{}", listing.text);
    as_key(
        LIMITED,
        axum::http::Method::GET,
        "/consolidations?repo=forge",
        None,
    )
    .await
    .assert_problem(StatusCode::FORBIDDEN, None);
    as_key(
        LIMITED,
        axum::http::Method::POST,
        &format!("/consolidations/{pass_id}/undo"),
        Some(json!({})),
    )
    .await
    .assert_problem(StatusCode::NOT_FOUND, None);
    as_key(
        LIMITED,
        axum::http::Method::POST,
        "/consolidate",
        Some(json!({"repo": "forge"})),
    )
    .await
    .assert_problem(StatusCode::FORBIDDEN, None);
}

#[tokio::test]
async fn a_pass_on_one_replica_is_the_same_on_another() {
    let Some(backend) = Backend::postgres().await else {
        return;
    };
    let one = backend.spawn_app().await;
    let other = backend.spawn_app().await;
    let [newest, busy, kept, _] = duplicates();
    import(&one, &[newest.clone(), busy.clone(), kept.clone()]).await;
    let (newest, busy, kept) = (id(&newest), id(&busy), id(&kept));
    let pass = consolidate(&one).await["passes"][0].clone();
    let pass_id = pass["id"].as_str().unwrap().to_owned();

    wait_until_async("the other replica takes the pass in", async || {
        listed(&other).await == [kept.clone()]
    })
    .await;
    let listing = other.get("/consolidations?repo=forge").await.json;
    assert_eq!(listing["passes"], json!([pass]));
    let undone = other
        .post(&format!("/consolidations/{pass_id}/undo"), &json!({}))
        .await;
    assert_eq!(undone.status, StatusCode::OK, "{}", undone.text);
    let all = sorted(vec![newest, busy, kept]);
    wait_until_async("the first replica takes the undo in", async || {
        listed(&one).await == all
    })
    .await;
}

#[tokio::test]
async fn passes_run_one_at_a_time_across_replicas_each_on_the_last_ones_changes() {
    let Some(backend) = Backend::postgres().await else {
        return;
    };
    let one = backend.spawn_app().await;
    let other = backend.spawn_app().await;
    let [newest, busy, kept, _] = duplicates();
    import(&one, &[newest, busy, kept]).await;
    wait_until_async("the other replica takes the memories in", async || {
        listed(&other).await.len() == 3
    })
    .await;
    other.wait_indexed().await;

    // Asked at once of both: the second to get its turn weighs what the
    // first made, and finds nothing left to do.
    let (first, second) = tokio::join!(consolidate(&one), consolidate(&other));
    let passes = [&first, &second]
        .iter()
        .map(|answer| answer["passes"].as_array().unwrap().len())
        .sum::<usize>();
    assert_eq!(passes, 1, "{first:#}\n{second:#}");
    let listing = one.get("/consolidations?repo=forge").await.json;
    assert_eq!(
        listing["passes"].as_array().unwrap().len(),
        1,
        "{listing:#}"
    );
    let pass = [&first, &second]
        .into_iter()
        .find_map(|answer| answer["passes"].get(0))
        .unwrap();
    let kept = [pass["changes"][0]["kept"].as_str().unwrap().to_owned()];
    wait_until_async("both replicas list the kept memory alone", async || {
        listed(&one).await == kept && listed(&other).await == kept
    })
    .await;
}

#[tokio::test]
async fn the_scheduled_pass_is_claimed_by_one_replica_per_interval() {
    let Some(Backend::Postgres(database)) = Backend::postgres().await else {
        return;
    };
    let settings = engram::config::PostgresConfig {
        url: Some(engram::config::DatabaseUrl::new(&database.url)),
        ..engram::config::PostgresConfig::default()
    };
    let one = engram::store::postgres::Database::open(&settings)
        .await
        .unwrap();
    let other = engram::store::postgres::Database::open(&settings)
        .await
        .unwrap();
    let day = std::time::Duration::from_secs(24 * 60 * 60);

    let (first, second) = tokio::join!(
        one.claim_scheduled("consolidation", day),
        other.claim_scheduled("consolidation", day)
    );
    let claims = [first.unwrap(), second.unwrap()];
    assert_eq!(
        claims.iter().filter(|claimed| **claimed).count(),
        1,
        "{claims:?}"
    );
    assert!(!one.claim_scheduled("consolidation", day).await.unwrap());
    // Another pass's turn is its own; a past interval is claimed again.
    assert!(other.claim_scheduled("retention", day).await.unwrap());
    assert!(
        one.claim_scheduled("consolidation", std::time::Duration::ZERO)
            .await
            .unwrap()
    );
}
