//! `/mcp` through the official TypeScript SDK's client, which checks each
//! tool result against the tool's `outputSchema` (as the MCP Inspector and
//! the clients built on the SDK do): every tool's success must pass that
//! check, and a refusal must reach the client as Engram's problem. Memories
//! as resources and the prompts are listed, read and got through it too,
//! their results checked against the protocol's schemas. Over stdio, it
//! subscribes to a memory through `engram mcp` (`tests/mcp-ts/subscribe.mjs`)
//! and hears it change.
//!
//! The client is `tests/mcp-ts/client.mjs`, run by `node` with the SDK
//! installed by `npm ci --prefix tests/mcp-ts` (`.ci/run` does). Without
//! `node` or the SDK the test prints why it is skipped and passes, except
//! under CI (`CI` set), where it fails.
//! Files only: the SDK's checks are under test; the tools run over both
//! backends in `mcp`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::{RunningApp, finishes, npm_installed, or_skip};
use crate::mcp::{LIMITED, ROOT, app_post, service};

/// The client script's directory.
fn client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-ts")
}

/// The SDK, where it and `node` are installed.
fn sdk() -> Result<PathBuf, String> {
    npm_installed(
        Path::new("node"),
        "mcp-ts",
        "@modelcontextprotocol/sdk/package.json",
    )
}

/// Writes forge's release day at `importance`; its id.
async fn release_day(app: &RunningApp, importance: f64) -> String {
    let (_, written) = app_post(
        app,
        "/memories",
        ROOT,
        &json!({"repo": "forge", "scope": "repo", "category": "patterns",
                "importance": importance, "content": "Forge releases on Tuesdays."}),
    )
    .await;
    written["id"].as_str().unwrap().to_owned()
}

