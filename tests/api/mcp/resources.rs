//! Memories as MCP resources and the prompts at `/mcp`, driven by the
//! official SDK's client: the capabilities, `resources/list` over more
//! than one page, `resources/read` of a memory, a namespace and a search,
//! the templates, `prompts/list` and `prompts/get`, and what a key limited
//! to one repo may list and read (a memory it may not see is not found,
//! as a missing one is). The stdio bridge's pass-through is in `bridge`.
//! Files only: the
//! REST operations underneath run over both backends elsewhere.

use std::collections::HashSet;

use rmcp::ServiceError;
use rmcp::model::{
    ErrorCode, GetPromptRequestParams, GetPromptResult, PaginatedRequestParams,
    ReadResourceRequestParams, Resource, ResourceContents,
};
use serde_json::{Value, json};

use crate::helpers::RunningApp;
use crate::mcp::{Client, LIMITED, ROOT, app_post, connect, service};

/// `resources/list`'s page size, as documented.
const PAGE_SIZE: usize = 50;

/// Every listed resource, page by page, and how many pages there were.
async fn list_all(client: &Client) -> (Vec<Resource>, usize) {
    let (mut resources, mut pages, mut cursor) = (Vec::new(), 0, None);
    loop {
        let page = client
            .list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        assert!(page.resources.len() <= PAGE_SIZE);
        resources.extend(page.resources);
        pages += 1;
        cursor = page.next_cursor;
        if cursor.is_none() {
            return (resources, pages);
        }
    }
}

/// The text of `uri`, which must be readable.
pub async fn read(client: &Client, uri: &str) -> String {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|err| panic!("reading {uri}: {err}"));
    let [
        ResourceContents::TextResourceContents {
            uri: read,
            mime_type,
            text,
            ..
        },
    ] = result.contents.as_slice()
    else {
        panic!("one text content: {result:?}");
    };
    assert_eq!(read, uri);
    assert_eq!(mime_type.as_deref(), Some("text/markdown"));
    text.clone()
}

/// The protocol error of a refused request: its code and message.
pub fn protocol_error<T: std::fmt::Debug>(answer: Result<T, ServiceError>) -> (ErrorCode, String) {
    match answer {
        Err(ServiceError::McpError(error)) => (error.code, error.message.into_owned()),
        other => panic!("a protocol error: {other:?}"),
    }
}

pub async fn read_refused(client: &Client, uri: &str) -> (ErrorCode, String) {
    protocol_error(
        client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await,
    )
}

async fn get_prompt(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<GetPromptResult, ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    client
        .get_prompt(GetPromptRequestParams::new(name).with_arguments(arguments))
        .await
}

/// The text of a prompt's messages.
fn prompt_text(result: &GetPromptResult) -> String {
    serde_json::to_string(&result.messages).unwrap()
}

/// Writes a memory of `repo` through REST: its id.
pub async fn remember(app: &RunningApp, repo: &str, content: &str) -> String {
    let (status, written) = app_post(
        app,
        "/memories",
        ROOT,
        &json!({"repo": repo, "scope": "repo", "category": "patterns", "importance": 0.9,
                "content": content}),
    )
    .await;
    assert_eq!(status.as_u16(), 201, "{written:#}");
    written["id"].as_str().unwrap().to_owned()
}

