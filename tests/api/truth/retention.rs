//! Letting go: a memory left provisional past `retention.provisional_days`,
//! or with no sign of life (written, retrieved, confirmed, found
//! `current`) past `retention.unused_days`, is archived by the pass that
//! runs once start-up is done, never deleted; a restore brings it back
//! for good. (A retrieval's mark, `used_at`, is tested with the access
//! counts in `pipeline`.) The tests' configuration turns retention off;
//! these turn it on with its defaults.

use serde_json::json;

use super::{days_ago, exported, import};
use engram::config::RetentionConfig;
use engram::store::COUNTING_SINCE_FILE;

use crate::backends::{Backend, over_both_backends};
use crate::helpers::{Builder, Ground, TestApp, id, ids, wait_until_async};

/// The ids `GET /memories?repo=forge` lists, archived ones or the others.
async fn listed(app: &TestApp, archived: bool) -> Vec<String> {
    let mut listed = ids(&app
        .get(&format!("/memories?repo=forge&archived={archived}"))
        .await
        .json);
    listed.sort();
    listed
}

fn sorted(ids: &[&String]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(|id| (*id).clone()).collect();
    ids.sort();
    ids
}

/// An app over `backend` with retention's defaults.
fn with_retention(backend: &Backend) -> Builder<'_> {
    backend
        .builder()
        .config(|config| config.retention = RetentionConfig::default())
}

/// Restarts `app` on its data and waits until retention archived `due`.
async fn restarted_once_archived(backend: &Backend, app: TestApp, due: &[&String]) -> TestApp {
    let app = with_retention(backend).on(app.into_ground()).spawn().await;
    let due = sorted(due);
    wait_until_async("retention's pass at start", async || {
        let archived = listed(&app, true).await;
        due.iter().all(|id| archived.contains(id))
    })
    .await;
    app
}

async fn memories_left_unconfirmed_or_unused_too_long_are_archived_until_restored(
    backend: Backend,
) {
    // A store that has counted uses for long enough to let go of what
    // nobody used.
    let ground = Ground::new().await;
    std::fs::write(ground.path().join(COUNTING_SINCE_FILE), days_ago(1000)).unwrap();
    let app = with_retention(&backend).on(ground).spawn().await;
    let old = days_ago(200);
    let lines = [
        exported(
            "Builds use the nightly toolchain.",
            &json!({"confidence": "provisional", "created_at": days_ago(20), "updated_at": days_ago(20)}),
        ),
        exported(
            "Builds pin the toolchain in rust-toolchain.toml.",
            &json!({"confidence": "provisional", "created_at": days_ago(3), "updated_at": days_ago(3)}),
        ),
        exported(
            "The staging cluster is called pluto.",
            &json!({"created_at": old, "updated_at": old}),
        ),
        exported(
            "The release notes live in CHANGES.md.",
            &json!({"created_at": old, "updated_at": old, "used_at": days_ago(10)}),
        ),
        exported(
            "Database pools are built in src/db/pool.rs.",
            &json!({"created_at": old, "updated_at": old, "validity": "current",
                    "checked_at": days_ago(5)}),
        ),
        exported(
            "The cache layer lives in src/cache.rs.",
            &json!({"created_at": old, "updated_at": old, "validity": "changed",
                    "checked_at": days_ago(5)}),
        ),
    ];
    import(&app, &lines).await;
    let [
        unconfirmed,
        fresh,
        unused,
        used,
        found_current,
        found_changed,
    ] = lines.map(|line| id(&line));
    assert_eq!(listed(&app, true).await, Vec::<String>::new());

    let app =
        restarted_once_archived(&backend, app, &[&unconfirmed, &unused, &found_changed]).await;
    assert_eq!(
        listed(&app, true).await,
        sorted(&[&unconfirmed, &unused, &found_changed]),
        "provisional past 14 days, or no sign of life for 180 (a check that found the code changed is none)"
    );
    assert_eq!(
        listed(&app, false).await,
        sorted(&[&fresh, &used, &found_current]),
        "written, used or found current lately"
    );

    let restored = app
        .post(&format!("/memories/{unconfirmed}/restore"), &json!({}))
        .await
        .json;
    assert_eq!(restored["archived"], false, "{restored}");
    assert_eq!(
        restored["confidence"], "confirmed",
        "a person brought it back: {restored}"
    );
    assert!(restored["used_at"].is_string(), "{restored}");
    assert_eq!(restored["version"], 1, "no new version");

    let later = exported(
        "The old deploy script was deploy.sh.",
        &json!({"created_at": old, "updated_at": old}),
    );
    import(&app, std::slice::from_ref(&later)).await;
    let later = id(&later);
    let app = restarted_once_archived(&backend, app, &[&later]).await;
    let read = app.get(&format!("/memories/{unconfirmed}")).await.json;
    assert_eq!(
        read["archived"], false,
        "the pass that let `later` go kept the restored one: {read}"
    );
}

/// A store that began before uses were counted (its first start counts
/// them from now) is not let go for the uses nobody wrote down; the
/// unconfirmed are let go as ever.
async fn a_store_older_than_the_counting_of_uses_is_not_let_go_for_disuse(backend: Backend) {
    let app = with_retention(&backend).spawn().await;
    let old = days_ago(400);
    let lines = [
        exported(
            "Builds use the nightly toolchain.",
            &json!({"confidence": "provisional", "created_at": days_ago(20), "updated_at": days_ago(20)}),
        ),
        exported(
            "The staging cluster is called pluto.",
            &json!({"created_at": old, "updated_at": old}),
        ),
    ];
    import(&app, &lines).await;
    let [unconfirmed, unused] = lines.map(|line| id(&line));
    let app = restarted_once_archived(&backend, app, &[&unconfirmed]).await;
    assert_eq!(
        listed(&app, false).await,
        [unused],
        "uses before the counting began are unknown, not absent"
    );
}

over_both_backends!(
    memories_left_unconfirmed_or_unused_too_long_are_archived_until_restored,
    a_store_older_than_the_counting_of_uses_is_not_let_go_for_disuse,
);
