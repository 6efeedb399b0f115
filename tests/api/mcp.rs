//! `/mcp` and `engram mcp`, driven by the official SDK's client over
//! Streamable HTTP and over stdio, against a real service. The tools that
//! write and read memories run over both backends; the transport's checks
//! (keys, hosts, origins) cannot depend on the backend.
//! Around it, a module each: the stdio bridge (`bridge`), the official
//! conformance suite (`conformance`), the TypeScript SDK's client
//! (`typescript`), memories as resources with the prompts (`resources`),
//! and the bridge's resource subscriptions (`subscribe`).

mod bridge;
mod conformance;
mod resources;
mod subscribe;
mod typescript;

use engram::config::ApiKey;
use reqwest::StatusCode;
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::backends::{Backend, over_both_backends};
use crate::grants::grant;
use crate::helpers::{RunningApp, TestApp, wait_until_async};

over_both_backends!(
    every_tool_answers_over_http_with_the_rest_results,
    a_limited_key_sees_through_mcp_what_it_sees_through_rest,
    remember_and_update_refuse_secrets_in_any_stored_field,
    remember_refuses_a_near_duplicate_naming_the_memory_unless_told_not_to,
);

pub const ROOT: &str = "root-key";
pub const LIMITED: &str = "forge-only-key";

pub type Client = RunningService<RoleClient, ()>;

/// A service with a full key and one limited to repo `forge` and user `ana`.
pub async fn service() -> RunningApp {
    service_over(&Backend::Files).await
}

/// [`service`] over `backend`.
async fn service_over(backend: &Backend) -> RunningApp {
    backend
        .builder()
        .embedder()
        .config(|config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.auth.keys = vec![grant(LIMITED, &["forge"], &["ana"])];
        })
        .serve()
        .await
}

pub async fn connect(base_url: &str, key: &str) -> Client {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{base_url}/mcp")).auth_header(key);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the MCP handshake")
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|err| panic!("calling {tool}: {err}"))
}

/// The structured result of a call that must succeed.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await;
    assert_ne!(result.is_error, Some(true), "{tool}: {result:?}");
    result.structured_content.expect("a structured result")
}

/// The problem document of a call that must be refused: JSON text, with no
/// `structuredContent`, which clients check against the tool's output
/// schema (a problem document does not match it).
pub async fn refused(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
    assert_eq!(result.structured_content, None, "{tool}: {result:?}");
    let text = result
        .content
        .iter()
        .find_map(|block| block.as_text())
        .unwrap_or_else(|| panic!("{tool}: no text in {result:?}"));
    serde_json::from_str(&text.text).expect("the problem document as JSON text")
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|tool| tool.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Recalls `query` until the memory with `content` comes back (the index
/// follows writes within a moment).
pub async fn recall_until_found(client: &Client, query: &str, content: &str) -> Value {
    let mut found = Value::Null;
    wait_until_async("recall to find the memory", async || {
        found = ok(client, "recall", json!({"query": query, "repo": "forge"})).await;
        found["memories"]
            .as_array()
            .is_some_and(|memories| memories.iter().any(|m| m["content"] == content))
    })
    .await;
    found
}

async fn every_tool_answers_over_http_with_the_rest_results(backend: Backend) {
    let app = service_over(&backend).await;
    let _upstream = &app.upstream;
    let client = connect(&app.base_url, ROOT).await;

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "confirm_memory",
            "forget",
            "get_memory",
            "list_memories",
            "recall",
            "remember",
            "review_memory",
            "update_memory"
        ]
    );
    for listed in &tools {
        let input = serde_json::to_string(&listed.input_schema).unwrap();
        assert!(!input.contains("$ref"), "{}: {input}", listed.name);
        assert!(listed.output_schema.is_some(), "{}", listed.name);
    }
    let hints = |name| tool(&tools, name).annotations.clone().unwrap();
    assert_eq!(hints("recall").read_only_hint, Some(true));
    assert_eq!(hints("forget").destructive_hint, Some(true));
    assert_eq!(hints("remember").read_only_hint, Some(false));
    let remember_input = &tool(&tools, "remember").input_schema;
    assert!(
        remember_input["required"]
            .as_array()
            .unwrap()
            .contains(&json!("content")),
        "{remember_input:?}"
    );

    let written = ok(
        &client,
        "remember",
        json!({"repo": "forge", "scope": "repo", "category": "project-conventions",
               "content": "The forge repo formats Go with gofumpt."}),
    )
    .await;
    let id = written["id"].as_str().unwrap().to_owned();
    assert_eq!(written["repo"], "forge");

    let recalled = recall_until_found(
        &client,
        "How is Go formatted in forge?",
        "The forge repo formats Go with gofumpt.",
    )
    .await;
    assert_eq!(recalled["memories"][0]["id"], id.as_str(), "{recalled:#}");
    assert!(recalled["memories"][0]["reason"]["kind"].is_string());
    assert!(
        recalled["injection"].as_str().unwrap().contains("gofumpt"),
        "{recalled:#}"
    );

    let updated = ok(
        &client,
        "update_memory",
        json!({"id": id, "content": "The forge repo formats Go with gofmt -s."}),
    )
    .await;
    assert_eq!(updated["supersedes"], id.as_str());
    assert_eq!(updated["version"], 2);
    assert_eq!(
        updated["category"], "project-conventions",
        "kept: {updated:#}"
    );
    let new_id = updated["id"].as_str().unwrap().to_owned();

    let detail = ok(&client, "get_memory", json!({"id": new_id})).await;
    assert_eq!(detail["chain"].as_array().unwrap().len(), 2, "{detail:#}");
    let rest = app_get(&app, &format!("/memories/{new_id}"), ROOT).await;
    assert_eq!(detail, rest.1, "the same document as GET /memories/{{id}}");

    let page = ok(
        &client,
        "list_memories",
        json!({"repo": "forge", "limit": 10}),
    )
    .await;
    let contents: Vec<&str> = page["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        contents.contains(&"The forge repo formats Go with gofmt -s."),
        "{page:#}"
    );

    let forgotten = ok(&client, "forget", json!({"id": new_id})).await;
    assert_eq!(forgotten, json!({"id": new_id, "forgotten": true}));
    let gone = refused(&client, "get_memory", json!({"id": new_id})).await;
    assert_eq!(gone["status"], 404, "{gone:#}");

    client.cancel().await.unwrap();
    app.stop().await;
}

