//! What a person does in the memory browser: filter the list, search and
//! read the reasons, read a memory with its chain and edges, edit it into
//! a new version, forget it, link it, draw its graph. The capture page and
//! what keeps a page safe (untrusted content, keys, bad addresses) are in
//! `capture_page` and `safety`.

use reqwest::Method;
use serde_json::json;

use super::{end, session};
use crate::helpers::{id, memory};

#[tokio::test]
async fn the_list_filters_by_text_namespace_and_category() {
    let (browser, served) = session!();
    served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys use Helm charts.",
        ))
        .await;
    served
        .create(memory(
            "repo",
            "forge",
            "corrections",
            "Tabs, not spaces, in Makefiles.",
        ))
        .await;
    served
        .create(memory(
            "repo",
            "other",
            "patterns",
            "Other repo deploys by hand.",
        ))
        .await;
    served
        .create(memory("user", "ana", "user-facts", "Ana lives in Lisbon."))
        .await;

    browser.open(&served.ui("")).await;
    assert_eq!(
        browser.texts(".memory-item p a").await,
        [
            "Ana lives in Lisbon.",
            "Other repo deploys by hand.",
            "Tabs, not spaces, in Makefiles.",
            "Deploys use Helm charts.",
        ],
        "newest first"
    );
    let chips = browser.texts(".chips .chip").await;
    assert_eq!(chips, ["repo/forge (2)", "repo/other (1)", "user/ana (1)"]);

    browser.fill("#filter-text", "deploys").await;
    browser.click(".filters button[type=submit]").await;
    browser
        .wait_for(
            "the text filter",
            "return document.querySelectorAll('.memory-item').length === 2",
        )
        .await;
    browser.fill("#filter-repo", "forge").await;
    browser.click(".filters button[type=submit]").await;
    browser
        .wait_for(
            "the repo filter",
            "return document.querySelectorAll('.memory-item').length === 1",
        )
        .await;
    assert_eq!(
        browser.texts(".memory-item p a").await,
        ["Deploys use Helm charts."]
    );

    browser.open(&served.ui("#/?category=corrections")).await;
    assert_eq!(
        browser.texts(".memory-item p a").await,
        ["Tabs, not spaces, in Makefiles."]
    );
    end(browser, served).await;
}

#[tokio::test]
async fn the_list_pages_newest_first() {
    let (browser, served) = session!();
    for n in 0..55 {
        served
            .create(memory(
                "repo",
                "forge",
                "patterns",
                &format!("Fact number {n}."),
            ))
            .await;
    }
    browser.open(&served.ui("")).await;
    let first = browser.texts(".memory-item p a").await;
    assert_eq!(first.len(), 50);
    assert_eq!(first[0], "Fact number 54.");
    browser.click(".pager a[rel=next]").await;
    browser
        .wait_for(
            "the second page",
            "return document.querySelectorAll('.memory-item').length === 5",
        )
        .await;
    assert_eq!(browser.texts(".memory-item p a").await[4], "Fact number 0.");
    browser.click(".pager a[rel=prev]").await;
    browser
        .wait_for(
            "the first page again",
            "return document.querySelectorAll('.memory-item').length === 50",
        )
        .await;
    end(browser, served).await;
}