/// The answers of the TypeScript client to `calls`, one per call: `result`
/// when it accepted the tool's result, `thrown` when it refused it.
async fn typescript_client(mcp_url: String, calls: Value) -> Vec<Value> {
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new("node")
            .arg(client_dir().join("client.mjs"))
            .args([&mcp_url, ROOT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(calls.to_string().as_bytes()).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("{err}: {output:?}"))
}

#[tokio::test]
async fn the_typescript_sdk_accepts_every_result_and_shows_refusals() {
    let Some(_) = or_skip(sdk()) else { return };
    let app = service().await;
    let _upstream = &app.upstream;
    let id = &release_day(&app, 0.5).await;
    let unknown = "0193f0c1-0000-7000-8000-000000000001";
    let calls = json!([
        {"tool": "remember", "arguments": {"repo": "forge", "scope": "repo",
            "category": "patterns", "content": "Forge lints with clippy."}},
        {"tool": "recall", "arguments": {"repo": "forge", "query": "When does forge release?"}},
        {"tool": "list_memories", "arguments": {"repo": "forge"}},
        {"tool": "get_memory", "arguments": {"id": id}},
        {"tool": "update_memory", "arguments": {"id": id, "content": "Forge releases on Wednesdays."}},
        {"tool": "forget", "arguments": {"id": unknown}},
        {"tool": "remember", "arguments": {"scope": "repo", "category": "feelings", "content": "x"}},
        {"tool": "get_memory", "arguments": {"id": unknown}},
    ]);
    let answers = typescript_client(format!("{}/mcp", app.base_url), calls).await;

    for (answer, tool) in answers[..5].iter().zip([
        "remember",
        "recall",
        "list_memories",
        "get_memory",
        "update_memory",
    ]) {
        let result = &answer["result"];
        assert_eq!(result["isError"], false, "{tool}: {answer:#}");
        assert!(
            result["structuredContent"].is_object(),
            "{tool}: {answer:#}"
        );
    }
    for (answer, status, field) in [
        (&answers[5], 404, None),
        (&answers[6], 422, Some("category")),
        (&answers[7], 404, None),
    ] {
        let result = &answer["result"];
        assert_eq!(
            result["isError"], true,
            "the client shows the refusal: {answer:#}"
        );
        assert_eq!(result.get("structuredContent"), None, "{answer:#}");
        let problem: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(problem["status"], status, "{problem:#}");
        assert!(problem["detail"].is_string(), "{problem:#}");
        if let Some(field) = field {
            assert_eq!(problem["field"], field, "{problem:#}");
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn the_typescript_sdk_lists_and_reads_memories_and_gets_a_prompt() {
    let Some(_) = or_skip(sdk()) else { return };
    let app = service().await;
    let _upstream = &app.upstream;
    let uri = format!("engram://repo/forge/{}", release_day(&app, 0.9).await);
    let missing = "engram://repo/forge/0193f0c1-0000-7000-8000-000000000001";
    let calls = json!([
        {"request": "listResources", "params": {}},
        {"request": "readResource", "params": {"uri": uri}},
        {"request": "listResourceTemplates", "params": {}},
        {"request": "readResource", "params": {"uri": "engram://repo/forge"}},
        {"request": "listPrompts", "params": {}},
        {"request": "getPrompt", "params": {"name": "recall-repo", "arguments": {"repo": "forge"}}},
        {"request": "readResource", "params": {"uri": missing}},
        {"request": "getPrompt", "params": {"name": "recall-everything"}},
    ]);
    let answers = Value::Array(typescript_client(format!("{}/mcp", app.base_url), calls).await);

    let listed = &answers[0]["result"]["resources"];
    assert_eq!(listed[0]["uri"], uri.as_str(), "{answers:#}");
    assert_eq!(listed[0]["name"], "Forge releases on Tuesdays.");
    let file = &answers[1]["result"]["contents"][0];
    assert_eq!(file["mimeType"], "text/markdown", "{answers:#}");
    assert!(
        file["text"]
            .as_str()
            .unwrap()
            .ends_with("---\nForge releases on Tuesdays.\n"),
        "{file:#}"
    );
    assert_eq!(
        answers[2]["result"]["resourceTemplates"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "{answers:#}"
    );
    let listing = answers[3]["result"]["contents"][0]["text"]
        .as_str()
        .unwrap();
    assert!(listing.contains(&uri), "{listing}");
    assert_eq!(answers[4]["result"]["prompts"][0]["name"], "recall-repo");
    assert_eq!(
        answers[5]["result"]["messages"][0]["role"], "user",
        "{answers:#}"
    );
    assert_eq!(answers[6]["code"], -32002, "not found: {answers:#}");
    assert_eq!(answers[7]["code"], -32602, "no such prompt: {answers:#}");
    app.stop().await;
}

#[tokio::test]
async fn the_typescript_sdk_subscribes_through_the_stdio_bridge_and_hears_a_change() {
    let Some(_) = or_skip(sdk()) else { return };
    let app = service().await;
    let _upstream = &app.upstream;
    let id = release_day(&app, 0.5).await;
    let uri = format!("engram://repo/forge/{id}");
    let mut child = tokio::process::Command::new("node")
        .arg(client_dir().join("subscribe.mjs"))
        .args([env!("CARGO_BIN_EXE_engram"), &app.base_url, LIMITED, &uri])
        .current_dir(&app.data_dir)
        .env("USER", "ana")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut line = async || {
        let line = finishes("the TypeScript client to print", lines.next_line())
            .await
            .unwrap()
            .expect("a line from the TypeScript client");
        serde_json::from_str::<Value>(&line).unwrap()
    };

    let subscribed = line().await;
    assert_eq!(
        subscribed["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    let (status, _) = app_post(
        &app,
        "/memories",
        ROOT,
        &json!({"repo": "forge", "scope": "repo", "category": "patterns", "supersedes": id,
                "content": "Forge releases on Wednesdays."}),
    )
    .await;
    assert_eq!(status.as_u16(), 201);
    assert_eq!(line().await, json!({"updated": uri}));
    let status = finishes("the TypeScript client to exit", child.wait())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    app.stop().await;
}