async fn app_get(app: &RunningApp, path: &str, key: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", app.base_url))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap_or_default())
}

pub async fn app_post(
    app: &RunningApp,
    path: &str,
    key: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", app.base_url))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap_or_default())
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_with_the_rest_problem() {
    let app = service().await;
    let _upstream = &app.upstream;
    let client = connect(&app.base_url, ROOT).await;

    for (arguments, field) in [
        (
            json!({"scope": "repo", "category": "project-conventions", "content": "  "}),
            "content",
        ),
        (
            json!({"scope": "repo", "category": "feelings", "content": "x"}),
            "category",
        ),
        (
            json!({"scope": "repo", "category": "patterns", "content": "x", "colour": 1}),
            "colour",
        ),
        (
            json!({"scope": "repo", "category": "patterns", "content": "x", "importance": 7}),
            "importance",
        ),
    ] {
        let problem = refused(&client, "remember", arguments.clone()).await;
        assert_eq!(problem["field"], field, "{problem:#}");
        let (status, rest) = app_post(&app, "/memories", ROOT, &arguments).await;
        assert_eq!(status.as_u16(), 422);
        assert_eq!(problem, rest, "the same problem as POST /memories");
    }
    let problem = refused(&client, "recall", json!({"query": "x", "top_k": 0})).await;
    assert_eq!(problem["field"], "top_k", "{problem:#}");
    let problem = refused(&client, "get_memory", json!({"id": "not-a-uuid"})).await;
    assert_eq!(problem["field"], "id", "{problem:#}");
    // Nothing was written by any of them.
    let (_, page) = app_get(&app, "/memories", ROOT).await;
    assert_eq!(page["memories"], json!([]));

    client.cancel().await.unwrap();
    app.stop().await;
}

async fn a_limited_key_sees_through_mcp_what_it_sees_through_rest(backend: Backend) {
    let app = service_over(&backend).await;
    let _upstream = &app.upstream;
    let root = connect(&app.base_url, ROOT).await;
    let mine = ok(
        &root,
        "remember",
        json!({"repo": "forge", "scope": "repo", "category": "patterns",
               "content": "Forge deploys with the blue pipeline."}),
    )
    .await;
    let theirs = ok(
        &root,
        "remember",
        json!({"repo": "secret", "scope": "repo", "category": "patterns",
               "content": "Secret deploys with the green pipeline."}),
    )
    .await;

    let limited = connect(&app.base_url, LIMITED).await;
    let page = ok(&limited, "list_memories", json!({})).await;
    let ids: Vec<&Value> = page["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(ids, [&mine["id"]], "{page:#}");
    let (_, rest_page) = app_get(&app, "/memories", LIMITED).await;
    assert_eq!(page, rest_page);

    let hidden = refused(&limited, "get_memory", json!({"id": theirs["id"]})).await;
    assert_eq!(hidden["status"], 404, "{hidden:#}");
    let hidden = refused(&limited, "forget", json!({"id": theirs["id"]})).await;
    assert_eq!(hidden["status"], 404, "{hidden:#}");
    let forbidden = refused(
        &limited,
        "remember",
        json!({"repo": "secret", "scope": "repo", "category": "patterns", "content": "Mine now."}),
    )
    .await;
    assert_eq!(forbidden["status"], 403, "{forbidden:#}");
    let forbidden = refused(
        &limited,
        "recall",
        json!({"query": "pipeline", "repo": "secret"}),
    )
    .await;
    assert_eq!(forbidden["status"], 403, "{forbidden:#}");
    // Theirs is still there.
    let (status, _) = app_get(
        &app,
        &format!("/memories/{}", theirs["id"].as_str().unwrap()),
        ROOT,
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    root.cancel().await.unwrap();
    limited.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn mcp_refuses_a_missing_key_a_foreign_host_and_a_browser_origin() {
    let app = service().await;
    let _upstream = &app.upstream;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}});
    let post = |key: Option<&str>, headers: &[(&str, &str)]| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", app.base_url))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(post(Some(ROOT), &[]).await, StatusCode::OK);
    assert_eq!(post(None, &[]).await, StatusCode::UNAUTHORIZED);
    assert_eq!(post(Some("wrong"), &[]).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        post(Some(ROOT), &[("host", "attacker.example")]).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(Some(ROOT), &[("origin", "https://attacker.example")]).await,
        StatusCode::FORBIDDEN
    );
    app.stop().await;
}

#[tokio::test]
async fn configured_hosts_and_origins_are_answered() {
    let app = TestApp::builder()
        .embedder()
        .config(|config| {
            config.http.allowed_hosts = vec!["memory.internal".to_owned()];
            config.mcp.allowed_origins = vec!["https://agents.example".to_owned()];
        })
        .serve()
        .await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}});
    let status = |headers: Vec<(&'static str, &'static str)>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", app.base_url))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(
        status(vec![("host", "memory.internal")]).await,
        StatusCode::OK
    );
    // The listen address and the loopback names are always allowed.
    assert_eq!(status(vec![]).await, StatusCode::OK);
    assert_eq!(status(vec![("host", "localhost")]).await, StatusCode::OK);
    assert_eq!(
        status(vec![("host", "elsewhere.example")]).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(vec![("origin", "https://agents.example")]).await,
        StatusCode::OK
    );
    assert_eq!(
        status(vec![("origin", "https://elsewhere.example")]).await,
        StatusCode::FORBIDDEN
    );
    app.stop().await;
}

