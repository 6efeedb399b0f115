//! What a person does in the memory browser: filter the list, search and
//! read the reasons, read a memory with its chain and edges, edit it into
//! a new version, forget it, draw its graph, retry a failed trigger, enter
//! a key; and untrusted content that never runs.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Served, classifier_says, end, session};
use crate::grants::grant;
use crate::helpers::memory;
use crate::upstream::Behaviour;

fn id(memory: &Value) -> String {
    memory["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_list_filters_by_text_namespace_and_category() {
    let Some((browser, served)) =
        session("the_list_filters_by_text_namespace_and_category", |_| {}).await
    else {
        return;
    };
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
    let Some((browser, served)) = session("the_list_pages_newest_first", |_| {}).await else {
        return;
    };
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
    let Some((browser, served)) =
        session("a_search_shows_relevance_scores_and_reasons", |_| {}).await
    else {
        return;
    };
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
    wait_indexed(&served).await;

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
    let Some((browser, served)) = session(
        "a_memory_page_shows_markdown_front_matter_chain_and_edges",
        |_| {},
    )
    .await
    else {
        return;
    };
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
    let Some((browser, served)) = session(
        "editing_writes_a_new_version_and_forgetting_removes_it",
        |_| {},
    )
    .await
    else {
        return;
    };
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
    let Some((browser, served)) =
        session("linking_writes_a_version_with_the_new_edge", |_| {}).await
    else {
        return;
    };
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
    let Some((browser, served)) = session("the_graph_draws_the_neighbourhood", |_| {}).await else {
        return;
    };
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

#[tokio::test]
async fn a_failed_trigger_is_retried_from_the_capture_page() {
    let Some((browser, served)) = session(
        "a_failed_trigger_is_retried_from_the_capture_page",
        |config| config.capture.max_attempts = 1,
    )
    .await
    else {
        return;
    };
    served.app.upstream.set_chat(Behaviour::Fail(503), "");
    let turn = json!({"session_id": "s1", "repo": "forge", "user": "ana",
        "messages": [{"role": "user", "content": "We deploy with Helm."}]});
    let (status, _) = served.call(Method::POST, "/turns", Some(&turn), None).await;
    assert_eq!(status, 202);
    browser.open(&served.ui("#/capture")).await;
    browser
        .wait_for(
            "the failed trigger",
            "if (document.querySelector('#failed button.retry')) return true; location.hash = '#/capture?t=' + Date.now(); return false",
        )
        .await;
    let error = browser.texts("#failed .error-text").await;
    assert!(error[0].contains("503"), "{error:?}");

    classifier_says(
        &served.app.upstream,
        r#"[{"content": "Deploys go through Helm.", "scope": "repo", "category": "patterns"}]"#,
    );
    browser.click("#failed button.retry").await;
    browser
        .wait_for(
            "the retried pass",
            "if (document.querySelector('#recent .result-processed') && !document.querySelector('#failed button.retry')) return true; if (!document.querySelector('main[aria-busy]')) location.hash = '#/capture?t=' + Date.now(); return false",
        )
        .await;
    let written = browser.texts("#recent tr:first-child .written a").await;
    assert_eq!(written.len(), 1, "what the pass wrote links to the memory");
    browser.click("#recent tr:first-child .written a").await;
    browser
        .wait_for(
            "the written memory",
            "return document.querySelector('main:not([aria-busy]) .content') !== null",
        )
        .await;
    assert_eq!(
        browser.texts(".content").await,
        ["Deploys go through Helm."]
    );
    end(browser, served).await;
}

#[tokio::test]
async fn untrusted_content_never_runs() {
    let Some((browser, served)) = session("untrusted_content_never_runs", |_| {}).await else {
        return;
    };
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
    let Some((browser, served)) = session(
        "the_key_is_asked_once_per_tab_and_a_limited_key_sees_its_namespaces_only",
        |config| {
            config.api_key = Some(engram::config::ApiKey::new("root-key"));
            config.auth.keys = vec![grant("forge-key", &["forge"], &["ana"])];
        },
    )
    .await
    else {
        return;
    };
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

/// Waits until every write so far is in the index (root view).
async fn wait_indexed(served: &Served) {
    crate::helpers::wait_until_async("the index", async || {
        let (_, stats) = served.call(Method::GET, "/stats", None, None).await;
        stats["index"]["ready"] == true && stats["index"]["pending"] == 0
    })
    .await;
}

#[tokio::test]
async fn a_malformed_address_shows_not_found_and_long_markup_lists_as_an_excerpt() {
    let Some((browser, served)) = session(
        "a_malformed_address_shows_not_found_and_long_markup_lists_as_an_excerpt",
        |_| {},
    )
    .await
    else {
        return;
    };
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

#[tokio::test]
async fn the_capture_page_reads_retrieval_latency_as_percentiles() {
    let Some((browser, served)) = session(
        "the_capture_page_reads_retrieval_latency_as_percentiles",
        |_| {},
    )
    .await
    else {
        return;
    };
    served
        .create(memory(
            "repo",
            "forge",
            "patterns",
            "Deploys use Helm charts.",
        ))
        .await;
    let (status, _) = served
        .call(
            Method::POST,
            "/retrieve",
            Some(&json!({"turn_id": "t-1", "repo": "forge", "query": "how do we deploy?"})),
            None,
        )
        .await;
    assert_eq!(status, 200);
    browser.open(&served.ui("#/capture")).await;
    let terms = browser.texts("#stats dt").await;
    for percentile in ["latency p50 ms", "latency p95 ms", "latency p99 ms"] {
        assert!(terms.iter().any(|term| term == percentile), "{terms:?}");
    }
    assert!(
        !terms.iter().any(|term| term.contains("le ms")),
        "raw buckets: {terms:?}"
    );
    let figures = browser.texts("#stats dd").await;
    assert!(
        figures.iter().any(|figure| figure.starts_with("≤ ")),
        "{figures:?}"
    );
    end(browser, served).await;
}

#[tokio::test]
async fn the_capture_page_says_capture_is_agent_driven_without_an_llm() {
    let Some((browser, served)) = session(
        "the_capture_page_says_capture_is_agent_driven_without_an_llm",
        |config| config.llm = None,
    )
    .await
    else {
        return;
    };
    browser.open(&served.ui("#/capture")).await;
    let said = browser.texts("#capture-mode").await;
    assert_eq!(said.len(), 1, "{said:?}");
    for part in ["Agent-driven capture.", "remember tool", "not classified"] {
        assert!(said[0].contains(part), "{part:?} missing from {said:?}");
    }
    end(browser, served).await;
}
