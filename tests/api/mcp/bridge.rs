//! `engram mcp`, the stdio bridge, started as an agent starts it (a child
//! process speaking MCP on its stdin and stdout) and driven by the official
//! SDK's client: against a real service, against nothing, against a
//! service that accepts connections and never answers, behind proxy
//! variables, and in a directory whose parent holds a `.git` FIFO; its
//! resources and prompts, passed through.
//! Files only: the bridge is under test; the tools run over both
//! backends in `mcp`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use engram::config::ApiKey;
use rmcp::ServiceExt;
use rmcp::model::{ErrorCode, GetPromptRequestParams};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::helpers::{Ground, PATIENCE, RunningApp, TestApp, finishes};
use crate::mcp::resources::{protocol_error, read, read_refused, remember};
use crate::mcp::{Client, LIMITED, ROOT, connect, ok, recall_until_found, refused, service};

/// `engram mcp` started as an agent starts it, in its project's checkout,
/// with `key`, as user `ana`, with `extra` arguments and environment.
pub fn bridge_command(
    url: &str,
    project: &Path,
    key: &str,
    extra: &[&str],
    env: &[(&str, String)],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_engram"));
    command
        .args(["mcp", "--url", url])
        .args(extra)
        .current_dir(project)
        .env("ENGRAM_API_KEY", key)
        .env("USER", "ana")
        .env_remove("ENGRAM_URL");
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Engram serving over `ground` at `address`, with the key [`ROOT`]: the
/// same service again after a stop, as an agent's bridge finds it.
pub async fn serve_at(ground: Ground, address: SocketAddr) -> RunningApp {
    TestApp::builder()
        .on(ground)
        .embedder()
        .config(move |config| {
            config.api_key = Some(ApiKey::new(ROOT));
            config.listen = address;
        })
        .serve()
        .await
}

/// The SDK's client over stdio to [`bridge_command`]'s bridge, once the
/// handshake is done.
async fn stdio_bridge(url: &str, project: &Path, key: &str) -> Client {
    connect_stdio(bridge_command(url, project, key, &[], &[])).await
}

async fn connect_stdio(command: tokio::process::Command) -> Client {
    let handshake = ().serve(TokioChildProcess::new(command).unwrap());
    finishes("the bridge to answer the handshake", handshake)
        .await
        .expect("the handshake over stdio")
}

/// A call the bridge answers with a tool error: its problem document.
async fn unanswered(client: &Client, tool: &str, arguments: Value) -> Value {
    let answered = refused(client, tool, arguments);
    let problem = finishes("the bridge to answer within its bound", answered).await;
    assert_eq!(problem["status"], 503, "{problem:#}");
    problem
}

/// A loopback address where nothing listens (yet).
pub fn free_address() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

#[tokio::test]
async fn the_stdio_bridge_serves_the_same_tools_with_its_key() {
    let app = service().await;
    let _upstream = &app.upstream;
    // Started as an agent starts it, in its project (`forge`) as user `ana`:
    // calls that name no owner get those.
    let project = app.data_dir.join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let root = stdio_bridge(&app.base_url, &project, ROOT).await;
    assert_eq!(root.list_all_tools().await.unwrap().len(), 8);
    ok(
        &root,
        "remember",
        json!({"repo": "forge", "scope": "repo", "category": "patterns",
               "content": "Forge pins its toolchain in rust-toolchain.toml."}),
    )
    .await;
    ok(
        &root,
        "remember",
        json!({"repo": "secret", "scope": "repo", "category": "patterns",
               "content": "Secret pins nothing."}),
    )
    .await;
    let recalled = recall_until_found(
        &root,
        "Where is the toolchain pinned?",
        "Forge pins its toolchain in rust-toolchain.toml.",
    )
    .await;
    assert!(
        recalled["injection"]
            .as_str()
            .unwrap()
            .contains("rust-toolchain")
    );

    let limited = stdio_bridge(&app.base_url, &project, LIMITED).await;
    let page = ok(&limited, "list_memories", json!({})).await;
    assert_eq!(page["memories"].as_array().unwrap().len(), 1, "{page:#}");
    assert_eq!(page["memories"][0]["repo"], "forge");
    let problem = refused(&limited, "list_memories", json!({"limit": 0})).await;
    assert_eq!(problem["field"], "limit", "{problem:#}");
    let written = ok(
        &limited,
        "remember",
        json!({"scope": "repo", "category": "patterns",
               "content": "Forge runs clippy with warnings denied."}),
    )
    .await;
    assert_eq!(written["repo"], "forge", "the project's repo: {written:#}");
    let problem = refused(
        &limited,
        "remember",
        json!({"repo": "secret", "scope": "repo", "category": "patterns",
               "content": "Secret runs nothing."}),
    )
    .await;
    assert_eq!(
        problem["status"], 403,
        "a named owner stays the caller's: {problem:#}"
    );

    root.cancel().await.unwrap();
    limited.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn the_stdio_bridge_passes_resources_and_prompts_through_with_its_repo() {
    let app = service().await;
    let _upstream = &app.upstream;
    let mine = remember(
        &app,
        "forge",
        "Forge pins its toolchain in rust-toolchain.toml.",
    )
    .await;
    let theirs = remember(&app, "secret", "Secret pins nothing.").await;
    app.wait_indexed_with(ROOT).await;
    let project = app.data_dir.join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let limited = stdio_bridge(&app.base_url, &project, LIMITED).await;
    let direct = connect(&app.base_url, LIMITED).await;

    let listed = limited.list_all_resources().await.unwrap();
    assert_eq!(listed, direct.list_all_resources().await.unwrap());
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, [format!("engram://repo/forge/{mine}")]);
    let file = read(&limited, uris[0]).await;
    assert!(file.ends_with("---\nForge pins its toolchain in rust-toolchain.toml.\n"));
    assert_eq!(
        read_refused(&limited, &format!("engram://repo/secret/{theirs}"))
            .await
            .0,
        ErrorCode::RESOURCE_NOT_FOUND,
        "the service's error, as it sent it"
    );
    assert_eq!(
        limited.list_all_resource_templates().await.unwrap(),
        direct.list_all_resource_templates().await.unwrap()
    );
    assert_eq!(
        limited.list_all_prompts().await.unwrap(),
        direct.list_all_prompts().await.unwrap()
    );
    // A prompt that names no repo gets the bridge's (the key's default
    // repo is not one it holds).
    let recalled = limited
        .get_prompt(GetPromptRequestParams::new("recall-repo"))
        .await
        .unwrap();
    let text = serde_json::to_string(&recalled.messages).unwrap();
    assert!(text.contains("rust-toolchain.toml"), "{text}");

    limited.cancel().await.unwrap();
    direct.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn an_agent_started_before_engram_has_its_tools_and_they_work_once_it_is_up() {
    let ground = Ground::new().await;
    let project = ground.path().join("checkouts/forge");
    std::fs::create_dir_all(&project).unwrap();
    let address = free_address();
    let start = |ground: Ground| serve_at(ground, address);
    let url = format!("http://{address}");
    let agent = stdio_bridge(&url, &project, ROOT).await;

    // Nothing serves yet: the tools are listed all the same, and a call is
    // a tool error the model can read.
    let offline = agent.list_all_tools().await.expect("the tools, offline");
    assert_eq!(offline.len(), 8);
    let remember = json!({"scope": "repo", "category": "patterns",
                          "content": "Forge tags releases from main."});
    let problem = unanswered(&agent, "remember", remember.clone()).await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("Engram is not answering at {url}/mcp")),
        "{detail}"
    );
    assert!(detail.contains("engram serve"), "{detail}");
    assert!(!detail.contains("rmcp::"), "no Rust types: {detail}");
    // The prompts are listed offline too; a resource read is an error
    // saying the same.
    assert_eq!(agent.list_all_prompts().await.unwrap().len(), 2);
    let (code, message) = protocol_error(agent.list_all_resources().await);
    assert_eq!(code, ErrorCode::INTERNAL_ERROR);
    assert!(message.contains("Engram is not answering"), "{message}");

    // The same session, once the service is up.
    let app = start(ground).await;
    let direct = connect(&app.base_url, ROOT).await;
    assert_eq!(
        direct.list_all_tools().await.unwrap(),
        offline,
        "the bridge lists what the service's /mcp lists"
    );
    direct.cancel().await.unwrap();
    assert_eq!(
        ok(&agent, "remember", remember.clone()).await["repo"],
        "forge"
    );

    let ground = app.stop().await;
    let problem = unanswered(&agent, "remember", remember).await;
    assert_eq!(problem["title"], "Engram is not answering", "{problem:#}");
    let app = start(ground).await;
    let page = ok(&agent, "list_memories", json!({})).await;
    assert_eq!(page["memories"].as_array().unwrap().len(), 1, "{page:#}");

    // A key the service refuses is named as such, not as an outage.
    let wrong_key = stdio_bridge(&url, &project, "wrong-key").await;
    let problem = refused(&wrong_key, "list_memories", json!({})).await;
    assert_eq!(problem["status"], 401, "{problem:#}");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("ENGRAM_API_KEY"), "{detail}");

    wrong_key.cancel().await.unwrap();
    agent.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn an_engram_that_never_answers_is_a_tool_error_at_the_bound() {
    // Connections queue in the backlog; nothing ever answers them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let project = tempfile::tempdir().unwrap();
    let command = bridge_command(&url, project.path(), ROOT, &["--timeout-ms", "300"], &[]);
    let agent = connect_stdio(command).await;
    assert_eq!(agent.list_all_tools().await.unwrap().len(), 8);
    for _ in 0..2 {
        let problem = unanswered(&agent, "recall", json!({"query": "anything"})).await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("Engram did not answer at") && detail.contains("within 300 ms"),
            "{detail}"
        );
    }
    agent.cancel().await.unwrap();
    drop(silent);
}