#[tokio::test]
async fn a_search_shows_relevance_scores_and_reasons() {
    let (browser, served) = session!();
    let helm = served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys use helm charts in forge.",
        ))
        .await;
    let mut linked = memory(
        "repo",
        "forge",
        "corrections",
        "Staging mirrors production.",
    );
    linked["related"] = json!([{"id": helm["id"], "relationship": "depends-on"}]);
    served.create(linked).await;
    served
        .create(memory("repo", "forge", "patterns", "Lunch is at noon."))
        .await;
    served.wait_indexed().await;

    browser.open(&served.ui("#/search")).await;
    browser.fill("#search-query", "helm charts deploys").await;
    browser.fill("input[name=repo]", "forge").await;
    // One result from the search; the linked memory comes as a hop.
    browser.fill("input[name=top_k]", "1").await;
    browser.click(".filters button[type=submit]").await;
    browser
        .wait_for(
            "the results",
            "return document.querySelectorAll('.hit').length > 0",
        )
        .await;
    let first = browser.texts(".hit:first-child p a").await;
    assert_eq!(first, ["Deploys use helm charts in forge."]);
    let reasons = browser.texts(".hit .reason").await;
    assert!(reasons[0].contains("it matches the query"), "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|reason| reason.contains("a depends-on edge")),
        "the hop says where it came from: {reasons:?}"
    );
    let relevance = browser.texts(".hit .relevance").await;
    assert!(relevance[0].starts_with("relevance 0."), "{relevance:?}");
    let scores = browser.texts(".hit:first-child .scores dt").await;
    for name in ["similarity", "recency", "importance", "access"] {
        assert!(scores.iter().any(|score| score == name), "{scores:?}");
    }
    end(browser, served).await;
}

#[tokio::test]
async fn a_memory_page_shows_markdown_front_matter_chain_and_edges() {
    let (browser, served) = session!();
    let first = served
        .create(memory("repo", "forge", "patterns", "We deploy with Helm."))
        .await;
    let mut second = memory(
        "repo",
        "forge",
        "patterns",
        "We deploy with **Helm 3**:\n\n- `helm upgrade`\n- from `charts/`",
    );
    second["supersedes"] = first["id"].clone();
    let current = served.create(second).await;
    let mut refines = memory("repo", "forge", "patterns", "Helm values live in values/.");
    refines["related"] = json!([{"id": current["id"], "relationship": "refines"}]);
    let refines = served.create(refines).await;
    browser.open(&served.memory_page(&current)).await;
    assert_eq!(browser.texts(".content strong").await, ["Helm 3"]);
    assert_eq!(
        browser.texts(".content li code").await,
        ["helm upgrade", "charts/"]
    );
    let chain = browser.texts(".chain li").await;
    assert_eq!(chain.len(), 2);
    assert!(chain[1].starts_with("v2 (this one)"), "{chain:?}");
    let incoming = browser.texts(".incoming li").await;
    assert_eq!(incoming, ["← refines Helm values live in values/."]);
    let front = browser.texts(".front-matter dd").await;
    assert!(front.contains(&id(&current)), "{front:?}");
    assert!(front.contains(&"forge".to_owned()));
    // The edge is followed from its other end too.
    browser.click(".incoming a").await;
    browser
        .wait_for("the linked memory", &format!("return location.hash === '#/m/{}' && document.querySelector('main:not([aria-busy]) .outgoing') !== null", id(&refines)))
        .await;
    assert_eq!(
        browser.texts(".outgoing li").await,
        ["→ refines We deploy with Helm 3:"],
        "labels are the first line, as the reader sees it"
    );
    end(browser, served).await;
}

#[tokio::test]
async fn editing_writes_a_new_version_and_forgetting_removes_it() {
    let (browser, served) = session!();
    let original = served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Releases are cut on Fridays.",
        ))
        .await;
    browser.open(&served.memory_page(&original)).await;
    browser.click("#edit-button").await;
    browser
        .fill("#edit-content", "Releases are cut on Thursdays.")
        .await;
    browser.click("#edit-save").await;
    browser
        .wait_for(
            "the new version's page",
            &format!("return location.hash.startsWith('#/m/') && location.hash !== '#/m/{}' && document.querySelector('main:not([aria-busy]) .chain') !== null", id(&original)),
        )
        .await;
    let hash: String = serde_json::from_value(browser.eval("return location.hash").await).unwrap();
    let new_id = hash.trim_start_matches("#/m/").to_owned();
    let (status, written) = served
        .call(Method::GET, &format!("/memories/{new_id}"), None, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            &written["version"],
            &written["supersedes"],
            &written["content"]
        ),
        (
            &json!(2),
            &original["id"],
            &json!("Releases are cut on Thursdays.")
        )
    );
    assert_eq!(browser.texts(".chain li").await.len(), 2);

    browser.click("#forget-button").await;
    browser
        .wait_for(
            "the confirmation",
            "return document.getElementById('confirm-dialog').open",
        )
        .await;
    browser.click("#confirm-yes").await;
    browser
        .wait_for("the list", "return location.hash === '#/' && document.querySelector('main:not([aria-busy]) .list') !== null")
        .await;
    let (status, _) = served
        .call(Method::GET, &format!("/memories/{new_id}"), None, None)
        .await;
    assert_eq!(status, 404, "forgotten");
    assert_eq!(
        browser.texts(".memory-item p a").await,
        ["Releases are cut on Fridays."]
    );

    // Cancelling the confirmation forgets nothing.
    browser.open(&served.memory_page(&original)).await;
    browser.click("#forget-button").await;
    browser
        .wait_for(
            "the confirmation",
            "return document.getElementById('confirm-dialog').open",
        )
        .await;
    browser.click("#confirm-no").await;
    let (status, _) = served
        .call(
            Method::GET,
            &format!("/memories/{}", id(&original)),
            None,
            None,
        )
        .await;
    assert_eq!(status, 200);
    end(browser, served).await;
}

