//! What a person decides about a memory's standing in the memory browser:
//! on a memory's page, and in the review list, where every memory that
//! waits for a decision (under review, its code gone, provisional,
//! archived) is settled in place.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Served, end, session};

/// A memory's page shows its standing and settles it: a provisional one
/// is confirmed, one under review is kept, each without a new version.
#[tokio::test]
async fn a_memorys_standing_is_shown_and_settled_on_its_page() {
    let (browser, served) = session!();
    let memory_id = uuid::Uuid::now_v7().to_string();
    let written = chrono::Utc::now().to_rfc3339();
    let exported = json!({
        "id": memory_id, "version": 1, "scope": "repo", "repo": "forge", "category": "patterns",
        "created_at": written, "updated_at": written,
        "trigger": "turn", "content": "Retries back off exponentially.",
        "anchors": [{"path": "src/net/retry.rs", "symbol": "backoff"}],
        "validity": "changed", "confidence": "provisional", "needs_review": true,
        "review_reason": "memory 42 it refines was superseded",
    });
    let (status, answer) = served
        .call(
            Method::POST,
            "/memories/import",
            Some(&json!({"memories": [exported]})),
            None,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    browser
        .open(&served.memory_page(&json!({"id": memory_id})))
        .await;
    browser
        .wait_for(
            "the standing",
            "return document.querySelector('#standing-provisional') !== null",
        )
        .await;
    let shown = browser.texts(".standing p").await.join("\n");
    assert!(shown.contains("changed since it was written"), "{shown}");
    assert!(
        shown.contains("memory 42 it refines was superseded"),
        "{shown}"
    );
    assert!(
        browser
            .texts(".front-matter dd")
            .await
            .iter()
            .any(|dd| dd.contains("src/net/retry.rs"))
    );

    browser.click("#confirm-button").await;
    browser
        .wait_for("confirmed", "return document.querySelector('#standing-provisional') === null && document.querySelector('#keep-button') !== null")
        .await;
    browser.click("#keep-button").await;
    browser
        .wait_for("kept", "return document.querySelector('main:not([aria-busy]) .memory') !== null && document.querySelector('#standing-review') === null")
        .await;
    let (_, read) = served
        .call(Method::GET, &format!("/memories/{memory_id}"), None, None)
        .await;
    assert_eq!(
        (&read["confidence"], &read["needs_review"], &read["version"]),
        (&json!("confirmed"), &json!(false), &json!(1)),
        "{read}"
    );
    end(browser, served).await;
}

/// Imports memories of `forge` written now, each with `fields` of its
/// own; their ids.
async fn imported<const N: usize>(served: &Served, fields: [Value; N]) -> [String; N] {
    let written = chrono::Utc::now().to_rfc3339();
    let lines = fields.map(|fields| {
        let mut line = json!({
            "id": uuid::Uuid::now_v7().to_string(), "version": 1, "scope": "repo",
            "repo": "forge", "category": "patterns", "created_at": written,
            "updated_at": written, "trigger": "turn",
        });
        for (key, value) in fields.as_object().unwrap() {
            line[key] = value.clone();
        }
        line
    });
    let (status, answer) = served
        .call(
            Method::POST,
            "/memories/import",
            Some(&json!({"memories": lines.to_vec()})),
            None,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    lines.map(|line| line["id"].as_str().unwrap().to_owned())
}

/// The review list shows each kind of memory waiting for a decision and
/// settles each in place: keep, confirm, restore, forget (after the
/// person confirms); what it settles leaves the list.
#[tokio::test]
async fn the_review_list_settles_every_memory_waiting_for_a_decision() {
    let (browser, served) = session!();
    let [review, gone, provisional, archived, settled] = imported(
        &served,
        [
            json!({"content": "Retries back off exponentially.", "needs_review": true,
                   "review_reason": "memory 42 it refines was superseded"}),
            json!({"content": "The retry loop lives in src/net/retry.rs.", "validity": "gone",
                   "checked_at": chrono::Utc::now().to_rfc3339()}),
            json!({"content": "Forge formats Go with gofumpt.", "confidence": "provisional"}),
            json!({"content": "The old CI ran on Jenkins.", "archived": true}),
            json!({"content": "Releases go out on Tuesdays."}),
        ],
    )
    .await;
    browser.open(&served.ui("#/review")).await;
    browser
        .wait_for(
            "the review list",
            "return document.querySelector('#review-archived') !== null",
        )
        .await;
    let listed = browser
        .eval("return [...document.querySelectorAll('.review [data-id]')].map((row) => row.dataset.id)")
        .await;
    assert_eq!(
        listed,
        json!([review, gone, provisional, archived]),
        "each kind in its section; nothing settled is listed"
    );
    assert!(!listed.to_string().contains(&settled));
    let notes = browser.texts(".review-note").await.join("\n");
    assert!(
        notes.contains("memory 42 it refines was superseded"),
        "{notes}"
    );

    let settle = async |section: &str, act: &str| {
        browser
            .click(&format!("#review-{section} .actions button:{act}"))
            .await;
        browser
            .wait_for(
                &format!("{section} settled"),
                &format!("return document.querySelector('main:not([aria-busy]) .review') !== null && document.querySelector('#review-{section}') === null"),
            )
            .await;
    };
    settle("review", "first-child").await;
    settle("provisional", "first-child").await;
    settle("archived", "first-child").await;
    browser.click("#review-gone .actions button").await;
    browser
        .wait_for(
            "the confirmation",
            "return document.querySelector('#confirm-dialog').open",
        )
        .await;
    browser.click("#confirm-yes").await;
    browser
        .wait_for(
            "forgotten",
            "return document.querySelector('main:not([aria-busy]) .review') !== null && document.querySelector('#review-gone') === null",
        )
        .await;
    assert_eq!(
        browser.texts(".review > p").await,
        ["Nothing waits for a decision."]
    );

    let read = async |id: &str| {
        served
            .call(Method::GET, &format!("/memories/{id}"), None, None)
            .await
    };
    let (_, kept) = read(&review).await;
    assert_eq!(kept["needs_review"], false, "{kept}");
    let (_, confirmed) = read(&provisional).await;
    assert_eq!(confirmed["confidence"], "confirmed", "{confirmed}");
    let (_, restored) = read(&archived).await;
    assert_eq!(restored["archived"], false, "{restored}");
    let (status, _) = read(&gone).await;
    assert_eq!(status, 404, "forgotten");
    end(browser, served).await;
}
