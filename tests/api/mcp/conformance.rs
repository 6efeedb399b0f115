//! `/mcp` against the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`), over a real port: the server
//! scenarios that apply to a stateless Streamable HTTP server offering
//! tools, memories as resources and prompts ([`SCENARIOS`]).
//!
//! The suite and the Node release it needs (22 or later; it reads
//! `fs.globSync`) are the package `tests/mcp-conformance`, installed by
//! `npm ci --prefix tests/mcp-conformance` (`.ci/run` does); the test runs
//! that package's `node`, not the one on `PATH`. Without them the test
//! prints why it is skipped and passes, except under CI (`CI` set), where
//! it fails. The suite sends no API key, so Engram runs without one, as a
//! local install does. Files only: the transport is under test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::json;

use crate::helpers::{TestApp, npm_installed, or_skip, post_json};

/// The server scenarios that apply to Engram, and why each does:
/// - `server-initialize`: the handshake;
/// - `ping`;
/// - `tools-list`: every tool has a name, a description and an input
///   schema;
/// - `dns-rebinding-protection`: a foreign `Host` and `Origin` are refused,
///   a loopback one at the server's own port is answered;
/// - `resources-list`: every resource (a memory) has a uri and a name;
/// - `prompts-list`: every prompt has a name and a description.
///
/// Left out: the scenarios that call the suite's own test tools
/// (`tools-call-*`, `json-schema-2020-12`, `elicitation-*`), read its own
/// fixtures (`resources-read-text` and `resources-read-binary` read
/// `test://static-text` and `test://static-binary`,
/// `resources-templates-read` reads `test://template/123/data`) or get its
/// own prompts (`prompts-get-simple`, `-with-args`, `-embedded-resource`,
/// `-with-image` get `test_simple_prompt` and the like), which a real
/// server does not have; `resources-subscribe` and `resources-unsubscribe`,
/// completion and logging (Engram offers none of them: a stateless server
/// has no stream to notify a subscriber on); and the SSE ones
/// (`server-sse-polling`, `server-sse-multiple-streams`), which need
/// sessions and event streams a stateless JSON server does not keep.
const SCENARIOS: [&str; 6] = [
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "resources-list",
    "prompts-list",
];

/// The package's directory.
fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-conformance")
}

/// The package's Node release.
fn node() -> PathBuf {
    package_dir().join("node_modules/.bin/node")
}

/// The suite's command line, where it and the package's `node` are
/// installed.
fn suite() -> Result<PathBuf, String> {
    npm_installed(
        &node(),
        "mcp-conformance",
        "@modelcontextprotocol/conformance/dist/index.js",
    )
}

/// The run of the suite at `suite` for one server scenario against `url`.
async fn run_scenario(suite: PathBuf, url: String, scenario: &'static str) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(node())
            .arg(suite)
            .args(["server", "--url", &url, "--scenario", scenario])
            .current_dir(package_dir())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_official_conformance_suite_passes_the_server_scenarios_that_apply() {
    let Some(suite) = or_skip(suite()) else {
        return;
    };
    let app = TestApp::builder().embedder().serve().await;
    // A memory to list as a resource.
    let written = post_json(
        &app.base_url,
        "/memories",
        &json!({"repo": "forge", "scope": "repo", "category": "patterns",
                "content": "Forge releases on Tuesdays."}),
    )
    .await;
    assert!(written["id"].is_string(), "{written}");
    let url = format!("{}/mcp", app.base_url);
    for scenario in SCENARIOS {
        let output = run_scenario(suite.clone(), url.clone(), scenario).await;
        assert!(
            output.status.success(),
            "{scenario} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    app.stop().await;
}
