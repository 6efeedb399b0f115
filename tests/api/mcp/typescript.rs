//! `/mcp` through the official TypeScript SDK's client, which checks each
//! tool result against the tool's `outputSchema` (as the MCP Inspector and
//! the clients built on the SDK do): every tool's success must pass that
//! check, and a refusal must reach the client as Engram's problem.
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

use crate::helpers::{npm_installed, or_skip};
use crate::mcp::{ROOT, app_post, service};

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
    let (_, written) = app_post(
        &app,
        "/memories",
        ROOT,
        &json!({"repo": "forge", "scope": "repo", "category": "patterns", "importance": 0.5,
                "content": "Forge releases on Tuesdays."}),
    )
    .await;
    let id = written["id"].as_str().unwrap();
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
