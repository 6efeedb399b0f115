//! Live sync seen by a person: a memory edited on disk shows its new text
//! in the browser, and a file broken on disk is listed above the memories
//! until it is fixed.

use std::fs;

use serde_json::Value;

use super::{end, session};
use crate::helpers::memory;

/// Re-renders `route` until `script` holds, as a person pressing reload.
fn reloading(route: &str, script: &str) -> String {
    format!(
        "if (document.querySelector('main:not([aria-busy])') && ({script})) return true; \
         if (!document.querySelector('main[aria-busy]')) location.hash = '{route}' + (('{route}'.includes('?')) ? '&' : '?') + 't=' + Date.now(); return false"
    )
}

#[tokio::test]
async fn edits_and_broken_files_on_disk_show_in_the_browser() {
    let (browser, served) = session!();
    let written: Value = served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Releases are cut on Mondays.",
        ))
        .await;
    let id = written["id"].as_str().unwrap();
    let path = served.data_dir().join(format!("repos/forge/{id}.md"));

    browser.open(&served.memory_page(&written)).await;
    assert_eq!(
        browser.texts(".content").await,
        ["Releases are cut on Mondays."]
    );
    let text = fs::read_to_string(&path).unwrap();
    fs::write(
        &path,
        text.replace(
            "Releases are cut on Mondays.",
            "Releases are cut on Wednesdays.",
        ),
    )
    .unwrap();
    browser
        .wait_for(
            "the edit made on disk",
            &reloading(
                &format!("#/m/{id}"),
                "document.querySelector('.content')?.textContent === 'Releases are cut on Wednesdays.'",
            ),
        )
        .await;

    fs::write(&path, "---\nnot: [closed\n---\n").unwrap();
    browser.open(&served.ui("")).await;
    browser
        .wait_for(
            "the broken file to be listed",
            &reloading("#/", "document.querySelector('#skipped-files') !== null"),
        )
        .await;
    let listed = browser.texts("#skipped-files li code").await;
    assert_eq!(listed, [format!("repos/forge/{id}.md")]);
    assert_eq!(
        browser.texts(".memory-item p a").await,
        ["Releases are cut on Wednesdays."],
        "the last good version stays listed"
    );

    fs::write(&path, text).unwrap();
    browser
        .wait_for(
            "the fixed file to leave the list",
            &reloading("#/", "document.querySelector('#skipped-files') === null && document.querySelector('.memory-item p a')?.textContent === 'Releases are cut on Mondays.'"),
        )
        .await;
    end(browser, served).await;
}