#[tokio::test]
async fn linking_writes_a_version_with_the_new_edge() {
    let (browser, served) = session!();
    let from = served
        .create(memory("repo", "forge", "patterns", "CI runs helm lint."))
        .await;
    let mut to = memory(
        "user",
        "ana",
        "coding-preferences",
        "Ana wants lint errors first.",
    );
    to["repo"] = json!("forge");
    let to = served.create(to).await;
    browser.open(&served.memory_page(&from)).await;
    browser.click("#link-button").await;
    browser.fill("#link-target", &id(&to)).await;
    browser.click("#link-save").await;
    browser
        .wait_for("the new version", &format!("return location.hash !== '#/m/{}' && document.querySelector('main:not([aria-busy]) .outgoing') !== null", id(&from)))
        .await;
    assert_eq!(
        browser.texts(".outgoing li").await,
        ["→ related Ana wants lint errors first."]
    );
    end(browser, served).await;
}

#[tokio::test]
async fn the_graph_draws_the_neighbourhood() {
    let (browser, served) = session!();
    let centre = served
        .create(memory("repo", "forge", "patterns", "Centre."))
        .await;
    for n in 0..6 {
        let mut spoke = memory("repo", "forge", "patterns", &format!("Spoke {n}."));
        spoke["related"] = json!([{"id": centre["id"], "relationship": "related"}]);
        let spoke = served.create(spoke).await;
        let mut leaf = memory("repo", "forge", "patterns", &format!("Leaf {n}."));
        leaf["related"] = json!([{"id": spoke["id"], "relationship": "extends"}]);
        served.create(leaf).await;
    }
    let mut newer = memory("repo", "forge", "patterns", "Centre, revised.");
    newer["supersedes"] = centre["id"].clone();
    served.create(newer).await;

    browser
        .open(&served.ui(&format!("#/g/{}", id(&centre))))
        .await;
    let drawn = browser
        .eval("return [document.querySelectorAll('#graph-svg a.node').length, document.querySelectorAll('#graph-svg line.edge').length, document.querySelectorAll('#graph-svg line.supersedes').length]")
        .await;
    assert_eq!(drawn, json!([14, 13, 1]), "1 + 6 + 6 + 1 memories");
    let inside = browser
        .eval("const box = document.getElementById('graph-svg').viewBox.baseVal; return [...document.querySelectorAll('#graph-svg circle')].every((c) => c.cx.baseVal.value >= 0 && c.cx.baseVal.value <= box.width && c.cy.baseVal.value >= 0 && c.cy.baseVal.value <= box.height)")
        .await;
    assert_eq!(inside, json!(true), "every node inside the drawing");
    browser
        .open(&served.ui(&format!("#/g/{}?depth=1", id(&centre))))
        .await;
    let drawn = browser
        .eval("return document.querySelectorAll('#graph-svg a.node').length")
        .await;
    assert_eq!(drawn, json!(8), "one hop: the spokes and the newer version");
    end(browser, served).await;
}