#[tokio::test]
async fn the_bridge_exits_when_its_client_closes_stdin_mid_call() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let project = tempfile::tempdir().unwrap();
    // A bound far longer than the test: the call is still waiting when
    // stdin closes.
    let mut child = bridge_command(&url, project.path(), ROOT, &["--timeout-ms", "600000"], &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let send = |message: Value| format!("{message}\n");
    stdin
        .write_all(
            send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}}),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = finishes("the handshake to be answered", stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(answer.contains("\"engram\""), "{answer}");
    for message in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "recall", "arguments": {"query": "anything"}}}),
    ] {
        stdin.write_all(send(message).as_bytes()).await.unwrap();
    }
    stdin.flush().await.unwrap();
    drop(stdin);
    let status = finishes("the bridge to exit once stdin closes", child.wait())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    drop(silent);
}

#[tokio::test]
async fn the_key_never_goes_through_a_proxy_to_a_loopback_engram() {
    let app = service().await;
    let _upstream = &app.upstream;
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let env: Vec<(&str, String)> = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .into_iter()
        .map(|name| (name, proxy_url.clone()))
        .collect();
    let project = app.data_dir.join("forge");
    std::fs::create_dir_all(&project).unwrap();
    let patience = PATIENCE.as_millis().to_string();
    let agent = connect_stdio(bridge_command(
        &app.base_url,
        &project,
        ROOT,
        &["--timeout-ms", &patience],
        &env,
    ))
    .await;

    let page = finishes(
        "the bridge to answer",
        ok(&agent, "list_memories", json!({})),
    )
    .await;
    assert_eq!(page["memories"], json!([]), "{page:#}");
    proxy.set_nonblocking(true).unwrap();
    let err = proxy.accept().expect_err("nothing connected to the proxy");
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);

    agent.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_git_fifo_above_the_agents_directory_does_not_stall_the_bridge() {
    let app = service().await;
    let _upstream = &app.upstream;
    let parent = app.data_dir.join("work");
    let project = parent.join("forge");
    std::fs::create_dir_all(&project).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(parent.join(".git"))
        .status()
        .unwrap();
    assert!(made.success());

    let agent = stdio_bridge(&app.base_url, &project, ROOT).await;
    let written = finishes(
        "the bridge to answer",
        ok(
            &agent,
            "remember",
            json!({"scope": "repo", "category": "patterns", "content": "Forge builds with make."}),
        ),
    )
    .await;
    assert_eq!(written["repo"], "forge", "{written:#}");

    agent.cancel().await.unwrap();
    app.stop().await;
}