/// `remember` and `update_memory` write through `POST /memories`: every
/// stored field goes through the secret guard, and the refusal names it.
/// (Read from the whole result, whether the problem comes as structured
/// content or as text.)
async fn remember_and_update_refuse_secrets_in_any_stored_field(backend: Backend) {
    let app = service_over(&backend).await;
    let _upstream = &app.upstream;
    let client = connect(&app.base_url, ROOT).await;
    let refusal = |result: &CallToolResult| {
        assert_eq!(result.is_error, Some(true), "{result:?}");
        serde_json::to_string(result).unwrap()
    };
    let result = call(
        &client,
        "remember",
        json!({"repo": "forge", "scope": "repo", "category": "patterns",
               "content": "Deploys use helm.", "session_id": "AKIAIOSFODNN7EXAMPLE"}),
    )
    .await;
    let problem = refusal(&result);
    assert!(problem.contains("secret-content"), "{problem}");
    assert!(problem.contains("session_id"), "{problem}");

    let written = ok(
        &client,
        "remember",
        json!({"repo": "forge", "scope": "repo", "category": "patterns",
               "content": "Deploys use helm."}),
    )
    .await;
    let result = call(
        &client,
        "update_memory",
        json!({"id": written["id"], "content": "Deploys use helm; Passwort: Geheim123!"}),
    )
    .await;
    let problem = refusal(&result);
    assert!(problem.contains("secret-content"), "{problem}");
    assert!(!problem.contains("Geheim123"), "{problem}");

    client.cancel().await.unwrap();
    app.stop().await;
}

async fn remember_refuses_a_near_duplicate_naming_the_memory_unless_told_not_to(backend: Backend) {
    let app = service_over(&backend).await;
    let _upstream = &app.upstream;
    let client = connect(&app.base_url, ROOT).await;
    let fact = json!({"repo": "forge", "scope": "repo", "category": "patterns",
                      "content": "Forge deploys with the blue pipeline."});
    let first = ok(&client, "remember", fact.clone()).await;
    // Every write in the index, so that the duplicate check sees them.
    app.wait_indexed_with(ROOT).await;

    let mut again = fact.clone();
    again["content"] = json!("forge deploys with the blue pipeline");
    let problem = refused(&client, "remember", again.clone()).await;
    assert_eq!(problem["status"], 409, "{problem:#}");
    assert_eq!(problem["type"], "urn:engram:problem:duplicate-memory");
    assert_eq!(problem["field"], "content");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains(first["id"].as_str().unwrap()), "{detail}");
    // A new version may say nearly what the one it replaces said.
    let mut update = again.clone();
    update["supersedes"] = first["id"].clone();
    update["dedupe"] = json!(true);
    let (status, _) = app_post(&app, "/memories", ROOT, &update).await;
    assert_eq!(status, StatusCode::CREATED);
    // Another namespace is not a duplicate, and a write can opt out.
    let mut elsewhere = again.clone();
    elsewhere["repo"] = json!("anvil");
    ok(&client, "remember", elsewhere).await;
    again["dedupe"] = json!(false);
    ok(&client, "remember", again).await;
    let (_, page) = app_get(&app, "/memories", ROOT).await;
    assert_eq!(page["memories"].as_array().unwrap().len(), 3, "{page:#}");

    client.cancel().await.unwrap();
    app.stop().await;
}