/// `count` memories of repo `forge`, brought in at once.
async fn import_forge(app: &RunningApp, count: usize) {
    // To the second: a listing's cursor keeps microseconds.
    let written = (chrono::Utc::now() - chrono::TimeDelta::days(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let lines: Vec<Value> = (0..count)
        .map(|n| {
            json!({"id": uuid::Uuid::now_v7().to_string(), "version": 1, "scope": "repo",
                   "repo": "forge", "category": "project-conventions", "created_at": written,
                   "updated_at": written, "related": [], "trigger": "turn",
                   "content": format!("Forge convention number {n}.")})
        })
        .collect();
    let (status, answer) =
        app_post(app, "/memories/import", ROOT, &json!({"memories": lines})).await;
    assert_eq!(status.as_u16(), 200, "{answer:#}");
}

#[tokio::test]
async fn resources_list_pages_through_the_current_memories_a_key_may_see() {
    let app = service().await;
    let _upstream = &app.upstream;
    import_forge(&app, PAGE_SIZE + 5).await;
    let old = remember(&app, "forge", "Forge releases on Tuesdays.").await;
    let (_, new) = app_post(
        &app,
        "/memories",
        ROOT,
        &json!({"repo": "forge", "scope": "repo", "category": "patterns",
                "content": "Forge releases on Wednesdays.\nSince the move.", "supersedes": old}),
    )
    .await;
    let new = new["id"].as_str().unwrap();
    let theirs = remember(&app, "secret", "Secret releases on Fridays.").await;

    let limited = connect(&app.base_url, LIMITED).await;
    let info = limited.peer_info().unwrap();
    let resources = info.capabilities.resources.clone().expect("resources");
    assert_eq!(resources.subscribe, None, "no stream to notify on");
    assert_eq!(resources.list_changed, None);
    assert!(info.capabilities.prompts.is_some());

    let (listed, pages) = list_all(&limited).await;
    assert_eq!(pages, 2);
    assert_eq!(listed.len(), PAGE_SIZE + 6, "every current forge memory");
    let uris: HashSet<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris.len(), listed.len(), "no memory twice");
    assert!(
        uris.iter()
            .all(|uri| uri.starts_with("engram://repo/forge/"))
    );
    let newest = &listed[0];
    assert_eq!(newest.uri, format!("engram://repo/forge/{new}"));
    assert_eq!(newest.name, "Forge releases on Wednesdays.");
    assert_eq!(newest.mime_type.as_deref(), Some("text/markdown"));
    assert!(newest.description.as_deref().unwrap().contains("patterns"));
    let annotations = newest.annotations.as_ref().unwrap();
    assert!(annotations.last_modified.is_some());
    assert!(
        !uris.contains(format!("engram://repo/forge/{old}").as_str()),
        "superseded"
    );

    let root = connect(&app.base_url, ROOT).await;
    let (everything, _) = list_all(&root).await;
    assert!(
        everything
            .iter()
            .any(|r| r.uri == format!("engram://repo/secret/{theirs}"))
    );
    let (code, _) = protocol_error(
        limited
            .list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some("not-a-cursor".to_owned())),
            ))
            .await,
    );
    assert_eq!(code, ErrorCode::INVALID_PARAMS);

    limited.cancel().await.unwrap();
    root.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_memory_reads_as_its_file_and_what_a_key_may_not_see_is_not_found() {
    let app = service().await;
    let _upstream = &app.upstream;
    let mine = remember(&app, "forge", "Forge lints with clippy.").await;
    let theirs = remember(&app, "secret", "Secret lints with nothing.").await;
    let limited = connect(&app.base_url, LIMITED).await;

    let file = read(&limited, &format!("engram://repo/forge/{mine}")).await;
    assert!(file.starts_with("---\n"), "{file}");
    assert!(file.contains(&format!("id: {mine}\n")), "{file}");
    assert!(file.contains("category: patterns\n"), "{file}");
    assert!(file.ends_with("---\nForge lints with clippy.\n"), "{file}");
    let on_disk =
        std::fs::read_to_string(app.data_dir.join(format!("repos/forge/{mine}.md"))).unwrap();
    assert_eq!(file, on_disk, "the file as stored");

    let missing = "0193f0c1-0000-7000-8000-000000000001";
    let not_found = read_refused(&limited, &format!("engram://repo/forge/{missing}")).await;
    assert_eq!(not_found.0, ErrorCode::RESOURCE_NOT_FOUND);
    for hidden in [
        format!("engram://repo/secret/{theirs}"),
        // Its id under a namespace the key holds is no way in either.
        format!("engram://repo/forge/{theirs}"),
    ] {
        assert_eq!(
            read_refused(&limited, &hidden).await,
            not_found,
            "{hidden}: as a missing one"
        );
    }
    let root = connect(&app.base_url, ROOT).await;
    assert!(
        read(&root, &format!("engram://repo/secret/{theirs}"))
            .await
            .contains("nothing")
    );
    assert_eq!(
        read_refused(&root, &format!("engram://user/ana/{theirs}"))
            .await
            .0,
        ErrorCode::RESOURCE_NOT_FOUND,
        "a memory is read under its own namespace only"
    );

    for malformed in [
        "file:///etc/passwd",
        "engram://repo/forge/not-a-uuid",
        "engram://repo/../etc",
        "engram://team/forge",
        "engram://search?colour=red",
    ] {
        let (code, message) = read_refused(&limited, malformed).await;
        assert_eq!(code, ErrorCode::INVALID_PARAMS, "{malformed}: {message}");
    }

    limited.cancel().await.unwrap();
    root.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn the_templates_read_a_namespace_and_a_search() {
    let app = service().await;
    let _upstream = &app.upstream;
    let mine = remember(&app, "forge", "Forge deploys with the blue pipeline.").await;
    remember(&app, "secret", "Secret deploys with the green pipeline.").await;
    app.wait_indexed_with(ROOT).await;
    let limited = connect(&app.base_url, LIMITED).await;

    let templates = limited.list_all_resource_templates().await.unwrap();
    let mut uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    uris.sort_unstable();
    assert_eq!(
        uris,
        [
            "engram://repo/{repo}",
            "engram://search{?q,repo,user}",
            "engram://user/{user}"
        ]
    );

    let listing = read(&limited, "engram://repo/forge").await;
    assert!(
        listing.contains(&format!(
            "[Forge deploys with the blue pipeline.](engram://repo/forge/{mine})"
        )),
        "{listing}"
    );
    assert!(!listing.contains("green"), "{listing}");
    let bracketed = remember(&app, "forge", "[Draft](x) Forge tags from main.").await;
    let listing = read(&limited, "engram://repo/forge").await;
    assert!(
        listing.contains(&format!(
            "[\\[Draft\\](x) Forge tags from main.](engram://repo/forge/{bracketed})"
        )),
        "a title cannot end its link: {listing}"
    );
    assert!(
        read(&limited, "engram://user/ana")
            .await
            .contains("None yet.")
    );
    assert_eq!(
        read_refused(&limited, "engram://repo/secret").await.0,
        ErrorCode::RESOURCE_NOT_FOUND
    );

    let found = read(
        &limited,
        "engram://search?q=how%20does%20forge%20deploy&repo=forge",
    )
    .await;
    assert!(found.contains("blue pipeline"), "{found}");
    assert!(
        found.contains(&format!("engram://repo/forge/{mine}")),
        "{found}"
    );
    assert!(!found.contains("green"), "{found}");
    assert_eq!(
        read_refused(&limited, "engram://search?q=pipeline&repo=secret")
            .await
            .0,
        ErrorCode::RESOURCE_NOT_FOUND
    );
    assert_eq!(
        read_refused(&limited, "engram://search?repo=forge").await.0,
        ErrorCode::INVALID_PARAMS,
        "no query"
    );

    limited.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn the_prompts_recall_a_repo_and_refuse_bad_arguments() {
    let app = service().await;
    let _upstream = &app.upstream;
    remember(
        &app,
        "forge",
        "Forge pins its toolchain in rust-toolchain.toml.",
    )
    .await;
    remember(&app, "secret", "Secret pins nothing.").await;
    app.wait_indexed_with(ROOT).await;
    let limited = connect(&app.base_url, LIMITED).await;

    let prompts = limited.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["recall-repo", "remember-this"]);
    assert!(prompts.iter().all(|p| p.description.is_some()));

    let recalled = get_prompt(&limited, "recall-repo", json!({"repo": "forge"}))
        .await
        .unwrap();
    let text = prompt_text(&recalled);
    assert!(text.contains("rust-toolchain.toml"), "{text}");
    assert!(!text.contains("Secret"), "{text}");
    let remembered = get_prompt(
        &limited,
        "remember-this",
        json!({"fact": "We squash merges.", "repo": "forge"}),
    )
    .await
    .unwrap();
    let text = prompt_text(&remembered);
    assert!(text.contains("We squash merges."), "{text}");
    assert!(text.contains("`remember`"), "{text}");

    for (name, arguments) in [
        ("forget-everything", json!({})),
        ("recall-repo", json!({"repo": "../etc"})),
        ("recall-repo", json!({"repo": "secret"})),
        ("recall-repo", json!({"repo": "forge", "colour": "red"})),
        ("recall-repo", json!({"repo": 7})),
        ("remember-this", json!({"repo": "forge"})),
        ("remember-this", json!({"fact": "  "})),
    ] {
        let (code, message) = protocol_error(get_prompt(&limited, name, arguments.clone()).await);
        assert_eq!(
            code,
            ErrorCode::INVALID_PARAMS,
            "{name} {arguments}: {message}"
        );
    }

    limited.cancel().await.unwrap();
    app.stop().await;
}
