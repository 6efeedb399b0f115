//! What keeps the memory browser safe: untrusted content never runs, the
//! key is asked once per tab and a limited key sees its namespaces only,
//! and a malformed address or long markup breaks nothing.

use reqwest::Method;
use serde_json::{Value, json};

use super::{end, session};
use crate::grants::grant;
use crate::helpers::memory;

#[tokio::test]
async fn untrusted_content_never_runs() {
    let (browser, served) = session!();
    let hostile = served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "<script>window.pwned = 'script'</script>\n\n[click me](javascript:window.pwned='link') and [data](data:text/html,<script>alert(1)</script>) and [ok](https://example.com/)\n\n<img src=x onerror=\"window.pwned='img'\">",
        ))
        .await;
    browser.open(&served.memory_page(&hostile)).await;
    let page = browser
        .eval("return {pwned: window.pwned ?? null, scripts: document.querySelectorAll('main script').length, images: document.querySelectorAll('main img').length, links: [...document.querySelectorAll('.content a')].map((a) => a.href), text: document.querySelector('.content').textContent}")
        .await;
    assert_eq!(page["pwned"], Value::Null, "{page}");
    assert_eq!((&page["scripts"], &page["images"]), (&json!(0), &json!(0)));
    assert_eq!(
        page["links"],
        json!(["https://example.com/"]),
        "only the https link is a link"
    );
    assert!(
        page["text"]
            .as_str()
            .unwrap()
            .contains("<script>window.pwned"),
        "shown as text"
    );
    browser.click(".content .unsafe-link").await;
    browser.open(&served.ui("")).await;
    browser.click(".memory-item a").await;
    browser
        .wait_for(
            "the page again",
            "return document.querySelector('main:not([aria-busy]) .content') !== null",
        )
        .await;
    assert_eq!(
        browser.eval("return window.pwned ?? null").await,
        Value::Null
    );
    end(browser, served).await;
}

#[tokio::test]
async fn the_key_is_asked_once_per_tab_and_a_limited_key_sees_its_namespaces_only() {
    let (browser, served) = session!(|config| {
        config.api_key = Some(engram::config::ApiKey::new("root-key"));
        config.auth.keys = vec![grant("forge-key", &["forge"], &["ana"])];
    });
    for (scope, owner, content) in [
        ("repo", "forge", "Forge deploys with Helm."),
        ("repo", "secret", "Secret deploys by hand."),
        ("user", "ana", "Ana lives in Lisbon."),
        ("user", "bob", "Bob lives in Oslo."),
    ] {
        let (status, _) = served
            .call(
                Method::POST,
                "/memories",
                Some(&memory(scope, owner, "patterns", content)),
                Some("root-key"),
            )
            .await;
        assert_eq!(status, 201);
    }
    // Not `open`: the page waits for the key.
    browser.client.goto(&served.ui("")).await.unwrap();
    browser
        .wait_for(
            "the key prompt",
            "return document.getElementById('key-dialog').open",
        )
        .await;
    browser.fill("#key-input", "forge-key").await;
    browser.click("#key-form button[type=submit]").await;
    browser
        .wait_for(
            "the list",
            "return document.querySelectorAll('main:not([aria-busy]) .memory-item').length > 0",
        )
        .await;
    assert_eq!(
        browser.texts(".memory-item p a").await,
        ["Ana lives in Lisbon.", "Forge deploys with Helm."]
    );
    assert_eq!(
        browser.texts(".chips .chip").await,
        ["repo/forge (1)", "user/ana (1)"]
    );
    assert_eq!(
        browser
            .eval("return sessionStorage.getItem('engram.api-key')")
            .await,
        json!("forge-key")
    );
    // Other pages of the tab use the key without asking again.
    browser.open(&served.ui("#/capture")).await;
    assert_eq!(
        browser
            .eval("return document.getElementById('key-dialog').open")
            .await,
        json!(false)
    );
    end(browser, served).await;
}

#[tokio::test]
async fn a_malformed_address_shows_not_found_and_long_markup_lists_as_an_excerpt() {
    let (browser, served) = session!();
    // A truncated percent-escape: decoding it throws.
    browser.open(&served.ui("#/m/%E0%A4%A")).await;
    assert_eq!(browser.texts("main h1").await, ["Not found"]);

    // Emphasis markers that never close, then closed ones past the
    // excerpt: the list shows the head of the text, markup gone.
    let content = format!("**Lead** *{}", "a *b _c ".repeat(900));
    served
        .create(memory("repo", "forge", "patterns", &content))
        .await;
    browser.open(&served.ui("")).await;
    let shown = browser.texts(".memory-item p a").await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("Lead *a *b _c"), "{}", shown[0]);
    assert!(shown[0].chars().count() <= 241, "{}", shown[0]);
    end(browser, served).await;
}
